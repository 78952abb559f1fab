# Metrics per (seed, method, OOD dataset) with ID as the positive class (OpenOOD v1.5), Table 2
# (mean +- std over seeds of accuracy and the Near / Far averages), the calibration table
# (accuracy, NLL, ECE, Brier), the AUPR table and the sweep table; `report` picks the standard
# deviation and the FPR95 convention (docs/protocol.md).


rule cifar_tables:
    message:
        "CIFAR: metrics, Table 2, the calibration and AUPR tables, the sweep table"
    input:
        scores=score_targets(),
        json=f"{PREPARED}/data.json",
    output:
        md=report(
            "results/cifar/tables/table2.md",
            caption="../../report/cifar_table2.rst",
            category="CIFAR-10",
        ),
        csv="results/cifar/tables/table2.csv",
        tex="results/cifar/tables/table2.tex",
        metrics="results/cifar/tables/metrics.csv",
        calibration="results/cifar/tables/calibration.csv",
        calibration_md="results/cifar/tables/calibration.md",
        aupr="results/cifar/tables/aupr.csv",
        aupr_md="results/cifar/tables/aupr.md",
        sweep="results/cifar/tables/sweep.csv",
        sweep_md=report(
            "results/cifar/tables/sweep.md",
            caption="../../report/cifar_sweep.rst",
            category="CIFAR-10",
        ),
    params:
        scores=lambda wildcards, input: os.path.dirname(
            os.path.dirname(os.path.dirname(input.scores[0]))
        ),
        data=lambda wildcards, input: os.path.dirname(input.json),
        methods=" ".join(METHODS),
        seeds=" ".join(str(s) for s in SEEDS),
        out=lambda wildcards, output: os.path.dirname(output.csv),
        report=json_text(config.get("report")),
    log:
        "logs/cifar/tables.log",
    benchmark:
        "benchmarks/cifar/tables.tsv"
    resources:
        mem_mb=RES["tables"]["mem_mb"],
        runtime=RES["tables"]["runtime"],
    threads: THREADS["tables"]
    conda:
        "../../../envs/pnc.yaml"
    shell:
        "python -m pnc.workflow cifar_tables --threads {threads} --scores {params.scores:q}"
        " --data {params.data:q} --methods {params.methods} --seeds {params.seeds}"
        " --out {params.out:q} --report {params.report:q} > {log:q} 2>&1"

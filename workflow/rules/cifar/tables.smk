# Metrics per (seed, method, OOD dataset) with ID as the positive class (OpenOOD v1.5), Table 2
# (mean +- std over seeds of accuracy and the Near / Far averages) and the sweep table.


rule cifar_tables:
    message:
        "CIFAR-10: metrics, Table 2 and the sweep table"
    input:
        score_targets(),
        f"{PREPARED}/data.json",
    output:
        report(
            "results/cifar/tables/table2.md",
            caption="../../report/cifar_table2.rst",
            category="CIFAR-10",
        ),
        "results/cifar/tables/table2.csv",
        "results/cifar/tables/table2.tex",
        "results/cifar/tables/metrics.csv",
        "results/cifar/tables/sweep.csv",
        "results/cifar/tables/sweep.md",
    params:
        scores="results/cifar/scores",
        data=PREPARED,
        methods=" ".join(METHODS),
        seeds=" ".join(str(s) for s in SEEDS),
        out="results/cifar/tables",
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
        "python -m pnc.workflow.cifar_tables --threads {threads} --scores {params.scores:q}"
        " --data {params.data:q} --methods {params.methods} --seeds {params.seeds}"
        " --out {params.out:q} > {log:q} 2>&1"

# Post-hoc per (seed, method), in two jobs around the selection stage (select.smk): the sweep
# (every configuration the method selects from, built on the training split and scored on the ID
# validation split: its temperature and NLL; P&C's by coordinate descent; each record named by its
# configuration id), then the scores (the configuration the selection stage chose, read by its id
# and built again: confidences on the test set and every OOD dataset). Both read the method's
# configurations from results/cifar/sweeps/<method>.json (common.smk). No OOD data enters any
# choice. A method without selection (the single-model scores) has no sweep: its scores job is its
# only one.


rule cifar_validate:
    wildcard_constraints:
        method=SELECTING_PATTERN,
    message:
        "CIFAR: {wildcards.method} on seed {wildcards.seed}, its configurations on validation"
    input:
        npz=f"{PREPARED}/{ID}.npz",
        ood=f"{PREPARED}/ood.npz",
        runs=runs_for,
        sweep=sweep_path("{method}"),
    output:
        json=validation_path("{seed}", "{method}"),
    params:
        runs=lambda wildcards, input: os.path.dirname(os.path.dirname(input.runs[0])),
        data=lambda wildcards, input: os.path.dirname(input.npz),
        model=json_text(MODEL),
        val=DATA["val_size"],
        batch=config.get("eval_batch_size", 500),
    log:
        "logs/cifar/validate/seed{seed}/{method}.log",
    benchmark:
        "benchmarks/cifar/validate/seed{seed}/{method}.tsv"
    resources:
        mem_mb=RES["posthoc"]["mem_mb"],
        runtime=RES["posthoc"]["runtime"],
        gpu=RES["posthoc"]["gpu"],
    threads: THREADS["posthoc"]
    conda:
        "../../../envs/pnc.yaml"
    shell:
        "python -m pnc.workflow cifar_validate --threads {threads} --seed {wildcards.seed}"
        " --sweep {input.sweep:q} --data {params.data:q}"
        " --runs {params.runs:q} --out {output.json:q} --model {params.model:q}"
        " --val-size {params.val} --batch-size {params.batch} > {log:q} 2>&1"


rule cifar_posthoc:
    message:
        "CIFAR: {wildcards.method} on seed {wildcards.seed}, its scores"
    input:
        npz=f"{PREPARED}/{ID}.npz",
        ood=f"{PREPARED}/ood.npz",
        runs=runs_for,
        sweep=sweep_path("{method}"),
        selection=selection_of,
    output:
        scores="results/cifar/scores/seed{seed}/{method}/scores.npz",
        json="results/cifar/scores/seed{seed}/{method}/selection.json",
    params:
        out=lambda wildcards, output: os.path.dirname(output.json),
        runs=lambda wildcards, input: os.path.dirname(os.path.dirname(input.runs[0])),
        data=lambda wildcards, input: os.path.dirname(input.npz),
        model=json_text(MODEL),
        val=DATA["val_size"],
        batch=config.get("eval_batch_size", 500),
        selection=lambda wildcards, input: " ".join(f"--selection {f}" for f in input.selection),
    log:
        "logs/cifar/posthoc/seed{seed}/{method}.log",
    benchmark:
        "benchmarks/cifar/posthoc/seed{seed}/{method}.tsv"
    resources:
        mem_mb=RES["posthoc"]["mem_mb"],
        runtime=RES["posthoc"]["runtime"],
        gpu=RES["posthoc"]["gpu"],
    threads: THREADS["posthoc"]
    conda:
        "../../../envs/pnc.yaml"
    shell:
        "python -m pnc.workflow cifar_posthoc --threads {threads} --seed {wildcards.seed}"
        " --sweep {input.sweep:q} --data {params.data:q}"
        " --runs {params.runs:q} --out {params.out:q} --model {params.model:q}"
        " --val-size {params.val} --batch-size {params.batch} {params.selection}"
        " > {log:q} 2>&1"

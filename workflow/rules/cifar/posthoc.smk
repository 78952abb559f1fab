# Post-hoc per (seed, method): construction on the training split, selection on the ID
# validation split (temperature per configuration; P&C by coordinate descent), confidences on the
# test set and every OOD dataset. No OOD data enters any choice.


rule cifar_posthoc:
    message:
        "CIFAR: {wildcards.method} on seed {wildcards.seed}"
    input:
        npz=f"{PREPARED}/{ID}.npz",
        ood=f"{PREPARED}/ood.npz",
        runs=runs_for,
    output:
        scores="results/cifar/scores/seed{seed}/{method}/scores.npz",
        json="results/cifar/scores/seed{seed}/{method}/selection.json",
    params:
        out=lambda wildcards, output: os.path.dirname(output.json),
        runs=lambda wildcards, input: os.path.dirname(os.path.dirname(input.runs[0])),
        data=lambda wildcards, input: os.path.dirname(input.npz),
        model=json_text(MODEL),
        section=lambda wildcards: section_json(wildcards.method),
        val=DATA["val_size"],
        batch=config.get("eval_batch_size", 500),
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
        " --method {wildcards.method} --section {params.section:q} --data {params.data:q}"
        " --runs {params.runs:q} --out {params.out:q} --model {params.model:q}"
        " --val-size {params.val} --batch-size {params.batch} > {log:q} 2>&1"

# Training runs: one per (env, seed, run id). Post-hoc configurations share a run (`base` serves
# P&C, P&C without correction, SWAG, Laplace and Subspace); Deep Ensembles and each MC-Dropout
# rate have their own (paper, Appendix C).


rule train:
    message:
        "Training run {wildcards.run} on {wildcards.env}, seed {wildcards.seed}"
    input:
        npz="resources/splits/{env}/seed{seed}/splits.npz",
        manifest="resources/splits/{env}/seed{seed}/manifest.json",
    output:
        msgpack="results/runs/{env}/seed{seed}/{run}/run.msgpack",
        json="results/runs/{env}/seed{seed}/{run}/run.json",
    params:
        splits=splits_dir,
        out=run_dir,
        spec=lambda wildcards: spec_json(wildcards.run),
        model=section_json("model"),
        train=section_json("train"),
    log:
        "logs/train/{env}/seed{seed}/{run}.log",
    benchmark:
        "benchmarks/train/{env}/seed{seed}/{run}.tsv"
    resources:
        mem_mb=RESOURCES["train"]["mem_mb"],
        runtime=RESOURCES["train"]["runtime"],
        gpu=RESOURCES["train"]["gpu"],
    threads: THREADS["train"]
    priority: training_priority
    conda:
        "../../envs/pnc.yaml"
    shell:
        "python -m pnc.workflow train_run --threads {threads} --env {wildcards.env}"
        " --seed {wildcards.seed} --run-id {wildcards.run} --spec {params.spec:q}"
        " --splits {params.splits:q} --out {params.out:q} --model {params.model:q}"
        " --train {params.train:q} > {log:q} 2>&1"

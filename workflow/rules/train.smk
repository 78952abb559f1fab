# Training runs: one per (env, seed, run id). Post-hoc configurations share a run (`base` serves
# P&C, P&C without correction, SWAG, Laplace and Subspace); Deep Ensembles and each MC-Dropout
# rate have their own (paper, Appendix C). With config `batch: env`, one job per environment
# trains every run of every seed in one process (train_command's stages, batch_command).


if BATCH:

    rule train_env:
        message:
            "Every training run of {wildcards.env}, every seed, in one process"
        input:
            npz=expand("resources/splits/{{env}}/seed{seed}/splits.npz", seed=SEEDS),
            manifest=expand("resources/splits/{{env}}/seed{seed}/manifest.json", seed=SEEDS),
        output:
            expand(
                "results/runs/{{env}}/seed{seed}/{run}/run.{ext}",
                seed=SEEDS,
                run=list(TRAINING_RUNS),
                ext=("msgpack", "json"),
            ),
        params:
            command=lambda wildcards, threads: batch_command(
                train_command(wildcards.env, seed, run, threads)
                for seed in SEEDS
                for run in TRAINING_RUNS
            ),
        log:
            "logs/train_env/{env}.log",
        benchmark:
            "benchmarks/train_env/{env}.tsv"
        resources:
            mem_mb=RESOURCES["train"]["mem_mb"],
            runtime=RESOURCES["train"]["runtime"] * len(SEEDS) * len(TRAINING_RUNS),
            gpu=RESOURCES["train"]["gpu"],
        threads: THREADS["train"]
        priority: sum(TRAINING_WORK.get(run, 0) for run in TRAINING_RUNS) * len(SEEDS)
        conda:
            "../../envs/pnc.yaml"
        shell:
            "python -m pnc.workflow {params.command} > {log:q} 2>&1"

else:

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
            command=lambda wildcards, threads: train_command(
                wildcards.env, wildcards.seed, wildcards.run, threads
            ),
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
            "python -m pnc.workflow {params.command} > {log:q} 2>&1"

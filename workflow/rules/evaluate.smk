# Post-hoc construction and evaluation: one job per (env, seed, method, run) evaluates every
# configuration of the method that uses the run, on val and every evaluation split (config
# `evaluation: full`) or on val and the frontier sample (`two_phase`, the default: the validation
# phase, writing beside its table the posteriors the test phase restores). Posteriors are otherwise
# rebuilt in memory, never stored; the job writes a small long-format metric table. With
# `two_phase`, the test phase scores, per (env, seed), every method's configurations that the
# environment's test plan names on the test splits, after the selection (select.smk): one process
# for all methods pays the start-up once (pnc.studies.mujoco.phases.run_test_phase). Each job reads
# its configurations by id from its method's grid table (GRID_TABLE, common.smk). With config
# `batch: env`, one job per environment runs every seed's evaluations (and one its test phases)
# in one process (evaluate_command's and test_command's stages, batch_command).


if BATCH:

    rule evaluate_env:
        message:
            "Construct and evaluate every method on {wildcards.env}, every seed, in one process"
        input:
            npz=expand("resources/splits/{{env}}/seed{seed}/splits.npz", seed=SEEDS),
            manifest=expand("resources/splits/{{env}}/seed{seed}/manifest.json", seed=SEEDS),
            runs=expand(
                "results/runs/{{env}}/seed{seed}/{run}/run.{ext}",
                seed=SEEDS,
                run=list(TRAINING_RUNS),
                ext=("msgpack", "json"),
            ),
            grids=grid_tables(),
        output:
            [
                path.format(env="{env}", seed=seed, method=method, run=run)
                for seed in SEEDS
                for method, run in METHOD_RUNS
                for path in (EVALUATION_TABLE, *STORED_POSTERIORS.values())
            ],
        params:
            command=lambda wildcards, threads: batch_command(
                evaluate_command(wildcards.env, seed, method, run, threads)
                for seed in SEEDS
                for method, run in METHOD_RUNS
            ),
        log:
            "logs/evaluate_env/{env}.log",
        benchmark:
            "benchmarks/evaluate_env/{env}.tsv"
        resources:
            mem_mb=RESOURCES["evaluate"]["mem_mb"],
            runtime=RESOURCES["evaluate"]["runtime"] * len(SEEDS) * len(METHOD_RUNS),
            gpu=RESOURCES["evaluate"]["gpu"],
        threads: THREADS["evaluate"]
        priority: sum(EVALUATION_WORK.values()) * len(SEEDS)
        conda:
            "../../envs/pnc.yaml"
        shell:
            "python -m pnc.workflow {params.command} > {log:q} 2>&1"

else:

    rule evaluate:
        message:
            "Construct and evaluate {wildcards.method} on run {wildcards.run}"
            " ({wildcards.env}, seed {wildcards.seed})"
        input:
            npz="resources/splits/{env}/seed{seed}/splits.npz",
            manifest="resources/splits/{env}/seed{seed}/manifest.json",
            msgpack="results/runs/{env}/seed{seed}/{run}/run.msgpack",
            json="results/runs/{env}/seed{seed}/{run}/run.json",
            grid=GRID_TABLE,
        output:
            **STORED_POSTERIORS,
            table=EVALUATION_TABLE,
        params:
            command=lambda wildcards, threads: evaluate_command(
                wildcards.env, wildcards.seed, wildcards.method, wildcards.run, threads
            ),
        log:
            "logs/evaluate/{env}/seed{seed}/{method}/{run}.log",
        benchmark:
            "benchmarks/evaluate/{env}/seed{seed}/{method}/{run}.tsv"
        resources:
            mem_mb=RESOURCES["evaluate"]["mem_mb"],
            runtime=RESOURCES["evaluate"]["runtime"],
            gpu=RESOURCES["evaluate"]["gpu"],
        threads: THREADS["evaluate"]
        priority: evaluation_priority
        conda:
            "../../envs/pnc.yaml"
        shell:
            "python -m pnc.workflow {params.command} > {log:q} 2>&1"


if TWO_PHASE and BATCH:

    rule evaluate_test_env:
        message:
            "Test phase: the planned configurations of every method on the test splits"
            " ({wildcards.env}, every seed, in one process)"
        input:
            npz=expand("resources/splits/{{env}}/seed{seed}/splits.npz", seed=SEEDS),
            manifest=expand("resources/splits/{{env}}/seed{seed}/manifest.json", seed=SEEDS),
            plan=TEST_PLAN,
            grids=grid_tables(),
            runs=lambda wildcards: [
                path for seed in SEEDS for path in test_phase_reads(wildcards.env, seed)
            ],
        output:
            expand(TEST_TABLE, seed=SEEDS, method=METHODS, allow_missing=True),
        params:
            command=lambda wildcards, threads: batch_command(
                test_command(wildcards.env, seed, threads) for seed in SEEDS
            ),
        log:
            "logs/evaluate_test_env/{env}.log",
        benchmark:
            "benchmarks/evaluate_test_env/{env}.tsv"
        resources:
            mem_mb=RESOURCES["evaluate"]["mem_mb"],
            runtime=RESOURCES["evaluate"]["runtime"] * len(SEEDS),
            gpu=RESOURCES["evaluate"]["gpu"],
        threads: THREADS["evaluate"]
        priority: TEST_PRIORITY * len(SEEDS)
        conda:
            "../../envs/pnc.yaml"
        shell:
            "python -m pnc.workflow {params.command} > {log:q} 2>&1"

elif TWO_PHASE:

    rule evaluate_test:
        message:
            "Test phase: the planned configurations of every method on the test splits"
            " ({wildcards.env}, seed {wildcards.seed})"
        input:
            npz="resources/splits/{env}/seed{seed}/splits.npz",
            manifest="resources/splits/{env}/seed{seed}/manifest.json",
            plan=TEST_PLAN,
            grids=grid_tables(),
            runs=test_phase_inputs,
        output:
            expand(TEST_TABLE, method=METHODS, allow_missing=True),
        params:
            command=lambda wildcards, threads: test_command(wildcards.env, wildcards.seed, threads),
        log:
            "logs/evaluate_test/{env}/seed{seed}.log",
        benchmark:
            "benchmarks/evaluate_test/{env}/seed{seed}.tsv"
        resources:
            mem_mb=RESOURCES["evaluate"]["mem_mb"],
            runtime=RESOURCES["evaluate"]["runtime"],
            gpu=RESOURCES["evaluate"]["gpu"],
        threads: THREADS["evaluate"]
        priority: TEST_PRIORITY
        conda:
            "../../envs/pnc.yaml"
        shell:
            "python -m pnc.workflow {params.command} > {log:q} 2>&1"

# Post-hoc construction and evaluation: one job per (env, seed, method, run) evaluates every
# configuration of the method that uses the run, on val and every evaluation split (config
# `evaluation: full`) or on val and the frontier sample (`two_phase`, the default: the validation
# phase, writing beside its table the posteriors the test phase restores). Posteriors are otherwise
# rebuilt in memory, never stored; the job writes a small long-format metric table. With
# `two_phase`, the test phase scores, per (env, seed), every method's configurations that the
# environment's test plan names on the test splits, after the selection (select.smk): one process
# for all methods pays the start-up once (pnc.studies.mujoco.phases.test_phase). Each job reads
# its configurations by id from its method's grid table (GRID_TABLE, common.smk).


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
        splits=splits_dir,
        run=run_dir,
        configs=run_configs,
        calibrations=calibration_options(),
        phase=validation_phase_options,
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
        "python -m pnc.workflow evaluate_run --threads {threads} --env {wildcards.env}"
        " --seed {wildcards.seed} --method {wildcards.method} --run-id {wildcards.run}"
        " --run {params.run:q} --splits {params.splits:q} --grid {input.grid:q}"
        " --configs {params.configs} --calibrations {params.calibrations}{params.phase}"
        " --out {output.table:q}"
        " > {log:q} 2>&1"


if TWO_PHASE:

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
            splits=splits_dir,
            runs=lambda wildcards: f"results/runs/{wildcards.env}/seed{wildcards.seed}",
            validation=lambda wildcards: f"results/validation/{wildcards.env}/seed{wildcards.seed}",
            methods=" ".join(METHODS),
            calibrations=calibration_options(),
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
            "python -m pnc.workflow evaluate_test --threads {threads} --env {wildcards.env}"
            " --seed {wildcards.seed} --methods {params.methods} --runs {params.runs:q}"
            " --splits {params.splits:q} --grids {input.grids:q}"
            " --calibrations {params.calibrations} --validation {params.validation:q}"
            " --plan {input.plan:q} --out {output:q} > {log:q} 2>&1"

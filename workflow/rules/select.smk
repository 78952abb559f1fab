# Selection per (env, method): the configuration with the lowest validation NLL averaged over
# seeds (paper, Appendix C); then the study's tables. `results/envs/{env}/results.csv` is the
# target that runs one environment alone. With `evaluation: two_phase` the selection reads the
# validation phase's tables and also writes the test plan (the configurations the test phase scores
# on the test splits, evaluate.smk); `assemble` then joins both phases' tables into the
# environment's all_configs.csv and results.csv. The selection checks the tables against the methods'
# grid tables (every configuration expected, by id; common.smk).


if not TWO_PHASE:

    rule select:
        message:
            "Select hyperparameters by mean validation NLL on {wildcards.env}"
        input:
            tables=lambda wildcards: metric_tables(wildcards.env),
            grid=grid_tables(),
        output:
            all_configs="results/envs/{env}/all_configs.csv",
            results="results/envs/{env}/results.csv",
            selection="results/envs/{env}/selection.json",
        params:
            seeds=" ".join(str(s) for s in SEEDS),
            calibrations=calibration_options(),
        resources:
            mem_mb=RESOURCES["select"]["mem_mb"],
            runtime=RESOURCES["select"]["runtime"],
        log:
            "logs/select/{env}.log",
        benchmark:
            "benchmarks/select/{env}.tsv"
        priority: UPSTREAM_PRIORITY
        threads: 1
        conda:
            "../../envs/pnc.yaml"
        shell:
            "python -m pnc.workflow select --threads {threads} {input.tables:q}"
            " --seeds {params.seeds} --env {wildcards.env} --grid {input.grid:q}"
            " --calibrations {params.calibrations}"
            " --all-configs {output.all_configs:q} --results {output.results:q}"
            " --selection {output.selection:q} > {log:q} 2>&1"

else:

    rule select:
        message:
            "Select hyperparameters by mean validation NLL on {wildcards.env}, and the test plan"
        input:
            tables=lambda wildcards: metric_tables(wildcards.env),
            grid=grid_tables(),
        output:
            selection="results/envs/{env}/selection.json",
            plan=TEST_PLAN,
        params:
            seeds=" ".join(str(s) for s in SEEDS),
            calibrations=calibration_options(),
        resources:
            mem_mb=RESOURCES["select"]["mem_mb"],
            runtime=RESOURCES["select"]["runtime"],
        log:
            "logs/select/{env}.log",
        benchmark:
            "benchmarks/select/{env}.tsv"
        priority: UPSTREAM_PRIORITY
        threads: 1
        conda:
            "../../envs/pnc.yaml"
        shell:
            "python -m pnc.workflow select_validation --threads {threads} {input.tables:q}"
            " --seeds {params.seeds} --env {wildcards.env} --grid {input.grid:q}"
            " --calibrations {params.calibrations} --selection {output.selection:q}"
            " --plan {output.plan:q} > {log:q} 2>&1"

    rule assemble:
        message:
            "Results tables of {wildcards.env} from the validation and the test phase"
        input:
            validation=lambda wildcards: metric_tables(wildcards.env),
            test=lambda wildcards: test_tables(wildcards.env),
            selection="results/envs/{env}/selection.json",
            plan=TEST_PLAN,
            grid=grid_tables(),
        output:
            all_configs="results/envs/{env}/all_configs.csv",
            results="results/envs/{env}/results.csv",
        params:
            seeds=" ".join(str(s) for s in SEEDS),
            calibrations=calibration_options(),
        resources:
            mem_mb=RESOURCES["select"]["mem_mb"],
            runtime=RESOURCES["select"]["runtime"],
        log:
            "logs/assemble/{env}.log",
        benchmark:
            "benchmarks/assemble/{env}.tsv"
        priority: UPSTREAM_PRIORITY
        threads: 1
        conda:
            "../../envs/pnc.yaml"
        shell:
            "python -m pnc.workflow assemble --threads {threads}"
            " --validation {input.validation:q} --test {input.test:q} --seeds {params.seeds}"
            " --env {wildcards.env} --grid {input.grid:q}"
            " --calibrations {params.calibrations} --selection {input.selection:q}"
            " --plan {input.plan:q} --all-configs {output.all_configs:q}"
            " --results {output.results:q} > {log:q} 2>&1"


rule aggregate:
    message:
        "Results tables of all environments: results/results.csv, results/all_configs.csv"
    input:
        all_configs=env_outputs("all_configs.csv"),
        results=env_outputs("results.csv"),
        selection=env_outputs("selection.json"),
    output:
        all_configs="results/all_configs.csv",
        results="results/results.csv",
        selection="results/selection.json",
    resources:
        mem_mb=RESOURCES["select"]["mem_mb"],
        runtime=RESOURCES["select"]["runtime"],
    log:
        "logs/aggregate.log",
    benchmark:
        "benchmarks/aggregate.tsv"
    threads: 1
    conda:
        "../../envs/pnc.yaml"
    shell:
        "python -m pnc.workflow aggregate --threads {threads}"
        " --all-configs {input.all_configs:q} --results {input.results:q}"
        " --selection {input.selection:q} --out-dir results > {log:q} 2>&1"


rule only_data:
    message:
        "Partial target: the splits of every (env, seed)"
    input:
        data_targets(),


rule only_training:
    message:
        "Partial target: every training run"
    input:
        training_targets(),


rule only_results:
    message:
        "Partial target: the results tables, without the report"
    input:
        results_targets(),

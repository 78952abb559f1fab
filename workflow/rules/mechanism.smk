# The mechanism evidence (paper Figures 1 B/C and 3; config `mechanism`):
#
#   selection.json + base run -> results/members/{env}/seed{seed}/members.{msgpack,json}
#       (the selected P&C configuration's members, built once and stored)
#   -> results/mechanism/{env}/seed{seed}.parquet (per-point diagnostics, tidy long table;
#      with the two-phase evaluation, Subspace's posterior is restored from the chain the
#      validation phase stored, results/validation/{env}/seed{seed}/subspace/{run}.npz)
#   -> figures/mechanism/{env}/*.{pdf,png} and results/tables/mechanism.{csv,md,tex}
#
# Runs for the seeds in `mechanism.seeds` (default: the first seed) when `pnc` is among the methods.
# Its targets (`mechanism_targets()`, common.smk) are part of `rule all`.


rule pnc_members:
    message:
        "Store the selected P&C members of {wildcards.env}, seed {wildcards.seed}"
    input:
        selection="results/envs/{env}/selection.json",
        npz="resources/splits/{env}/seed{seed}/splits.npz",
        manifest="resources/splits/{env}/seed{seed}/manifest.json",
        msgpack=f"results/runs/{{env}}/seed{{seed}}/{PNC_RUN}/run.msgpack",
        json=f"results/runs/{{env}}/seed{{seed}}/{PNC_RUN}/run.json",
        grid=grid_tables(["pnc"]),
    output:
        msgpack="results/members/{env}/seed{seed}/members.msgpack",
        json="results/members/{env}/seed{seed}/members.json",
    params:
        splits=splits_dir,
        run=lambda wildcards: f"results/runs/{wildcards.env}/seed{wildcards.seed}/{PNC_RUN}",
        out=mechanism_out_dir,
    log:
        "logs/pnc_members/{env}/seed{seed}.log",
    benchmark:
        "benchmarks/pnc_members/{env}/seed{seed}.tsv"
    resources:
        mem_mb=RESOURCES["mechanism"]["mem_mb"],
        runtime=RESOURCES["mechanism"]["runtime"],
        gpu=RESOURCES["mechanism"]["gpu"],
    priority: UPSTREAM_PRIORITY
    threads: THREADS["evaluate"]
    conda:
        "../../envs/pnc.yaml"
    shell:
        "python -m pnc.workflow pnc_members --threads {threads} --env {wildcards.env}"
        " --seed {wildcards.seed} --run {params.run:q} --splits {params.splits:q}"
        " --selection {input.selection:q} --grid {input.grid:q} --out {params.out:q}"
        " > {log:q} 2>&1"


rule mechanism:
    message:
        "Mechanism diagnostics of {wildcards.env}, seed {wildcards.seed}"
    input:
        members="results/members/{env}/seed{seed}/members.json",
        members_msgpack="results/members/{env}/seed{seed}/members.msgpack",
        selection="results/envs/{env}/selection.json",
        npz="resources/splits/{env}/seed{seed}/splits.npz",
        manifest="resources/splits/{env}/seed{seed}/manifest.json",
        msgpack=f"results/runs/{{env}}/seed{{seed}}/{PNC_RUN}/run.msgpack",
        json=f"results/runs/{{env}}/seed{{seed}}/{PNC_RUN}/run.json",
        runs=mechanism_runs,  # the base run and the other mechanism methods' own runs
        posteriors=mechanism_posteriors,  # two_phase: the stored chains, restored not rerun
        grid=mechanism_grid_tables(),
    output:
        parquet="results/mechanism/{env}/seed{seed}.parquet",
        info="results/mechanism/{env}/seed{seed}.json",
    params:
        splits=splits_dir,
        run=lambda wildcards: f"results/runs/{wildcards.env}/seed{wildcards.seed}/{PNC_RUN}",
        members=lambda wildcards: f"results/members/{wildcards.env}/seed{wildcards.seed}",
        validation=mechanism_validation_option,
        settings=json.dumps(
            {
                k: MECHANISM[k]
                for k in (
                    "points_per_split",
                    "probes",
                    "probe_eps",
                    "bootstrap_points",
                    "bootstrap_members",
                )
                if k in MECHANISM
            },
            sort_keys=True,
        ),
    log:
        "logs/mechanism/{env}/seed{seed}.log",
    benchmark:
        "benchmarks/mechanism/{env}/seed{seed}.tsv"
    resources:
        mem_mb=RESOURCES["mechanism"]["mem_mb"],
        runtime=RESOURCES["mechanism"]["runtime"],
        gpu=RESOURCES["mechanism"]["gpu"],
    priority: UPSTREAM_PRIORITY
    threads: THREADS["evaluate"]
    conda:
        "../../envs/pnc.yaml"
    shell:
        # short-lived buffers: huge pages or a kept heap cost more, pnc.runtime.allocator.SHELL_PREFIX
        'GLIBC_TUNABLES="${{PNC_GLIBC_TUNABLES_SHORT_LIVED-${{GLIBC_TUNABLES-}}}}" '
        "python -m pnc.workflow mechanism_diagnostics --threads {threads} --env {wildcards.env}"
        " --seed {wildcards.seed} --run {params.run:q} --splits {params.splits:q}"
        " --members {params.members:q} --selection {input.selection:q}"
        " --grid {input.grid:q} --settings {params.settings:q}{params.validation}"
        " --out {output.parquet:q} --info {output.info:q} > {log:q} 2>&1"


if BATCH:

    rule mechanism_report_batch:
        message:
            "Report: the mechanism figures of every environment and the mechanism table, in one"
            " process"
        input:
            mechanism=[f for env in ENVS for f in mechanism_files(env)],
            all_configs=["results/all_configs.csv", *env_outputs("all_configs.csv")],
            grid=grid_tables(PER_SIGMA_METHODS),
        output:
            [f for env in ENVS for f in mechanism_figure_outputs(env)],
            mechanism_table_outputs(),
        params:
            command=lambda wildcards, threads: batch_command(
                [
                    *[mechanism_figures_command(env, threads) for env in ENVS],
                    mechanism_table_command(threads),
                ]
            ),
        log:
            "logs/report/mechanism_batch.log",
        benchmark:
            "benchmarks/report/mechanism_batch.tsv"
        resources:
            mem_mb=RESOURCES["report"]["mem_mb"],
            runtime=RESOURCES["report"]["runtime"] * (1 + len(ENVS)),
        threads: 1
        conda:
            "../../envs/pnc.yaml"
        shell:
            "python -m pnc.workflow {params.command} > {log:q} 2>&1"

else:

    rule mechanism_figures:
        message:
            "Report: mechanism figures (paper Figures 1 B/C, 3 A/B/C) of {wildcards.env}"
        input:
            mechanism=lambda wildcards: mechanism_files(wildcards.env),
            all_configs="results/envs/{env}/all_configs.csv",
            grid=grid_tables(PER_SIGMA_METHODS),
        output:
            mechanism_figure_outputs("{env}"),
        params:
            command=lambda wildcards, threads: mechanism_figures_command(wildcards.env, threads),
        log:
            "logs/report/mechanism/{env}.log",
        benchmark:
            "benchmarks/report/mechanism/{env}.tsv"
        resources:
            mem_mb=RESOURCES["report"]["mem_mb"],
            runtime=RESOURCES["report"]["runtime"],
        threads: 1
        conda:
            "../../envs/pnc.yaml"
        shell:
            "python -m pnc.workflow {params.command} > {log:q} 2>&1"

    rule mechanism_table:
        message:
            "Report: the mechanism table of every environment"
        input:
            mechanism=[f for env in ENVS for f in mechanism_files(env)],
            all_configs="results/all_configs.csv",
            grid=grid_tables(PER_SIGMA_METHODS),
        output:
            mechanism_table_outputs(),
        params:
            command=lambda wildcards, threads: mechanism_table_command(threads),
        log:
            "logs/report/mechanism_table.log",
        benchmark:
            "benchmarks/report/mechanism_table.tsv"
        resources:
            mem_mb=RESOURCES["report"]["mem_mb"],
            runtime=RESOURCES["report"]["runtime"],
        threads: 1
        conda:
            "../../envs/pnc.yaml"
        shell:
            "python -m pnc.workflow {params.command} > {log:q} 2>&1"


rule only_mechanism:
    message:
        "Partial target: the mechanism figures and table"
    input:
        mechanism_targets(),

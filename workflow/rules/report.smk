# Report stage: the paper's tables and figures from the long-format results tables.
#
#   results/results.csv      (selected configuration per (env, method)) -> results/tables/*
#   results/all_configs.csv  (every configuration, with `selected`)     -> figures/frontier*
#
# The targets (`report_targets()`, listed in `rule all`) and the table names come from common.smk.
# Every output that belongs in `snakemake --report report.html` is wrapped in report(...) with a
# caption from workflow/report/ (table_outputs and figure_outputs in common.smk, shared by the
# rules of either `batch`). The
# rules run `python -m pnc.workflow report_tables` and `python -m pnc.workflow report_figure`
# (commands from common.smk), which call `python -m pnc.report` in-process; with config
# `batch: env` one job runs them all in one process.


if BATCH:

    rule report_batch:
        message:
            "Report: the tables and every figure, in one process"
        input:
            "results/results.csv",
            "results/all_configs.csv",
        output:
            table_outputs(),
            figure_outputs("frontier", None),
            [f for env in ENVS for f in figure_outputs("frontier", env)],
            [f for env in ENVS for f in figure_outputs("metrics", env)],
        params:
            command=lambda wildcards, threads: batch_command(
                [
                    report_tables_command(threads),
                    figure_command("frontier", None, threads),
                    *[
                        figure_command(kind, env, threads)
                        for kind in FIGURE_TITLES
                        for env in ENVS
                    ],
                ]
            ),
        log:
            "logs/report/batch.log",
        benchmark:
            "benchmarks/report/batch.tsv"
        resources:
            mem_mb=RESOURCES["report"]["mem_mb"],
            runtime=RESOURCES["report"]["runtime"] * (2 + 2 * len(ENVS)),
        threads: 1
        conda:
            "../../envs/pnc.yaml"
        shell:
            "python -m pnc.workflow {params.command} > {log:q} 2>&1"

else:

    rule report_tables:
        message:
            "Report: ranks, Wilcoxon-Holm tests and the paper's tables from {input}"
        input:
            "results/results.csv",
        output:
            table_outputs(),
        params:
            command=lambda wildcards, threads: report_tables_command(threads),
        log:
            "logs/report/tables.log",
        benchmark:
            "benchmarks/report/tables.tsv"
        resources:
            mem_mb=RESOURCES["report"]["mem_mb"],
            runtime=RESOURCES["report"]["runtime"],
        threads: 1
        conda:
            "../../envs/pnc.yaml"
        shell:
            "python -m pnc.workflow {params.command} > {log:q} 2>&1"

    rule report_frontier_overview:
        message:
            "Report: ID/OOD frontier of every environment from {input}"
        input:
            "results/all_configs.csv",
        output:
            figure_outputs("frontier", None),
        params:
            command=lambda wildcards, threads: figure_command("frontier", None, threads),
        log:
            "logs/report/frontier_all.log",
        benchmark:
            "benchmarks/report/frontier_all.tsv"
        resources:
            mem_mb=RESOURCES["report"]["mem_mb"],
            runtime=RESOURCES["report"]["runtime"],
        threads: 1
        conda:
            "../../envs/pnc.yaml"
        shell:
            "python -m pnc.workflow {params.command} > {log:q} 2>&1"

    rule report_frontier:
        message:
            "Report: ID/OOD frontier of {wildcards.env}"
        input:
            "results/all_configs.csv",
        output:
            figure_outputs("frontier", "{env}"),
        params:
            command=lambda wildcards, threads: figure_command("frontier", wildcards.env, threads),
        log:
            "logs/report/frontier/{env}.log",
        benchmark:
            "benchmarks/report/frontier/{env}.tsv"
        resources:
            mem_mb=RESOURCES["report"]["mem_mb"],
            runtime=RESOURCES["report"]["runtime"],
        threads: 1
        conda:
            "../../envs/pnc.yaml"
        shell:
            "python -m pnc.workflow {params.command} > {log:q} 2>&1"

    rule report_metrics:
        message:
            "Report: headline metrics across methods on {wildcards.env}"
        input:
            "results/results.csv",
        output:
            figure_outputs("metrics", "{env}"),
        params:
            command=lambda wildcards, threads: figure_command("metrics", wildcards.env, threads),
        log:
            "logs/report/metrics/{env}.log",
        benchmark:
            "benchmarks/report/metrics/{env}.tsv"
        resources:
            mem_mb=RESOURCES["report"]["mem_mb"],
            runtime=RESOURCES["report"]["runtime"],
        threads: 1
        conda:
            "../../envs/pnc.yaml"
        shell:
            "python -m pnc.workflow {params.command} > {log:q} 2>&1"

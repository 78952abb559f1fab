# Report stage: the paper's tables and figures from the long-format results tables.
#
#   results/results.csv      (selected configuration per (env, method)) -> results/tables/*
#   results/all_configs.csv  (every configuration, with `selected`)     -> figures/frontier*
#
# The targets (`report_targets()`, listed in `rule all`) and the table names come from common.smk.
# Every output that belongs in `snakemake --report report.html` is wrapped in report(...) with a
# caption from workflow/report/. The rules run `python -m pnc.workflow report_tables` and
# `python -m pnc.workflow report_figure`, which call `python -m pnc.report` in-process.


rule report_tables:
    message:
        "Report: ranks, Wilcoxon-Holm tests and the paper's tables from {input}"
    input:
        "results/results.csv",
    output:
        [
            report(
                f"results/tables/{table}.csv",
                caption=f"../report/table_{table}.rst",
                category="Tables",
                labels={"table": table},
            )
            for table in REPORT_TABLES
        ],
        expand("results/tables/{table}.{ext}", table=REPORT_TABLES, ext=("tex", "md")),
        json="results/tables/stats.json",
    params:
        out=tables_dir,
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
        "python -m pnc.workflow report_tables --threads {threads} {input:q}"
        " --out {params.out:q} > {log:q} 2>&1"


rule report_frontier_overview:
    message:
        "Report: ID/OOD frontier of every environment from {input}"
    input:
        "results/all_configs.csv",
    output:
        png=report(
            "figures/frontier_all.png",
            caption="../report/frontier_all.rst",
            category="Figures",
            subcategory="All environments",
            labels={"figure": "ID/OOD frontier"},
        ),
        pdf="figures/frontier_all.pdf",
    params:
        stem=figure_stem,
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
        "python -m pnc.workflow report_figure --threads {threads} frontier {input:q}"
        " --out {params.stem:q} > {log:q} 2>&1"


rule report_frontier:
    message:
        "Report: ID/OOD frontier of {wildcards.env}"
    input:
        "results/all_configs.csv",
    output:
        png=report(
            "figures/frontier/{env}.png",
            caption="../report/frontier.rst",
            category="Figures",
            subcategory="{env}",
            labels={"env": "{env}", "figure": "ID/OOD frontier"},
        ),
        pdf="figures/frontier/{env}.pdf",
    params:
        stem=figure_stem,
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
        "python -m pnc.workflow report_figure --threads {threads} frontier {input:q}"
        " --env {wildcards.env:q} --out {params.stem:q} > {log:q} 2>&1"


rule report_metrics:
    message:
        "Report: headline metrics across methods on {wildcards.env}"
    input:
        "results/results.csv",
    output:
        png=report(
            "figures/metrics/{env}.png",
            caption="../report/metrics.rst",
            category="Figures",
            subcategory="{env}",
            labels={"env": "{env}", "figure": "headline metrics"},
        ),
        pdf="figures/metrics/{env}.pdf",
    params:
        stem=figure_stem,
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
        "python -m pnc.workflow report_figure --threads {threads} metrics {input:q}"
        " --env {wildcards.env:q} --out {params.stem:q} > {log:q} 2>&1"

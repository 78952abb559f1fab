# Report stage: the paper's tables and figures from the long-format results tables.
#
#   results/results.csv      (selected configuration per (env, method)) -> results/tables/*
#   results/all_configs.csv  (every configuration, with `selected`)     -> figures/frontier*
#
# The Snakefile includes this file and lists `report_targets()` in `rule all`; the environments
# come from `config["envs"]` (names as in the `env` column of the results tables). Every output that
# belongs in `snakemake --report report.html` is wrapped in report(...) with a caption from
# workflow/report/. The rules are thin: they call `python -m pnc.report.stats` and `python -m pnc.report.figures`
# (pandas, numpy and matplotlib only; OMP_NUM_THREADS sizes the OpenBLAS pool to the rule's
# threads).

import os
import re

REPORT_TABLES = ("cross_env", "wilcoxon", "hparams", "per_env", "spearman")
REPORT_TABLE_FORMATS = ("tex", "md", "csv")
REPORT_FIGURE_FORMATS = ("pdf", "png")


# Environments of the report (names as in the results tables' `env` column).
REPORT_ENVS = [str(e) for e in (config.get("envs") or [])]
if not REPORT_ENVS:
    raise ValueError(
        "the report stage needs config key 'envs': a non-empty list of environment names"
    )
REPORT_ENV_PATTERN = "|".join(re.escape(e) for e in REPORT_ENVS)
# Every file the report stage writes: list `report_targets()` in `rule all`.
REPORT_TARGETS = (
    expand("results/tables/{table}.{ext}", table=REPORT_TABLES, ext=REPORT_TABLE_FORMATS)
    + ["results/tables/stats.json"]
    + expand("figures/frontier_all.{ext}", ext=REPORT_FIGURE_FORMATS)
    + expand(
        "figures/{kind}/{env}.{ext}",
        kind=("frontier", "metrics"),
        env=REPORT_ENVS,
        ext=REPORT_FIGURE_FORMATS,
    )
)
report_targets = lambda: list(REPORT_TARGETS)


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
        out=lambda wildcards, output: os.path.dirname(output.json),
    log:
        "logs/report/tables.log",
    benchmark:
        "benchmarks/report/tables.tsv"
    threads: 1
    conda:
        "../../envs/pnc.yaml"
    shell:
        "OMP_NUM_THREADS={threads} python -m pnc.report.stats {input:q} --out {params.out:q}"
        " > {log:q} 2>&1"


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
        stem=lambda wildcards, output: os.path.splitext(output.png)[0],
    log:
        "logs/report/frontier_all.log",
    benchmark:
        "benchmarks/report/frontier_all.tsv"
    threads: 1
    conda:
        "../../envs/pnc.yaml"
    shell:
        "OMP_NUM_THREADS={threads} python -m pnc.report.figures frontier {input:q}"
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
        stem=lambda wildcards, output: os.path.splitext(output.png)[0],
    wildcard_constraints:
        env=REPORT_ENV_PATTERN,
    log:
        "logs/report/frontier/{env}.log",
    benchmark:
        "benchmarks/report/frontier/{env}.tsv"
    threads: 1
    conda:
        "../../envs/pnc.yaml"
    shell:
        "OMP_NUM_THREADS={threads} python -m pnc.report.figures frontier {input:q} --env {wildcards.env:q}"
        " --out {params.stem:q} > {log:q} 2>&1"


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
        stem=lambda wildcards, output: os.path.splitext(output.png)[0],
    wildcard_constraints:
        env=REPORT_ENV_PATTERN,
    log:
        "logs/report/metrics/{env}.log",
    benchmark:
        "benchmarks/report/metrics/{env}.tsv"
    threads: 1
    conda:
        "../../envs/pnc.yaml"
    shell:
        "OMP_NUM_THREADS={threads} python -m pnc.report.figures metrics {input:q} --env {wildcards.env:q}"
        " --out {params.stem:q} > {log:q} 2>&1"

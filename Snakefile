# The Perturb-and-Correct MuJoCo study (paper Section 5.3, Appendix C) as a cached DAG:
#
#   data (offline behaviour datasets or Minari) -> Far data -> splits per (env, seed)
#   -> training runs per (env, seed, run), shared by every post-hoc configuration
#   -> construction + evaluation per (env, seed, method, run) -> selection per env (val NLL)
#   -> results/all_configs.csv, results/results.csv, results/selection.json -> report
#
# Run from the repository root (the default profile in profiles/default is picked up):
#   snakemake --cores 2 --configfile config/quick.yaml      # quick default
#   snakemake --cores N                                      # the paper's protocol (config.yaml)
#   snakemake --cores N results/envs/Hopper/results.csv      # one environment, no report
#   snakemake --report report.html                           # HTML report of a finished run
#
# Every job runs `python -m pnc.workflow STAGE --threads {threads} ...` (see pnc/workflow/commands.py).

import os

from snakemake.utils import min_version

min_version("9.0")


# config.yaml holds the defaults (the paper's protocol); a config given with --configfile is an
# overlay that Snakemake merges into it key by key (mappings merged, any other value replaced), so a
# study's config names only what it changes, and which methods run (`run_methods`).


configfile: os.path.join(workflow.basedir, "config.yaml")  # beside this file, whatever --directory


report: "workflow/report/workflow.rst"


# common.smk validates the config against workflow/schemas/config.schema.yaml (filling in its
# defaults) and checks it across keys, before any rule is defined.
include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/select.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/mechanism.smk"
include: "workflow/rules/pieces.smk"


rule all:
    default_target: True
    input:
        results_targets(),
        report_targets(),
        mechanism_targets(),

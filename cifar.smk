# The CIFAR-10 OOD study (paper Section 5.4, Table 2; Appendix D) as a cached DAG of its own:
#
#   data check (CIFAR-10 binary + OpenOOD v1.5 image lists) -> training runs per seed (base with
#   SWAG moments, Deep Ensemble members, one MC Dropout run per rate) -> post-hoc per (seed,
#   method): every configuration built and scored on ID validation (NLL after temperature
#   scaling) -> selection per method, each seed's choice -> post-hoc scores per (seed, method):
#   the chosen configuration's confidences on the test set and every OOD dataset -> metrics,
#   Table 2 and the sweep table.
#
# A Snakefile separate from the MuJoCo study's: the two studies share no job, their configs have
# different schemas, and neither DAG should be built (or validated) to run the other.
# Run from the repository root (the default profile in profiles/default is picked up):
#   snakemake -s cifar.smk --cores 16 --resources gpu=1                     # config/cifar.yaml
#   snakemake -s cifar.smk --cores 2 --configfile config/cifar_tiny.yaml    # CI scale, CPU
#   snakemake -s cifar.smk --profile profiles/slurm                         # SLURM, GPU jobs
#   snakemake -s cifar.smk --cores 4 cifar_training                         # partial target
# config/cifar.yaml holds the defaults and is always loaded; a --configfile is deep-merged over it
# and names only what it changes (config/cifar_tiny.yaml, cifar_smoke.yaml, cifar100.yaml,
# cifar_authors.yaml).
#
# Every job runs `python -m pnc.workflow cifar_STAGE --threads {threads} ...` (see pnc/workflow/commands.py).

from snakemake.utils import min_version

min_version("9.0")


configfile: "config/cifar.yaml"


include: "workflow/rules/cifar/common.smk"
include: "workflow/rules/cifar/data.smk"
include: "workflow/rules/cifar/train.smk"
include: "workflow/rules/cifar/posthoc.smk"
include: "workflow/rules/cifar/select.smk"
include: "workflow/rules/cifar/tables.smk"


rule cifar:
    default_target: True
    input:
        table_targets(),


rule cifar_training:
    input:
        training_targets(),

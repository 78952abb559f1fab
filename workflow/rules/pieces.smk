# One (env, seed)'s outputs as a piece of a long study (pnc.report.pieces): the manifest lists its
# metric tables with their SHA-256 once every one exists. `scripts/reference_runs.sh` runs the
# study piece by piece (target results/pieces/{env}/seed{seed}.json) and stores each piece as it
# finishes; the piece is not part of `rule all`.


rule piece:
    message:
        "List the metric tables of {wildcards.env}, seed {wildcards.seed} with their hashes"
    input:
        lambda wildcards: piece_tables(wildcards.env, wildcards.seed),
    output:
        "results/pieces/{env}/seed{seed}.json",
    resources:
        mem_mb=RESOURCES["select"]["mem_mb"],
        runtime=RESOURCES["select"]["runtime"],
    log:
        "logs/piece/{env}/seed{seed}.log",
    benchmark:
        "benchmarks/piece/{env}/seed{seed}.tsv"
    threads: 1
    conda:
        "../../envs/pnc.yaml"
    shell:
        "python -m pnc.workflow piece --threads {threads} {wildcards.env} {wildcards.seed}"
        " {input:q} --out {output:q} > {log:q} 2>&1"

# Selection per method, a stage of its own (as the MuJoCo study's select.smk): from every seed's
# sweep (posthoc.smk's validation files), each seed's configuration: the lowest ID-validation NLL
# at its own temperature (P&C: where coordinate descent ends). Each seed chooses on its own
# validation split (paper, Appendix D.2); the post-hoc scores of a seed read its choice (the chosen
# record's configuration id). Only the methods that select (SELECTING) have one.


rule cifar_select:
    wildcard_constraints:
        method=SELECTING_PATTERN,
    message:
        "CIFAR: select {wildcards.method} by validation NLL, every seed"
    input:
        validation=lambda wildcards: [validation_path(seed, wildcards.method) for seed in SEEDS],
        sweep=sweep_path("{method}"),
    output:
        json=selection_path("{method}"),
    log:
        "logs/cifar/select/{method}.log",
    benchmark:
        "benchmarks/cifar/select/{method}.tsv"
    resources:
        mem_mb=RES["select"]["mem_mb"],
        runtime=RES["select"]["runtime"],
        gpu=RES["select"]["gpu"],
    threads: THREADS["select"]
    conda:
        "../../../envs/pnc.yaml"
    shell:
        "python -m pnc.workflow cifar_select --threads {threads} {input.validation:q}"
        " --sweep {input.sweep:q} --out {output.json:q} > {log:q} 2>&1"

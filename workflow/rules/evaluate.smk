# Post-hoc construction and evaluation: one job per (env, seed, method, run) evaluates every
# configuration of the method that uses the run, on val and every evaluation split. Posteriors
# are rebuilt in memory, never stored; the job writes a small long-format metric table.


rule evaluate:
    message:
        "Construct and evaluate {wildcards.method} on run {wildcards.run}"
        " ({wildcards.env}, seed {wildcards.seed})"
    input:
        npz="resources/splits/{env}/seed{seed}/splits.npz",
        manifest="resources/splits/{env}/seed{seed}/manifest.json",
        msgpack="results/runs/{env}/seed{seed}/{run}/run.msgpack",
        json="results/runs/{env}/seed{seed}/{run}/run.json",
    output:
        "results/metrics/{env}/seed{seed}/{method}/{run}.csv",
    params:
        splits=splits_dir,
        run=run_dir,
        grid=lambda wildcards: method_json(wildcards.method),
        calibrations=calibration_options(),
    log:
        "logs/evaluate/{env}/seed{seed}/{method}/{run}.log",
    benchmark:
        "benchmarks/evaluate/{env}/seed{seed}/{method}/{run}.tsv"
    resources:
        mem_mb=RESOURCES["evaluate"]["mem_mb"],
        runtime=RESOURCES["evaluate"]["runtime"],
    threads: THREADS["evaluate"]
    priority: evaluation_priority
    conda:
        "../../envs/pnc.yaml"
    shell:
        "python -m pnc.workflow evaluate_run --threads {threads} --env {wildcards.env}"
        " --seed {wildcards.seed} --method {wildcards.method} --run-id {wildcards.run}"
        " --run {params.run:q} --splits {params.splits:q} --grid {params.grid:q}"
        " --calibrations {params.calibrations} --out {output:q} > {log:q} 2>&1"

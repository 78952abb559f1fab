# Training runs per seed: `base` (also collects the SWAG moments), `member<k>` (further Deep
# Ensemble members; the base run is member 0), `dropout<rate>` (MC Dropout). A run writes a
# checkpoint next to its outputs (every `checkpoint_every` epochs) and resumes from it when
# restarted.


rule cifar_train:
    message:
        "CIFAR: training run {wildcards.run}, seed {wildcards.seed}"
    input:
        npz=f"{PREPARED}/{ID}.npz",
        json=f"{PREPARED}/data.json",
    output:
        msgpack="results/cifar/runs/seed{seed}/{run}/run.msgpack",
        json="results/cifar/runs/seed{seed}/{run}/run.json",
    params:
        out=lambda wildcards, output: os.path.dirname(output.json),
        data=lambda wildcards, input: os.path.dirname(input.json),
        model=json_text(MODEL),
        train=json_text(TRAIN),
        val=DATA["val_size"],
        swag=lambda wildcards: (
            " ".join(str(s) for s in SWAG_STARTS) if wildcards.run == "base" else ""
        ),
        every=config["checkpoint_every"],
    log:
        "logs/cifar/train/seed{seed}/{run}.log",
    benchmark:
        "benchmarks/cifar/train/seed{seed}/{run}.tsv"
    resources:
        mem_mb=RES["train"]["mem_mb"],
        runtime=RES["train"]["runtime"],
        gpu=RES["train"]["gpu"],
    threads: THREADS["train"]
    conda:
        "../../../envs/pnc.yaml"
    shell:
        "python -m pnc.workflow cifar_train --threads {threads} --seed {wildcards.seed}"
        " --run-id {wildcards.run} --data {params.data:q} --out {params.out:q}"
        " --model {params.model:q} --train {params.train:q} --val-size {params.val}"
        " --checkpoint-every {params.every} --swag-starts {params.swag} > {log:q} 2>&1"

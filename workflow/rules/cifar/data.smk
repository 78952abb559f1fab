# Data: the generated tiny benchmark (CI scale only, config data.tiny), then the check of every
# CIFAR-10 and OpenOOD v1.5 file and their arrays, written once for every later job.


rule cifar_tiny_data:
    message:
        "CIFAR-10: writing the generated tiny benchmark under {params.root}"
    output:
        os.path.join(DATA["root"], "tiny.json"),
    params:
        root=lambda wildcards, output: os.path.dirname(output[0]),
        options=json_text(DATA.get("tiny")),
    log:
        "logs/cifar/tiny_data.log",
    benchmark:
        "benchmarks/cifar/tiny_data.tsv"
    resources:
        mem_mb=RES["data"]["mem_mb"],
        runtime=RES["data"]["runtime"],
    threads: 1
    conda:
        "../../../envs/pnc.yaml"
    shell:
        "python -m pnc.workflow.cifar_tiny_data --threads {threads} {params.root:q}"
        " --options {params.options:q} > {log:q} 2>&1"


rule cifar_data:
    message:
        "CIFAR-10: checking the data under {params.root} and writing its arrays"
    input:
        tiny_input,
    output:
        f"{PREPARED}/cifar10.npz",
        f"{PREPARED}/ood.npz",
        json=f"{PREPARED}/data.json",
    params:
        root=DATA["root"],
        ood=" ".join(DATA["ood"]),
        limit=f"--limit {DATA['ood_limit']}" if DATA.get("ood_limit") else "",
        out=lambda wildcards, output: os.path.dirname(output.json),
    log:
        "logs/cifar/data.log",
    benchmark:
        "benchmarks/cifar/data.tsv"
    resources:
        mem_mb=RES["data"]["mem_mb"],
        runtime=RES["data"]["runtime"],
    threads: THREADS["data"]
    conda:
        "../../../envs/pnc.yaml"
    shell:
        "python -m pnc.workflow.cifar_data --threads {threads} {params.root:q} --ood {params.ood}"
        " --out {params.out:q} {params.limit} > {log:q} 2>&1"

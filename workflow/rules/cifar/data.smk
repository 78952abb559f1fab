# Data: the generated benchmark (CI and smoke scale, config data.tiny) or the download of every
# missing file from its official source (data.fetch, checksums verified; without a network one
# message names every missing file and how to place it by hand), then the check of every ID and
# OpenOOD v1.5 file and their arrays, written once for every later job.


rule cifar_fetch:
    message:
        "CIFAR: fetching the missing data files into {params.root}"
    output:
        json="resources/cifar/fetch.json",
    params:
        root=DATA["root"],
        ood=" ".join(DATA["ood"]),
        id=ID,
        sources=json_text(DATA.get("sources")),
    log:
        "logs/cifar/fetch.log",
    benchmark:
        "benchmarks/cifar/fetch.tsv"
    resources:
        mem_mb=RES["data"]["mem_mb"],
        runtime=RES["data"]["runtime"],
    threads: 1
    conda:
        "../../../envs/pnc.yaml"
    shell:
        "python -m pnc.workflow cifar_fetch --threads {threads} {params.root:q} --ood {params.ood}"
        " --id {params.id} --sources {params.sources:q} --summary {output.json:q} > {log:q} 2>&1"


rule cifar_tiny_data:
    message:
        "CIFAR: writing the generated tiny benchmark under {params.root}"
    output:
        os.path.join(DATA["root"], "tiny.json"),
    params:
        root=lambda wildcards, output: os.path.dirname(output[0]),
        options=json_text(DATA.get("tiny")),
        id=ID,
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
        "python -m pnc.workflow cifar_tiny_data --threads {threads} {params.root:q}"
        " --options {params.options:q} --id {params.id} > {log:q} 2>&1"


rule cifar_data:
    message:
        "CIFAR: checking the data under {params.root} and writing its arrays"
    input:
        data_input,
    output:
        f"{PREPARED}/{ID}.npz",
        f"{PREPARED}/ood.npz",
        json=f"{PREPARED}/data.json",
    params:
        root=DATA["root"],
        ood=" ".join(DATA["ood"]),
        limit=f"--limit {DATA['ood_limit']}" if DATA.get("ood_limit") else "",
        out=lambda wildcards, output: os.path.dirname(output.json),
        id=ID,
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
        "python -m pnc.workflow cifar_data --threads {threads} {params.root:q} --ood {params.ood}"
        " --out {params.out:q} {params.limit} --id {params.id} > {log:q} 2>&1"

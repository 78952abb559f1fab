# Data: behaviour datasets (offline ARS rollouts, or the paper's Minari datasets), the Far
# (uniform-random-action) dataset per (env, seed), and the pools/splits per (env, seed). Minari datasets live
# under config data.minari_root; each dataset rule leaves a JSON record of what it made or found.


# ARS keeps its training state in resources/ars_state/ (outside the rule's output), so a job that
# was cut off (a SLURM time limit, say) resumes where it stopped when it runs again.
rule behaviour_policies:
    message:
        "Train the ARS behaviour policies (expert/medium/simple) of {wildcards.env}"
    output:
        directory("resources/policies/{env}"),
    params:
        seed=DATA.get("seed", 0),
    log:
        "logs/behaviour_policies/{env}.log",
    benchmark:
        "benchmarks/behaviour_policies/{env}.tsv"
    resources:
        mem_mb=RESOURCES["policies"]["mem_mb"],
        runtime=RESOURCES["policies"]["runtime"],
    priority: UPSTREAM_PRIORITY
    threads: THREADS["data"]
    conda:
        "../../envs/pnc.yaml"
    shell:
        "python -m pnc.workflow behaviour_policies --threads {threads} {wildcards.env}"
        " --out resources/policies --seed {params.seed} --workers {threads}"
        " --state resources/ars_state/{wildcards.env}.npz > {log:q} 2>&1"


rule offline_data:
    message:
        "Offline behaviour datasets (ARS policies) for {wildcards.env}"
    input:
        policy_input,
    output:
        "resources/data/{env}/offline.json",
    params:
        root=MINARI_ROOT,
        policies=policy_option,
        transitions=DATA["offline_transitions"],
        seed=DATA.get("seed", 0),
    log:
        "logs/offline_data/{env}.log",
    benchmark:
        "benchmarks/offline_data/{env}.tsv"
    resources:
        mem_mb=RESOURCES["data"]["mem_mb"],
        runtime=RESOURCES["data"]["runtime"],
    priority: UPSTREAM_PRIORITY
    threads: THREADS["data"]
    conda:
        "../../envs/pnc.yaml"
    shell:
        "python -m pnc.workflow offline_data --threads {threads} {wildcards.env}"
        " --minari-root {params.root:q} --transitions {params.transitions} --seed {params.seed}"
        " {params.policies} --force"
        " > {output:q}.tmp 2> {log:q} && mv {output:q}.tmp {output:q}"


rule minari_data:
    message:
        "Minari datasets of {wildcards.env} (expert/medium/simple)"
    output:
        "resources/data/{env}/minari.json",
    params:
        root=MINARI_ROOT,
        download="--download" if DATA["download"] else "",
    log:
        "logs/minari_data/{env}.log",
    benchmark:
        "benchmarks/minari_data/{env}.tsv"
    resources:
        mem_mb=RESOURCES["data"]["mem_mb"],
        runtime=RESOURCES["data"]["runtime"],
    priority: DOWNLOAD_PRIORITY
    threads: THREADS["data"]
    conda:
        "../../envs/pnc.yaml"
    shell:
        "python -m pnc.workflow minari_data --threads {threads} {wildcards.env}"
        " --minari-root {params.root:q} {params.download} --out {output:q} > {log:q} 2>&1"


rule far_data:
    message:
        "Far data: uniform-random-action rollouts of {wildcards.env}, seed {wildcards.seed}"
    input:
        far_input,
    output:
        "resources/data/{env}/far-seed{seed}.json",
    params:
        root=MINARI_ROOT,
        transitions=DATA["far_transitions"],
    log:
        "logs/far_data/{env}/seed{seed}.log",
    benchmark:
        "benchmarks/far_data/{env}/seed{seed}.tsv"
    resources:
        mem_mb=RESOURCES["data"]["mem_mb"],
        runtime=RESOURCES["data"]["runtime"],
    priority: UPSTREAM_PRIORITY
    threads: THREADS["data"]
    conda:
        "../../envs/pnc.yaml"
    shell:
        "python -m pnc.workflow far_data --threads {threads} {wildcards.env}"
        " --minari-root {params.root:q} --transitions {params.transitions}"
        " --seed {wildcards.seed} --force"
        " > {output:q}.tmp 2> {log:q} && mv {output:q}.tmp {output:q}"


rule splits:
    message:
        "Pools and splits train/val/id/near/mid/far of {wildcards.env}, seed {wildcards.seed}"
    input:
        source_records,
    output:
        npz="resources/splits/{env}/seed{seed}/splits.npz",
        manifest="resources/splits/{env}/seed{seed}/manifest.json",
    params:
        out=splits_dir,
        root=MINARI_ROOT,
        source=DATA["source"],
        options=split_options(),
    log:
        "logs/splits/{env}/seed{seed}.log",
    benchmark:
        "benchmarks/splits/{env}/seed{seed}.tsv"
    resources:
        mem_mb=RESOURCES["splits"]["mem_mb"],
        runtime=RESOURCES["splits"]["runtime"],
    priority: UPSTREAM_PRIORITY
    threads: THREADS["data"]
    conda:
        "../../envs/pnc.yaml"
    shell:
        "python -m pnc.workflow episode_splits --threads {threads} {wildcards.env}"
        " --source {params.source} --seed {wildcards.seed} --out {params.out:q}"
        " --minari-root {params.root:q} {params.options} --force"
        " > {log:q} 2>&1"

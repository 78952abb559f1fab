"""The pure parts of scripts/slurm_check.sh: the single-node ``slurm.conf`` it starts SLURM with,
and the check that every submitted ``sbatch`` line carries its rule's threads and memory.

    python scripts/slurm_conf.py --dir D --cpus N --memory-mb M [--partition P] > D/slurm.conf
    python scripts/slurm_conf.py --check-sbatch sbatch.txt --rules-of snakemake.log [...]
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from pathlib import Path


def slurm_conf(directory: Path, cpus: int, memory_mb: int, partition: str = "pnccheck") -> str:
    """A ``slurm.conf`` for one node on localhost whose state, spool, logs and munge socket live
    under ``directory``; ``cpus`` and ``memory_mb`` are the node's (the machine's) CPUs and memory.

    No accounting database: the executor reads job states with ``squeue``, so finished jobs stay
    in the controller for an hour (``MinJobAge``). Memory is a consumable resource, confined per
    job by a memory cgroup (:func:`cgroup_conf`): a job over its ``--mem`` is killed by the
    kernel's OOM killer, which SLURM records as ``OUT_OF_MEMORY``.
    """
    if cpus < 1 or memory_mb < 1:
        raise ValueError(f"cpus and memory_mb must be positive, got {cpus} and {memory_mb}")
    if not re.fullmatch(r"[A-Za-z0-9_]+", partition):
        raise ValueError(f"partition name must be letters, digits and _, got {partition!r}")
    d = Path(directory).resolve()
    lines = {
        "ClusterName": "pnccheck",
        "SlurmctldHost": "localhost",
        "SlurmUser": "root",
        "SlurmdUser": "root",
        "AuthType": "auth/munge",
        "AuthInfo": f"socket={d / 'munge' / 'munge.socket'}",
        "CredType": "cred/munge",
        "SlurmctldPort": "6817",
        "SlurmdPort": "6818",
        "StateSaveLocation": str(d / "state"),
        "SlurmdSpoolDir": str(d / "spool"),
        "SlurmctldPidFile": str(d / "slurmctld.pid"),
        "SlurmdPidFile": str(d / "slurmd.pid"),
        "SlurmctldLogFile": str(d / "log" / "slurmctld.log"),
        "SlurmdLogFile": str(d / "log" / "slurmd.log"),
        "ProctrackType": "proctrack/cgroup",
        "TaskPlugin": "task/cgroup",
        "SwitchType": "switch/none",
        "MpiDefault": "none",
        "ReturnToService": "2",
        "SchedulerType": "sched/backfill",
        "SelectType": "select/cons_tres",
        "SelectTypeParameters": "CR_Core_Memory",
        "JobAcctGatherType": "jobacct_gather/cgroup",
        "JobAcctGatherFrequency": "task=5",
        "AccountingStorageType": "accounting_storage/none",
        "JobCompType": "jobcomp/none",
        "MinJobAge": "3600",
        "SlurmctldTimeout": "30",
        "SlurmdTimeout": "30",
        "InactiveLimit": "0",
        "KillWait": "5",
        "Waittime": "0",
    }
    text = "".join(f"{key}={value}\n" for key, value in lines.items())
    text += (
        f"NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN\n"
        f"PartitionName={partition} Nodes=localhost Default=YES MaxTime=INFINITE State=UP\n"
    )
    return text


def cgroup_conf() -> str:
    """The ``cgroup.conf`` beside ``slurm.conf``: cgroup v1 hierarchies (those this machine
    mounts under /sys/fs/cgroup), each job confined to its ``--mem`` of RAM and no swap."""
    return (
        "CgroupPlugin=cgroup/v1\n"
        "CgroupMountpoint=/sys/fs/cgroup\n"
        "ConstrainCores=no\n"
        "ConstrainRAMSpace=yes\n"
        "ConstrainSwapSpace=yes\n"
        "AllowedSwapSpace=0\n"
    )


def local_profile(repo_profile: Path, partition: str, jobs: int) -> str:
    """A Snakemake profile given after ``repo_profile`` (``--profile repo --profile local``) with
    the settings of one site: its partition (added to the repository profile's
    ``default-resources``, which a later profile would otherwise replace as a whole), no account
    and job states read with ``squeue`` (no accounting database), ``jobs`` SLURM jobs at a time,
    and verbose output (the plugin logs each ``sbatch`` call)."""
    import yaml

    base = yaml.safe_load(Path(repo_profile).read_text()) or {}
    resources = base.get("default-resources", {})
    if isinstance(resources, list):
        resources = dict(item.split("=", 1) for item in resources)
    resources = {**resources, "slurm_partition": partition}
    profile = {
        "default-resources": resources,
        "slurm-no-account": True,
        "slurm-status-command": "squeue",
        "slurm-init-seconds-before-status-checks": 5,
        "jobs": jobs,
        "verbose": True,
    }
    return "# Settings of one site, kept out of the repository's profiles/slurm\n" + yaml.safe_dump(
        profile, sort_keys=False
    )


def parse_sbatch(line: str) -> dict[str, str]:
    """The options of one ``sbatch`` call as the executor plugin logs it (``sbatch call: ...``):
    ``{"cpus_per_task": "1", "mem": "4000", "time": "30", "comment": "rule_x_wildcards_...",
    "gpus": ...}``, only the options present. Raises ``ValueError`` on a line that is not one."""
    text = line.split("sbatch call:", 1)[-1].strip()
    if not text.startswith("sbatch "):
        raise ValueError(f"not an sbatch call: {line!r}")
    words = shlex.split(text.split(" --wrap=", 1)[0].split(" <<<", 1)[0])
    names = {
        "-c": "cpus_per_task", "--cpus-per-task": "cpus_per_task", "--mem": "mem",
        "-t": "time", "--time": "time", "--comment": "comment", "--gpus": "gpus",
        "--gres": "gres", "-p": "partition", "--partition": "partition",
        "--job-name": "job_name", "-J": "job_name", "--cpus-per-gpu": "cpus_per_gpu",
    }  # fmt: skip
    options: dict[str, str] = {}
    i = 1
    while i < len(words):
        word = words[i]
        if "=" in word and word.startswith("--"):
            key, value = word.split("=", 1)
            i += 1
        elif i + 1 < len(words) and not words[i + 1].startswith("-"):
            key, value = word, words[i + 1]
            i += 2
        else:
            key, value = word, ""
            i += 1
        if key in names:
            options[names[key]] = value
    return options


def _job_resources(log: str) -> dict[str, dict[str, str]]:
    """``{comment: {"threads": ..., "mem_mb": ...}}`` from Snakemake's job blocks in a verbose log.

    A job block holds ``rule NAME:`` or ``localrule``, ``wildcards: a=1, b=2``, ``threads: N``
    and ``resources: mem_mb=..., ...``; its comment is the plugin's ``rule_NAME_wildcards_1_2``.
    """
    jobs: dict[str, dict[str, str]] = {}
    for block in re.split(r"\n(?=\[[A-Z][a-z]{2} [A-Z][a-z]{2} )", log):
        rule = re.search(r"^rule (\w+):", block, re.M)
        if not rule:
            continue
        wildcards = re.search(r"^\s+wildcards: (.*)$", block, re.M)
        threads = re.search(r"^\s+threads: (\d+)$", block, re.M)
        resources = re.search(r"^\s+resources: (.*)$", block, re.M)
        comment = f"rule_{rule.group(1)}"
        if wildcards:
            values = [part.split("=", 1)[1] for part in wildcards.group(1).split(", ")]
            comment += "_wildcards_" + "_".join(values).replace("/", "_")
        info = {"threads": threads.group(1) if threads else "1"}
        if resources:
            for part in resources.group(1).split(", "):
                key, _, value = part.partition("=")
                info[key] = value
        jobs[comment] = info
    return jobs


def check_sbatch(lines: list[str], logs: list[str]) -> list[str]:
    """Problems with the ``sbatch`` lines: a job whose line lacks its rule's threads as
    ``--cpus-per-task``, its ``mem_mb`` as ``--mem``, its ``runtime`` as ``-t`` or its ``gpu`` as
    ``--gpus``, compared with the job block Snakemake logged. Rules with a ``message:`` log no
    block; their lines must carry the three options (values not compared). Empty when fine."""
    jobs: dict[str, dict[str, str]] = {}
    for log in logs:
        jobs.update(_job_resources(log))
    problems = []
    if not lines:
        return ["no sbatch call in the logs (was the run verbose?)"]
    for line in lines:
        options = parse_sbatch(line)
        comment = options.get("comment", "")
        job = jobs.get(comment)
        if job is None:  # a rule with a message: directive prints no job block; presence only
            missing = [key for key in ("cpus_per_task", "mem", "time") if not options.get(key)]
            if missing:
                problems.append(f"{comment}: no {', '.join(missing)} in {line}")
            continue
        want = {"cpus_per_task": job["threads"], "mem": job.get("mem_mb"),
                "time": job.get("runtime"), "gpus": job.get("gpu")}  # fmt: skip
        for key, value in want.items():
            if value is not None and options.get(key) != value:
                problems.append(f"{comment}: {key}={options.get(key)!r}, the rule declares {value}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path)
    parser.add_argument("--cpus", type=int)
    parser.add_argument("--memory-mb", type=int)
    parser.add_argument("--partition", default="pnccheck")
    parser.add_argument("--cgroup-conf", action="store_true", help="write cgroup.conf")
    parser.add_argument("--profile-from", type=Path, help="write a local profile after this one")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--check-sbatch", type=Path, help="file of 'sbatch call: ...' lines")
    parser.add_argument("--rules-of", type=Path, nargs="*", default=[], help="Snakemake logs")
    args = parser.parse_args(argv)
    if args.check_sbatch is not None:
        lines = [line for line in args.check_sbatch.read_text().splitlines() if line.strip()]
        problems = check_sbatch(lines, [p.read_text() for p in args.rules_of])
        for problem in problems:
            print(problem, file=sys.stderr)
        print(f"{len(lines)} sbatch lines, {len(problems)} problems")
        return 1 if problems else 0
    if args.cgroup_conf:
        sys.stdout.write(cgroup_conf())
        return 0
    if args.profile_from is not None:
        sys.stdout.write(local_profile(args.profile_from, args.partition, args.jobs))
        return 0
    if args.dir is None or args.cpus is None or args.memory_mb is None:
        parser.error("--dir, --cpus and --memory-mb are required to write a slurm.conf")
    sys.stdout.write(slurm_conf(args.dir, args.cpus, args.memory_mb, args.partition))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

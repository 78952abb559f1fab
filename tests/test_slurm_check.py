"""The pure parts of scripts/slurm_check.sh (scripts/slurm_conf.py): the single-node SLURM
configuration, the local profile layered over profiles/slurm, and the check that each submitted
``sbatch`` line carries its rule's threads, memory and wall time."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("slurm_conf", ROOT / "scripts" / "slurm_conf.py")
slurm_conf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(slurm_conf)

#: An sbatch call as the executor plugin logs it (from a run of the check), the wrap shortened.
LINE = (
    "sbatch call: sbatch --parsable --job-name 4f4130f0-6807-47fc-9d83-f40be2af24df --output "
    "/tmp/w/.snakemake/slurm_logs/rule_train/InvertedPendulum_0_base/%j.log --export=ALL "
    "--comment rule_train_wildcards_InvertedPendulum_0_base   -p pnccheck -t 60 --mem 8000 "
    '--ntasks=1 --cpus-per-task=1 -D /tmp/w --wrap="/venv/bin/python -m snakemake '
    "--target-jobs 'train:env=InvertedPendulum,seed=0,run=base' --cores 'all' --mem 5\""
)

#: The matching job block of Snakemake's verbose log.
BLOCK = """[Mon Nov 23 21:02:03 2026]
rule train:
    input: resources/data/InvertedPendulum/splits-seed0.json
    output: results/runs/InvertedPendulum/seed0/base/run.msgpack
    log: logs/train/InvertedPendulum/seed0/base.log
    jobid: 4
    benchmark: benchmarks/train/InvertedPendulum/seed0/base.tsv
    reason: Missing output files: results/runs/InvertedPendulum/seed0/base/run.msgpack
    wildcards: env=InvertedPendulum, seed=0, run=base
    resources: tmpdir=<TBD>, mem_mb=8000, mem=8 GB, mem_mib=7630, runtime=60
"""


def test_slurm_conf_is_one_node_with_the_given_cpus_and_memory(tmp_path):
    text = slurm_conf.slurm_conf(tmp_path, cpus=2, memory_mb=24105, partition="debug")
    settings = dict(line.split("=", 1) for line in text.splitlines() if " " not in line)
    assert settings["SlurmctldHost"] == "localhost"
    assert settings["StateSaveLocation"] == str(tmp_path.resolve() / "state")
    assert settings["AuthInfo"] == f"socket={tmp_path.resolve() / 'munge' / 'munge.socket'}"
    assert settings["SelectTypeParameters"] == "CR_Core_Memory"
    assert settings["AccountingStorageType"] == "accounting_storage/none"
    assert int(settings["MinJobAge"]) >= 120  # squeue sees finished jobs (the plugin's bound)
    assert "NodeName=localhost NodeAddr=127.0.0.1 CPUs=2 RealMemory=24105" in text
    assert "PartitionName=debug Nodes=localhost Default=YES" in text
    assert "ConstrainRAMSpace=yes" in slurm_conf.cgroup_conf()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cpus": 0, "memory_mb": 100}, "positive"),
        ({"cpus": 2, "memory_mb": 100, "partition": "a b"}, "partition"),
    ],
)
def test_slurm_conf_rejects_bad_input(tmp_path, kwargs, message):
    with pytest.raises(ValueError, match=message):
        slurm_conf.slurm_conf(tmp_path, **kwargs)


def test_local_profile_adds_the_partition_to_the_repository_defaults():
    repo = ROOT / "profiles" / "slurm" / "config.yaml"
    before = repo.read_text()
    local = yaml.safe_load(slurm_conf.local_profile(repo, "debug", jobs=3))
    defaults = yaml.safe_load(before)["default-resources"]
    assert local["default-resources"] == {**defaults, "slurm_partition": "debug"}
    assert local["slurm-no-account"] is True and local["slurm-status-command"] == "squeue"
    assert local["jobs"] == 3 and "executor" not in local
    assert repo.read_text() == before


def test_parse_sbatch_reads_the_options_before_the_wrapped_command():
    options = slurm_conf.parse_sbatch(LINE)
    assert options == {
        "job_name": "4f4130f0-6807-47fc-9d83-f40be2af24df",
        "comment": "rule_train_wildcards_InvertedPendulum_0_base",
        "partition": "pnccheck",
        "time": "60",
        "mem": "8000",  # not the wrapped command's "--mem 5"
        "cpus_per_task": "1",
    }
    with pytest.raises(ValueError, match="not an sbatch call"):
        slurm_conf.parse_sbatch("srun -n1 hostname")


def test_check_sbatch_matches_each_line_to_its_job():
    assert slurm_conf.check_sbatch([LINE], [BLOCK]) == []
    threaded = BLOCK.replace("    wildcards:", "    threads: 2\n    wildcards:")
    assert slurm_conf.check_sbatch([LINE], [threaded]) == [
        "rule_train_wildcards_InvertedPendulum_0_base: cpus_per_task='1', the rule declares 2"
    ]
    smaller = BLOCK.replace("mem_mb=8000", "mem_mb=4000")
    assert slurm_conf.check_sbatch([LINE], [smaller]) == [
        "rule_train_wildcards_InvertedPendulum_0_base: mem='8000', the rule declares 4000"
    ]
    gpu = BLOCK.replace("runtime=60", "runtime=60, gpu=1")
    assert slurm_conf.check_sbatch([LINE], [gpu]) == [
        "rule_train_wildcards_InvertedPendulum_0_base: gpus=None, the rule declares 1"
    ]
    other = BLOCK.replace("run=base", "run=other")  # no block: the options must be present
    assert slurm_conf.check_sbatch([LINE], [other]) == []
    bare = LINE.replace(" --mem 8000", "").replace(" -t 60", "")
    assert slurm_conf.check_sbatch([bare], [other]) == [
        f"rule_train_wildcards_InvertedPendulum_0_base: no mem, time in {bare}"
    ]
    assert slurm_conf.check_sbatch([], [BLOCK]) != []

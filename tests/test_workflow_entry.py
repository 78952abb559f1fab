"""``python -m pnc.workflow STAGE``: the one entry point of the rules, its stage table and errors."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from pnc.workflow import commands

ROOT = Path(__file__).resolve().parents[1]
RULE_FILES = sorted((ROOT / "workflow" / "rules").rglob("*.smk"))
COMMAND = re.compile(r"python -m pnc\.workflow(\S*) (\w+)")
# the stages of the commands common.smk builds (stage_command, and batch_command's `batch`)
BUILT = re.compile(r'stage_command\(\s*"(\w+)"|return f"(batch) ')


def _named_stages() -> set[str]:
    named = set()
    for path in RULE_FILES:
        text = path.read_text()
        for suffix, stage in COMMAND.findall(text):
            assert suffix == "", f"{path.name}: old module-per-stage command pnc.workflow{suffix}"
            named.add(stage)
        named.update(a or b for a, b in BUILT.findall(text))
    return named


def test_every_stage_a_rule_names_exists_and_every_stage_is_used():
    named = _named_stages()
    assert len(named) >= 20
    assert named <= set(commands.STAGES), sorted(named - set(commands.STAGES))
    assert set(commands.STAGES) <= named, sorted(set(commands.STAGES) - named)


@pytest.mark.parametrize("stage", sorted(commands.STAGES))
def test_every_stage_shows_its_help(stage, capsys):
    with pytest.raises(SystemExit) as info:
        commands.main([stage, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: python -m pnc.workflow {stage} ") and "--threads" in out


def test_listing_and_unknown_stage(capsys):
    assert commands.main(["--help"]) == 0
    listing = capsys.readouterr().out
    for name in commands.STAGES:
        assert f"\n  {name} " in listing
    assert commands.main([]) == 2
    assert "usage: python -m pnc.workflow STAGE" in capsys.readouterr().err
    assert commands.main(["train"]) == 2
    err = capsys.readouterr().err
    assert "unknown stage 'train'" in err and "train_run, evaluate_run" in err


def test_forwarding_stage_passes_the_exit_status_and_its_prog(monkeypatch, capsys):
    """A bad argument of the library reaches it and its status comes back, from a real process."""
    done = subprocess.run(
        [sys.executable, "-m", "pnc.workflow", "report_tables", "--threads", "1", "nope.csv"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "--out" in done.stderr  # pnc.report tables: the required --out is missing


_PROBE = """
import atexit, logging, runpy, sys
from pnc.workflow import commands

atexit.register(lambda: print("teardown ran", file=sys.stderr, flush=True))

def probe(argv):
    with open(argv[0], "w") as f:
        f.write("written")
    print("buffered stdout line")  # a pipe: block-buffered until flushed
    logging.getLogger("pnc.workflow").warning("logged line")
    return int(argv[1])

commands.STAGES["probe"] = probe
sys.argv = ["pnc.workflow", "probe", sys.argv[1], sys.argv[2]]
runpy.run_module("pnc.workflow", run_name="__main__")
"""


@pytest.mark.parametrize("full_exit", [False, True])
@pytest.mark.parametrize("status", [0, 3])
def test_a_stage_process_ends_without_the_interpreter_teardown(tmp_path, full_exit, status):
    """``python -m pnc.workflow``: after the stage returns, its outputs, stdout, log lines and
    process record are complete and its status is the exit status, and the interpreter's teardown
    (here an ``atexit`` handler) is skipped unless ``PNC_FULL_EXIT=1``."""
    import os

    from pnc.runtime.io import PROCESS_RECORD

    env = {k: v for k, v in os.environ.items() if k != commands.FULL_EXIT_VAR}
    if full_exit:
        env[commands.FULL_EXIT_VAR] = "1"
    out = tmp_path / "out.txt"
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(out), str(status)],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert done.returncode == status, done.stderr
    assert out.read_text() == "written"
    assert done.stdout == "buffered stdout line\n"
    err = done.stderr.strip().splitlines()
    assert any("logged line" in line for line in err)
    if full_exit:
        assert err[-1] == "teardown ran"
        err = err[:-1]
    else:
        assert "teardown ran" not in done.stderr
    assert err[-1].startswith(PROCESS_RECORD) and f'"status": {status}' in err[-1]


def test_exit_process_statuses(monkeypatch):
    calls = []
    monkeypatch.delenv(commands.FULL_EXIT_VAR, raising=False)
    monkeypatch.setattr(commands.os, "_exit", lambda code: calls.append(code))
    commands.exit_process(None)
    commands.exit_process(2)
    assert calls == [0, 2]
    monkeypatch.setenv(commands.FULL_EXIT_VAR, "1")
    with pytest.raises(SystemExit) as info:
        commands.exit_process(4)
    assert info.value.code == 4 and calls == [0, 2]


def test_batch_runs_its_stages_in_order_and_stops_at_the_first_failure(monkeypatch, capsys):
    calls = []

    def stage(name, status):
        return lambda argv: calls.append((name, argv)) or status

    stages = {**commands.STAGES, "one": stage("one", 0), "two": stage("two", 3)}
    stages["three"] = stage("three", None)
    monkeypatch.setattr(commands, "STAGES", stages)
    sep = commands.BATCH_SEPARATOR
    argv = ["one", "--threads", "1", "a", sep, "three", "--threads", "1", sep, "one", "b"]
    assert commands.batch(argv) == 0
    assert calls == [
        ("one", ["--threads", "1", "a"]),
        ("three", ["--threads", "1"]),
        ("one", ["b"]),
    ]
    calls.clear()
    assert commands.batch(["one", sep, "two", "x", sep, "one"]) == 3
    assert calls == [("one", []), ("two", ["x"])]  # the stage after the failure never runs
    # nothing runs when a part names no stage, an unknown one or a batch
    calls.clear()
    for bad, named in (
        (["one", sep, "nope"], "unknown stage 'nope'"),
        (["one", sep, sep, "one"], f"no stage around {sep!r}"),
        (["one", sep], f"no stage around {sep!r}"),
        (["batch", "one"], "unknown stage 'batch'"),
    ):
        assert commands.batch(bad) == 2
        assert named in capsys.readouterr().err
    assert calls == []

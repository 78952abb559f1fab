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


def _named_stages() -> set[str]:
    named = set()
    for path in RULE_FILES:
        for suffix, stage in COMMAND.findall(path.read_text()):
            assert suffix == "", f"{path.name}: old module-per-stage command pnc.workflow{suffix}"
            named.add(stage)
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

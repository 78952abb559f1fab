"""Every committed reference folder under docs/results/ (one holding a results.csv) rebuilds its
tables byte for byte from its own CSVs: tables and data cannot drift apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from pnc.report import export

ROOT = Path(__file__).resolve().parents[1] / "docs" / "results"
FOLDERS = sorted(p.parent for p in ROOT.glob("*/results.csv"))


@pytest.mark.parametrize("folder", FOLDERS, ids=[p.name for p in FOLDERS])
def test_committed_tables_rebuild_from_their_csvs(folder):
    assert (folder / "tables").is_dir(), f"{folder} has a results.csv but no tables/"
    assert export.check_folder(folder, ROOT / "paper") == []

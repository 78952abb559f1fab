"""The peers benchmark (``python -m pnc.bench.peers``): its refusals, its tasks' data and a
``--quick`` run of both tasks with every method (slow tier)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pnc.bench import peers
from pnc.bench.peer_tasks import DIGITS_ID_CLASSES, Task, check_task, digits_task


def _tiny_task(shifts) -> Task:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(30, 3)).astype(np.float32)
    y = rng.normal(size=(30, 2)).astype(np.float32)
    return Task("tiny", "regression", (x[:10], y[:10]), (x[10:20], y[10:20]),
                (x[20:], y[20:]), shifts)  # fmt: skip


def test_refuses_an_empty_shift_set_naming_the_task():
    task = _tiny_task({})
    with pytest.raises(ValueError, match=r"task 'tiny': the shift set is empty"):
        check_task(task)
    # the runner refuses before it trains anything
    with pytest.raises(ValueError, match=r"task 'tiny': the shift set is empty"):
        peers.run_task(task, peers.Settings.make(quick=True))


@pytest.mark.parametrize("split", [0, 1, 2])
def test_refuses_shifted_rows_that_repeat_id_rows(split):
    task = _tiny_task({})
    rows = (task.train, task.val, task.test)[split][0]
    fresh = np.full((4, 3), 9.0, np.float32)
    task.shifts = {"fine": (fresh, None), "leaky": (np.concatenate([fresh + 1, rows[2:4]]), None)}
    with pytest.raises(ValueError, match=r"task 'tiny': shift 'leaky' shares 2 input rows"):
        check_task(task)
    with pytest.raises(ValueError, match=r"shift 'leaky'"):
        peers.run_task(task, peers.Settings.make(quick=True))
    task.shifts = {"fine": (fresh, None)}
    check_task(task)  # disjoint rows pass


def test_refuses_a_shift_without_rows():
    task = _tiny_task({"empty": (np.zeros((0, 3), np.float32), None)})
    with pytest.raises(ValueError, match=r"task 'tiny': shift 'empty' has no rows"):
        check_task(task)


def test_digits_task_splits():
    task = digits_task(0)
    check_task(task)  # disjoint ID and OOD rows
    n_id = sum(len(part[0]) for part in (task.train, task.val, task.test))
    held_out = task.shifts["held_out_classes"][0]
    assert n_id + len(held_out) == 1797
    for part in (task.train, task.val, task.test):
        assert set(np.unique(part[1])) == set(range(len(DIGITS_ID_CLASSES)))
    # the corruptions are of the ID test images, and grow with the severity
    names = [n for n in task.shifts if n != "held_out_classes"]
    assert len(names) == 6
    for kind in ("rotation", "noise"):
        dist = [np.abs(task.shifts[n][0] - task.test[0]).mean() for n in names if kind in n]
        assert len(dist) == 3 and dist[0] > 0 and np.all(np.diff(dist) > 0), (kind, dist)


def test_grids_of_pnc_and_laplax_have_the_same_size():
    for quick in (False, True):
        s = peers.Settings.make(quick)
        sizes = {m: len(s.grid(m)) for m in peers.GRIDS}
        assert len(set(sizes.values())) == 1, sizes


@pytest.mark.slow
def test_quick_run_scores_every_method(tmp_path):
    pytest.importorskip(
        "laplax", reason="laplax is not installed: pip install -e '.[peers]' (scripts/test.sh does)"
    )
    out = tmp_path / "peers.json"
    report = peers.main(["--quick", "--out", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(report))
    expected = {
        "digits": {"base", "pnc", "laplace_last_layer_diag", "laplace_all_lowrank",
                   "deep_ensemble", "mc_dropout"},
        "halfcheetah": {"base", "pnc", "pnc_study", "laplace_last_layer_diag",
                        "laplace_all_lowrank", "deep_ensemble"},
        "transformer": {"base", "pnc", "laplace_last_layer_diag", "laplace_all_lowrank",
                        "deep_ensemble"},
    }  # fmt: skip
    assert report["grids"] == {m: peers.GRIDS[m][1] for m in peers.GRIDS}
    for task, methods in expected.items():
        entry = report["tasks"][task]
        assert set(entry["methods"]) == methods
        shifts = set(entry["data"]["rows"]) - {"train", "val", "test"}
        for name, m in entry["methods"].items():
            assert set(m["shifts"]) == shifts, (task, name)
            for metrics in m["shifts"].values():
                assert 0.0 <= metrics["auroc"] <= 1.0 and 0.0 <= metrics["fpr95"] <= 1.0
            assert m["predict_s_per_1000"] > 0 and m["peak_rss_mb"] > 0
            assert np.isfinite(m["nll"]) and np.isfinite(m["val_nll"])
            if m["grid"]:
                # the chosen point is the grid's lowest validation NLL, and it is what was scored
                best = min(m["grid"], key=lambda p: p["val_nll"])
                assert {k: best[k] for k in m["selected"]} == m["selected"], (task, name)
                assert m["val_nll"] == pytest.approx(best["val_nll"], rel=1e-6)
                assert m["construct_cpu_s"] > 0
        if task == "halfcheetah":
            de = entry["methods"]["deep_ensemble"]
            assert de["rmse"] > 0 and de["construct_cpu_s"] > 0
        else:
            base = entry["methods"]["base"]
            assert base["accuracy"] > 0.8
            assert 0.0 <= base["ece"] <= 1.0
        if task == "digits":
            # the base network tells the held-out classes apart better than chance
            assert entry["methods"]["base"]["shifts"]["held_out_classes"]["auroc"] > 0.6


def test_committed_tables_are_the_committed_json_s(capsys):
    """docs/peers.md shows what ``python -m pnc.bench.peers_report`` prints for the committed
    JSON: every table row it prints is in the page."""
    from pathlib import Path

    from pnc.bench import peers_report

    root = Path(__file__).resolve().parents[1]
    peers_report.main([str(root / "docs" / "peers" / "peers.json")])
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    page = set((root / "docs" / "peers.md").read_text().splitlines())
    assert len(printed) > 50
    missing = [line for line in printed if line not in page]
    assert not missing, missing[:3]

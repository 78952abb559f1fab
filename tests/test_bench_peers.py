"""The peers benchmark (``python -m pnc.bench.peers``): its refusals, its tasks' data, the ID
task's choice, resuming from finished pieces, the report's sentences, and a ``--quick`` run of
its tasks with every method (slow tier)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pnc.bench import peer_tasks, peers, peers_report
from pnc.bench.peer_tasks import DIGITS_ID_CLASSES, Task, check_task, digits_task

ROOT = Path(__file__).resolve().parents[1]


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


@pytest.mark.parametrize("per_class", [peer_tasks.DIGITS_TRAIN_PER_CLASS, None])
def test_digits_task_splits(per_class):
    task = digits_task(0, train_per_class=per_class)
    check_task(task)  # disjoint ID and OOD rows
    n_id = sum(len(part[0]) for part in (task.train, task.val, task.test))
    held_out = task.shifts["held_out_classes"][0]
    assert n_id + len(held_out) == 1797
    for part in (task.train, task.val, task.test):
        assert set(np.unique(part[1])) == set(range(len(DIGITS_ID_CLASSES)))
    if per_class is not None:
        # the same number of training images per class; the rest split in half
        assert np.all(np.bincount(task.train[1]) == per_class)
        assert abs(len(task.val[0]) - len(task.test[0])) <= 1
    # no image in two splits
    keys = [{r.tobytes() for r in part[0].reshape(len(part[0]), -1)} for part in
            (task.train, task.val, task.test)]  # fmt: skip
    assert not (keys[0] & keys[1]) and not (keys[0] & keys[2]) and not (keys[1] & keys[2])
    # the corruptions are of the ID test images, and grow with the severity
    names = [n for n in task.shifts if n != "held_out_classes"]
    assert len(names) == 6
    for kind in ("rotation", "noise"):
        dist = [np.abs(task.shifts[n][0] - task.test[0]).mean() for n in names if kind in n]
        assert len(dist) == 3 and dist[0] > 0 and np.all(np.diff(dist) > 0), (kind, dist)


def test_the_id_tasks_are_the_committed_probe_s_choice():
    """The classification tasks' training sets are what ``--probe`` chose from the base networks'
    ID validation accuracy alone, and that choice follows its rule."""
    probe = json.loads((ROOT / "docs" / "peers" / "probe.json").read_text())["probe"]
    defaults = peers.Settings()
    for task, entry in probe.items():
        field, values = peers.PROBE[task]
        assert entry["setting"] == field
        assert [c[field] for c in entry["candidates"]] == list(values)
        fits = [c[field] for c in entry["candidates"]
                if c["val_accuracy"] <= peers.PROBE_MAX_ACCURACY]  # fmt: skip
        assert entry["chosen_exists"] == bool(fits)
        if not fits:  # no harder candidate: the task is left out of the run
            assert task in peers.OPTIONAL_TASKS and task not in peers.TASKS
            continue
        assert entry["chosen"] == fits[-1] and task in peers.TASKS
        assert getattr(defaults, field) == entry["chosen"]
        chosen = next(c for c in entry["candidates"] if c[field] == entry["chosen"])
        assert 0.8 <= chosen["val_accuracy"] <= peers.PROBE_MAX_ACCURACY


@pytest.mark.parametrize("name", ["hopper", "ant"])
def test_offline_tasks_have_disjoint_shifts(name):
    task = peer_tasks.offline_task(name, 0, pool=200, evaluation=50)
    check_task(task)
    assert task.name == name and task.kind == "regression"
    assert set(task.shifts) == {"near", "far"}
    assert len(task.train[0]) == 180 and len(task.val[0]) == 20
    assert task.train[1].shape[1] == task.shifts["far"][1].shape[1]


def _fake_piece(name, s, methods=None, log=None, grid_aurocs=False):
    rng = np.random.default_rng(s.seed)
    method = {"nll": float(rng.normal()), "shifts": {"a": {"auroc": float(rng.uniform())}},
              "peak_rss_mb": 1.0}  # fmt: skip
    return {"methods": {"base": method, "pnc": dict(method)}, "cpu_s": 1.0 + s.seed,
            "wall_s": 2.0, "load_average_end": [0.0, 0.0, 0.0]}  # fmt: skip


def test_finished_pieces_are_read_not_run_again(tmp_path, monkeypatch):
    calls = []

    def fake(name, s, methods=None, log=None, grid_aurocs=False):
        calls.append((name, s.seed))
        return _fake_piece(name, s)

    monkeypatch.setattr(peers, "run_piece", fake)
    args = ["--quick", "--tasks", "digits", "--seeds", "0", "1", "--pieces", str(tmp_path)]
    first = peers.main(args)
    assert calls == [("digits", 0), ("digits", 1)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["digits-seed0.json", "digits-seed1.json"]
    (tmp_path / "digits-seed1.json").unlink()  # an interrupted run: seed 1 never finished
    second = peers.main(args)
    assert calls[2:] == [("digits", 1)]
    assert second["pieces_reused"] == 1 and first["pieces_reused"] == 0
    assert second["total_cpu_s"] == first["total_cpu_s"] == 3.0
    assert second["tasks"]["digits"]["seeds"]["0"]["methods"] == \
        first["tasks"]["digits"]["seeds"]["0"]["methods"]  # fmt: skip
    # a piece of other settings is refused, naming its file
    with pytest.raises(ValueError, match=r"digits-seed0\.json was made with other settings"):
        peers.main(["--tasks", "digits", "--seeds", "0", "--pieces", str(tmp_path)])


def test_sentences_follow_the_numbers():
    def piece(aurocs, nll):
        return {"methods": {
            name: {"nll": n, "shifts": {"s": {"auroc": a}}}
            for name, a, n in zip(("base", "pnc", "deep_ensemble"), aurocs, nll, strict=True)
        }}  # fmt: skip

    entry = {"seeds": {"0": piece((0.70, 0.80, 0.79), (1.0, 0.9, 0.5)),
                       "1": piece((0.72, 0.82, 0.83), (1.1, 0.8, 0.6)),
                       "2": piece((0.71, 0.84, 0.81), (1.2, 1.0, 0.7))}}  # fmt: skip
    c = peers_report.comparison(entry, "pnc", "mean AUROC over the shifts")
    assert c["pnc"] == pytest.approx(0.82)
    base, de = c["peers"]["base"], c["peers"]["deep_ensemble"]
    assert base["difference"] == pytest.approx(0.11) and base["exceeds"]
    assert base["better_seeds"] == 3 and base["spread"] == pytest.approx(0.02)
    assert de["difference"] == pytest.approx(0.01) and not de["exceeds"]
    assert de["better_seeds"] == 2
    text = peers_report.sentence("t", entry, "pnc", "mean AUROC over the shifts")
    assert "base network +0.110 (exceeds the spread 0.020; P&C higher in 3 of 3 seeds)" in text
    assert "Deep Ensemble +0.010 (within the spread 0.020; P&C higher in 2 of 3 seeds)" in text
    nll = peers_report.comparison(entry, "pnc", "ID NLL")["peers"]["deep_ensemble"]
    assert nll["difference"] == pytest.approx(0.3) and nll["better_seeds"] == 0 and nll["exceeds"]


def test_grids_of_pnc_and_laplax_have_the_same_size():
    for quick in (False, True):
        s = peers.Settings.make(quick)
        sizes = {m: len(s.grid(m)) for m in ("pnc", "laplace_last_layer_diag",
                                             "laplace_all_lowrank")}  # fmt: skip
        assert len(set(sizes.values())) == 1, sizes
        assert len(s.grid("pnc_study")) <= sizes["pnc"]


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
    }  # fmt: skip
    assert report["grids"] == {m: peers.GRIDS[m][1] for m in peers.GRIDS}
    assert report["seeds"] == [0] and set(report["tasks"]) == set(expected)
    assert report["total_cpu_s"] > 0 and report["pieces_reused"] == 0
    for task, methods in expected.items():
        entry = report["tasks"][task]["seeds"]["0"]
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
            assert base["accuracy"] > 0.6
            assert 0.0 <= base["ece"] <= 1.0
        if task == "digits":
            # the base network tells the held-out classes apart better than chance
            assert entry["methods"]["base"]["shifts"]["held_out_classes"]["auroc"] > 0.6
    # the report renders one seed too (no spread)
    text = peers_report.render(report)
    assert "| base network |" in text and "the spread 0.000" in text


def test_committed_tables_are_the_committed_json_s(capsys):
    """docs/peers.md shows what ``python -m pnc.bench.peers_report`` prints for the committed
    JSON (three seeds): every table row and sentence it prints is in the page."""
    peers_report.main([str(ROOT / "docs" / "peers" / "peers.json"),
                       "--probe", str(ROOT / "docs" / "peers" / "probe.json")])  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    printed = [line for line in lines if line.startswith(("|", "- **"))]
    page = set((ROOT / "docs" / "peers.md").read_text().splitlines())
    assert len(printed) > 80
    missing = [line for line in printed if line not in page]
    assert not missing, missing[:3]
    report = json.loads((ROOT / "docs" / "peers" / "peers.json").read_text())
    assert report["seeds"] == list(peers.SEEDS) and set(report["tasks"]) == set(peers.TASKS)

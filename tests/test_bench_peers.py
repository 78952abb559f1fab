"""The peers benchmark (``python -m bench.peers``): its refusals, its tasks' data, the ID
task's choice, resuming from finished pieces, the report's numbers (comparisons, shifts against
chance, choices at the edge of their grid), a ``--quick`` run of its tasks with every method (slow
tier), and docs/peers.md against the committed JSON: its generated blocks, the numbers of its
prose, its command and its links."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

from bench import peer_tasks, peers, peers_report
from bench.peer_tasks import DIGITS_ID_CLASSES, Task, check_task, digits_task

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "peers.md"
REPORT = ROOT / "docs" / "peers" / "peers.json"
PROBE = ROOT / "docs" / "peers" / "probe.json"
NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?")


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


def _segment(text: str, label: str) -> str:
    """The part of a comparison sentence about the peer ``label``: up to its closing bracket."""
    part = text[text.index(f" {label} ") + len(label) + 2 :]
    return part[: part.index(")") + 1]


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
    # the sentence carries, per peer, the difference, the spread and the seeds P&C wins
    text = peers_report.sentence("t", entry, "pnc", "mean AUROC over the shifts")
    base_part, de_part = _segment(text, "base network"), _segment(text, "Deep Ensemble")
    assert NUMBER.findall(base_part) == ["+0.110", "0.020", "3", "3"]
    assert NUMBER.findall(de_part) == ["+0.010", "0.020", "2", "3"]
    assert "exceeds" in base_part and "exceeds" not in de_part  # the verdict follows ``exceeds``
    nll = peers_report.comparison(entry, "pnc", "ID NLL")["peers"]["deep_ensemble"]
    assert nll["difference"] == pytest.approx(0.3) and nll["better_seeds"] == 0 and nll["exceeds"]


def _two_seeds(aurocs: dict) -> dict:
    """A task of two seeds with one shift ``s``: method -> the AUROC of each seed."""
    return {"seeds": {seed: {"methods": {name: {"nll": 0.0, "shifts": {"s": {"auroc": v[i]}}}
                                         for name, v in aurocs.items()}}
                      for i, seed in enumerate(("0", "1"))}}  # fmt: skip


def test_shift_sentence_sides_of_chance():
    entry = _two_seeds({"base": (0.30, 0.45), "pnc": (0.55, 0.90), "deep_ensemble": (0.40, 0.70)})
    c = peers_report.shift_summary(entry, "s")
    sides = {name: m["side"] for name, m in c["methods"].items()}
    assert sides == {"base": "below", "pnc": "above", "deep_ensemble": "both"}
    assert (c["low"], c["high"]) == ("base", "pnc")
    text = peers_report.shift_sentence("t", entry, "s")
    # the lowest and highest means and the single seeds' range; per method, its seeds' range
    assert NUMBER.findall(text.split("; ")[0].split("**")[-1]) == ["0.375", "0.725", "0.300",
                                                                    "0.900"]  # fmt: skip
    for label, low, high in (("P&C (`pnc.ensemble`)", "0.550", "0.900"),
                             ("base network", "0.300", "0.450"),
                             ("Deep Ensemble", "0.400", "0.700")):  # fmt: skip
        assert f"{label} ({low} to {high})" in text
    every = _two_seeds({"base": (0.6, 0.7), "pnc": (0.8, 0.9)})
    assert {m["side"] for m in peers_report.shift_summary(every, "s")["methods"].values()} == {
        "above"
    }


def _edge_report() -> dict:
    """Two seeds of one task: P&C's sigma at its grid's top in seed 0 and inside it in seed 1;
    the study configuration's sigma at its bottom in both, its one-value bootstrap fraction fixed;
    laplax's grid only in the scored points (no ``grids`` recorded for it)."""

    def piece(sigma, study, prec):
        return {"methods": {
            "base": {"selected": {}, "grid": []},
            "pnc": {"selected": {"sigma": sigma}, "grid": []},
            "pnc_study": {"selected": {"sigma": study, "bootstrap_frac": 0.3}, "grid": []},
            "laplace_all_lowrank": {"selected": {"prior_prec": prec},
                                    "grid": [{"prior_prec": p} for p in (1.0, 10.0, 100.0)]},
        }}  # fmt: skip

    return {"grids": {"pnc": {"sigma": [1.0, 2.0, 4.0]},
                      "pnc_study": {"sigma": [8.0, 16.0], "bootstrap_frac": [0.3]}},
            "tasks": {"t": {"seeds": {"0": piece(4.0, 8.0, 10.0),
                                      "1": piece(2.0, 8.0, 100.0)}}}}  # fmt: skip


def test_edge_choices_are_the_selected_values_at_a_grid_s_end():
    report = _edge_report()
    found = {(c["seed"], c["method"], c["setting"], c["value"], c["edge"])
             for c in peers_report.edge_choices(report)}  # fmt: skip
    assert found == {
        ("0", "pnc", "sigma", 4.0, "largest"),  # seed 1's sigma 2 is inside the grid
        ("0", "pnc_study", "sigma", 8.0, "smallest"),
        ("1", "pnc_study", "sigma", 8.0, "smallest"),  # the fixed bootstrap fraction is not listed
        ("1", "laplace_all_lowrank", "prior_prec", 100.0, "largest"),  # grid from its points
    }
    # a piece's own grids come before the run's
    report["tasks"]["t"]["seeds"]["1"]["grids"] = {"pnc": {"sigma": [2.0, 4.0]}}
    seeds = {c["seed"] for c in peers_report.edge_choices(report) if c["method"] == "pnc"}
    assert seeds == {"0", "1"}
    # the list names each choice once, with its grid and its seeds
    text = peers_report.edge_list(_edge_report())
    rows = {line.split("**")[1]: NUMBER.findall(line.split("**")[2]) for line in text.splitlines()}
    assert rows == {"t, P&C (`pnc.ensemble`)": ["4", "1", "2", "4", "0", "1", "2"],
                    "t, P&C (study configuration)": ["8", "8", "16", "0", "1", "2", "2"],
                    "t, laplax, all weights, low-rank GGN": ["100", "1", "10", "100", "1", "1",
                                                             "2"]}  # fmt: skip
    inside = _edge_report()
    for seed in inside["tasks"]["t"]["seeds"].values():
        seed["methods"] = {"pnc": {"selected": {"sigma": 2.0}, "grid": []}}
    assert peers_report.edge_choices(inside) == []


def test_committed_edge_choices_are_every_choice_at_its_grid_s_end():
    """Recomputed from the committed JSON: every method, task and seed whose selected value is
    the smallest or largest of the run's grid for it (grids of one value are fixed)."""
    report = json.loads(REPORT.read_text())
    expected = set()
    for task, entry in report["tasks"].items():
        for seed, piece in entry["seeds"].items():
            for name, m in piece["methods"].items():
                for key, value in m["selected"].items():
                    axis = report["grids"][name][key]
                    scored = sorted({p[key] for p in m["grid"]})
                    assert scored == sorted(axis), (task, seed, name)  # the grid was scored whole
                    if len(axis) > 1 and value in (min(axis), max(axis)):
                        expected.add((task, seed, name, key, value))
    found = {(c["task"], c["seed"], c["method"], c["setting"], c["value"])
             for c in peers_report.edge_choices(report)}  # fmt: skip
    assert found == expected and found
    # the choices docs/peers.md names in its prose are among them
    for task in ("halfcheetah", "hopper"):
        for seed in ("0", "1", "2"):
            assert (task, seed, "pnc_study", "sigma", 8.0) in found
    assert ("hopper", "2", "pnc", "sigma", 1.0) in found
    assert {s for t, s, m, _, v in found if (t, m, v) == ("digits", "pnc", 32.0)} == {"0", "1", "2"}


def test_committed_shift_claims_of_the_page():
    """The page's prose on Ant and on the digits' noise shifts, against the JSON."""
    report = json.loads(REPORT.read_text())
    ant = peers_report.shift_summary(report["tasks"]["ant"], "far")["methods"]
    assert ant["deep_ensemble"]["side"] == ant["pnc_study"]["side"] == "above"
    assert ant["base"]["side"] == "below"
    near = peers_report.shift_summary(report["tasks"]["ant"], "near")["methods"]
    assert near["deep_ensemble"]["side"] == near["pnc_study"]["side"] == "both"
    page = PAGE.read_text()
    prose = page.split("### Where P&C wins")[1].split("### Cost")[0]
    digits = report["tasks"]["digits"]
    for shift in ("noise_0.1", "noise_0.25", "noise_0.5"):
        means = [m["mean"] for m in peers_report.shift_summary(digits, shift)["methods"].values()]
        assert f"between {min(means):.3f} and {max(means):.3f}" in prose, shift
    de = ant["deep_ensemble"]["seeds"]
    assert f"({de.min():.3f} to {de.max():.3f})" in prose


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


def _report_command() -> list[str]:
    """The arguments of the ``python -m bench.peers_report`` command the page gives."""
    block = re.search(r"```bash\n(.*?)```", PAGE.read_text(), flags=re.S).group(1)
    text = block.replace("\\\n", " ")
    line = next(x for x in text.splitlines() if "python -m bench.peers_report" in x)
    words = shlex.split(line.split("#")[0])
    return words[words.index("bench.peers_report") + 1 :]


def test_committed_blocks_are_what_the_page_s_command_prints(capsys, tmp_path):
    """docs/peers.md carries, verbatim, each block ``python -m bench.peers_report`` prints for the
    committed JSON (probe table, edge list, tables and sentences), run as the page gives it."""
    args = _report_command()
    figure = args.index("--figure")
    assert (ROOT / args[figure + 1]).is_file()
    args[figure + 1] = str(tmp_path / "peers.png")
    peers_report.main(args)
    printed = capsys.readouterr().out
    assert (tmp_path / "peers.png").stat().st_size > 0
    report = json.loads(REPORT.read_text())
    blocks = peers_report.parts(report, json.loads(PROBE.read_text()))
    assert set(blocks) == {"probe", "edges", "tables"}
    page = PAGE.read_text()
    for name, block in blocks.items():
        assert block in printed, name
        assert block in page, f"docs/peers.md does not carry the {name} block the command prints"
    assert report["seeds"] == list(peers.SEEDS) and set(report["tasks"]) == set(peers.TASKS)


def test_the_page_s_prose_numbers_are_the_report_s():
    """Every three-decimal number of the page's own text (outside the generated blocks) is one
    the report prints for the committed JSON."""
    report = json.loads(REPORT.read_text())
    blocks = peers_report.parts(report, json.loads(PROBE.read_text()))
    prose = PAGE.read_text()
    for block in blocks.values():
        prose = prose.replace(block, "")
    printed = {n.lstrip("+-") for n in NUMBER.findall("\n".join(blocks.values()))}
    written = [n for n in NUMBER.findall(prose) if re.fullmatch(r"[-+]?\d+\.\d{3}", n)]
    assert len(written) > 40
    assert not [n for n in written if n.lstrip("+-") not in printed]


def test_the_page_s_links_resolve():
    text = PAGE.read_text()
    slugs = {re.sub(r"[^\w\- ]", "", h.strip("# ").lower()).replace(" ", "-")
             for h in text.splitlines() if h.startswith("#")}  # fmt: skip
    links = re.findall(r"\[[^\]]*\]\(([^)\s]+)\)", text)
    assert links
    for target in links:
        if target.startswith(("http://", "https://")):
            continue
        path, _, anchor = target.partition("#")
        if path:
            assert (PAGE.parent / path).exists(), target
        else:
            assert anchor in slugs, target

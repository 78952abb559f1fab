"""Tables, sentences and the figure of ``docs/peers.md`` from the JSON of :mod:`bench.peers`:
``python -m bench.peers_report REPORT.json [--probe PROBE.json] [--figure FILE.png]``.

Every cell is the mean over the run's seeds and its spread, the sample standard deviation over
the seeds (``n - 1`` in the denominator; ``mean ± std``). Prints, per task, a quality table (ID
accuracy or RMSE, NLL, ECE, AUROC and FPR95 per shift), a cost table (construction, prediction,
memory, each seed's chosen grid point), the cost ratios of P&C to each peer, and one sentence per
P&C variant saying, for each peer, whether P&C's difference in mean AUROC over the shifts, and in
ID NLL, exceeds the spread, and one sentence per shift saying which methods rank it above chance
in every seed. Before the tasks it prints every choice at the edge of its grid (a method's selected
value at the smallest or largest value of the grid the JSON records). ``--probe`` prints the table
of the ID task's choice (``python -m bench.peers --probe``); ``--figure`` draws, per task, the mean
AUROC over the shifts against the construction CPU seconds of each method, with the seeds' spread
as bars. The three parts of the text (probe table, edge list, tables and sentences) are
:func:`parts`; ``docs/peers.md`` carries each verbatim.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from pnc.methods.labels import SHARED_LABELS

LABELS = {
    "base": "base network",
    "pnc": "P&C (`pnc.ensemble`)",
    "pnc_study": "P&C (study configuration)",
    "laplace_last_layer_diag": "laplax, last layer, diagonal GGN",
    "laplace_all_lowrank": "laplax, all weights, low-rank GGN",
    "deep_ensemble": SHARED_LABELS["deep_ensemble"],
    "mc_dropout": SHARED_LABELS["mc_dropout"],
}
#: The P&C variants whose differences from the peers get a sentence.
PNC_VARIANTS = ("pnc", "pnc_study")


def _fmt(v: float, digits: int = 3) -> str:
    return f"{v:.{digits}f}"


def _num(v: float) -> str:
    if v == 0:
        return "0"
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def spread(values) -> float:
    """The seeds' spread: the sample standard deviation (0 for one seed)."""
    values = np.asarray(values, np.float64)
    return float(values.std(ddof=1)) if values.size > 1 else 0.0


def _cell(values, fmt=_fmt) -> str:
    values = np.asarray(values, np.float64)
    if values.size == 1:
        return fmt(values[0])
    return f"{fmt(values.mean())} ± {fmt(spread(values))}"


def seeds_of(entry: dict) -> list[dict]:
    """The task's pieces, one per seed, in the run's order."""
    return list(entry["seeds"].values())


def methods_of(entry: dict) -> list[str]:
    return list(seeds_of(entry)[0]["methods"])


def values(entry: dict, method: str, get) -> np.ndarray:
    """``get(method's entry)`` of every seed."""
    return np.array([get(piece["methods"][method]) for piece in seeds_of(entry)], np.float64)


def mean_auroc(m: dict) -> float:
    """A method's AUROC averaged over the task's shifts (one seed)."""
    return float(np.mean([v["auroc"] for v in m["shifts"].values()]))


def quality_table(task: str, entry: dict, metric: str = "auroc") -> str:
    """ID metrics and ``metric`` (``"auroc"`` or ``"fpr95"``) per shift, mean ± std over the
    seeds; FPR95 rows carry no ID metrics."""
    first = seeds_of(entry)[0]["methods"]
    any_method = next(iter(first.values()))
    shifts = list(any_method["shifts"])
    classification = "accuracy" in any_method
    with_id = metric == "auroc"
    head = ["method"]
    if with_id:
        head += ["ID accuracy" if classification else "ID RMSE", "ID NLL"]
        head += ["ECE"] if classification else []
    head += [f"{metric.upper()} {s}" for s in shifts]
    if with_id:
        head += ["mean AUROC"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in methods_of(entry):
        cells = [LABELS.get(name, name)]
        if with_id:
            ids = ["accuracy", "nll", "ece"] if classification else ["rmse", "nll"]
            cells += [_cell(values(entry, name, lambda m, k=k: m[k])) for k in ids]
        cells += [_cell(values(entry, name, lambda m, s=s: m["shifts"][s][metric])) for s in shifts]
        if with_id:
            cells.append(_cell(values(entry, name, mean_auroc)))
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _chosen(entry: dict, name: str) -> str:
    picks = []
    for piece in seeds_of(entry):
        selected = piece["methods"][name]["selected"]
        picks.append(", ".join(f"{k} {v:g}" for k, v in selected.items()) or "-")
    if len(set(picks)) == 1:
        return picks[0]
    return " / ".join(picks)


def cost_table(task: str, entry: dict) -> str:
    head = [
        "method",
        "construction CPU s",
        "wall s",
        "in training epochs",
        "in base trainings",
        "predict s / 1,000 rows",
        "peak RSS MB",
        "rise MB",
        "chosen (per seed)",
    ]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in methods_of(entry):

        def cell(key, with_spread=False, name=name):
            v = values(entry, name, lambda m: m[key])
            return _cell(v, _num) if with_spread else _num(float(v.mean()))

        cells = [
            LABELS.get(name, name),
            cell("construct_cpu_s", True),
            cell("construct_wall_s"),
            cell("construct_epochs"),
            cell("construct_over_training"),
            cell("predict_s_per_1000", True),
            cell("peak_rss_mb"),
            cell("extra_rss_mb"),
            _chosen(entry, name),
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def ratios(entry: dict, pnc_name: str = "pnc") -> str:
    """P&C's mean construction CPU time and prediction time over each peer's."""
    names = methods_of(entry)
    if pnc_name not in names:
        return ""
    build_p = values(entry, pnc_name, lambda m: m["construct_cpu_s"]).mean()
    predict_p = values(entry, pnc_name, lambda m: m["predict_s_per_1000"]).mean()
    head = ["peer", "construction: P&C / peer", "prediction: P&C / peer"]
    rows = ["| " + " | ".join(head) + " |", "|---|---|---|"]
    for name in names:
        if name in (pnc_name, "base"):
            continue
        build = values(entry, name, lambda m: m["construct_cpu_s"]).mean()
        predict = values(entry, name, lambda m: m["predict_s_per_1000"]).mean()
        b = build_p / build if build > 0 else np.inf
        rows.append(f"| {LABELS.get(name, name)} | {_num(b)} | {_num(predict_p / predict)} |")
    return "\n".join(rows)


#: The quantities the sentences compare: name, how to read it from a method's entry, and
#: whether higher is better.
COMPARED = {
    "mean AUROC over the shifts": (mean_auroc, True),
    "ID NLL": (lambda m: m["nll"], False),
}


def comparison(entry: dict, pnc_name: str, quantity: str) -> dict:
    """P&C's difference from each peer in ``quantity`` (a key of :data:`COMPARED`).

    Per peer: ``difference`` (P&C's mean over the seeds minus the peer's), ``spread`` (the larger
    of the two methods' standard deviations over the seeds), ``exceeds`` (``|difference| >
    spread``), ``better_seeds`` (the seeds in which P&C is better: its base network is the
    peer's, so the seeds pair) and ``seeds``.
    """
    get, higher_better = COMPARED[quantity]
    mine = values(entry, pnc_name, get)
    out = {"pnc": float(mine.mean()), "pnc_spread": spread(mine), "peers": {}}
    for name in methods_of(entry):
        if name == pnc_name:
            continue
        other = values(entry, name, get)
        diff = float(mine.mean() - other.mean())
        width = max(spread(mine), spread(other))
        better = int(np.sum(mine > other if higher_better else mine < other))
        out["peers"][name] = {
            "difference": diff,
            "spread": width,
            "exceeds": bool(abs(diff) > width),
            "better_seeds": better,
            "seeds": int(mine.size),
        }
    return out


def _signed(v: float) -> str:
    return f"{'+' if v >= 0 else '-'}{abs(v):.3f}"


def sentence(task: str, entry: dict, pnc_name: str, quantity: str) -> str:
    """One sentence: P&C's ``quantity`` and, per peer, its difference, whether that exceeds the
    spread, and in how many seeds P&C is the better."""
    c = comparison(entry, pnc_name, quantity)
    _, higher_better = COMPARED[quantity]
    word = "higher" if higher_better else "lower"
    parts = []
    for name, p in c["peers"].items():
        verdict = "exceeds the spread" if p["exceeds"] else "within the spread"
        parts.append(
            f"{LABELS.get(name, name)} {_signed(p['difference'])} ({verdict} {p['spread']:.3f}; "
            f"P&C {word} in {p['better_seeds']} of {p['seeds']} seeds)"
        )
    return (
        f"**{task}, {LABELS[pnc_name]}, {quantity}** {c['pnc']:.3f} ± {c['pnc_spread']:.3f}; "
        f"P&C minus each peer: " + "; ".join(parts) + "."
    )


#: An AUROC above this ranks the shifted rows above the ID ones more often than not.
CHANCE = 0.5


def shift_summary(entry: dict, shift: str) -> dict:
    """Every method's AUROC on ``shift``, per seed, and which side of :data:`CHANCE` it falls on.

    ``methods``: per method, ``seeds`` (the AUROC of each seed) and ``side``: ``"above"`` (above
    chance in every seed), ``"below"`` (below it in every seed) or ``"both"``. ``low`` and
    ``high``: the methods of the lowest and highest mean over the seeds.
    """
    methods = {}
    for name in methods_of(entry):
        v = values(entry, name, lambda m: m["shifts"][shift]["auroc"])
        side = "above" if np.all(v > CHANCE) else "below" if np.all(v < CHANCE) else "both"
        methods[name] = {"seeds": v, "mean": float(v.mean()), "side": side}
    low = min(methods, key=lambda n: methods[n]["mean"])
    high = max(methods, key=lambda n: methods[n]["mean"])
    return {"methods": methods, "low": low, "high": high}


SIDES = {
    "above": "above chance (0.5) in every seed",
    "below": "below chance in every seed",
    "both": "above chance in some seeds, not in others",
}


def shift_sentence(task: str, entry: dict, shift: str) -> str:
    """One sentence per shift: the lowest and highest mean AUROC over the seeds, and, per side of
    chance, the methods on it with the range of their seeds' AUROCs."""
    c = shift_summary(entry, shift)
    m = c["methods"]
    every = np.concatenate([v["seeds"] for v in m.values()])
    parts = []
    for side, words in SIDES.items():
        names = [n for n in m if m[n]["side"] == side]
        if len(names) == len(m):
            parts.append(f"{words}: every method")
        elif names:
            ranges = [f"{LABELS.get(n, n)} ({m[n]['seeds'].min():.3f} to "
                      f"{m[n]['seeds'].max():.3f})" for n in names]  # fmt: skip
            parts.append(f"{words}: " + ", ".join(ranges))
    return (
        f"**{task}, {shift}, AUROC** mean over the seeds from {m[c['low']]['mean']:.3f} "
        f"({LABELS.get(c['low'], c['low'])}) to {m[c['high']]['mean']:.3f} "
        f"({LABELS.get(c['high'], c['high'])}), single seeds {every.min():.3f} to "
        f"{every.max():.3f}; " + "; ".join(parts) + "."
    )


def grid_of(report: dict, piece: dict, name: str) -> dict[str, list[float]]:
    """The grid ``name`` chose from in ``piece``, as the JSON records it: the piece's ``grids``,
    else the run's, else the values of the points the method scored."""
    for grids in (piece.get("grids"), report.get("grids")):
        if grids and name in grids:
            return {k: list(v) for k, v in grids[name].items()}
    points = piece["methods"][name].get("grid") or []
    keys = piece["methods"][name].get("selected", {})
    return {k: sorted({p[k] for p in points}) for k in keys}


def edge_choices(report: dict) -> list[dict]:
    """Every selected value at the smallest or the largest value of its grid, per task, seed,
    method and setting: ``task``, ``seed``, ``method``, ``setting``, ``value``, ``edge``
    (``"smallest"`` or ``"largest"``) and ``grid``. A setting whose grid has one value is fixed,
    not chosen, and is left out."""
    out = []
    for task, entry in report["tasks"].items():
        for seed, piece in entry["seeds"].items():
            for name, m in piece["methods"].items():
                grid = grid_of(report, piece, name)
                for key, value in (m.get("selected") or {}).items():
                    axis = sorted(grid.get(key, []))
                    if len(axis) < 2 or value not in (axis[0], axis[-1]):
                        continue
                    edge = "smallest" if value == axis[0] else "largest"
                    out.append({"task": task, "seed": seed, "method": name, "setting": key,
                                "value": value, "edge": edge, "grid": axis})  # fmt: skip
    return out


def edge_list(report: dict) -> str:
    """:func:`edge_choices` as Markdown bullets, one per task, method, setting and value, with
    the seeds that chose it, in the run's order of tasks and methods."""
    groups: dict[tuple, dict] = {}
    for c in edge_choices(report):
        key = (c["task"], c["method"], c["setting"], c["value"], c["edge"])
        groups.setdefault(key, {"grid": c["grid"], "seeds": []})["seeds"].append(str(c["seed"]))
    if not groups:
        return "- **no choice** is at the edge of its grid."
    tasks = list(report["tasks"])
    order = {t: methods_of(report["tasks"][t]) for t in tasks}

    def rank(key):
        task, name, setting, value, _ = key
        return tasks.index(task), order[task].index(name), setting, value

    rows = []
    for key in sorted(groups, key=rank):
        task, name, setting, value, edge = key
        seeds, n = groups[key]["seeds"], len(report["tasks"][task]["seeds"])
        grid = ", ".join(f"{v:g}" for v in groups[key]["grid"])
        which = f"seed{'s' if len(seeds) > 1 else ''} {', '.join(seeds)}"
        rows.append(
            f"- **{task}, {LABELS.get(name, name)}**: {setting} {value:g}, its grid's {edge} "
            f"({grid}), in {which} ({len(seeds)} of {n})"
        )
    return "\n".join(rows)


def probe_table(report: dict) -> str:
    """The ID task's choice: per classification task and candidate, the base network's ID
    validation accuracy and NLL per seed and their means, and which candidate the rule chose."""
    head = ["task", "setting", "training images", "epochs", "ID val. accuracy", "ID val. NLL", ""]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for task, t in report["probe"].items():
        for c in t["candidates"]:
            value = c[t["setting"]]
            seeds = c["seeds"]
            acc = " / ".join(_fmt(r["val_accuracy"]) for r in seeds)
            nll = " / ".join(_fmt(r["val_nll"]) for r in seeds)
            chosen = "**chosen**" if t["chosen_exists"] and value == t["chosen"] else ""
            train_rows = sorted({r["train_rows"] for r in seeds})
            cells = [
                task,
                f"`{t['setting']}` = {'none (60 % split)' if value is None else value}",
                " / ".join(str(n) for n in train_rows),
                str(seeds[0]["epochs"]),
                f"{_fmt(c['val_accuracy'])} ({acc})",
                f"{_fmt(c['val_nll'])} ({nll})",
                chosen,
            ]
            rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def figure(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = report["tasks"]
    cols = 2 if len(tasks) == 4 else min(len(tasks), 3)
    lines = -(-len(tasks) // cols)
    fig, axes = plt.subplots(lines, cols, figsize=(5.2 * cols, 4.4 * lines), squeeze=False)
    markers = dict(zip(LABELS, "os^vDPX", strict=True))
    colors = dict(zip(LABELS, [f"C{i}" for i in range(len(LABELS))], strict=True))
    for ax, (task, entry) in zip(axes.flat, tasks.items(), strict=False):
        for name in methods_of(entry):
            auroc = values(entry, name, mean_auroc)
            cpu = values(entry, name, lambda m: m["construct_cpu_s"])
            ax.errorbar(
                max(cpu.mean(), 1e-2),
                auroc.mean(),
                yerr=spread(auroc),
                marker=markers.get(name, "o"),
                color=colors.get(name, "k"),
                markersize=7,
                capsize=3,
                linestyle="none",
                label=LABELS.get(name, name).replace("`", ""),
            )
        ax.set_xscale("log")
        ax.set_xlabel("construction CPU s after the base training (log; 0 at 0.01)")
        shifts = len(seeds_of(entry)[0]["methods"]["base"]["shifts"])
        ax.set_ylabel(f"mean AUROC over {shifts} shifts")
        ax.set_title(f"{task} (seeds {', '.join(entry['seeds'])}: mean ± std)")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(tasks) :]:
        ax.axis("off")
    handles = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=4, fontsize=8)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path, dpi=100)


def tables(report: dict) -> str:
    """Per task: the comparison sentences, one sentence per shift, the quality, FPR95 and cost
    tables and the cost ratios."""
    seeds = ", ".join(str(s) for s in report["seeds"])
    out = [f"Mean ± standard deviation over seeds {seeds}.\n"]
    for task, entry in report["tasks"].items():
        out.append(f"#### {task}\n")
        for name in PNC_VARIANTS:
            if name in methods_of(entry):
                for quantity in COMPARED:
                    out.append(f"- {sentence(task, entry, name, quantity)}")
        for shift in seeds_of(entry)[0]["methods"]["base"]["shifts"]:
            out.append(f"- {shift_sentence(task, entry, shift)}")
        out.append("")
        out.append(f"{quality_table(task, entry)}\n")
        out.append(f"{quality_table(task, entry, 'fpr95')}\n\n{cost_table(task, entry)}\n")
        for name in PNC_VARIANTS:
            if name in methods_of(entry):
                out.append(f"Ratios of the means, {LABELS[name]}:\n\n{ratios(entry, name)}\n")
    return "\n".join(out).rstrip("\n")


def parts(report: dict, probe: dict | None = None) -> dict[str, str]:
    """The text's parts, each a block that ``docs/peers.md`` carries verbatim: ``probe`` (when
    ``probe`` is given), ``edges`` (:func:`edge_list`) and ``tables`` (:func:`tables`)."""
    out = {}
    if probe is not None:
        out["probe"] = probe_table(probe)
    out["edges"] = edge_list(report)
    out["tables"] = tables(report)
    return out


def render(report: dict, probe: dict | None = None) -> str:
    """Everything :func:`main` prints, as one Markdown text: the :func:`parts` in order."""
    return "\n\n".join(parts(report, probe).values()) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--probe", type=Path, default=None, help="the JSON of --probe")
    parser.add_argument("--figure", type=Path, default=None)
    args = parser.parse_args(argv)
    report = json.loads(args.report.read_text())
    probe = json.loads(args.probe.read_text()) if args.probe is not None else None
    print(render(report, probe))
    if args.figure is not None:
        figure(report, args.figure)


if __name__ == "__main__":
    main()

"""Tables and the figure of ``docs/peers.md`` from the JSON of :mod:`pnc.bench.peers`:
``python -m pnc.bench.peers_report REPORT.json [--figure FILE.png]``.

Prints, per task, a quality table (ID accuracy or RMSE, NLL, ECE, AUROC and FPR95 per shift), a
cost table (construction, prediction, memory, chosen grid point) and the cost ratios of P&C to
each peer, all in Markdown. ``--figure`` draws, per task, the mean AUROC over the shifts against
the construction CPU seconds of each method.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from pnc.core.labels import SHARED_LABELS

LABELS = {
    "base": "base network",
    "pnc": "P&C (`pnc.ensemble`)",
    "pnc_study": "P&C (study configuration)",
    "laplace_last_layer_diag": "laplax, last layer, diagonal GGN",
    "laplace_all_lowrank": "laplax, all weights, low-rank GGN",
    "deep_ensemble": SHARED_LABELS["deep_ensemble"],
    "mc_dropout": SHARED_LABELS["mc_dropout"],
}


def _fmt(v: float, digits: int = 3) -> str:
    return f"{v:.{digits}f}"


def _num(v: float) -> str:
    if v == 0:
        return "0"
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def quality_table(task: str, entry: dict, metric: str = "auroc") -> str:
    """ID metrics and ``metric`` (``"auroc"`` or ``"fpr95"``) per shift; FPR95 rows carry no
    ID metrics."""
    methods = entry["methods"]
    first = next(iter(methods.values()))
    shifts = list(first["shifts"])
    classification = "accuracy" in first
    with_id = metric == "auroc"
    head = ["method"]
    if with_id:
        head += ["ID accuracy" if classification else "ID RMSE", "ID NLL"]
        head += ["ECE"] if classification else []
    head += [f"{metric.upper()} {s}" for s in shifts]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, m in methods.items():
        cells = [LABELS.get(name, name)]
        if with_id:
            cells += [_fmt(m["accuracy"] if classification else m["rmse"]), _fmt(m["nll"])]
            cells += [_fmt(m["ece"])] if classification else []
        cells += [_fmt(m["shifts"][s][metric]) for s in shifts]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


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
        "chosen",
    ]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, m in entry["methods"].items():
        chosen = ", ".join(f"{k} {v:g}" for k, v in m["selected"].items()) or "-"
        cells = [
            LABELS.get(name, name),
            _num(m["construct_cpu_s"]),
            _num(m["construct_wall_s"]),
            _num(m["construct_epochs"]),
            _num(m["construct_over_training"]),
            _num(m["predict_s_per_1000"]),
            _num(m["peak_rss_mb"]),
            _num(m["extra_rss_mb"]),
            chosen,
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def ratios(entry: dict, pnc_name: str = "pnc") -> str:
    """P&C's construction CPU time and prediction time over each peer's."""
    methods = entry["methods"]
    if pnc_name not in methods:
        return ""
    p = methods[pnc_name]
    head = ["peer", "construction: P&C / peer", "prediction: P&C / peer"]
    rows = ["| " + " | ".join(head) + " |", "|---|---|---|"]
    for name, m in methods.items():
        if name in (pnc_name, "base"):
            continue
        build = p["construct_cpu_s"] / m["construct_cpu_s"] if m["construct_cpu_s"] > 0 else np.inf
        predict = p["predict_s_per_1000"] / m["predict_s_per_1000"]
        rows.append(f"| {LABELS.get(name, name)} | {_num(build)} | {_num(predict)} |")
    return "\n".join(rows)


def figure(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = report["tasks"]
    fig, axes = plt.subplots(1, len(tasks), figsize=(5.2 * len(tasks), 4.6), squeeze=False)
    markers = dict(zip(LABELS, "os^vDPX", strict=True))
    colors = dict(zip(LABELS, [f"C{i}" for i in range(len(LABELS))], strict=True))
    for ax, (task, entry) in zip(axes[0], tasks.items(), strict=True):
        for name, m in entry["methods"].items():
            aurocs = [v["auroc"] for v in m["shifts"].values()]
            x = max(m["construct_cpu_s"], 1e-2)
            ax.scatter(
                x,
                np.mean(aurocs),
                marker=markers.get(name, "o"),
                color=colors.get(name, "k"),
                s=60,
                label=LABELS.get(name, name),
            )
        ax.set_xscale("log")
        ax.set_xlabel("construction CPU s after the base training (log; 0 drawn at 0.01)")
        ax.set_ylabel(f"mean AUROC over {len(aurocs)} shifts")
        ax.set_title(task)
        ax.grid(alpha=0.3)
    handles = {}
    for ax in axes[0]:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=4, fontsize=8)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--figure", type=Path, default=None)
    args = parser.parse_args(argv)
    report = json.loads(args.report.read_text())
    for task, entry in report["tasks"].items():
        print(f"## {task}\n\n{quality_table(task, entry)}\n")
        print(f"{quality_table(task, entry, 'fpr95')}\n\n{cost_table(task, entry)}\n")
        for name in ("pnc", "pnc_study"):
            if name in entry["methods"]:
                print(f"Ratios, {LABELS[name]}:\n\n{ratios(entry, name)}\n")
    if args.figure is not None:
        figure(report, args.figure)


if __name__ == "__main__":
    main()

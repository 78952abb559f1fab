"""Metrics per (seed, method, OOD dataset), Table 2 and the sweep table of Appendix D.

``metrics.csv`` (long format): ``seed, method, dataset, group, metric, value`` with
``metric`` in ``accuracy`` (dataset ``cifar10``, group ``id``), ``auroc`` and ``fpr95``
(:mod:`pnc.cifar.ood_metrics`: ID positive, OpenOOD v1.5), all in percent.

Table 2 (``table2.{csv,md,tex}``): per method, accuracy, and Near / Far AUROC and FPR95, where a
group's value on one seed is the mean over its datasets; entries are mean +- standard deviation
(``ddof = 1``; 0 with a single seed) over seeds.

The sweep table (``sweep.csv``: every configuration tried per seed with its temperature and
validation NLL; ``sweep.md``: per method and hyperparameter the values tried and the value
selected on each seed).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from pnc.cifar import ood_metrics as M
from pnc.cifar.data import OOD_DATASETS
from pnc.cifar.posthoc import METHOD_LABELS
from pnc.io import write_csv

TABLE2_COLUMNS = ("acc", "near_auroc", "near_fpr95", "far_auroc", "far_fpr95")
TABLE2_HEADER = ("Acc%", "Near AUROC", "Near FPR95", "Far AUROC", "Far FPR95")


def method_metrics(scores: Mapping[str, np.ndarray], test_y: np.ndarray, ood: Sequence[str]) -> list[dict]:  # fmt: skip
    """Rows ``{dataset, group, metric, value}`` of one method's outputs on one seed."""
    rows = [
        {"dataset": "cifar10", "group": "id", "metric": "accuracy",
         "value": 100 * M.accuracy(scores["test_pred"], test_y)},
    ]  # fmt: skip
    for name in ood:
        group = OOD_DATASETS[name][0]
        conf_id, conf_ood = scores["test_conf"], scores[f"{name}_conf"]
        rows.append({"dataset": name, "group": group, "metric": "auroc", "value": 100 * M.auroc(conf_id, conf_ood)})  # fmt: skip
        rows.append({"dataset": name, "group": group, "metric": "fpr95", "value": 100 * M.fpr_at_tpr(conf_id, conf_ood)})  # fmt: skip
    return rows


def table2(metrics: pd.DataFrame) -> pd.DataFrame:
    """Mean and std over seeds of accuracy and the per-group averages, one row per method."""
    per_seed = (
        metrics.groupby(["method", "seed", "group", "metric"], sort=False)["value"].mean().reset_index()
    )  # fmt: skip
    per_seed["column"] = np.where(
        per_seed["metric"] == "accuracy", "acc", per_seed["group"] + "_" + per_seed["metric"]
    )
    wide = per_seed.pivot_table(index=["method", "seed"], columns="column", values="value")
    rows = []
    order = [m for m in METHOD_LABELS if m in set(metrics["method"])]
    for method in order:
        sub = wide.loc[method]
        row = {"method": method, "label": METHOD_LABELS[method], "seeds": len(sub)}
        for col in TABLE2_COLUMNS:
            values = sub[col].to_numpy() if col in sub else np.array([np.nan])
            row[f"{col}_mean"] = float(np.mean(values))
            row[f"{col}_std"] = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
        rows.append(row)
    return pd.DataFrame(rows)


def _cells(table: pd.DataFrame) -> list[list[str]]:
    return [
        [row["label"], *(f"{row[f'{c}_mean']:.2f} ± {row[f'{c}_std']:.2f}" for c in TABLE2_COLUMNS)]
        for _, row in table.iterrows()
    ]


def table2_markdown(table: pd.DataFrame) -> str:
    lines = [
        "| Method | " + " | ".join(TABLE2_HEADER) + " |",
        "|---" * (len(TABLE2_HEADER) + 1) + "|",
    ]
    lines += ["| " + " | ".join(cells) + " |" for cells in _cells(table)]
    return "\n".join(lines) + "\n"


def table2_latex(table: pd.DataFrame) -> str:
    header = " & ".join(["Method", *(h.replace("%", r"\%") for h in TABLE2_HEADER)])
    body = [
        " & ".join(
            [cells[0].replace("&", r"\&"), *("$" + c.replace("±", r"\pm") + "$" for c in cells[1:])]
        )
        + r" \\"  # fmt: skip
        for cells in _cells(table)
    ]
    return (
        "\n".join(
            [
                r"\begin{tabular}{lccccc}",
                r"\toprule",
                header + r" \\",
                r"\midrule",
                *body,
                r"\bottomrule",
                r"\end{tabular}",
            ]  # fmt: skip
        )
        + "\n"
    )


def sweep_rows(method: str, seed: int, record: Mapping) -> list[dict]:
    return [
        {
            "seed": seed,
            "method": method,
            "config": json.dumps(r["config"], sort_keys=True),
            "temperature": r["temperature"],
            "val_nll": r["val_nll"],
            "val_accuracy": r.get("val_accuracy"),
            "selected": bool(r.get("selected")),
        }  # fmt: skip
        for r in record.get("sweep", [])
    ]


def sweep_markdown(sweep: pd.DataFrame) -> str:
    lines = ["| Method | Hyperparameter | Values | Selected (per seed) |", "|---|---|---|---|"]
    for method in [m for m in METHOD_LABELS if m in set(sweep["method"])]:
        sub = sweep[sweep["method"] == method]
        configs = [json.loads(c) for c in sub["config"]]
        chosen: dict[int, dict] = {}
        for s, c, sel in zip(sub["seed"], sub["config"], sub["selected"], strict=True):
            if sel:
                chosen[int(s)] = json.loads(c)
        for key in configs[0]:
            values = list(dict.fromkeys(json.dumps(c[key]) for c in configs))
            picked = ", ".join(f"{s}: {json.dumps(c[key])}" for s, c in sorted(chosen.items()))
            lines.append(f"| {METHOD_LABELS[method]} | {key} | {', '.join(values)} | {picked} |")
    return "\n".join(lines) + "\n"


def write_tables(metrics: pd.DataFrame, sweep: pd.DataFrame, out: str | Path) -> pd.DataFrame:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(metrics, out / "metrics.csv")
    table = table2(metrics)
    write_csv(table, out / "table2.csv")
    (out / "table2.md").write_text(table2_markdown(table))
    (out / "table2.tex").write_text(table2_latex(table))
    write_csv(sweep, out / "sweep.csv")
    (out / "sweep.md").write_text(sweep_markdown(sweep) if len(sweep) else "no swept method\n")
    return table

"""Metrics per (seed, method, dataset), Table 2, the calibration and AUPR tables, and the sweep
table of Appendix D.

``metrics.csv`` (long format): ``seed, method, dataset, group, metric, value`` with, on the ID
test set (group ``id``, dataset the ID name), ``accuracy`` (%), ``nll`` (nats), ``ece`` (%, 15
equal-width bins) and ``brier``, from the predictive probabilities after the method's
temperature; and per OOD dataset ``auroc``, ``fpr95``, ``aupr_in``, ``aupr_out`` (%;
:mod:`pnc.studies.cifar.ood_metrics`: ID positive, OpenOOD v1.5), plus for the single-model scores
``fpr95_entropy``: the FPR95 of the base network's predictive entropy.

Table 2 (``table2.{csv,md,tex}``): per method, accuracy, and Near / Far AUROC and FPR95 (the
paper's columns); ``calibration.{csv,md}``: accuracy, NLL, ECE, Brier; ``aupr.{csv,md}``: Near /
Far AUPR-In and AUPR-Out. A group's value on one seed is the mean over its datasets; entries are
mean +- standard deviation over seeds (:class:`Report`: the sample or the population standard
deviation; 0 with a single seed).

The sweep table (``sweep.csv``: every configuration tried per seed with its temperature and
validation NLL; ``sweep.md``: per method and hyperparameter the values tried and the value
selected on each seed).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from pnc.methods.ood import labels as method_labels
from pnc.methods.ood import registered as registered_methods
from pnc.runtime.io import write_csv
from pnc.runtime.render import fmt, latex_escape, markdown_table, tabular_lines
from pnc.studies.cifar import ood_metrics as M

TABLE2_COLUMNS = ("acc", "near_auroc", "near_fpr95", "far_auroc", "far_fpr95")
TABLE2_HEADER = ("Acc%", "Near AUROC", "Near FPR95", "Far AUROC", "Far FPR95")
CALIBRATION_COLUMNS = ("acc", "nll", "ece", "brier")
CALIBRATION_HEADER = ("Acc%", "NLL", "ECE%", "Brier")
AUPR_COLUMNS = ("near_aupr_in", "near_aupr_out", "far_aupr_in", "far_aupr_out")
AUPR_HEADER = ("Near AUPR-In", "Near AUPR-Out", "Far AUPR-In", "Far AUPR-Out")
ID_METRICS = ("accuracy", "nll", "ece", "brier")


@dataclasses.dataclass(frozen=True)
class Report:
    """How the tables summarise the seeds (docs/protocol.md, CIFAR rows).

    Attributes:
        std: ``"sample"`` (``ddof = 1``; the paper's 5 seeds) or ``"population"`` (``ddof = 0``;
            the authors' table over seeds {0, 1, 2}).
        fpr95: ``"own"`` (each score's own FPR95) or ``"authors"`` (MSP, Energy and
            Mahalanobis report the base network's predictive-entropy FPR95, as the authors'
            table does).
    """

    std: str = "sample"
    fpr95: str = "own"

    def __post_init__(self):
        if self.std not in ("sample", "population"):
            raise ValueError(f"report.std must be 'sample' or 'population', got {self.std!r}")
        if self.fpr95 not in ("own", "authors"):
            raise ValueError(f"report.fpr95 must be 'own' or 'authors', got {self.fpr95!r}")

    @property
    def ddof(self) -> int:
        return 1 if self.std == "sample" else 0


def method_metrics(
    scores: Mapping[str, np.ndarray],
    test_y: np.ndarray,
    groups: Mapping[str, str],
    id_name: str = "cifar10",
) -> list[dict]:
    """Rows ``{dataset, group, metric, value}`` of one method's outputs on one seed.

    ``scores``: ``test_pred`` ``[N]``, ``test_probs`` ``[N, K]``, ``test_conf`` ``[N]``,
    ``<name>_conf`` per OOD dataset (and ``<set>_entropy_conf`` for the single-model scores);
    ``groups``: OOD dataset -> ``"near"`` / ``"far"``.
    """
    probs = scores["test_probs"]
    id_values = {
        "accuracy": 100 * M.accuracy(scores["test_pred"], test_y),
        "nll": M.nll(probs, test_y),
        "ece": 100 * M.ece(probs, test_y),
        "brier": M.brier(probs, test_y),
    }
    rows = [
        {"dataset": id_name, "group": "id", "metric": k, "value": v} for k, v in id_values.items()
    ]
    for name, group in groups.items():
        conf_id, conf_ood = scores["test_conf"], scores[f"{name}_conf"]
        values = {
            "auroc": M.auroc(conf_id, conf_ood),
            "fpr95": M.fpr_at_tpr(conf_id, conf_ood),
            "aupr_in": M.aupr_in(conf_id, conf_ood),
            "aupr_out": M.aupr_out(conf_id, conf_ood),
        }
        if "test_entropy_conf" in scores:
            values["fpr95_entropy"] = M.fpr_at_tpr(
                scores["test_entropy_conf"], scores[f"{name}_entropy_conf"]
            )
        rows += [
            {"dataset": name, "group": group, "metric": k, "value": 100 * v}
            for k, v in values.items()
        ]
    return rows


def _per_seed(metrics: pd.DataFrame, report: Report) -> pd.DataFrame:
    """``(method, seed) x column`` of the group means (columns ``acc``, ``nll``, ...,
    ``near_auroc``, ...), with the authors' FPR95 convention applied if asked."""
    m = metrics
    if report.fpr95 == "authors":
        swapped = [x.id for x in registered_methods() if x.authors_entropy_fpr95]
        swap = m["method"].isin(swapped)
        m = m[~(swap & (m["metric"] == "fpr95"))].copy()
        m.loc[swap & (m["metric"] == "fpr95_entropy"), "metric"] = "fpr95"
    per_seed = (
        m.groupby(["method", "seed", "group", "metric"], sort=False)["value"].mean().reset_index()
    )
    per_seed["column"] = np.where(
        per_seed["group"] == "id",
        per_seed["metric"].replace({"accuracy": "acc"}),
        per_seed["group"] + "_" + per_seed["metric"],
    )
    return per_seed.pivot_table(index=["method", "seed"], columns="column", values="value")


def summary_table(
    metrics: pd.DataFrame, columns: tuple[str, ...] = TABLE2_COLUMNS, report: Report | None = None
) -> pd.DataFrame:
    """Mean and std over seeds of ``columns``, one row per method (in Table 2's order)."""
    report = report or Report()
    wide = _per_seed(metrics, report)
    rows = []
    labels = method_labels()
    order = [m for m in labels if m in set(metrics["method"])]
    for method in order:
        sub = wide.loc[method]
        row = {"method": method, "label": labels[method], "seeds": len(sub)}
        for col in columns:
            values = sub[col].to_numpy() if col in sub else np.array([np.nan])
            row[f"{col}_mean"] = float(np.mean(values))
            row[f"{col}_std"] = float(np.std(values, ddof=report.ddof)) if len(values) > 1 else 0.0
        rows.append(row)
    return pd.DataFrame(rows)


def table2(metrics: pd.DataFrame, report: Report | None = None) -> pd.DataFrame:
    """Mean and std over seeds of accuracy and the per-group averages, one row per method."""
    return summary_table(metrics, TABLE2_COLUMNS, report)


def _cell(mean: float, std: float, digits: int, latex: bool = False) -> str:
    """``mean ± std`` in fixed point (LaTeX: in math mode, ``\\pm``)."""
    if latex:
        return f"${fmt(mean, digits)} \\pm {fmt(std, digits)}$"
    return f"{fmt(mean, digits)} ± {fmt(std, digits)}"


def _rows(table: pd.DataFrame, columns, digits: int, latex: bool = False) -> list[list[str]]:
    label = latex_escape if latex else str
    return [
        [
            label(row["label"]),
            *(_cell(row[f"{c}_mean"], row[f"{c}_std"], digits, latex) for c in columns),
        ]
        for _, row in table.iterrows()
    ]


def table_markdown(
    table: pd.DataFrame, columns=TABLE2_COLUMNS, header=TABLE2_HEADER, digits: int = 2
) -> str:
    return markdown_table(None, ["Method", *header], _rows(table, columns, digits))


def table2_markdown(table: pd.DataFrame) -> str:
    return table_markdown(table)


def table2_latex(table: pd.DataFrame) -> str:
    header = " & ".join(latex_escape(h) for h in ("Method", *TABLE2_HEADER)) + r" \\"
    rows = _rows(table, TABLE2_COLUMNS, 2, latex=True)
    return "\n".join(tabular_lines("l" + "c" * len(TABLE2_COLUMNS), [header], rows)) + "\n"


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
        }
        for r in record.get("sweep", [])
    ]


def sweep_markdown(sweep: pd.DataFrame) -> str:
    rows = []
    labels = method_labels()
    for method in [m for m in labels if m in set(sweep["method"])]:
        sub = sweep[sweep["method"] == method]
        configs = [json.loads(c) for c in sub["config"]]
        chosen: dict[int, dict] = {}
        for s, c, sel in zip(sub["seed"], sub["config"], sub["selected"], strict=True):
            if sel:
                chosen[int(s)] = json.loads(c)
        for key in configs[0]:
            values = list(dict.fromkeys(json.dumps(c[key]) for c in configs))
            picked = ", ".join(f"{s}: {json.dumps(c[key])}" for s, c in sorted(chosen.items()))
            rows.append([labels[method], key, ", ".join(values), picked])
    header = ["Method", "Hyperparameter", "Values", "Selected (per seed)"]
    return markdown_table(None, header, rows)


def write_tables(
    metrics: pd.DataFrame, sweep: pd.DataFrame, out: str | Path, report: Report | None = None
) -> pd.DataFrame:
    """Write every table under ``out``; return Table 2."""
    report = report or Report()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(metrics, out / "metrics.csv")
    table = table2(metrics, report)
    write_csv(table, out / "table2.csv")
    (out / "table2.md").write_text(table2_markdown(table))
    (out / "table2.tex").write_text(table2_latex(table))
    cal = summary_table(metrics, CALIBRATION_COLUMNS, report)
    write_csv(cal, out / "calibration.csv")
    (out / "calibration.md").write_text(
        table_markdown(cal, CALIBRATION_COLUMNS, CALIBRATION_HEADER, 3)
    )
    aupr = summary_table(metrics, AUPR_COLUMNS, report)
    write_csv(aupr, out / "aupr.csv")
    (out / "aupr.md").write_text(table_markdown(aupr, AUPR_COLUMNS, AUPR_HEADER))
    write_csv(sweep, out / "sweep.csv")
    (out / "sweep.md").write_text(sweep_markdown(sweep) if len(sweep) else "no swept method\n")
    return table

"""The CIFAR study's calibration and AUPR metrics by hand, and the protocol options of its tables
(sample / population standard deviation, the authors' FPR95 convention)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from pnc.studies.cifar import ood_metrics as M
from pnc.studies.cifar import ood_tables as T


def test_aupr_in_and_out_by_hand():
    # ranked by confidence: 0.9 ID, 0.6 OOD, 0.4 ID, 0.1 OOD
    conf_id, conf_ood = [0.9, 0.4], [0.6, 0.1]
    assert M.aupr_in(conf_id, conf_ood) == pytest.approx(0.5 * 1 + 0.5 * 2 / 3)
    # OOD positive, ranked by minus the confidence: 0.1 OOD, 0.4 ID, 0.6 OOD, 0.9 ID
    assert M.aupr_out(conf_id, conf_ood) == pytest.approx(0.5 * 1 + 0.5 * 2 / 3)
    assert M.aupr_in([3.0, 2.0], [1.0]) == 1.0 and M.aupr_out([3.0, 2.0], [1.0]) == 1.0
    # perfectly inverted: every OOD image above every ID image
    assert M.aupr_out([0.0, 0.1], [0.5]) == pytest.approx(1 / 3)


def test_aupr_matches_precision_recall_steps_on_random_scores():
    rng = np.random.default_rng(0)
    a, b = rng.normal(1, 1, 40), rng.normal(0, 1, 30)
    scores = np.concatenate([a, b])
    positive = np.concatenate([np.ones(40), np.zeros(30)]).astype(bool)
    order = np.argsort(-scores, kind="stable")
    tp = np.cumsum(positive[order])
    precision = tp / np.arange(1, 71)
    expected = float(
        np.sum(precision[positive[order]]) / 40
    )  # no ties: AP = mean precision at hits
    assert M.aupr_in(a, b) == pytest.approx(expected)


def test_nll_brier_ece_by_hand():
    probs = np.array([[0.95, 0.05], [0.95, 0.05], [0.55, 0.45], [0.45, 0.55]])
    labels = np.array([0, 1, 0, 1])
    assert M.nll(probs, labels) == pytest.approx(-np.mean(np.log([0.95, 0.05, 0.55, 0.55])))
    assert M.brier(probs, labels) == pytest.approx(
        np.mean([2 * 0.05**2, 2 * 0.95**2, 2 * 0.45**2, 2 * 0.45**2])
    )
    # bins of width 1/15: 0.95 -> (14/15, 1], accuracy 1/2; 0.55 -> (8/15, 9/15], accuracy 1
    assert M.ece(probs, labels) == pytest.approx(0.5 * 0.45 + 0.5 * 0.45)
    assert M.ece(probs, labels, n_bins=1) == pytest.approx(abs(0.75 - 0.75))


def test_ece_bin_edges_belong_to_the_lower_bin():
    # confidence exactly 2/3 = 10/15 falls in (9/15, 10/15], with the 0.62 sample
    probs = np.array([[2 / 3, 1 / 3], [0.62, 0.38]])
    labels = np.array([0, 1])
    assert M.ece(probs, labels) == pytest.approx(abs(0.5 - (2 / 3 + 0.62) / 2))
    with pytest.raises(ValueError, match="labels must be in 0..1"):
        M.ece(probs, np.array([0, 2]))
    with pytest.raises(ValueError, match=r"probabilities \[N, K\]"):
        M.nll(probs[0], labels)


def _scores(rng, n=50, k=10, ood=("cifar100", "svhn"), entropy=False):
    probs = rng.dirichlet(np.ones(k), n).astype(np.float32)
    out = {"test_pred": probs.argmax(1), "test_probs": probs, "test_conf": rng.normal(1, 1, n)}
    for name in ood:
        out[f"{name}_conf"] = rng.normal(0, 1, 20)
    if entropy:
        out["test_entropy_conf"] = rng.normal(1, 1, n)
        for name in ood:
            out[f"{name}_entropy_conf"] = rng.normal(1, 1, 20)
    return out


def test_method_metrics_rows_for_id_and_every_ood_set():
    rng = np.random.default_rng(1)
    scores, labels = _scores(rng), rng.integers(0, 10, 50)
    rows = T.method_metrics(scores, labels, {"cifar100": "near", "svhn": "far"})
    got = {(r["dataset"], r["metric"]): r["value"] for r in rows}
    assert set(got) == {("cifar10", m) for m in ("accuracy", "nll", "ece", "brier")} | {
        (d, m) for d in ("cifar100", "svhn") for m in ("auroc", "fpr95", "aupr_in", "aupr_out")
    }
    assert got[("cifar10", "ece")] == pytest.approx(100 * M.ece(scores["test_probs"], labels))
    assert got[("svhn", "aupr_out")] == pytest.approx(
        100 * M.aupr_out(scores["test_conf"], scores["svhn_conf"])
    )
    with_entropy = T.method_metrics(_scores(rng, entropy=True), labels, {"svhn": "far"})
    assert "fpr95_entropy" in {r["metric"] for r in with_entropy}


def _long(values: dict) -> pd.DataFrame:
    """Metrics rows from ``{(method, seed): {metric: value}}`` on one far dataset."""
    rows = []
    for (method, seed), metrics in values.items():
        for metric, value in metrics.items():
            group = "id" if metric in T.ID_METRICS else "far"
            dataset = "cifar10" if group == "id" else "svhn"
            rows.append({"seed": seed, "method": method, "dataset": dataset, "group": group, "metric": metric, "value": value})  # fmt: skip
    return pd.DataFrame(rows)


def test_population_or_sample_std_and_the_authors_fpr95():
    values = {
        (m, s): {"accuracy": 90 + s, "nll": 0.3, "ece": 2.0, "brier": 0.1, "auroc": 80 + s,
                 "fpr95": 40 + 2 * s, **({"fpr95_entropy": 60 + 2 * s} if m == "msp" else {})}
        for m in ("msp", "pnc") for s in (0, 1, 2)
    }  # fmt: skip
    metrics = _long(values)
    sample = T.table2(metrics, T.Report(std="sample")).set_index("method")
    population = T.table2(metrics, T.Report(std="population")).set_index("method")
    assert sample.loc["pnc", "acc_std"] == pytest.approx(1.0)
    assert population.loc["pnc", "acc_std"] == pytest.approx(math.sqrt(2 / 3))
    assert sample.loc["msp", "far_fpr95_mean"] == pytest.approx(42)
    authors = T.table2(metrics, T.Report(fpr95="authors")).set_index("method")
    assert authors.loc["msp", "far_fpr95_mean"] == pytest.approx(62)
    assert authors.loc["pnc", "far_fpr95_mean"] == pytest.approx(42)  # P&C keeps its own
    cal = T.summary_table(metrics, T.CALIBRATION_COLUMNS).set_index("method")
    assert cal.loc["pnc", "nll_mean"] == pytest.approx(0.3) and cal.loc["pnc", "seeds"] == 3
    with pytest.raises(ValueError, match="report.std"):
        T.Report(std="ddof0")
    with pytest.raises(ValueError, match="report.fpr95"):
        T.Report(fpr95="entropy")


def test_write_tables_writes_the_calibration_and_aupr_tables(tmp_path):
    rng = np.random.default_rng(2)
    labels = rng.integers(0, 10, 50)
    rows = []
    for seed in (0, 1):
        for r in T.method_metrics(_scores(rng), labels, {"cifar100": "near", "svhn": "far"}):
            rows.append({"seed": seed, "method": "pnc", **r})
    sweep = pd.DataFrame(columns=["seed", "method", "config", "temperature", "val_nll", "val_accuracy", "selected"])  # fmt: skip
    T.write_tables(pd.DataFrame(rows), sweep, tmp_path)
    cal = (tmp_path / "calibration.md").read_text()
    assert "| Method | Acc% | NLL | ECE% | Brier |" in cal and "P&C" in cal
    aupr = pd.read_csv(tmp_path / "aupr.csv")
    assert {"near_aupr_in_mean", "far_aupr_out_std"} <= set(aupr.columns)
    assert np.isfinite(aupr[[c for c in aupr.columns if c.endswith("_mean")]].to_numpy()).all()


# ----------------------------------------------------------------------------- rendering

# The tables of a fixed input, byte for byte as pnc.studies.cifar.ood_tables wrote them before it used the
# shared cell and layout helpers of pnc.runtime.render.
TABLE2_MD = (
    "| Method | Acc% | Near AUROC | Near FPR95 | Far AUROC | Far FPR95 |\n"
    "|---|---|---|---|---|---|\n"
    "| P&C | 91.87 ± 0.90 | 89.35 ± 0.49 | 29.35 ± 0.49 | 96.60 ± 0.49 | 36.60 ± 0.49 |\n"
    "| Deep Ensemble | 93.20 ± 0.14 | 90.85 ± 0.49 | 30.85 ± 0.49 | 98.10 ± 0.49 | 38.10 ± 0.49 |\n"
    "| MSP | 90.00 ± 0.00 | 86.35 ± 0.49 | 26.35 ± 0.49 | 93.60 ± 0.49 | 33.60 ± 0.49 |\n"
)
TABLE2_TEX = (
    "\\begin{tabular}{lccccc}\n"
    "\\toprule\n"
    "Method & Acc\\% & Near AUROC & Near FPR95 & Far AUROC & Far FPR95 \\\\\n"
    "\\midrule\n"
    "P\\&C & $91.87 \\pm 0.90$ & $89.35 \\pm 0.49$ & $29.35 \\pm 0.49$ & $96.60 \\pm 0.49$ & $36.60 \\pm 0.49$ \\\\\n"
    "Deep Ensemble & $93.20 \\pm 0.14$ & $90.85 \\pm 0.49$ & $30.85 \\pm 0.49$ & $98.10 \\pm 0.49$ & $38.10 \\pm 0.49$ \\\\\n"
    "MSP & $90.00 \\pm 0.00$ & $86.35 \\pm 0.49$ & $26.35 \\pm 0.49$ & $93.60 \\pm 0.49$ & $33.60 \\pm 0.49$ \\\\\n"
    "\\bottomrule\n"
    "\\end{tabular}\n"
)
CALIBRATION_MD = (
    "| Method | Acc% | NLL | ECE% | Brier |\n"
    "|---|---|---|---|---|\n"
    "| P&C | 91.867 ± 0.895 | 0.306 ± 0.010 | 1.875 ± 0.530 | 0.122 ± 0.002 |\n"
    "| Deep Ensemble | 93.200 ± 0.141 | 0.255 ± 0.007 | 1.000 ± 0.141 | 0.103 ± 0.004 |\n"
    "| MSP | 90.000 ± 0.000 | 0.405 ± 0.007 | 3.062 ± 0.088 | 0.155 ± 0.007 |\n"
)
AUPR_MD = (
    "| Method | Near AUPR-In | Near AUPR-Out | Far AUPR-In | Far AUPR-Out |\n"
    "|---|---|---|---|---|\n"
    "| P&C | 90.35 ± 0.49 | 87.35 ± 0.49 | 97.60 ± 0.49 | 94.60 ± 0.49 |\n"
    "| Deep Ensemble | 91.85 ± 0.49 | 88.85 ± 0.49 | 99.10 ± 0.49 | 96.10 ± 0.49 |\n"
    "| MSP | 87.35 ± 0.49 | 84.35 ± 0.49 | 94.60 ± 0.49 | 91.60 ± 0.49 |\n"
)
SWEEP_MD = (
    "| Method | Hyperparameter | Values | Selected (per seed) |\n"
    "|---|---|---|---|\n"
    "| LLLA | prior_precision | 1.0, 10 | 0: 10 |\n"
    "| P&C | block | [3, 0], [3, 1] | 0: [3, 0], 1: [3, 0] |\n"
    "| P&C | bootstrap_frac | 0.05 | 0: 0.05, 1: 0.05 |\n"
    "| P&C | sigma | 25.0 | 0: 25.0, 1: 25.0 |\n"
)


def _fixed_metrics() -> pd.DataFrame:
    """Three methods, two seeds, accuracy / NLL / ECE / Brier and the four OOD metrics on two Near
    and two Far datasets."""
    rows = []
    values = {
        "pnc": {
            "accuracy": [91.234, 92.5],
            "nll": [0.31234, 0.2987],
            "ece": [1.5, 2.25],
            "brier": [0.1234, 0.1199],
        },
        "msp": {
            "accuracy": [90.0, 90.0],
            "nll": [0.4, 0.41],
            "ece": [3.125, 3.0],
            "brier": [0.15, 0.16],
        },
        "deep_ensemble": {
            "accuracy": [93.1, 93.3],
            "nll": [0.25, 0.26],
            "ece": [0.9, 1.1],
            "brier": [0.1, 0.105],
        },
    }
    ood = {"pnc": 0.0, "msp": -3.0, "deep_ensemble": 1.5}
    sets = (
        ("cifar100", "near", 88.0),
        ("tin", "near", 90.0),
        ("svhn", "far", 95.0),
        ("mnist", "far", 97.5),
    )
    offsets = (("auroc", 0.0), ("fpr95", -60.0), ("aupr_in", 1.0), ("aupr_out", -2.0))
    for method, ids in values.items():
        for seed in (0, 1):
            row = {"seed": seed, "method": method}
            for metric, v in ids.items():
                rows.append(
                    {**row, "dataset": "cifar10", "group": "id", "metric": metric, "value": v[seed]}
                )
            for dataset, group, base in sets:
                for metric, off in offsets:
                    value = base + off + ood[method] + 0.7 * seed
                    rows.append(
                        {
                            **row,
                            "dataset": dataset,
                            "group": group,
                            "metric": metric,
                            "value": value,
                        }
                    )
    return pd.DataFrame(rows)


def test_tables_render_byte_for_byte():
    metrics = _fixed_metrics()
    table = T.table2(metrics)
    assert T.table2_markdown(table) == TABLE2_MD
    assert T.table2_latex(table) == TABLE2_TEX
    cal = T.summary_table(metrics, T.CALIBRATION_COLUMNS)
    assert T.table_markdown(cal, T.CALIBRATION_COLUMNS, T.CALIBRATION_HEADER, 3) == CALIBRATION_MD
    aupr = T.summary_table(metrics, T.AUPR_COLUMNS)
    assert T.table_markdown(aupr, T.AUPR_COLUMNS, T.AUPR_HEADER) == AUPR_MD
    pnc = {
        "sweep": [
            {
                "config": {"block": [3, 0], "sigma": 25.0, "bootstrap_frac": 0.05},
                "temperature": 1.25,
                "val_nll": 0.2,
                "val_accuracy": 0.9,
                "selected": True,
            },
            {
                "config": {"block": [3, 1], "sigma": 25.0, "bootstrap_frac": 0.05},
                "temperature": 1.5,
                "val_nll": 0.3,
                "val_accuracy": 0.89,
            },
        ]
    }
    llla = {
        "sweep": [
            {
                "config": {"prior_precision": 1.0},
                "temperature": 2.0,
                "val_nll": 0.5,
                "val_accuracy": 0.8,
                "selected": False,
            },
            {
                "config": {"prior_precision": 10},
                "temperature": 2.5,
                "val_nll": 0.4,
                "val_accuracy": 0.81,
                "selected": True,
            },
        ]
    }
    rows = T.sweep_rows("pnc", 0, pnc) + T.sweep_rows("pnc", 1, pnc) + T.sweep_rows("llla", 0, llla)
    assert T.sweep_markdown(pd.DataFrame(rows)) == SWEEP_MD


def _fpr_by_enumeration(conf_id, conf_ood, tpr):
    """FPR at the first threshold, from high to low, whose TPR reaches ``tpr``: every distinct
    confidence tried in turn, counting by hand."""
    for t in sorted(set(conf_id) | set(conf_ood), reverse=True):
        if sum(c >= t for c in conf_id) / len(conf_id) >= tpr:
            return sum(c >= t for c in conf_ood) / len(conf_ood)
    raise AssertionError("unreachable: the lowest threshold calls every image ID")


def test_fpr_at_tpr_by_enumeration_with_ties_and_other_rates():
    rng = np.random.default_rng(3)
    for trial in range(30):
        n_id, n_ood = int(rng.integers(1, 25)), int(rng.integers(1, 25))
        # few distinct values, so ties within and across the two sets are common
        conf_id = list(rng.integers(0, 6, n_id) / 2.0)
        conf_ood = list(rng.integers(-2, 4, n_ood) / 2.0)
        for tpr in (0.95, 0.5, 0.8, 1.0, 0.01):
            assert M.fpr_at_tpr(conf_id, conf_ood, tpr) == pytest.approx(
                _fpr_by_enumeration(conf_id, conf_ood, tpr), abs=0
            ), (trial, tpr)
    # by hand: ID 0.9 0.8 0.7 0.1, OOD 0.85 0.2; TPR 0.75 is first reached at 0.7 (one OOD above)
    assert M.fpr_at_tpr([0.9, 0.8, 0.7, 0.1], [0.85, 0.2], 0.75) == 0.5
    # 0.95 needs all four ID images: threshold 0.1, both OOD images above it
    assert M.fpr_at_tpr([0.9, 0.8, 0.7, 0.1], [0.85, 0.2]) == 1.0
    assert M.fpr_at_tpr([2.0, 3.0], [0.0, 1.0]) == 0.0


@pytest.mark.parametrize("metric", [M.auroc, M.fpr_at_tpr, M.aupr_in, M.aupr_out])
def test_ood_metrics_refuse_bad_confidences(metric):
    good = [0.3, 0.2]
    for conf_id, conf_ood in (
        ([], good),
        (good, []),
        ([[0.3, 0.2]], good),
        (good, [[0.3], [0.2]]),
        (0.3, good),
    ):
        with pytest.raises(ValueError, match="non-empty 1-D confidence arrays"):
            metric(conf_id, conf_ood)
    for conf_id, conf_ood in (([np.nan, 0.1], good), (good, [0.1, np.inf]), ([-np.inf], good)):
        with pytest.raises(ValueError, match="^confidences must be finite$"):
            metric(conf_id, conf_ood)
    assert 0.0 <= metric([0.3], [0.2]) <= 1.0  # one image each is enough


def _ece_by_hand(p, y, n_bins):
    """ECE with bins (b/n, (b+1)/n] (a confidence of 0 in the first), looping over images."""
    conf = p.max(axis=1)
    pred = p.argmax(axis=1)
    members = [[] for _ in range(n_bins)]
    for i in range(len(y)):
        b = 0
        for k in range(n_bins):
            if k / n_bins < conf[i] <= (k + 1) / n_bins:
                b = k
        members[b].append(i)
    total = 0.0
    for idx in members:
        if idx:
            acc = np.mean([pred[i] == y[i] for i in idx])
            total += len(idx) / len(y) * abs(acc - np.mean([conf[i] for i in idx]))
    return total


def test_ece_against_a_loop_over_images_for_several_bin_counts():
    rng = np.random.default_rng(5)
    logits = rng.normal(0, 2, (60, 4))
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y = rng.integers(0, 4, 60)
    for n_bins in (1, 2, 3, 7, 15, 40):
        assert M.ece(p, y, n_bins) == pytest.approx(_ece_by_hand(p, y, n_bins), rel=1e-12)
    assert M.ece(p, y) == pytest.approx(_ece_by_hand(p, y, 15), rel=1e-12)
    # one confident image, right and wrong: ECE is 1 - conf and conf
    assert M.ece([[0.8, 0.2]], [0]) == pytest.approx(0.2)
    assert M.ece([[0.8, 0.2]], [1]) == pytest.approx(0.8)
    with pytest.raises(ValueError, match="n_bins must be >= 1, got 0"):
        M.ece(p, y, 0)


def test_nll_floors_a_zero_probability_at_the_smallest_float32():
    tiny = float(np.finfo(np.float32).tiny)
    assert M.nll([[0.0, 1.0], [0.5, 0.5]], [0, 0]) == pytest.approx(
        (-math.log(tiny) - math.log(0.5)) / 2, rel=1e-12
    )
    assert M.nll([[0.25, 0.75]], [1]) == pytest.approx(-math.log(0.75), rel=1e-12)


@pytest.mark.parametrize("metric", [M.nll, M.brier, M.ece])
def test_probability_metrics_refuse_bad_input_naming_it(metric):
    p = np.array([[0.2, 0.8], [0.6, 0.4]])
    with pytest.raises(ValueError, match=r"need probabilities \[N, K\] and labels \[N\]"):
        metric(p[0], [0])
    with pytest.raises(ValueError, match=r"need probabilities \[N, K\] and labels \[N\]"):
        metric(p, [0, 1, 1])
    with pytest.raises(ValueError, match=r"need probabilities \[N, K\] and labels \[N\]"):
        metric(p[:0], [])
    with pytest.raises(ValueError, match="^probabilities must be finite and non-negative$"):
        metric([[0.2, np.nan], [0.6, 0.4]], [0, 1])
    with pytest.raises(ValueError, match="finite and non-negative"):
        metric([[-0.1, 1.1], [0.6, 0.4]], [0, 1])
    for labels in ([0, 2], [-1, 0]):
        with pytest.raises(ValueError, match=r"labels must be in 0\.\.1"):
            metric(p, labels)
    assert metric(p, [1, 0]) >= 0.0  # both classes at the edges are accepted


def test_accuracy_by_hand_and_its_shape_checks():
    assert M.accuracy([1, 2, 3, 4], [1, 0, 3, 0]) == 0.5
    assert M.accuracy(np.array([[1, 2]]), np.array([[1, 2]])) == 1.0
    with pytest.raises(ValueError, match=r"predictions \(3,\) and labels \(2,\) must match"):
        M.accuracy([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="must match"):
        M.accuracy([], [])


@pytest.mark.parametrize("metric", [M.auroc, M.fpr_at_tpr, M.aupr_in, M.aupr_out])
def test_integer_confidences_are_scored_as_their_values(metric):
    """Unsigned-integer confidences (e.g. vote counts) score as the same values in float64: minus
    the confidence (AUPR-Out) must not wrap around."""
    conf_id, conf_ood = [200, 10, 150, 90], [120, 5, 60]
    expected = metric(np.asarray(conf_id, np.float64), np.asarray(conf_ood, np.float64))
    for dtype in (np.uint8, np.int16):
        assert metric(np.asarray(conf_id, dtype), np.asarray(conf_ood, dtype)) == expected
        assert metric(np.asarray(conf_id, dtype), np.asarray(conf_ood, np.float64)) == expected
        assert metric(np.asarray(conf_id, np.float64), np.asarray(conf_ood, dtype)) == expected


@pytest.mark.parametrize("metric", [M.nll, M.brier, M.ece])
def test_half_precision_probabilities_are_scored_in_float64(metric):
    p16 = np.array([[0.1, 0.3, 0.6], [0.7, 0.2, 0.1], [0.3, 0.3, 0.4]], np.float16)
    y = [2, 1, 0]
    assert metric(p16, y) == pytest.approx(metric(p16.astype(np.float64), y), rel=1e-15)


def test_ece_keeps_zero_and_rounded_up_confidences_in_the_end_bins():
    # an all-zero row has confidence 0: the first bin (|1 - 0|, argmax 0 is right), weight 1/2
    assert M.ece([[0.0, 0.0], [0.8, 0.2]], [0, 0]) == pytest.approx(0.5 * 1.0 + 0.5 * 0.2)
    # a float32 softmax can round a confidence just above 1: still the last bin, not dropped
    over = 1.0 + 1e-7
    for n_bins in (1, 15):
        assert M.ece([[over, 0.0]], [1], n_bins) == pytest.approx(over)
        assert M.ece([[over, 0.0], [0.0, over]], [0, 0], n_bins) == pytest.approx(over - 0.5)

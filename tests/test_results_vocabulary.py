"""The results vocabulary agrees with the method registry, the workflow schema, the evaluation and
the report; the one validator accepts the study's three kinds of table and rejects malformed ones."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from synthetic_results import make_results

from pnc.core.predictive import Predictive
from pnc.core.training import Standardizer
from pnc.methods.regression import METHOD_IDS
from pnc.report import figures, stats, tables
from pnc.studies.mujoco import results as vocab
from pnc.studies.mujoco import results_table
from pnc.studies.mujoco.evaluate import evaluate_splits
from pnc.studies.mujoco.selection import METRIC_TABLE_CHECKS

SCHEMA = Path(__file__).resolve().parents[1] / "workflow" / "schemas" / "config.schema.yaml"


def test_every_registered_method_has_an_entry_and_vice_versa():
    assert set(vocab.METHOD_INFO) == set(METHOD_IDS)
    assert all(info.id == m for m, info in vocab.METHOD_INFO.items())
    # the paper's methods in the tables' order (a new method takes its place by its ``table_order``)
    paper = ("deep_ensemble", "mc_dropout", "swag", "laplace", "subspace", "pnc")
    assert tuple(m for m in vocab.RANKED_METHODS if m in paper) == paper
    ablations = ("pnc_nocorr", "deep_ensemble_mixture")
    assert tuple(m for m in vocab.ABLATION_METHODS if m in ablations) == ablations
    assert vocab.REFERENCE in vocab.RANKED_METHODS


def test_workflow_schema_lists_the_vocabulary_methods():
    schema = yaml.safe_load(SCHEMA.read_text())
    listed = schema["properties"]["methods"]["propertyNames"]["enum"]
    assert len(listed) == len(set(listed))
    assert set(listed) == set(vocab.METHODS)


def _predictive(rng, s, n, d, spread=1.0) -> Predictive:
    return Predictive(
        means=rng.normal(size=(s, n, d)) * spread, variances=rng.uniform(0.5, 2.0, (s, n, d))
    )


def test_every_metric_the_evaluation_emits_is_described():
    rng = np.random.default_rng(0)
    preds = {s: _predictive(rng, 3, 20, 2) for s in vocab.EVAL_SPLITS}
    targets = {s: rng.normal(size=(20, 2)) for s in vocab.EVAL_SPLITS}
    rows = list(evaluate_splits(preds, targets, Standardizer(np.zeros(2), np.ones(2))))
    emitted = {m for _, m, _ in rows}
    assert emitted == set(vocab.METRICS)
    for metric in emitted:
        info = vocab.METRIC_INFO[metric]
        assert info.id == metric and info.label and info.definition.endswith(".")
        assert isinstance(info.higher_is_better, bool)
        assert (info.bounds is None) == (info.reference is None)
        if info.bounds is not None:
            assert info.bounds[0] <= info.reference <= info.bounds[1]
    for split in vocab.EVAL_SPLITS:
        names = [m for s, m, _ in rows if s == split]
        expected = vocab.SPLIT_METRICS + (
            vocab.SHIFT_METRICS if split in vocab.SHIFTED_SPLITS else ()
        )
        assert names == list(expected)
    assert vocab.REPORTED_SPLITS == ("id", "near", "mid", "far")
    assert set(vocab.SPLIT_LABELS) == set(vocab.EVAL_SPLITS)
    assert (vocab.SELECTION_SPLIT, vocab.SELECTION_METRIC) == ("val", "nll")
    assert all(s in vocab.REPORTED_SPLITS and m in vocab.METRICS for s, m in vocab.HEADLINE)


def test_tables_and_figures_share_labels():
    assert vocab.METHOD_INFO["laplace"].short == "Lap."
    results, _ = make_results(envs=("A", "B"), no_mid=("B",), seeds=(0, 1))
    df = results_table.validate(results)
    built = {t.name: t for t in tables.build_tables(df, stats.compute_statistics(df))}
    methods = stats.methods_present(df)
    header = built["hparams"].markdown.splitlines()[2]
    assert (
        header == "| " + " | ".join(["Env"] + [vocab.METHOD_INFO[m].short for m in methods]) + " |"
    )
    assert list(built["cross_env"].data["label"]) == [
        vocab.METHOD_INFO[m].label for m in vocab.RANKED_METHODS
    ]
    fig = figures.metrics_figure(df, "A")
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    figures.plt.close(fig)
    assert ticks == [vocab.METHOD_INFO[m].short for m in methods]
    assert legend == [vocab.METHOD_INFO[m].label for m in methods]
    assert "Lap." in ticks and "Lap." in header
    assert set(figures.METHOD_STYLE) == set(vocab.METHODS)


# ---------------------------------------------------------------------------------------------
# The validator on the study's three kinds of table
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def all_configs() -> pd.DataFrame:
    return make_results(envs=("A", "B"), no_mid=("B",), seeds=(0, 1))[1]


def test_metric_tables_keep_val_rows_and_non_finite_values(all_configs):
    metric_table = all_configs.drop(columns="selected")
    rows = metric_table.index[metric_table.split == "far"][:2]
    metric_table.loc[rows, "value"] = [np.nan, np.inf]
    out = results_table.validate(metric_table, **METRIC_TABLE_CHECKS)
    assert len(out) == len(metric_table) and "val" in set(out["split"])
    assert out["value"].dtype == np.float64
    assert np.isnan(out.loc[rows[0], "value"]) and np.isinf(out.loc[rows[1], "value"])
    with pytest.raises(results_table.ResultsError, match="non-finite"):
        results_table.validate(metric_table, one_config=False)


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda d: d.drop(columns="data_source"), r"lacks required column\(s\) \['data_source'\]"),
        (lambda d: d.drop(columns="calibration"), r"lacks required column\(s\) \['calibration'\]"),
        (lambda d: d.assign(calibration="temp"), r"unknown calibration value\(s\) \['temp'\]"),
        (lambda d: d.assign(calibration=None), "column 'calibration' is empty"),
        (lambda d: d.assign(value=d.value.astype(object).where(d.index != 0, "x")), "non-numeric"),
        (lambda d: pd.concat([d, d.iloc[:1]]), "duplicated measurements"),
        (lambda d: d.assign(method=d.method.replace("pnc", "pnc2")), r"unknown method.*pnc2"),
    ],
)
def test_metric_tables_reject_malformed_input(all_configs, mutate, message):
    metric_table = all_configs.drop(columns="selected")
    with pytest.raises(results_table.ResultsError, match=message):
        results_table.validate(mutate(metric_table.copy()), **METRIC_TABLE_CHECKS)


def test_all_configs_needs_boolean_selected(all_configs):
    out = results_table.validate(
        all_configs.assign(selected=all_configs.selected.astype(str)), require_selected=True
    )
    assert out["selected"].dtype == bool and "val" not in set(out["split"])
    with pytest.raises(results_table.ResultsError, match="must be boolean"):
        results_table.validate(all_configs.assign(selected="maybe"), require_selected=True)


def test_load_names_a_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        results_table.load(tmp_path / "missing.csv")


# ---------------------------------------------------------------------------------------------
# Calibration variants
# ---------------------------------------------------------------------------------------------


def test_calibration_vocabulary():
    columns = vocab.RESULT_COLUMNS
    assert set(columns) == set(vocab.REQUIRED_COLUMNS) | set(vocab.OPTIONAL_DEFAULTS)
    assert columns.index("calibration") == columns.index("config") + 1
    assert vocab.CALIBRATIONS == ("raw", "vcal") == (vocab.RAW, vocab.VCAL)
    assert vocab.OPTIONAL_DEFAULTS["calibration"] == "raw"
    assert "calibration" in vocab.MEASUREMENT_KEY
    assert vocab.CALIBRATION_INFO["raw"].label == ""
    assert vocab.CALIBRATION_INFO["vcal"].label == "+ vcal"
    assert all(c.id == k and c.description.endswith(".") for k, c in vocab.CALIBRATION_INFO.items())


def test_tables_without_calibration_column_read_as_raw(all_configs):
    old = all_configs[all_configs.calibration == "raw"].drop(columns=["calibration", "selected"])
    out = results_table.validate(old, one_config=False)
    assert (out["calibration"] == "raw").all()
    with pytest.raises(results_table.ResultsError, match="calibration"):
        results_table.validate(old, **METRIC_TABLE_CHECKS)  # metric tables always have it


def test_one_config_means_one_config_calibration_pair(all_configs):
    selected = all_configs[all_configs.selected].drop(columns="selected")
    assert len(results_table.validate(selected)) > 0
    both = all_configs[all_configs.config.isin(selected.config)].drop(columns="selected")
    with pytest.raises(results_table.ResultsError, match=r"several \(config, calibration\) pairs"):
        results_table.validate(both)
    # the same measurement in both variants is not a duplicate
    assert len(results_table.validate(both, one_config=False)) == len(both[both.split != "val"])

"""Figures: frontier data, Pareto fronts, axis scales, grayscale-distinct styles and files."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from synthetic_results import GRIDS, make_results

from pnc.report import figures as fg
from pnc.studies.mujoco import results as vocab
from pnc.studies.mujoco import results_table


@pytest.fixture(scope="module")
def tables():
    results, all_configs = make_results(envs=("Ant-v5", "Swimmer-v5"), seeds=(0, 1))
    return (
        results_table.validate(results),
        results_table.validate(all_configs, require_selected=True, drop_selection_split=False),
        all_configs,
    )


def test_frontier_points_are_seed_means_per_configuration(tables):
    _, all_configs, raw = tables
    pts = fg.frontier_points(all_configs)
    n_configs = raw.groupby(["env", "method"])["config"].nunique().sum()
    assert len(pts) == n_configs
    assert (pts.groupby(["env", "method"])["selected"].sum() == 1).all()
    row = pts[(pts.env == "Ant-v5") & (pts.method == "swag") & (pts.config == "scale=1.0")].iloc[0]
    # swag's variance-calibrated variant has the lower validation NLL (synthetic_results)
    assert row["calibration"] == "vcal"
    src = raw[
        (raw.env == "Ant-v5")
        & (raw.method == "swag")
        & (raw.config == "scale=1.0")
        & (raw.calibration == "vcal")
    ]
    expected = src[(src.split == "far") & (src.metric == "nll")]["value"].mean()
    assert row["far_nll"] == pytest.approx(expected)
    assert not row["selected"] and row["n_seeds"] == 2


def test_frontier_draws_each_configuration_in_its_val_chosen_variant(tables):
    _, all_configs, _ = tables
    pts = fg.frontier_points(all_configs)
    val = all_configs[(all_configs.split == "val") & (all_configs.metric == "nll")]
    means = val.groupby(["env", "method", "config", "calibration"])["value"].mean()
    for r in pts.itertuples():
        other = "raw" if r.calibration == "vcal" else "vcal"
        assert (
            means[(r.env, r.method, r.config, r.calibration)]
            <= means[(r.env, r.method, r.config, other)]
        )
    chosen = pts[pts.selected]
    flagged = all_configs[all_configs.selected][
        ["env", "method", "config", "calibration"]
    ].drop_duplicates()
    assert len(chosen) == len(flagged)
    assert set(map(tuple, chosen[flagged.columns].to_numpy())) == set(
        map(tuple, flagged.to_numpy())
    )


def test_frontier_needs_val_rows_to_choose_a_variant(tables):
    _, all_configs, _ = tables
    without_val = all_configs[all_configs.split != "val"]
    with pytest.raises(fg.FigureError, match="val rows"):
        fg.frontier_points(without_val)
    # a table with one variant per configuration (written before the calibration column)
    old = without_val[without_val.calibration == "raw"].drop(columns="calibration")
    first = old.method.map(lambda m: GRIDS[m][0])
    old = results_table.validate(old.assign(selected=old.config == first), require_selected=True)
    pts = fg.frontier_points(old)
    assert set(pts.calibration) == {"raw"}


def test_frontier_needs_selected_column(tables):
    _, _, raw = tables
    with pytest.raises(results_table.ResultsError, match="selected"):
        results_table.validate(raw.drop(columns="selected"), require_selected=True)


def test_pareto_front():
    x = np.array([1.0, 2.0, 3.0, 2.5, 0.5])
    y = np.array([5.0, 2.0, 1.0, 3.0, 6.0])
    # (2.5, 3) is dominated by (2, 2); the rest trade off
    np.testing.assert_array_equal(fg.pareto_front(x, y), [4, 0, 1, 2])


@pytest.mark.parametrize(
    "values,scale",
    [
        ([0.1, 0.5, 0.9], "linear"),
        ([0.01, 5.0, 100.0], "log"),
        ([-1.3, 2.0, 3000.0], "symlog"),
        ([-1.0, 0.5, 2.0], "linear"),
    ],
)
def test_choose_scale(values, scale):
    assert fg.choose_scale(np.array(values)) == scale


def test_styles_distinct_in_every_channel():
    methods = vocab.METHODS
    assert set(fg.METHOD_STYLE) == set(methods)
    for channel in ("color", "marker", "hatch"):
        values = [str(fg.METHOD_STYLE[m][channel]) for m in methods]
        assert len(set(values)) == len(methods), channel


def test_figures_are_written_as_pdf_and_png(tmp_path, tables):
    results, all_configs, _ = tables
    paths = fg.save(fg.frontier_figure(all_configs), tmp_path / "frontier_all")
    paths += fg.save(fg.metrics_figure(results, "Swimmer-v5"), tmp_path / "metrics" / "Swimmer-v5")
    assert [p.suffix for p in paths] == [".pdf", ".png"] * 2
    for p in paths:
        head = p.read_bytes()[:8]
        assert head.startswith(b"%PDF") if p.suffix == ".pdf" else head == b"\x89PNG\r\n\x1a\n"


def test_frontier_panels_one_per_env(tables):
    _, all_configs, _ = tables
    fig = fg.frontier_figure(all_configs)
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in visible] == ["Ant-v5", "Swimmer-v5"]
    # every configuration is drawn: hollow (other) + filled (selected) scatter points
    n_points = sum(len(c.get_offsets()) for c in visible[0].collections)
    assert n_points == len(fg.frontier_points(all_configs).query("env == 'Ant-v5'"))
    fg.plt.close(fig)


def test_metrics_figure_panels_and_single_seed(tmp_path):
    results, _ = make_results(envs=("A",), no_mid=(), seeds=(0,), methods=("pnc", "swag"))
    fig = fg.metrics_figure(results_table.validate(results), "A")
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert titles == [fg.metric_label(s, m) for s, m in vocab.HEADLINE]
    assert "1 seed (no spread)" in fig._suptitle.get_text()
    fg.plt.close(fig)


def test_frontier_rejects_inconsistent_selected_flags(tables):
    _, all_configs, _ = tables
    bad = all_configs.copy()
    first = bad.index[(bad.method == "pnc") & bad.selected][0]
    bad.loc[first, "selected"] = False
    with pytest.raises(fg.FigureError, match="selected"):
        fg.frontier_points(pd.DataFrame(bad))

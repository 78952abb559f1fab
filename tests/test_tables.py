"""Structure and content of the paper's tables (LaTeX, Markdown, CSV)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from synthetic_results import make_results

from pnc.report import stats as st
from pnc.report import tables as tb
from pnc.runtime import render
from pnc.studies.mujoco import results as vocab
from pnc.studies.mujoco import results_table

ENVS = ("Ant-v5", "Hopper-v5", "Swimmer-v5")


@pytest.fixture(scope="module")
def built():
    results, _ = make_results(envs=ENVS, no_mid=("Swimmer-v5",), seeds=(0, 1, 2))
    df = results_table.validate(results)
    stats = st.compute_statistics(df)
    return df, stats, {t.name: t for t in tb.build_tables(df, stats)}


def _md_rows(markdown: str) -> list[list[str]]:
    lines = [ln for ln in markdown.splitlines() if ln.startswith("|")]
    return [[c.strip() for c in ln.strip("|").split(" | ")] for ln in lines[2:]]


def _latex_body_rows(latex: str) -> list[str]:
    body = (
        latex.split(r"\midrule", 1)[1]
        if r"\endlastfoot" not in latex
        else latex.split(r"\endlastfoot", 1)[1]
    )
    return [
        ln.strip()
        for ln in body.splitlines()
        if ln.strip().endswith(r"\\") and not ln.strip().startswith(r"\multicolumn")
    ]


def test_every_table_is_built_with_booktabs(built):
    _, _, tables = built
    assert set(tables) == set(tb.TABLE_NAMES)
    for t in tables.values():
        for rule in (r"\toprule", r"\midrule", r"\bottomrule", r"\caption{", r"\label{tab:"):
            assert rule in t.latex, (t.name, rule)
        assert t.markdown.startswith("Table: ")
        # balanced groups and environments (no TeX engine needed)
        bare = t.latex.replace(r"\{", "").replace(r"\}", "")
        assert bare.count("{") == bare.count("}"), t.name
        assert (
            re.findall(r"\\begin\{(\w+)\}", t.latex) == re.findall(r"\\end\{(\w+)\}", t.latex)[::-1]
        ), t.name
        assert bare.count("$") % 2 == 0, t.name


def test_cross_env_structure(built):
    df, stats, tables = built
    t = tables["cross_env"]
    assert list(t.data["method"]) == list(vocab.RANKED_METHODS)  # six methods, no ablation
    for split, metric in vocab.HEADLINE:
        cid = f"{split}_{metric}"
        for suffix in ("mean_rank", "rank_std", "wins", "n_envs", "p_holm", "arrow"):
            assert f"{cid}_{suffix}" in t.data.columns
        # ranks 1..6 per env average to 3.5 over the six methods
        assert t.data[f"{cid}_mean_rank"].mean() == pytest.approx(3.5)
        assert (t.data[f"{cid}_n_envs"] == len(ENVS)).all()
        assert t.data[f"{cid}_wins"].sum() >= len(ENVS)
    rows = _md_rows(t.markdown)
    assert len(rows) == 6 and all(len(r) == 1 + 2 * len(vocab.HEADLINE) for r in rows)
    assert len(_latex_body_rows(t.latex)) == 6
    assert all(r.count(" & ") == 2 * len(vocab.HEADLINE) for r in _latex_body_rows(t.latex))


def test_cross_env_bold_marks_best_mean_rank(built):
    _, _, tables = built
    t = tables["cross_env"]
    for split, metric in vocab.HEADLINE:
        cid = f"{split}_{metric}"
        best = t.data[f"{cid}_mean_rank"] == t.data[f"{cid}_mean_rank"].min()
        np.testing.assert_array_equal(t.data[f"{cid}_best"], best)
    pnc_row = _md_rows(t.markdown)[-1]
    assert pnc_row[0] == "P&C" and pnc_row[1].startswith("**")


def test_captions_state_source_seeds_envs_and_definitions(built):
    _, _, tables = built
    for name in ("cross_env", "per_env", "spearman", "hparams", "wilcoxon"):
        cap = tables[name].caption
        assert "3 MuJoCo environments (offline behaviour datasets), 3 seeds per environment" in cap
    assert "ID RMSE: root mean squared error" in tables["cross_env"].caption
    for phrase in ("NLL: Gaussian negative log-likelihood", "AUROC: ID evaluation", "Spearman:"):
        assert phrase in tables["cross_env"].caption
        assert phrase in tables["per_env"].caption or phrase == "Spearman:"
    assert "every method tied for the best rank counts a win" in tables["cross_env"].caption


def test_fewer_than_eight_envs_says_no_arrows(built):
    _, stats, tables = built
    for name in ("cross_env", "wilcoxon"):
        assert "no comparison can be significant" in tables[name].caption
        assert "at least 8 environments are needed" in tables[name].caption
    assert not any(t["arrow"] for w in stats["wilcoxon"].values() for t in w["tests"].values())
    assert not any("↑" in c or "↓" in c for r in _md_rows(tables["cross_env"].markdown) for c in r)
    assert r"$^{\uparrow}$" not in tables["cross_env"].latex


@pytest.mark.slow
def test_arrows_appear_with_enough_environments():
    envs = tuple(f"E{i}" for i in range(9))
    means = {}
    rows = []
    for e_i, env in enumerate(envs):
        means[env] = {
            m: 1.0 + 0.1 * i + 0.01 * e_i for i, m in enumerate(vocab.RANKED_METHODS[:-1])
        }
        means[env]["pnc"] = 0.5 - 0.013 * e_i
        for m, v in means[env].items():
            for split, metric in vocab.HEADLINE:
                value = v if not vocab.METRIC_INFO[metric].higher_is_better else -v
                rows.append(
                    dict(env=env, method=m, seed=0, split=split, metric=metric, value=value)
                )
    df = results_table.validate(pd.DataFrame(rows))
    stats = st.compute_statistics(df)
    t = tb.cross_env_table(df, stats)
    assert "no comparison can be significant" not in t.caption
    assert t.latex.count(r"$^{\uparrow}$") == 5 * len(vocab.HEADLINE)
    assert (t.data.loc[t.data.method != "pnc", "id_rmse_arrow"] == "up").all()
    w = tb.wilcoxon_table(df, stats)
    assert len(w.data) == 5 * len(vocab.HEADLINE) and w.data["significant"].all()
    np.testing.assert_allclose(w.data["p_holm"], 5 * 2.0**-8)


def test_per_env_structure_and_bold(built):
    df, _, tables = built
    t = tables["per_env"]
    assert len(t.data) == len(ENVS) * 6
    assert list(t.data["env"].drop_duplicates()) == list(ENVS)
    summary = st.summarise(df)
    for env in ENVS:
        for split, metric in tb.PER_ENV_COLUMNS:
            s = summary[
                (summary.env == env) & (summary.split == split) & (summary.metric == metric)
            ]
            s = s[s.method.isin(vocab.RANKED_METHODS)].set_index("method")["mean"]
            best = s.idxmax() if vocab.METRIC_INFO[metric].higher_is_better else s.idxmin()
            rows = t.data[t.data.env == env].set_index("method")
            assert rows[f"{split}_{metric}_best"].sum() == 1
            assert rows.loc[best, f"{split}_{metric}_best"]
            assert rows.loc[best, f"{split}_{metric}_mean"] == pytest.approx(s[best])
    body = _latex_body_rows(t.latex)
    assert len(body) == len(ENVS) * 6
    assert t.latex.count(r"\textbf{") == len(ENVS) * len(tb.PER_ENV_COLUMNS)
    assert t.latex.count(r"\multicolumn{4}{l}{\textit{") == len(ENVS)
    assert "longtable" in t.latex


def test_spearman_dashes_for_missing_mid_and_italic_negatives(built):
    df, _, tables = built
    t = tables["spearman"]
    rows = _md_rows(t.markdown)
    swimmer = [r for r in rows if r[0] == "Swimmer-v5"]
    assert len(swimmer) == 6 and all(r[4] == "--" for r in swimmer)
    assert all(r[4] != "--" for r in rows if r[0] != "Swimmer-v5")
    negatives = t.data.filter(like="_mean").lt(0).to_numpy().sum()
    assert negatives > 0  # the synthetic table has anti-informative cells
    assert t.latex.count(r"\textit{$-$") == negatives
    # header ID/Near/Mid/Far
    assert re.search(r"Method & ID \$\\uparrow\$ & Near .* & Mid .* & Far", t.latex)


def test_ties_are_all_bold():
    rows = [
        dict(env="E", method=m, seed=0, split="far", metric="spearman", value=v)
        for m, v in zip(vocab.RANKED_METHODS, [0.5, 0.5, 0.1, 0.2, -0.3, 0.4], strict=True)
    ]
    df = results_table.validate(pd.DataFrame(rows))
    t = tb.spearman_table(df, st.summarise(df))
    assert list(t.data["far_spearman_best"]) == [True, True, False, False, False, False]
    assert t.latex.count(r"\textbf{") == 2


def test_single_seed_cells_show_mean_only():
    results, _ = make_results(envs=("A",), no_mid=(), seeds=(0,))
    df = results_table.validate(results)
    t = tb.per_env_table(df, st.summarise(df))
    assert tb.SINGLE_SEED_NOTE in t.caption
    assert all("±" not in c for r in _md_rows(t.markdown) for c in r[2:])
    assert t.data["id_rmse_std"].isna().all()


def test_hparams_table(built):
    df, _, tables = built
    t = tables["hparams"]
    methods = st.methods_present(df)
    assert list(t.data["env"]) == list(ENVS)
    assert list(t.data.columns[1:]) == methods + [f"{m}_calibration" for m in methods]
    rows = _md_rows(t.markdown)
    assert len(rows) == len(ENVS) and all(len(r) == 1 + len(methods) for r in rows)
    assert rows[0][methods.index("pnc") + 1] == "ps=16, bf=0.1, lreg=0.0001"
    # the synthetic swag and laplace select their variance-calibrated variant
    assert rows[0][methods.index("swag") + 1] == "sws=0.1 + vcal"
    assert (t.data["swag_calibration"] == "vcal").all()
    assert (t.data["pnc_calibration"] == "raw").all() and (t.data["swag"] == "scale=0.1").all()
    assert "bf: P&C per-member bootstrap fraction" in t.caption
    assert "+ vcal: post-hoc variance calibration" in t.caption
    assert r"sws=0.1 + vcal" in t.latex


def test_hparams_table_without_calibration_column():
    results, _ = make_results(envs=("A",), no_mid=(), seeds=(0,), calibrations=("raw",))
    df = results_table.validate(results.drop(columns="calibration"))
    assert (df["calibration"] == "raw").all()
    t = tb.hparams_table(df)
    assert "vcal" not in t.markdown and "vcal" not in t.caption


@pytest.mark.parametrize(
    "config,expected",
    [
        ("sigma=16,bootstrap_frac=0.1,ridge=0.0001", "ps=16, bf=0.1, lreg=0.0001"),
        ("default", "default"),
        ("", "default"),
        ("n_members=5", "n=5"),
        ("new_knob=3", "new_knob=3"),
    ],
)
def test_abbreviate_config(config, expected):
    assert tb.abbreviate_config(config) == expected


def test_latex_escape_and_number_format():
    assert render.latex_escape("P&C_x 50% ±") == r"P\&C\_x 50\% $\pm$"
    assert render.fmt(-0.123, 2, "$-$") == "$-$0.12"
    assert render.fmt(-0.001, 2) == "0.00"  # no negative zero
    assert render.decimals_for(0.00612) == 5 and render.decimals_for(51.8) == 3


def test_write_tables(tmp_path, built):
    _, _, tables = built
    paths = render.write_tables(list(tables.values()), tmp_path)
    assert len(paths) == len(tb.TABLE_NAMES) * len(render.TABLE_FORMATS)
    csv = pd.read_csv(tmp_path / "per_env.csv")
    pd.testing.assert_frame_equal(
        csv[["id_rmse_mean", "far_nll_mean"]],
        tables["per_env"].data[["id_rmse_mean", "far_nll_mean"]],
    )


def test_tables_accept_any_config_label_and_name_the_free_ones(tmp_path):
    """`pnc.report tables` reads nothing out of a `config` label: a user's results CSV whose
    labels are not configuration ids (e.g. "selected") gives every table, the same numbers as
    with ids, and the hparams table shows the labels as given and names them in its caption."""
    from pnc.runtime.io import write_csv

    results, _ = make_results(envs=ENVS, no_mid=("Swimmer-v5",), seeds=(0, 1, 2))
    free = results.copy()
    free["config"] = np.where(free["method"] == "pnc", "selected", "my run")
    write_csv(results, tmp_path / "ids.csv")
    write_csv(free, tmp_path / "free.csv")
    tb.write_tables_and_stats(tmp_path / "ids.csv", tmp_path / "ids")
    tb.write_tables_and_stats(tmp_path / "free.csv", tmp_path / "free")
    for name in ("cross_env", "wilcoxon", "per_env", "spearman"):
        for ext in ("csv", "md", "tex"):
            a = (tmp_path / "ids" / f"{name}.{ext}").read_text()
            assert a == (tmp_path / "free" / f"{name}.{ext}").read_text(), (name, ext)
    hparams = (tmp_path / "free" / "hparams.md").read_text()
    assert "Labels that are not configuration ids are shown as given: my run, selected." in hparams
    assert "| selected |" in hparams or "| selected + vcal |" in hparams
    ids = (tmp_path / "ids" / "hparams.md").read_text()
    assert "not configuration ids" not in ids  # ids are not named


@pytest.mark.parametrize(
    "labels,free", [(["sigma=8,ridge=0.01", "default", "n_members=5"], []),
                    (["selected", "sigma=8", "a,b", "x=1=2"], ["a,b", "selected", "x=1=2"])]
)  # fmt: skip
def test_free_labels(labels, free):
    assert tb.free_labels(labels) == free

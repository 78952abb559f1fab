"""Ranks, ties, wins, Wilcoxon signed-rank and Holm on hand-checked examples; input validation."""

from __future__ import annotations

import itertools
import json
import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests
from synthetic_results import make_results

from pnc.report import stats as st
from pnc.studies.mujoco import results as vocab
from pnc.studies.mujoco import results_table


def _table(
    means: dict[str, dict[str, float]], split="far", metric="nll", seeds=(0,)
) -> pd.DataFrame:
    """Long table with the given per-(env, method) values repeated over ``seeds``."""
    rows = [
        {"env": env, "method": m, "seed": s, "split": split, "metric": metric, "value": v}
        for env, per_method in means.items()
        for m, v in per_method.items()
        for s in seeds
    ]
    return results_table.validate(pd.DataFrame(rows))


# ---------------------------------------------------------------------------------------------
# Ranks, ties and wins
# ---------------------------------------------------------------------------------------------


def test_rank_row_direction_and_average_ties():
    np.testing.assert_array_equal(st.rank_row([3.0, 1.0, 2.0, 2.0], False), [4, 1, 2.5, 2.5])
    np.testing.assert_array_equal(st.rank_row([3.0, 1.0, 2.0, 2.0], True), [1, 4, 2.5, 2.5])


def test_rank_summary_mean_std_and_tied_wins():
    # env A: a and b tie for best; env B: c best; env C: a best.
    ranks = pd.DataFrame(
        {"a": [1.5, 3.0, 1.0], "b": [1.5, 2.0, 3.0], "c": [3.0, 1.0, 2.0]},
        index=["A", "B", "C"],
    )
    out = st.rank_summary(ranks)
    assert out.loc["a", "wins"] == 2 and out.loc["b", "wins"] == 1 and out.loc["c", "wins"] == 1
    assert out["wins"].sum() == 4  # every tied best wins, so wins can exceed the env count
    assert out.loc["a", "mean_rank"] == pytest.approx((1.5 + 3.0 + 1.0) / 3)
    # sample standard deviation (ddof=1), as in the paper's Table 1
    assert out.loc["a", "rank_std"] == pytest.approx(np.std([1.5, 3.0, 1.0], ddof=1))
    assert (out["n_envs"] == 3).all()


def test_ranking_uses_seed_means_excludes_ablation_and_respects_direction():
    six = {m: float(i) for i, m in enumerate(vocab.RANKED_METHODS)}  # deep_ensemble lowest
    df = _table({"E1": six | {"pnc_nocorr": -100.0}}, metric="nll", seeds=(0, 1))
    summary = st.summarise(df)
    ranks = st.rank_methods(summary, "far", "nll", st.methods_present(df, vocab.RANKED_METHODS))
    assert list(ranks.columns) == list(vocab.RANKED_METHODS)  # the ablation is never ranked
    np.testing.assert_array_equal(ranks.loc["E1"].to_numpy(), np.arange(1, 7))
    df_auroc = _table({"E1": six}, metric="auroc")
    ranks = st.rank_methods(st.summarise(df_auroc), "far", "auroc", vocab.RANKED_METHODS)
    np.testing.assert_array_equal(ranks.loc["E1"].to_numpy(), np.arange(6, 0, -1))


def test_rank_on_seed_means_not_single_seeds():
    rows = []
    # method a: seeds 0.0 and 10.0 (mean 5); method b: seeds 4.0 and 4.0 (mean 4) -> b ranks first
    for m, vals in (("deep_ensemble", (0.0, 10.0)), ("pnc", (4.0, 4.0))):
        for s, v in enumerate(vals):
            rows.append(dict(env="E", method=m, seed=s, split="id", metric="rmse", value=v))
    summary = st.summarise(results_table.validate(pd.DataFrame(rows)))
    ranks = st.rank_methods(summary, "id", "rmse", ["deep_ensemble", "pnc"])
    assert ranks.loc["E", "pnc"] == 1 and ranks.loc["E", "deep_ensemble"] == 2
    de = summary[summary.method == "deep_ensemble"].iloc[0]
    assert de["mean"] == 5.0 and de["std"] == pytest.approx(np.std([0, 10], ddof=1))


def test_env_without_mid_split_is_left_out_of_mid_ranks_only():
    results, _ = make_results(envs=("A", "B", "C"), no_mid=("B",), seeds=(0, 1))
    out = st.compute_statistics(results_table.validate(results))
    assert out["ranks"]["mid/spearman"]["n_envs"] == 2
    assert set(out["ranks"]["mid/spearman"]["per_env"]) == {"A", "C"}
    assert out["ranks"]["far/spearman"]["n_envs"] == 3
    assert out["wilcoxon"]["far/spearman"]["n_envs"] == 3


def test_missing_method_in_one_env_is_an_error():
    df = _table({"E1": {"pnc": 1.0, "swag": 2.0}, "E2": {"pnc": 1.0}})
    with pytest.raises(results_table.ResultsError, match=r"E2: swag"):
        st.rank_methods(st.summarise(df), "far", "nll", ["swag", "pnc"])


# ---------------------------------------------------------------------------------------------
# Wilcoxon signed-rank and Holm
# ---------------------------------------------------------------------------------------------


def test_wilcoxon_hand_checked_example():
    # |d| ranks 1..5; the baseline is better only in the env of rank 4: R+ = 11, R- = 4.
    # Exact two-sided p: sign patterns with negative-rank sum <= 4 are {}, {1}, {2}, {3}, {4},
    # {1,2}, {1,3}: 7 of 32, so p = 2 * 7 / 32.
    out = st.wilcoxon_test(np.array([1.0, 2.0, 3.0, -4.0, 5.0]))
    assert out["r_plus"] == 11 and out["r_minus"] == 4 and out["statistic"] == 4
    assert out["p"] == pytest.approx(2 * 7 / 32)
    assert out["test"] == "exact" and out["favours"] == "pnc"
    # enumerate all sign patterns independently
    w_obs = 4
    count = sum(
        1
        for signs in itertools.product((0, 1), repeat=5)
        if min(
            sum(r for r, s in zip(range(1, 6), signs, strict=True) if s),
            sum(r for r, s in zip(range(1, 6), signs, strict=True) if not s),
        )
        <= w_obs
    )
    assert out["p"] == pytest.approx(count / 32)


def test_wilcoxon_zero_differences_are_dropped_and_all_zero_gives_p_one():
    out = st.wilcoxon_test(np.array([0.0, 1.0, 2.0, 3.0]))
    assert out["n_nonzero"] == 3 and out["p"] == pytest.approx(2 / 2**3)
    zero = st.wilcoxon_test(np.zeros(4))
    assert zero["n_nonzero"] == 0 and zero["p"] == 1.0 and zero["favours"] is None


def test_wilcoxon_ties_use_exact_permutation_distribution():
    d = np.array([1.0, 1.0, 2.0, -3.0, 4.0])
    out = st.wilcoxon_test(d)
    assert out["test"].startswith("exact permutation")
    ranks = sps.rankdata(np.abs(d))
    r_plus = ranks[d > 0].sum()
    # enumerate the 2**5 sign flips of the tied ranks: two-sided p = P(|R+ - mean| >= observed)
    sums = [
        sum(r for r, s in zip(ranks, signs, strict=True) if s)
        for signs in itertools.product((0, 1), repeat=5)
    ]
    centre = ranks.sum() / 2
    p = np.mean([abs(s - centre) >= abs(r_plus - centre) - 1e-12 for s in sums])
    assert out["p"] == pytest.approx(p)


@pytest.mark.parametrize("n", [2, 5, 8, 9])
def test_tied_wilcoxon_gives_scipys_permutation_p_value_bit_for_bit(n):
    """The sign-flip p-value is the number scipy's wilcoxon (method "auto", ties) computes."""
    rng = np.random.default_rng(n)
    for _ in range(3):
        d = rng.integers(-3, 4, size=n).astype(float) / 4  # ties, zeros and both signs
        d[d == 0] = 0.25
        d[0] = -d[1] if n > 1 else d[0]  # at least one tie of the absolute values
        out = st.wilcoxon_test(d)
        expected = sps.wilcoxon(d, zero_method="wilcox", alternative="two-sided", method="auto")
        assert out["test"].startswith("exact permutation"), out
        assert out["p"] == float(expected.pvalue), (d, out["p"], expected.pvalue)
        assert out["statistic"] == float(expected.statistic)


def test_sign_flip_p_value_refuses_too_many_pairs():
    with pytest.raises(ValueError, match="too many"):
        st.sign_flip_pvalue(np.arange(1.0, 22.0), 5.0)


def _holm_by_hand(p):
    p = np.asarray(p, float)
    order = np.argsort(p)
    m = p.size
    adj = np.empty(m)
    running = 0.0
    for i, idx in enumerate(order):
        running = max(running, (m - i) * p[idx])
        adj[idx] = min(1.0, running)
    return adj


def test_holm_matches_hand_computation_and_statsmodels():
    p = [0.01, 0.04, 0.03, 0.005]
    # sorted 0.005, 0.01, 0.03, 0.04 -> 4*0.005, 3*0.01, max(.., 2*0.03), max(.., 1*0.04)
    expected = np.array([0.03, 0.06, 0.06, 0.02])
    reject, adjusted = st.holm(p, 0.05)
    np.testing.assert_allclose(adjusted, expected)
    np.testing.assert_allclose(_holm_by_hand(p), expected)
    np.testing.assert_array_equal(reject, [True, False, False, True])
    rng = np.random.default_rng(1)
    for _ in range(4):
        q = rng.uniform(0, 0.2, size=5)
        np.testing.assert_allclose(st.holm(q)[1], _holm_by_hand(q))
    # the same numbers as statsmodels, bit for bit, with ties, ones and the rejection boundary
    cases = [rng.uniform(0, 0.1, size=m) for m in (1, 3, 6, 10)]
    cases += [np.array([0.01, 0.01, 0.0125, 0.5, 1.0]), np.array([0.0125, 0.0125 + 1e-17, 0.9])]
    for q in cases:
        ref_reject, ref_adjusted, _, _ = multipletests(q, alpha=0.05, method="holm")
        reject, adjusted = st.holm(q, 0.05)
        np.testing.assert_array_equal(reject, ref_reject)
        np.testing.assert_array_equal(adjusted, ref_adjusted)


def test_min_attainable_p_and_the_eight_environment_threshold():
    for n in range(1, 12):
        assert st.min_wilcoxon_p(n) == pytest.approx(2.0 ** (1 - n))
    # five baselines: 7 envs cannot reach 0.05 after Holm, 8 can
    assert st.min_holm_p(7, 5) == pytest.approx(0.078125)
    assert st.min_holm_p(8, 5) == pytest.approx(0.0390625)
    assert st.min_envs_for_significance(5, 0.05) == 8
    assert st.min_envs_for_significance(1, 0.05) == 6


def _dominant(n_envs: int, pnc_better: bool) -> pd.DataFrame:
    """P&C better (or worse) than every baseline in every env by distinct margins."""
    means = {}
    for e in range(n_envs):
        per = {m: 10.0 + i + 0.1 * e for i, m in enumerate(vocab.RANKED_METHODS[:-1])}
        per["pnc"] = 10.0 - (1.0 + 0.37 * e) if pnc_better else 30.0 + 0.37 * e
        means[f"E{e}"] = per
    return _table(means, metric="nll")


@pytest.mark.parametrize("pnc_better,arrow", [(True, "up"), (False, "down")])
def test_arrows_with_eight_envs_and_none_with_seven(pnc_better, arrow):
    out8 = st.compute_statistics(_dominant(8, pnc_better))["wilcoxon"]["far/nll"]
    assert out8["significance_attainable"]
    for t in out8["tests"].values():
        assert t["p"] == pytest.approx(2.0**-7)
        assert t["p_holm"] == pytest.approx(5 * 2.0**-7)
        assert t["significant"] and t["arrow"] == arrow
    out7 = st.compute_statistics(_dominant(7, pnc_better))["wilcoxon"]["far/nll"]
    assert not out7["significance_attainable"]
    assert out7["min_attainable_p_holm"] == pytest.approx(0.078125)
    assert all(not t["significant"] and t["arrow"] is None for t in out7["tests"].values())


def test_arrow_orientation_for_higher_is_better_metric():
    means = {}
    for e in range(9):
        per = {m: 0.5 + 0.01 * i for i, m in enumerate(vocab.RANKED_METHODS[:-1])}
        per["pnc"] = 0.9 + 0.001 * e  # higher AUROC: P&C better
        means[f"E{e}"] = per
    out = st.compute_statistics(_table(means, metric="auroc"))["wilcoxon"]["far/auroc"]
    assert all(t["arrow"] == "up" for t in out["tests"].values())


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def results() -> pd.DataFrame:
    return make_results(envs=("A", "B"), no_mid=("B",), seeds=(0, 1))[0]


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda d: d.drop(columns="metric"), r"lacks required column\(s\) \['metric'\]"),
        (lambda d: d.assign(split=d.split.replace("far", "faraway")), r"unknown split.*faraway"),
        (lambda d: d.assign(metric=d.metric.replace("nll", "loss")), r"unknown metric.*loss"),
        (lambda d: d.assign(method=d.method.replace("swag", "sgld")), r"unknown method.*sgld"),
        (lambda d: d.assign(value=d.value.where(d.index != 3)), r"non-finite.*env=A"),
        (lambda d: pd.concat([d, d.iloc[:1]]), r"duplicated measurements"),
        (
            lambda d: d.assign(config=np.where(d.index == 0, "other", d.config)),
            r"one configuration per \(env, method\)",
        ),
        (lambda d: d.assign(data_source="gym"), r"unknown data_source"),
    ],
)
def test_bad_input_raises_naming_the_problem(results, mutate, message):
    with pytest.raises(results_table.ResultsError, match=message):
        results_table.validate(mutate(results.copy()))


def test_optional_columns_default_and_val_rows_are_ignored(results):
    bare = results[list(vocab.REQUIRED_COLUMNS)].copy()
    val = bare[bare.split == "id"].assign(split="val")
    df = results_table.validate(pd.concat([bare, val]))
    assert (df["config"] == "default").all() and (df["data_source"] == "unspecified").all()
    assert "val" not in set(df["split"]) and len(df) == len(bare)


def test_wilcoxon_normal_approximation_with_ties_by_hand():
    """More than 13 pairs with tied |differences|: the normal approximation, with the tie
    correction of the variance and no continuity correction, computed here from the ranks."""
    d = np.array(
        [1.0, -1.0, 2.0, 2.0, 3.0, -3.0, 4.0, 5.0, 5.0, 5.0, 6.0, 7.0, -8.0, 9.0, 10.0, 0.0]
    )
    out = st.wilcoxon_test(d)
    nonzero = d[d != 0]
    n = nonzero.size
    assert n == 15 and out["n_nonzero"] == 15
    assert out["test"] == "normal approximation (tied |differences|)"
    # midranks of |d|: 1,1 -> 1.5; 2,2 -> 3.5; 3,3 -> 5.5; 4 -> 7; 5,5,5 -> 9; 6 -> 11; 7 -> 12 ...
    ranks = np.array([1.5, 1.5, 3.5, 3.5, 5.5, 5.5, 7, 9, 9, 9, 11, 12, 13, 14, 15])
    r_plus = ranks[nonzero > 0].sum()
    r_minus = ranks[nonzero < 0].sum()
    assert (out["r_plus"], out["r_minus"]) == (r_plus, r_minus) == (100.0, 20.0)
    ties = np.array([2, 2, 2, 3])  # group sizes of tied |d|
    var = n * (n + 1) * (2 * n + 1) / 24 - np.sum(ties**3 - ties) / 48
    z = (min(r_plus, r_minus) - n * (n + 1) / 4) / np.sqrt(var)
    assert out["p"] == pytest.approx(2 * sps.norm.cdf(z), rel=1e-9)
    assert out["favours"] == "pnc"


# ---------------------------------------------------------------------------------------------
# Order of the summary and mean tables
# ---------------------------------------------------------------------------------------------


def _long(rows, data_source=None) -> pd.DataFrame:
    """Validated long table from ``(env, method, split, metric, {seed: value})`` tuples."""
    records = [
        {"env": env, "method": m, "seed": s, "split": split, "metric": metric, "value": v}
        | ({"data_source": data_source[env]} if data_source else {})
        for env, m, split, metric, per_seed in rows
        for s, v in per_seed.items()
    ]
    return results_table.validate(pd.DataFrame(records))


def test_summary_and_mean_table_keep_the_order_of_first_appearance():
    # environments and methods deliberately out of alphabetical order
    df = _long(
        [
            ("Walker", "swag", "far", "nll", {0: 1.0, 1: 3.0}),
            ("Walker", "deep_ensemble", "far", "nll", {0: 5.0, 1: 5.0}),
            ("Ant", "swag", "far", "nll", {0: 2.0, 1: 2.0}),
            ("Ant", "deep_ensemble", "far", "nll", {0: 0.0, 1: 4.0}),
        ]
    )
    summary = st.summarise(df)
    assert list(zip(summary.env, summary.method, strict=True)) == [
        ("Walker", "swag"),
        ("Walker", "deep_ensemble"),
        ("Ant", "swag"),
        ("Ant", "deep_ensemble"),
    ]
    assert list(summary["mean"]) == [2.0, 5.0, 2.0, 2.0]
    # sample std of (1, 3) and (0, 4): sqrt(2) and sqrt(8)
    np.testing.assert_allclose(summary["std"], [np.sqrt(2.0), 0.0, 0.0, np.sqrt(8.0)])
    assert list(summary["n_seeds"]) == [2, 2, 2, 2]
    table = st.mean_table(summary, "far", "nll", ["deep_ensemble", "swag"])
    assert list(table.index) == ["Walker", "Ant"]
    assert list(table.columns) == ["deep_ensemble", "swag"]
    np.testing.assert_array_equal(table.to_numpy(), [[5.0, 2.0], [2.0, 2.0]])


def test_missing_method_error_names_the_split_and_metric():
    df = _table({"E1": {"pnc": 1.0, "swag": 2.0}, "E2": {"pnc": 1.0}}, split="mid", metric="auroc")
    with pytest.raises(
        results_table.ResultsError,
        match=r"^mid/auroc is missing for method\(s\) in env\(s\): \['E2: swag'\]$",
    ):
        st.mean_table(st.summarise(df), "mid", "auroc", ["swag", "pnc"])


def test_rank_row_reads_the_values_as_floats():
    # unsigned integers: negating them in their own type would wrap around (0 stays 0, 1 -> 255)
    values = np.array([0, 1, 2], dtype=np.uint8)
    np.testing.assert_array_equal(st.rank_row(values, True), [3, 2, 1])
    np.testing.assert_array_equal(st.rank_row(values, False), [1, 2, 3])


def test_wins_are_integers():
    ranks = pd.DataFrame({"a": [1.0, 2.0], "b": [2.0, 1.0]}, index=["A", "B"])
    wins = st.rank_summary(ranks)["wins"]
    assert wins.dtype.kind == "i" and list(wins) == [1, 1]


# ---------------------------------------------------------------------------------------------
# Attainable p-values
# ---------------------------------------------------------------------------------------------


def test_min_attainable_p_edges():
    # no pairs: no test, p = 1
    assert st.min_wilcoxon_p(0) == 1.0 and st.min_wilcoxon_p(-3) == 1.0
    # beyond 50 pairs scipy's default switches to the normal approximation; this stays exact
    for n in (51, 52, 53):
        assert st.min_wilcoxon_p(n) == pytest.approx(2.0 ** (1 - n), rel=1e-9)
    # Holm-adjusted p-values are capped at 1: 5 x 1 and 5 x 1/2
    assert st.min_holm_p(1, 5) == 1.0 and st.min_holm_p(2, 5) == 1.0 and st.min_holm_p(0, 3) == 1.0
    assert st.min_holm_p(3, 1) == 0.25
    # no comparison to correct: one environment suffices
    assert st.min_envs_for_significance(0) == 1
    # alpha equal to the attainable minimum counts as reachable (p <= alpha)
    assert st.min_envs_for_significance(1, 2.0**-4) == 5  # 2^(1-5)
    assert st.min_envs_for_significance(5, 5 * 2.0**-7) == 8
    # alpha = 0.01, five baselines: 5 x 2^-8 = 0.0195 > 0.01 >= 5 x 2^-9 = 0.00977
    assert st.min_envs_for_significance(5, 0.01) == 10


def test_significance_note_text():
    assert st.significance_note(7, 5) == (
        "With 7 environment(s) and 5 baseline(s), the smallest Holm-adjusted p-value a two-sided "
        "exact Wilcoxon signed-rank test can reach is min(1, 5 x 2^(1-7)) = 0.0781 > alpha = 0.05 "
        "(all differences of one sign); at least 8 environments are needed, so no comparison can "
        "be significant and no arrows are shown."
    )
    # 5 x 2^-8 = 0.01953; with alpha = 0.01 ten environments are needed (5 x 2^-9 = 0.00977)
    note = st.significance_note(9, 5, 0.01)
    assert "min(1, 5 x 2^(1-9)) = 0.0195 > alpha = 0.01 " in note
    assert "at least 10 environments are needed" in note


# ---------------------------------------------------------------------------------------------
# Wilcoxon signed-rank: edge cases
# ---------------------------------------------------------------------------------------------


def test_wilcoxon_all_zero_result_in_full():
    assert st.wilcoxon_test(np.zeros(3)) == {
        "n_nonzero": 0,
        "statistic": None,
        "r_plus": 0.0,
        "r_minus": 0.0,
        "p": 1.0,
        "test": "none (all differences zero)",
        "favours": None,
    }


def test_wilcoxon_reads_object_arrays_as_floats():
    # |d| ranks 1..4, baseline better at rank 3: R+ = 7, R- = 3; subsets of {1,2,3,4} with sum <= 3
    # are {}, {1}, {2}, {3}, {1,2}: p = 2 * 5 / 16
    out = st.wilcoxon_test(np.array([1.0, 2, -3, 4, 0], dtype=object))
    assert out == {
        "n_nonzero": 4,
        "statistic": 3.0,
        "r_plus": 7.0,
        "r_minus": 3.0,
        "p": pytest.approx(0.625),
        "test": "exact",
        "favours": "pnc",
    }


def test_wilcoxon_favours_follows_the_rank_sums():
    # R+ = 1 + 2 = 3 = R-: no side; subsets of {1,2,3} with sum <= 3: 5 of 8, p = min(1, 10/8)
    even = st.wilcoxon_test(np.array([1.0, 2.0, -3.0]))
    assert (even["r_plus"], even["r_minus"], even["favours"]) == (3.0, 3.0, None)
    assert even["p"] == 1.0
    tied = st.wilcoxon_test(np.array([1.0, -1.0]))
    assert (tied["r_plus"], tied["r_minus"], tied["favours"]) == (1.5, 1.5, None)
    worse = st.wilcoxon_test(np.array([-1.0, -2.0, 3.0, -4.0]))
    assert (worse["r_plus"], worse["r_minus"], worse["favours"]) == (3.0, 7.0, "baseline")


def _exact_permutation_p(d: np.ndarray) -> float:
    """Two-sided p of the signed-rank statistic by enumerating every sign flip of the midranks."""
    ranks = sps.rankdata(np.abs(d))
    signs = (np.arange(2**d.size)[:, None] >> np.arange(d.size)) & 1  # every 0/1 sign pattern
    sums = signs @ ranks
    centre = ranks.sum() / 2
    observed = abs(ranks[d > 0].sum() - centre)
    return float(np.mean(np.abs(sums - centre) >= observed - 1e-9))


def test_wilcoxon_tied_thirteen_pairs_exact_fourteen_normal():
    d13 = np.array([1.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, -11.0, -12.0])
    out = st.wilcoxon_test(d13)
    assert out["n_nonzero"] == 13
    assert out["test"] == "exact permutation (tied |differences|)"
    assert out["p"] == pytest.approx(_exact_permutation_p(d13), rel=1e-9)
    d14 = np.append(d13, 13.0)
    out = st.wilcoxon_test(d14)
    assert out["n_nonzero"] == 14
    assert out["test"] == "normal approximation (tied |differences|)"
    n = 14
    r_minus = 12.0 + 13.0  # midranks of |d|: 1, 1 -> 1.5; 2 -> 3; ...; 11 -> 12; 12 -> 13
    assert out["r_minus"] == r_minus and out["r_plus"] == n * (n + 1) / 2 - r_minus
    var = n * (n + 1) * (2 * n + 1) / 24 - (2**3 - 2) / 48  # one pair of tied |d|
    z = (r_minus - n * (n + 1) / 4) / np.sqrt(var)
    assert out["p"] == pytest.approx(2 * sps.norm.cdf(z), rel=1e-9)


def test_wilcoxon_exact_beyond_fifty_distinct_pairs():
    # 52 distinct |d| = 1..52, the baseline better at every third: R- = 3 (1 + ... + 17) = 459
    d = np.arange(1.0, 53.0)
    d[2::3] *= -1
    out = st.wilcoxon_test(d)
    assert out["test"] == "exact" and out["r_minus"] == 459.0 and out["statistic"] == 459.0
    # exact null distribution of the rank sum: number of subsets of {1..52} with each sum
    counts = [1] + [0] * (52 * 53 // 2)
    for r in range(1, 53):
        for s in range(len(counts) - 1, r - 1, -1):
            counts[s] += counts[s - r]
    p = 2 * sum(counts[:460]) / 2**52
    assert out["p"] == pytest.approx(p, rel=1e-9)


# ---------------------------------------------------------------------------------------------
# Holm: edge cases
# ---------------------------------------------------------------------------------------------


def test_holm_edge_cases():
    reject, adjusted = st.holm([])
    assert reject.shape == (0,) and reject.dtype == bool
    assert adjusted.shape == (0,) and adjusted.dtype == np.float64
    # one comparison: nothing to correct
    reject, adjusted = st.holm([0.03])
    np.testing.assert_array_equal(reject, [True])
    np.testing.assert_array_equal(adjusted, [0.03])
    # the level is the one given: adjusted 0.03, 0.06, 0.06, 0.02 all <= 0.1
    reject, adjusted = st.holm([0.01, 0.04, 0.03, 0.005], alpha=0.1)
    np.testing.assert_array_equal(reject, [True, True, True, True])
    # p-values given as integers (1 for an all-zero comparison) give float adjusted p-values
    reject, adjusted = st.holm([1, 0, 1])
    assert adjusted.dtype == np.float64
    np.testing.assert_array_equal(adjusted, [1.0, 0.0, 1.0])
    np.testing.assert_array_equal(reject, [False, True, False])


# ---------------------------------------------------------------------------------------------
# Comparisons against the reference
# ---------------------------------------------------------------------------------------------


def _six_envs() -> pd.DataFrame:
    """Far NLL in six environments: ``swag - pnc`` = 1, 2, 3, -4, 5, 6 (the baseline better once)
    and ``laplace - pnc`` = 1..6 (P&C better everywhere)."""
    means = {}
    for e, gap in enumerate([1.0, 2.0, 3.0, -4.0, 5.0, 6.0]):
        means[f"E{e}"] = {"swag": 10.0 + gap, "laplace": 10.0 + (e + 1.0), "pnc": 10.0}
    return _table(means, metric="nll")


def test_compare_to_reference_values():
    summary = st.summarise(_six_envs())
    out = st.compare_to_reference(summary, "far", "nll", ["swag", "laplace", "pnc"])
    assert {k: v for k, v in out.items() if k != "tests"} == {
        "n_envs": 6,
        "n_comparisons": 2,
        "alpha": 0.05,
        "min_attainable_p_holm": pytest.approx(2 * 2.0**-5),
        "significance_attainable": False,  # 0.0625 > 0.05
    }
    swag, laplace = out["tests"]["swag"], out["tests"]["laplace"]
    # swag: R- = 4 (the rank of |-4|); subsets of {1..6} with sum <= 4: {}, 1, 2, 3, 4, 12, 13
    assert (swag["r_plus"], swag["r_minus"], swag["statistic"]) == (17.0, 4.0, 4.0)
    assert swag["p"] == pytest.approx(2 * 7 / 64)
    assert (laplace["r_plus"], laplace["r_minus"]) == (21.0, 0.0)
    assert laplace["p"] == pytest.approx(2 / 64)
    # Holm by hand: 2 x 1/32 = 0.0625, then max(0.0625, 1 x 0.21875)
    assert laplace["p_holm"] == pytest.approx(0.0625)
    assert swag["p_holm"] == pytest.approx(0.21875)
    assert not laplace["significant"] and laplace["arrow"] is None
    # at alpha = 0.1 the Holm-adjusted 0.0625 is significant
    out = st.compare_to_reference(summary, "far", "nll", ["swag", "laplace", "pnc"], alpha=0.1)
    assert out["alpha"] == 0.1 and out["significance_attainable"]
    assert out["tests"]["laplace"]["significant"] and out["tests"]["laplace"]["arrow"] == "up"
    assert not out["tests"]["swag"]["significant"] and out["tests"]["swag"]["arrow"] is None


def test_compare_to_reference_one_and_no_baseline():
    summary = st.summarise(_six_envs())
    one = st.compare_to_reference(summary, "far", "nll", ["laplace", "pnc"])
    # one comparison: 2^(1-6) = 0.03125 <= 0.05, reached by laplace
    assert one["n_comparisons"] == 1 and one["significance_attainable"]
    assert one["min_attainable_p_holm"] == pytest.approx(2.0**-5)
    assert one["tests"]["laplace"]["p_holm"] == pytest.approx(2.0**-5)
    assert one["tests"]["laplace"]["arrow"] == "up"
    none = st.compare_to_reference(summary, "far", "nll", ["pnc"])
    assert none["n_comparisons"] == 0 and none["tests"] == {}
    assert not none["significance_attainable"]


def test_significance_attainable_when_min_p_equals_alpha():
    summary = st.summarise(_dominant(8, True))
    alpha = 5 * 2.0**-7  # exactly the smallest Holm-adjusted p with 8 envs and 5 baselines
    out = st.compare_to_reference(summary, "far", "nll", vocab.RANKED_METHODS, alpha=alpha)
    assert out["significance_attainable"]
    assert all(t["significant"] and t["arrow"] == "up" for t in out["tests"].values())


# ---------------------------------------------------------------------------------------------
# compute_statistics: the JSON record
# ---------------------------------------------------------------------------------------------


def test_compute_statistics_record():
    # Walker (3 seeds, minari) before Ant (2 seeds, offline); pnc_nocorr is carried, never ranked
    rows = []
    for env, seeds in (("Walker", (0, 1, 2)), ("Ant", (0, 1))):
        for split, metric, vals in (
            ("far", "nll", {"swag": 2.0, "pnc": 1.0, "pnc_nocorr": 0.5}),
            ("id", "rmse", {"swag": 1.0, "pnc": 3.0, "pnc_nocorr": 9.0}),
        ):
            if env == "Ant" and metric == "rmse":
                vals = {"swag": 1.0, "pnc": 1.0, "pnc_nocorr": 9.0}  # tie: both win
            for m, v in vals.items():
                rows.append((env, m, split, metric, {s: v + s for s in seeds}))
    df = _long(rows, data_source={"Walker": "minari", "Ant": "offline"})
    out = st.compute_statistics(df)
    assert json.loads(json.dumps(out, allow_nan=False)) == out
    assert list(out) == [
        "alpha",
        "reference",
        "tie_rule",
        "std",
        "envs",
        "data_sources",
        "seeds",
        "methods",
        "ranked_methods",
        "summary",
        "ranks",
        "wilcoxon",
    ]
    assert out["alpha"] == 0.05 and out["reference"] == "pnc"
    assert out["tie_rule"] == "every method tied for the best rank counts a win"
    assert out["std"] == "sample standard deviation over seeds (ddof=1); null where a single seed"
    assert out["envs"] == ["Walker", "Ant"]
    assert list(out["data_sources"].items()) == [("Walker", "minari"), ("Ant", "offline")]
    assert list(out["seeds"].items()) == [("Walker", 3), ("Ant", 2)]
    assert all(type(v) is int for v in out["seeds"].values())
    assert out["methods"] == ["swag", "pnc", "pnc_nocorr"]
    assert out["ranked_methods"] == ["swag", "pnc"]
    assert len(out["summary"]) == 2 * 3 * 2
    first = out["summary"][0]
    assert first == {
        "env": "Walker",
        "method": "swag",
        "config": "default",
        "calibration": "raw",
        "split": "far",
        "metric": "nll",
        "mean": 3.0,  # 2 + mean of seeds 0, 1, 2
        "std": 1.0,
        "n_seeds": 3,
    }
    assert list(out["ranks"]) == ["id/rmse", "far/nll"]  # split order of the study, then metric
    nll = out["ranks"]["far/nll"]
    assert nll == {
        "per_env": {"Walker": {"swag": 2.0, "pnc": 1.0}, "Ant": {"swag": 2.0, "pnc": 1.0}},
        "mean_rank": {"swag": 2.0, "pnc": 1.0},
        "rank_std": {"swag": 0.0, "pnc": 0.0},
        "wins": {"swag": 0, "pnc": 2},
        "n_envs": 2,
        "higher_is_better": False,
    }
    rmse = out["ranks"]["id/rmse"]
    assert rmse["per_env"] == {
        "Walker": {"swag": 1.0, "pnc": 2.0},
        "Ant": {"swag": 1.5, "pnc": 1.5},
    }
    assert rmse["mean_rank"] == {"swag": 1.25, "pnc": 1.75}
    assert rmse["rank_std"]["swag"] == pytest.approx(np.sqrt(0.125))  # (1, 1.5), ddof=1
    assert rmse["wins"] == {"swag": 2, "pnc": 1}
    assert all(type(v) is int for v in rmse["wins"].values())
    # tests only for the headline pairs present: id/rmse and far/nll
    assert set(out["wilcoxon"]) == {"id/rmse", "far/nll"}
    w = out["wilcoxon"]["far/nll"]
    assert (w["n_envs"], w["n_comparisons"], w["alpha"]) == (2, 1, 0.05)
    assert w["min_attainable_p_holm"] == 0.5 and not w["significance_attainable"]
    assert w["tests"]["swag"]["r_plus"] == 3.0 and w["tests"]["swag"]["p"] == 0.5


def test_compute_statistics_tests_only_headline_pairs_with_pnc_and_a_baseline():
    def stats_of(methods, split="far", metric="nll", **kw):
        means = {f"E{e}": {m: float(i + e) for i, m in enumerate(methods)} for e in range(3)}
        return st.compute_statistics(_table(means, split=split, metric=metric), **kw)

    # no ranked method: nothing is ranked or tested, the rest is still recorded
    out = stats_of(["pnc_nocorr"])
    assert out["ranks"] == {} and out["wilcoxon"] == {} and out["methods"] == ["pnc_nocorr"]
    # P&C alone: ranked, not tested
    out = stats_of(["pnc"])
    assert out["ranks"]["far/nll"]["wins"] == {"pnc": 3} and out["wilcoxon"] == {}
    # baselines without P&C: ranked, not tested
    out = stats_of(["swag", "laplace"])
    assert out["ranks"]["far/nll"]["mean_rank"] == {"swag": 1.0, "laplace": 2.0}
    assert out["wilcoxon"] == {}
    # P&C and one baseline: tested
    out = stats_of(["swag", "pnc"])
    assert list(out["wilcoxon"]) == ["far/nll"]
    assert out["wilcoxon"]["far/nll"]["tests"]["swag"]["favours"] == "baseline"
    # not a headline pair: ranked, not tested
    out = stats_of(["swag", "pnc"], split="mid", metric="nll")
    assert list(out["ranks"]) == ["mid/nll"] and out["wilcoxon"] == {}


def test_compute_statistics_uses_the_given_alpha():
    out = st.compute_statistics(_six_envs(), alpha=0.1)
    assert out["alpha"] == 0.1
    w = out["wilcoxon"]["far/nll"]
    assert w["alpha"] == 0.1 and w["significance_attainable"]
    assert w["tests"]["laplace"]["p_holm"] == pytest.approx(0.0625)
    assert w["tests"]["laplace"]["significant"] and w["tests"]["laplace"]["arrow"] == "up"


def test_clean_makes_strict_json():
    raw = {
        1: [np.int64(2), (np.float64(1.5), float("nan"))],
        "b": np.bool_(True),
        "c": np.float32("nan"),
        "d": "x",
        "e": None,
    }
    out = st._clean(raw)
    assert out == {"1": [2, [1.5, None]], "b": True, "c": None, "d": "x", "e": None}
    assert type(out["1"][0]) is int and type(out["1"][1][0]) is float and out["b"] is True
    # one environment: the rank standard deviation is undefined and written as null
    single = st.compute_statistics(_table({"E": {"swag": 1.0, "pnc": 2.0}}))
    assert single["ranks"]["far/nll"]["rank_std"] == {"swag": None, "pnc": None}


# ---------------------------------------------------------------------------------------------
# substitute_methods
# ---------------------------------------------------------------------------------------------


def _with_mixture() -> pd.DataFrame:
    return _table(
        {
            "E1": {"deep_ensemble": 1.0, "pnc": 2.0, "deep_ensemble_mixture": 3.0},
            "E2": {"deep_ensemble_mixture": 6.0, "deep_ensemble": 4.0, "pnc": 5.0},
        }
    )


def test_substitute_methods_replaces_the_target_rows_by_the_source_rows():
    df = _with_mixture()
    before = df.copy()
    out = st.substitute_methods(df, {"deep_ensemble": "deep_ensemble_mixture"})
    pd.testing.assert_frame_equal(df, before)  # the input is left alone
    assert list(out.columns) == list(df.columns)
    pd.testing.assert_index_equal(out.index, pd.RangeIndex(4))
    assert list(zip(out.env, out.method, out.value, strict=True)) == [
        ("E1", "pnc", 2.0),
        ("E1", "deep_ensemble", 3.0),
        ("E2", "deep_ensemble", 6.0),
        ("E2", "pnc", 5.0),
    ]
    pd.testing.assert_frame_equal(st.substitute_methods(df, {}), df)


@pytest.mark.parametrize(
    "substitutions,message",
    [
        (
            {"swag": "laplace"},
            "target method 'swag' has no rows; source method 'laplace' has no rows",
        ),
        ({"deep_ensemble": "swag"}, "source method 'swag' has no rows"),
        (
            {"deep_ensemble": "pnc", "pnc": "deep_ensemble_mixture"},
            "a method is both a target and a source",
        ),
        (
            {"deep_ensemble": "deep_ensemble_mixture", "pnc": "deep_ensemble_mixture"},
            "a source method serves two targets",
        ),
    ],
)
def test_substitute_methods_refuses_naming_every_problem(substitutions, message):
    with pytest.raises(
        ValueError, match="^" + re.escape("cannot substitute methods: " + message) + "$"
    ):
        st.substitute_methods(_with_mixture(), substitutions)

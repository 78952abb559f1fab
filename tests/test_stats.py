"""Ranks, ties, wins, Wilcoxon signed-rank and Holm on hand-checked examples; input validation."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from synthetic_results import make_results

from pnc.report import stats as st
from pnc.study import results as vocab


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
    return vocab.validate(pd.DataFrame(rows))


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
    summary = st.summarise(vocab.validate(pd.DataFrame(rows)))
    ranks = st.rank_methods(summary, "id", "rmse", ["deep_ensemble", "pnc"])
    assert ranks.loc["E", "pnc"] == 1 and ranks.loc["E", "deep_ensemble"] == 2
    de = summary[summary.method == "deep_ensemble"].iloc[0]
    assert de["mean"] == 5.0 and de["std"] == pytest.approx(np.std([0, 10], ddof=1))


def test_env_without_mid_split_is_left_out_of_mid_ranks_only():
    results, _ = make_results(envs=("A", "B", "C"), no_mid=("B",), seeds=(0, 1))
    out = st.compute_statistics(vocab.validate(results))
    assert out["ranks"]["mid/spearman"]["n_envs"] == 2
    assert set(out["ranks"]["mid/spearman"]["per_env"]) == {"A", "C"}
    assert out["ranks"]["far/spearman"]["n_envs"] == 3
    assert out["wilcoxon"]["far/spearman"]["n_envs"] == 3


def test_missing_method_in_one_env_is_an_error():
    df = _table({"E1": {"pnc": 1.0, "swag": 2.0}, "E2": {"pnc": 1.0}})
    with pytest.raises(vocab.ResultsError, match=r"E2: swag"):
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
    with pytest.raises(vocab.ResultsError, match=message):
        vocab.validate(mutate(results.copy()))


def test_optional_columns_default_and_val_rows_are_ignored(results):
    bare = results[list(vocab.REQUIRED_COLUMNS)].copy()
    val = bare[bare.split == "id"].assign(split="val")
    df = vocab.validate(pd.concat([bare, val]))
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

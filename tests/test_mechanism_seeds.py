"""The mechanism table on several seeds (pnc.report.mechanism_table): every point evidence per
seed, its mean and spread over the seeds, and the mechanism claims (pnc.report.claims) judged on
every seed; one seed keeps the pooled table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pnc.report import mechanism_claims, verdicts
from pnc.report import mechanism_table as rm
from pnc.studies.mujoco.mechanism_columns import MECHANISM_COLUMNS

#: The 3B slope of each seed's synthetic points.
SLOPES = {0: 2.0, 1: 3.0, 2: 4.0}


def _points(env: str, seed: int, slope: float, n: int = 200) -> list[pd.DataFrame]:
    """One seed's points: D linear in log10 distance (``slope``), proportional to the sketch,
    the OOD score's parts, input distances, and the members' ||dh|| / ||dy||."""
    rng = np.random.default_rng(seed)
    frames = []
    for split, off in (("id", 0.5), ("far", 2.0)):
        dist = 10 ** rng.uniform(0, 2, n)
        values = {
            "disagreement": off + slope * np.log10(dist) + 0.05 * rng.normal(size=n),
            "mahalanobis": dist,
            "input_distance": dist * (1.0 if split == "id" else 3.0),
            "score_aleatoric": rng.uniform(1, 2, n),
            "score_epistemic": rng.uniform(0, 1, n) + (5.0 if split == "far" else 0.0),
        }
        values["sketch_probe"] = values["sketch_analytic"] = values["disagreement"] + 10.0
        for q, v in values.items():
            frames.append(pd.DataFrame({"env": env, "seed": seed, "split": split,
                                        "point": np.arange(n), "method": "pnc", "member": -1,
                                        "quantity": q, "value": v}))  # fmt: skip
        for method, far_dy in (("pnc", 0.4), ("pnc_nocorr", 0.1)):
            for member in range(3):
                for q, v in (("dh", 1.0), ("dy", 0.1 if split == "id" else far_dy)):
                    frames.append(pd.DataFrame([{"env": env, "seed": seed, "split": split,
                                                 "point": -1, "method": method, "member": member,
                                                 "quantity": q, "value": v}]))  # fmt: skip
    return frames


def _frame(seeds=SLOPES, envs=("Ant", "Hopper")) -> pd.DataFrame:
    frames = [f for env in envs for s in seeds for f in _points(env, s, SLOPES[s])]
    return pd.concat(frames, ignore_index=True)[list(MECHANISM_COLUMNS)]


def _all_configs(envs=("Ant", "Hopper")) -> pd.DataFrame:
    """P&C better on Far NLL than P&C w/o Corr at both sigmas, in every environment."""
    rows = [
        (env, method, config, "raw", seed, split, metric, value + 0.01 * seed)
        for env in envs
        for method, config, far in (
            ("pnc", "sigma=8,bootstrap_frac=0.1,ridge=0.01", 1.0),
            ("pnc", "sigma=16,bootstrap_frac=0.1,ridge=0.01", 1.5),
            ("pnc_nocorr", "sigma=8", 2.0),
            ("pnc_nocorr", "sigma=16", 3.0),
        )
        for seed in SLOPES
        for split, metric, value in (("val", "nll", 1.0), ("id", "rmse", 0.1), ("far", "nll", far))
    ]
    columns = ["env", "method", "config", "calibration", "seed", "split", "metric", "value"]
    return pd.DataFrame(rows, columns=columns)


#: Each configuration's sigma, as the grid tables give it.
SIGMAS = {
    ("pnc", "sigma=8,bootstrap_frac=0.1,ridge=0.01"): 8.0,
    ("pnc", "sigma=16,bootstrap_frac=0.1,ridge=0.01"): 16.0,
    ("pnc_nocorr", "sigma=8"): 8.0,
    ("pnc_nocorr", "sigma=16"): 16.0,
}


@pytest.fixture(scope="module")
def stats() -> pd.DataFrame:
    return rm.mechanism_stats(_frame(), _all_configs(), SIGMAS)


def test_several_seeds_give_each_seeds_rows_and_their_mean_and_spread(stats):
    assert list(stats.columns) == rm.STATS_COLUMNS + rm.SEED_COLUMNS
    b3 = stats[(stats.env == "Ant") & (stats.evidence == rm.EVIDENCE_3B)]
    per_seed = b3[b3.seed.notna()].set_index("seed")["estimate"]
    assert sorted(per_seed.index) == [0, 1, 2]
    for seed, slope in SLOPES.items():  # each seed's regression on its own points
        assert per_seed[seed] == pytest.approx(slope, abs=0.05)
    summary = b3[b3.seed.isna()].iloc[0]
    assert summary.estimate == pytest.approx(per_seed.mean())
    assert summary.seed_sd == pytest.approx(per_seed.std(ddof=1))
    assert summary.n == 3 * 400 and summary.note == "mean over 3 seeds (0-2)"
    # 3A is computed on the seed means: no seed, no spread
    a3 = stats[stats.evidence == rm.EVIDENCE_3A]
    assert len(a3) == 4 and a3.seed.isna().all() and a3.seed_sd.isna().all()
    # the rows over the seeds come first in every environment, each seed's rows after 3A
    ant = stats[stats.env == "Ant"].reset_index(drop=True)
    first_seed_row = ant.index[ant.seed.notna()].min()
    assert ant.loc[: first_seed_row - 1, "seed"].isna().all()
    assert ant.loc[first_seed_row - 1, "evidence"] == rm.EVIDENCE_3A


def test_one_seed_keeps_the_pooled_table_without_seed_columns():
    one = rm.mechanism_stats(_frame(seeds={0: 2.0}), _all_configs(), SIGMAS)
    assert list(one.columns) == rm.STATS_COLUMNS
    assert one[one.evidence == rm.EVIDENCE_3B].estimate.iloc[0] == pytest.approx(2.0, abs=0.05)


def test_the_rendered_table_shows_the_rows_over_the_seeds_with_their_spread(stats):
    table = rm.mechanism_table(stats)
    lines = [ln for ln in table.markdown.splitlines() if ln.startswith("| ")]
    assert lines[0].startswith("| Environment | Evidence | Method | σ | Estimate | SD over seeds |")
    assert len(lines) - 1 == int(stats.seed.isna().sum())  # the per-seed rows are in the CSV only
    assert "mean over the seeds" in table.caption
    assert len(table.data) == len(stats)  # the CSV: every row


def test_over_seeds_refuses_an_evidence_missing_a_seed():
    rows = pd.DataFrame(
        [{"env": "Ant", "evidence": rm.EVIDENCE_3B, "method": "pnc", "sigma": np.nan,
          "estimate": 1.0, "se": 0.1, "t": 10.0, "spearman": 0.9, "n": 10, "note": "", "seed": s}
         for s in (0, 1)]
        + [{"env": "Hopper", "evidence": rm.EVIDENCE_3B, "method": "pnc", "sigma": np.nan,
            "estimate": 1.0, "se": 0.1, "t": 10.0, "spearman": 0.9, "n": 10, "note": "",
            "seed": 0}]
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"\('Hopper', .*\): seeds \[0\], expected \[0, 1\]"):
        rm.over_seeds(rows)


def test_the_mechanism_claims_are_judged_on_every_seed(stats, tmp_path):
    (tmp_path / "tables").mkdir()
    stats.to_csv(tmp_path / mechanism_claims.MECHANISM_FILE, index=False)
    table = mechanism_claims.read_mechanism_table(tmp_path)
    judged = mechanism_claims.MECHANISM_CLAIMS[
        :3
    ]  # 3A, 3B, 3C (the points have no Theorem 3 ranks)
    judged_claims = {c: mechanism_claims.mechanism_claim(c, judge, table) for c, judge in judged}
    c3a, c3b, c3c = (c for c, _ in judged)
    assert judged_claims[c3c].verdict == verdicts.HOLDS
    assert judged_claims[c3a].verdict == verdicts.HOLDS  # on the seed means: its rows have no seed
    assert judged_claims[c3b].verdict == verdicts.HOLDS
    assert judged_claims[c3b].measured.startswith(
        "slope > 0 with t > 2 in 2 of 2, on 6 of 6 (environment, seed) pairs"
    )
    # one seed of one environment against 3B: the claim holds only partly, whatever the mean
    seed1 = (table.env == "Hopper") & (table.evidence == rm.EVIDENCE_3B) & (table.seed == 1)
    table.loc[seed1, "estimate"] = -0.5
    judge = dict(mechanism_claims.MECHANISM_CLAIMS)[c3b]
    row = mechanism_claims.mechanism_claim(c3b, judge, table)
    assert row.verdict == "partly: 1 of 2 (Ant)"
    assert "on 5 of 6 (environment, seed) pairs" in row.measured

"""The paper's claims measured on a reference folder (pnc.report.claims): verdict rules, the
readings of the Deep Ensemble, the mechanism table, refusals of incomplete inputs, the real data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pnc.report import claims, compare

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
PAPER = RESULTS / "paper"
REFERENCE = RESULTS / "offline"
SIGMAS = (8.0, 16.0, 32.0)

ID_COMPETITIVE, ID_WINS, FAR_NLL, FAR_AUROC, FAR_SPEARMAN, STRONGER = (
    c for c, _ in claims.RANKING_CLAIMS
)
C3A, C3B, C3C, C1BC, THM3 = (c for c, _ in claims.MECHANISM_CLAIMS)


def _paper() -> pd.DataFrame:
    return pd.read_csv(PAPER / "results.csv")


@pytest.fixture(scope="module")
def paper_draws() -> compare.Column:
    """The Table 1 cells of the paper's appendix (no mixture reading)."""
    return compare.statistics_of(_paper())


def _by_claim(rows: list[claims.Claim]) -> dict[str, claims.Claim]:
    return {c.claim: c for c in rows}


def _with_mixture(frame: pd.DataFrame, factor: float) -> pd.DataFrame:
    """The table plus a Deep Ensemble mixture reading: the draws' values times ``factor``."""
    mixture = frame[frame.method == "deep_ensemble"].assign(method="deep_ensemble_mixture")
    mixture["value"] = mixture["value"] * factor
    return pd.concat([frame, mixture], ignore_index=True)


def _mechanism(envs: tuple[str, ...] = ("Ant", "Hopper", "Swimmer")) -> pd.DataFrame:
    """A mechanism table on which every mechanism claim holds in every environment."""
    rows = []
    for env in envs:
        row = {"env": env, "method": "pnc", "sigma": np.nan, "t": np.nan, "spearman": np.nan}
        rows += [
            {**row, "evidence": claims.EVIDENCE_3B, "estimate": 2.0, "t": 20.0, "spearman": 0.9},
            {**row, "evidence": claims.EVIDENCE_3C_PROBE, "estimate": 1.0, "t": 80.0, "spearman": 0.95},
            {**row, "evidence": claims.EVIDENCE_1BC, "estimate": 5.0},
            {**row, "evidence": claims.EVIDENCE_1BC, "method": "pnc_nocorr", "estimate": 1.0},
            {**row, "evidence": claims.EVIDENCE_THM3, "estimate": 1.05},
        ]
        rows += [
            {**row, "evidence": claims.EVIDENCE_3A, "sigma": s, "estimate": -1.0} for s in SIGMAS
        ]
    return pd.DataFrame(rows)


def _judge(frame: pd.DataFrame, claim: str) -> claims.Claim:
    judge = dict(claims.MECHANISM_CLAIMS)[claim]
    return claims.mechanism_claim(claim, judge, frame)


def _set(frame: pd.DataFrame, evidence: str, env: str, column: str, value: float, **where) -> None:
    mask = (frame.evidence == evidence) & (frame.env == env)
    for name, wanted in where.items():
        mask &= frame[name] == wanted
    assert mask.sum() >= 1
    frame.loc[mask, column] = value


# --------------------------------------------------------------------------------------------
# Verdict rules
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("draws", "mixture", "verdict"),
    [
        (True, None, claims.HOLDS),
        (False, None, claims.DOES_NOT_HOLD),
        (True, True, claims.HOLDS),
        (False, False, claims.DOES_NOT_HOLD),
        (True, False, claims.DRAWS_ONLY),
        (False, True, claims.MIXTURE_ONLY),
    ],
)
def test_a_ranking_claim_holds_when_it_holds_in_every_reading_present(draws, mixture, verdict):
    assert claims.reading_verdict(draws, mixture) == verdict


def test_a_per_environment_claim_counts_environments():
    assert claims.environment_verdict(9, 9) == claims.HOLDS
    assert claims.environment_verdict(0, 9) == claims.DOES_NOT_HOLD
    assert claims.environment_verdict(4, 9) == "holds in 4 of 9 environments"
    for k, n in ((3, 2), (-1, 2), (0, 0)):
        with pytest.raises(ValueError, match="cannot judge"):
            claims.environment_verdict(k, n)


def test_numbers_keep_three_significant_digits():
    assert [claims.number(v) for v in (56.008, 1.0264, 0.00566, 137.4)] == [
        "56.0", "1.03", "0.00566", "137",
    ]  # fmt: skip
    assert claims.number(12.889, signed=True) == "+12.9"
    assert claims.number(-0.2742, signed=True) == "-0.274"


# --------------------------------------------------------------------------------------------
# Ranking claims
# --------------------------------------------------------------------------------------------


def test_the_papers_own_appendix_meets_its_ranking_claims(paper_draws):
    rows = _by_claim(claims.claims_of(paper_draws))
    assert [rows[c].verdict for c, _ in claims.RANKING_CLAIMS] == [claims.HOLDS] * 6
    assert rows[ID_WINS].measured == "draws: P&C 5 of 11, next: Subspace 3; no mixture reading"
    assert rows[FAR_AUROC].measured.startswith("draws: mean rank 1.27, 9 of 11 wins, significant")
    assert rows[STRONGER].measured.startswith("draws: 1.27 / 1.27 / 1.64 against 3.09↑ / 2.64↑")
    for claim, _ in claims.MECHANISM_CLAIMS:  # no mechanism table: nothing to judge
        assert rows[claim].verdict == claims.CANNOT_BE_COMPARED
        assert "no mechanism table" in rows[claim].measured


def test_pnc_worst_on_far_auroc_does_not_hold():
    frame = _paper()
    worst = (frame.method == "pnc") & (frame.split == "far") & (frame.metric == "auroc")
    frame.loc[worst, "value"] = 0.0  # below every baseline in every environment
    rows = _by_claim(claims.claims_of(compare.statistics_of(frame)))
    assert rows[FAR_AUROC].verdict == claims.DOES_NOT_HOLD
    assert "mean rank 6.00, 0 of 11 wins" in rows[FAR_AUROC].measured
    assert "significantly worse than" in rows[FAR_AUROC].measured
    assert "best: Deep Ensemble 1.73" in rows[FAR_AUROC].measured
    assert rows[STRONGER].verdict == claims.DOES_NOT_HOLD  # 6.00 against the Deep Ensemble's
    assert rows[FAR_NLL].verdict == claims.HOLDS  # the other metrics are untouched


def test_a_mixture_that_wins_every_id_rmse_splits_the_verdict_by_reading():
    frame = _with_mixture(_paper(), factor=1e-3)  # the mixture's RMSE far below every method's
    draws, mixture = compare.our_readings(frame)
    assert mixture is not None
    rows = _by_claim(claims.claims_of(draws, mixture))
    assert rows[ID_COMPETITIVE].verdict == claims.DRAWS_ONLY
    assert "mixture: mean rank 3.68 (3rd of 6), Deep Ensemble significantly better" in (
        rows[ID_COMPETITIVE].measured
    )
    assert rows[ID_WINS].verdict == claims.DRAWS_ONLY
    assert rows[ID_WINS].measured.endswith("mixture: P&C 0 of 11, more: Deep Ensemble 11")
    # factor 1e-3 also shrinks the mixture's Far NLL: P&C loses its Far NLL lead in that reading
    assert rows[FAR_NLL].verdict == claims.DRAWS_ONLY
    assert rows[STRONGER].verdict == claims.DRAWS_ONLY


def test_ranking_inputs_that_are_missing_or_not_finite_are_refused(paper_draws):
    frame = _paper()
    no_auroc = compare.statistics_of(frame[frame.metric != "auroc"])
    with pytest.raises(ValueError, match=r"no Far AUROC ↑ ranks \(far/auroc is missing\)"):
        claims.claims_of(no_auroc)
    no_ensemble = compare.statistics_of(frame[frame.method != "deep_ensemble"])
    with pytest.raises(ValueError, match=r"no Far NLL ↓ rank for \['deep_ensemble'\]"):
        claims.claims_of(no_ensemble)
    draws = {k: dict(cells) for k, cells in paper_draws.items()}  # the fixture stays unchanged
    cell = draws["id/rmse"]["swag"]
    draws["id/rmse"]["swag"] = compare.Cell(np.nan, cell.rank_std, 0, cell.n_envs, None)
    with pytest.raises(ValueError, match=r"non-finite ID RMSE ↓ mean rank for \['swag'\]"):
        claims.claims_of(draws)


def test_a_non_finite_result_in_the_folder_is_refused(tmp_path):
    frame = _paper()
    frame.loc[0, "value"] = np.nan
    frame.to_csv(tmp_path / "results.csv", index=False)
    with pytest.raises(ValueError, match="non-finite.*env=Ant, method=deep_ensemble"):
        claims.claims_of_folder(tmp_path)


# --------------------------------------------------------------------------------------------
# Mechanism claims
# --------------------------------------------------------------------------------------------


def test_every_mechanism_claim_holds_on_a_table_made_to_hold():
    frame = _mechanism()
    for claim, _ in claims.MECHANISM_CLAIMS:
        assert _judge(frame, claim).verdict == claims.HOLDS, claim
    measured = _judge(frame, C3A).measured
    assert (
        measured
        == "negative at every σ in 3 of 3; Ant (the paper's): -1.00 / -1.00 / -1.00 at σ = 8 / 16 / 32"
    )


def test_3a_with_one_positive_sigma_in_one_environment_holds_in_k_of_n():
    frame = _mechanism()
    _set(frame, claims.EVIDENCE_3A, "Hopper", "estimate", 0.5, sigma=16.0)
    row = _judge(frame, C3A)
    assert row.verdict == "holds in 2 of 3 environments"
    assert row.measured.startswith("negative at every σ in 2 of 3 (not Hopper);")
    frame.loc[(frame.evidence == claims.EVIDENCE_3A) & (frame.env == "Ant"), "estimate"] = [
        12.9, 18.0, 27.0,
    ]  # fmt: skip
    row = _judge(frame, C3A)
    assert row.verdict == "holds in 1 of 3 environments"
    assert "positive at every σ in Ant; Ant (the paper's): +12.9 / +18.0 / +27.0" in row.measured


def test_3b_3c_1bc_and_theorem_3_judge_each_environment():
    frame = _mechanism()
    _set(frame, claims.EVIDENCE_3B, "Swimmer", "t", 1.5)  # positive but not significant
    _set(frame, claims.EVIDENCE_3C_PROBE, "Ant", "estimate", 0.47)  # named, but Spearman decides
    _set(frame, claims.EVIDENCE_THM3, "Hopper", "estimate", 0.99)
    frame.loc[frame.evidence == claims.EVIDENCE_1BC, "estimate"] = 0.9  # below 1 everywhere
    assert _judge(frame, C3B).verdict == "holds in 2 of 3 environments"
    assert "(not Swimmer); t 1.50 to 20.0" in _judge(frame, C3B).measured
    assert _judge(frame, C3C).verdict == claims.HOLDS
    assert _judge(frame, C3C).measured.endswith("outside [0.8, 1.2] in Ant (0.470)")
    assert _judge(frame, C1BC).verdict == claims.DOES_NOT_HOLD
    assert _judge(frame, THM3).verdict == "holds in 2 of 3 environments"
    _set(frame, claims.EVIDENCE_3C_PROBE, "Hopper", "spearman", -0.1)
    assert _judge(frame, C3C).verdict == "holds in 2 of 3 environments"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda f: f[f.evidence != claims.EVIDENCE_THM3], r"'Thm 3: .*' \(pnc\) has no rows"),
        (
            lambda f: f[~((f.evidence == claims.EVIDENCE_3B) & (f.env == "Hopper"))],
            r"'3B: .*' \(pnc\) is missing for env\(s\) \['Hopper'\]",
        ),
        (lambda f: f[f.method != "pnc_nocorr"], r"'1B/C: .*' \(pnc_nocorr\) has no rows"),
        (
            lambda f: f.assign(estimate=f.estimate.where(f.evidence != claims.EVIDENCE_3A)),
            r"'3A: .*' \(pnc\) has a non-finite sigma/estimate in env\(s\) \['Ant', 'Hopper'",
        ),
        (
            lambda f: f.assign(t=f.t.where(f.env != "Swimmer")),
            r"'3B: .*' \(pnc\) has a non-finite estimate/t/spearman in env\(s\) \['Swimmer'\]",
        ),
    ],
)
def test_an_incomplete_mechanism_table_is_refused(paper_draws, edit, message):
    with pytest.raises(ValueError, match=message):
        claims.claims_of(paper_draws, None, edit(_mechanism()))


def test_the_mechanism_table_is_read_from_the_folder_when_present(tmp_path):
    assert claims.read_mechanism_table(tmp_path) is None
    (tmp_path / "tables").mkdir()
    _mechanism().to_csv(tmp_path / claims.MECHANISM_FILE, index=False)
    pd.testing.assert_frame_equal(claims.read_mechanism_table(tmp_path), _mechanism())
    _mechanism().drop(columns="spearman").to_csv(tmp_path / claims.MECHANISM_FILE, index=False)
    with pytest.raises(ValueError, match=r"missing column\(s\) \['spearman'\]"):
        claims.read_mechanism_table(tmp_path)


# --------------------------------------------------------------------------------------------
# Rendering and the real data
# --------------------------------------------------------------------------------------------


def test_the_claims_render_as_a_pipe_table():
    rows = [claims.Claim("a | b", "1.00", claims.HOLDS)]
    assert claims.claims_markdown(rows).splitlines() == [
        "| Claim | Measured | Verdict |",
        "|---|---|---|",
        r"| a \| b | 1.00 | holds |",
    ]


def test_the_reference_folder_holds_far_auroc_with_11_of_11_wins():
    rows = _by_claim(claims.claims_of_folder(REFERENCE))
    auroc = rows[FAR_AUROC]
    assert auroc.verdict == claims.HOLDS
    assert auroc.measured.startswith("draws: mean rank 1.00, 11 of 11 wins, significant against 5")
    assert "; mixture: mean rank 1.09, 10 of 11 wins" in auroc.measured
    assert rows[C3A].verdict == "holds in 4 of 11 environments"
    # the generated table is the last section of the folder's committed comparison.md
    text = (REFERENCE / compare.COMPARISON_FILE).read_text()
    assert "\n## The paper's claims, measured\n" in text
    assert text.rstrip("\n").endswith(claims.claims_markdown(list(rows.values())).rstrip("\n"))

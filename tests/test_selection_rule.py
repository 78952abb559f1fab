"""One selection rule for both studies (pnc.methods.selection_rule.lowest): the lowest finite value
wins, the first on ties, a non-finite value never wins wherever it stands; the MuJoCo study's
``select_candidate`` and the CIFAR study's ``lowest_nll`` and ``coordinate_descent`` follow it on
their own, without a caller cleaning their input first."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pnc.methods.ood.posthoc import coordinate_descent, lowest_nll
from pnc.methods.selection_rule import NoFiniteCandidateError, lowest, select_candidate

NAN, INF = math.nan, math.inf

#: values -> the index the rule picks
CASES = [
    ([3.0, 1.0, 2.0], 1),
    ([1.0, 1.0, 0.5, 0.5], 2),  # ties: the first
    ([NAN, 1.0], 1),  # a leading NaN never wins (a `<` loop would keep it)
    ([1.0, NAN, 0.5], 2),
    ([INF, 2.0, -INF], 1),  # neither infinity wins
    ([2.0], 0),
]


@pytest.mark.parametrize(("values", "want"), CASES)
def test_lowest_picks_the_first_lowest_finite_value(values, want):
    assert lowest(values) == want


@pytest.mark.parametrize(("values", "want"), CASES)
def test_both_studies_follow_the_one_rule(values, want):
    names = [f"c{i}" for i in range(len(values))]
    assert select_candidate(dict(zip(names, values, strict=True))) == names[want]
    assert lowest_nll([{"val_nll": v} for v in values]) == want
    grids = {"a": list(range(len(values))), "b": [0]}
    assert coordinate_descent(grids, lambda p: values[p["a"]]) == {"a": want, "b": 0}


def test_a_missing_nll_never_wins_and_empty_inputs_are_said():
    assert lowest_nll([{"val_nll": None}, {"val_nll": 3.0}]) == 1
    assert lowest_nll([]) is None
    with pytest.raises(ValueError, match="no values"):
        lowest([])
    with pytest.raises(ValueError, match="no candidates"):
        select_candidate({})


def test_finite_or_none_writes_every_non_finite_float_as_null_and_keeps_the_rest():
    from pnc.methods.selection_rule import finite_or_none

    nan, inf = float("nan"), float("inf")
    record = {
        "val_nll": nan,
        "candidates": {"a": 1.5, "b": -inf, "c": np.float32("nan"), "d": np.float64(2.0)},
        "path": [inf, (3, "x", None)],
        "n": 4,
    }
    got = finite_or_none(record)
    assert got == {
        "val_nll": None,
        "candidates": {"a": 1.5, "b": None, "c": None, "d": 2.0},
        "path": [None, [3, "x", None]],
        "n": 4,
    }
    assert type(got["candidates"]["d"]) is np.float64  # a finite value is kept as it is
    assert finite_or_none(nan) is None and finite_or_none(0.5) == 0.5
    assert math.isnan(record["val_nll"])  # the input is not changed


@pytest.mark.parametrize(
    "candidates,expected",
    [
        ({"a": 2.0, "b": 1.0, "c": 1.0}, "b"),
        ({"a": math.nan, "b": math.inf, "c": 5.0}, "c"),
        ({("x", "raw"): 1.0, ("x", "vcal"): 1.0}, ("x", "raw")),
        ({"a": -math.inf, "b": 0.0}, "b"),
    ],
)
def test_select_candidate_on_keys(candidates, expected):
    assert select_candidate(candidates) == expected


def test_select_candidate_needs_candidates():
    with pytest.raises(ValueError, match="no candidates"):
        select_candidate({})


@pytest.mark.parametrize("values", [[NAN, NAN], [INF, -INF, NAN], [NAN]])
def test_nothing_is_selected_when_every_candidate_diverged(values):
    """No finite value: the rule refuses, in both studies, naming every candidate."""
    with pytest.raises(
        NoFiniteCandidateError, match=r"every one diverged\), none is selected: 0: "
    ):
        lowest(values)
    names = [f"c{i}" for i in range(len(values))]
    with pytest.raises(NoFiniteCandidateError, match=r"selected: c0: "):
        select_candidate(dict(zip(names, values, strict=True)))
    sweep = [{"config": {"scale": i}, "val_nll": v} for i, v in enumerate(values)]
    with pytest.raises(NoFiniteCandidateError, match=r"selected: scale=0: "):
        lowest_nll(sweep)
    with pytest.raises(NoFiniteCandidateError, match=r"selected: a=0,b=0: "):
        coordinate_descent({"a": list(range(len(values))), "b": [0]}, lambda p: values[p["a"]])


def test_the_mujoco_selection_refuses_a_method_whose_every_candidate_diverged():
    import pandas as pd

    from pnc.studies.mujoco.results import RESULT_COLUMNS
    from pnc.studies.mujoco.selection import select

    rows = [
        ("Hopper", "swag", c, "raw", 0, s, "nll", v, "offline")
        for c, v in (("a", NAN), ("b", INF))
        for s in ("val", "id")
    ]
    with pytest.raises(NoFiniteCandidateError, match=r"Hopper/swag: .*a\|raw: nan, b\|raw: inf"):
        select(pd.DataFrame(rows, columns=list(RESULT_COLUMNS)))


def test_the_cifar_selection_refuses_a_method_whose_every_candidate_diverged(tmp_path):
    import json

    from pnc.studies.cifar import jobs
    from pnc.studies.cifar.sweep import expand_sweep

    expand_sweep("llla", {"grid": {"prior_precision": [1.0, 10.0]}}).write(tmp_path / "llla.json")
    sweep = [
        {"config": {"prior_precision": p}, "val_nll": None, "id": f"prior_precision={p:g}"}
        for p in (1.0, 10.0)
    ]
    validation = tmp_path / "v.json"
    validation.write_text(json.dumps({"method": "llla", "seed": 3, "sweep": sweep}))
    with pytest.raises(NoFiniteCandidateError, match=r"llla, seed 3 .*prior_precision=1: inf, prior_precision=10: inf"):
        jobs.select(sweep=tmp_path / "llla.json", validation=[validation], out=tmp_path / "s.json")
    assert not (tmp_path / "s.json").exists()

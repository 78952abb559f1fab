"""The benchmark's work counts (bench.flops) against hand-computed sums."""

from __future__ import annotations

import pytest

from bench.__main__ import work_and_rates
from bench.flops import layer_widths, pnc_build_macs, train_macs
from pnc.core.mlp import MLPConfig
from pnc.core.perturb_correct import PnCConfig

MLP = MLPConfig(out_dim=1, hidden=(3, 3, 3))


def test_layer_widths_end_with_the_mean_and_variance_head():
    assert layer_widths(MLP, 2) == [(2, 3), (3, 3), (3, 3), (3, 2)]


def test_train_macs_counts_forward_and_two_backward_products_per_layer():
    # per row 2*3 + 3*3 + 3*3 + 3*2 = 30 multiply-adds forward
    assert train_macs(MLP, 2, steps=7, batch_size=5) == 3 * 7 * 5 * 30


def test_build_macs_by_hand_for_two_perturbed_layers():
    config = PnCConfig(n_members=4, layers=(0, 2), bootstrap_frac=0.5, rank=2)
    rows = 10  # floor(0.5 * 20) rows per member
    forward = rows * (2 * 3 + 3 * 3 + 3 * 3)  # layers 0..2 up to the input of layer 3
    # corrected: hidden layer 1 (d = 3, q = 3) and, after the last hidden layer, the head (q = 2)
    gram = (rows * 4 * 7 + 4 * 3 * 3) + (rows * 4 * 7 + 4 * 3 * 2)
    solve = (2 * 4**3 // 3 + 5 * 4**2 * 3) + (2 * 4**3 // 3 + 5 * 4**2 * 2)
    macs = pnc_build_macs(MLP, 2, config, n_cal=20)
    assert macs == {
        "forward": 4 * forward,
        "gram": 4 * gram,
        "solve": 4 * solve,
        "total": 4 * (forward + gram + solve),
    }


def test_build_macs_of_one_perturbed_layer_without_bootstrap():
    config = PnCConfig(n_members=1, layers=(1,), bootstrap_frac=None, rank=2)
    macs = pnc_build_macs(MLP, 2, config, n_cal=8)
    assert macs["forward"] == 8 * (6 + 9)  # every calibration row, layers 0 and 1
    assert macs["gram"] == 8 * 4 * 7 + 4 * 3 * 3  # hidden layer 2: d = 3, q = 3
    assert macs["solve"] == 2 * 4**3 // 3 + 5 * 4**2 * 3


@pytest.mark.parametrize(
    ("config", "n_cal", "match"),
    [
        (PnCConfig(n_members=2, layers=(0,), bootstrap_frac=None, rank=2), 4, "primal"),
        (PnCConfig(n_members=2, layers=(0,), rank=2, correct=False), 40, "correcting"),
        (PnCConfig(n_members=2, layers=(0,), rank=2, sigma=0.0), 40, "sigma"),
    ],
)
def test_build_macs_refuse_what_they_do_not_count(config, n_cal, match):
    with pytest.raises(ValueError, match=match):
        pnc_build_macs(MLP, 2, config, n_cal)


def test_work_and_rates():
    out = work_and_rates(build_macs=5e9, build_s=2.0, train_macs=50e9, train_s=4.0)
    assert out["build_gflop"] == pytest.approx(10.0)
    assert out["train_gflop"] == pytest.approx(100.0)
    assert out["build_over_train_work"] == pytest.approx(0.1)
    assert out["build_gflop_per_s"] == pytest.approx(5.0)
    assert out["train_gflop_per_s"] == pytest.approx(25.0)
    assert out["build_gflop_per_s_for_5pct"] == pytest.approx(10.0 / 0.2)

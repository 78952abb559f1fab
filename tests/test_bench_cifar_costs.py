"""The CIFAR cost projection's arithmetic (bench.cifar_costs)."""

import pytest

from bench import cifar_costs


def test_image_counts_follow_the_protocol_sizes():
    counts = cifar_costs.image_counts()
    n_eval = 10_000 + sum(cifar_costs.OPENOOD_SIZES.values())
    assert counts["training"] == 9 * 300 * 45_000
    assert counts["forward_passes"] == 9 * (45_000 + 5_000 + n_eval)
    assert counts["swag"] == 2 * 50 * (2_048 + 5_000) + 50 * n_eval
    assert counts["pnc"] == 10 * 50 * 5_000 + 50 * n_eval


def test_measured_rate_projection_divides_the_counts_by_the_rates():
    out = cifar_costs.projection_at_rates(train_images_per_s=1_000.0, forward_images_per_s=4_000.0)
    counts = out["images"]
    hours = out["hours"]
    assert hours["training"] == pytest.approx(counts["training"] / 1_000.0 / 3600)
    assert hours["training_per_run"] == pytest.approx(hours["training"] / 9)
    posthoc = (counts["forward_passes"] + counts["swag"] + counts["pnc"]) / 4_000.0 / 3600
    assert hours["posthoc"] == pytest.approx(posthoc)
    assert hours["total_per_seed"] == pytest.approx(hours["training"] + posthoc)
    # twice the rates, half the hours
    faster = cifar_costs.projection_at_rates(2_000.0, 8_000.0)["hours"]
    assert faster["total_per_seed"] == pytest.approx(hours["total_per_seed"] / 2)


def test_flop_projection_uses_the_same_image_counts():
    counts = cifar_costs.image_counts()
    out = cifar_costs.projection(train_flops=3.0, forward_flops=1.0, gpu_tflops=1e-12)
    flops = out["flops"]
    assert flops["training"] == pytest.approx(3.0 * counts["training"])
    assert flops["forward_passes"] == pytest.approx(counts["forward_passes"])
    assert flops["total"] == pytest.approx(
        3.0 * counts["training"] + counts["forward_passes"] + counts["swag"] + counts["pnc"]
    )
    # at 1 FLOP/s the seconds are the FLOPs
    assert out["hours"]["total_per_seed"] == pytest.approx(flops["total"] / 3600)


def test_flops_are_counted_on_the_lowered_function():
    import jax
    import jax.numpy as jnp

    a = jnp.ones((8, 16), jnp.float32)
    b = jnp.ones((16, 4), jnp.float32)
    lowered = jax.jit(lambda x, y: x @ y).lower(a, b)
    assert cifar_costs._flops(lowered) == pytest.approx(2 * 8 * 16 * 4)


def test_committed_gpu_measurement_matches_the_projection_and_the_page():
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    measured = json.loads((root / "docs/performance/cifar_costs_h200.json").read_text())
    train = measured["train"]["images_per_s"]
    forward = measured["forward"]["images_per_s"]
    again = cifar_costs.projection_at_rates(train, forward)
    assert again["hours"] == pytest.approx(measured["projection_at_measured_rates"]["hours"])
    page = (root / "docs/cifar_results.md").read_text()
    for rate in (train, forward, measured["pnc_predict"]["images_per_s"]):
        assert f"{rate:,.0f}" in page
    assert f"**{again['hours']['total_per_seed']:.1f} h on one H200**" in page


def test_job_costs_add_compilation_loading_and_the_time_between_epochs():
    rates = cifar_costs.projection_at_rates(1_000.0, 4_000.0)["hours"]
    out = cifar_costs.projection_with_job_costs(
        1_000.0, 4_000.0, compile_s=30.0, load_s=6.0, overhead_s_per_epoch=2.0
    )
    hours = out["hours"]
    jobs = 9 + 16  # training runs and post-hoc jobs of a seed
    assert out["job_costs"]["jobs_per_seed"] == jobs
    assert hours["compile_and_load"] == pytest.approx(jobs * 36.0 / 3600)
    assert hours["between_epochs"] == pytest.approx(9 * 300 * 2.0 / 3600)
    assert hours["total_per_seed"] == pytest.approx(
        rates["total_per_seed"] + hours["compile_and_load"] + hours["between_epochs"]
    )
    assert hours["training_per_run"] == pytest.approx(
        rates["training_per_run"] + (36.0 + 300 * 2.0) / 3600
    )
    # nothing besides the images: the plain projection
    none = cifar_costs.projection_with_job_costs(
        1_000.0, 4_000.0, compile_s=0.0, load_s=0.0, overhead_s_per_epoch=0.0
    )
    assert none["hours"]["total_per_seed"] == pytest.approx(rates["total_per_seed"])


def test_epoch_costs_report_computation_and_overhead_per_epoch():
    """The per-epoch measurement on a tiny network: its fields, and the overhead is the run's
    wall time per epoch less the computation (the set-up subtracted)."""
    from pnc.core.conv import ResNetConfig

    net = ResNetConfig(widths=(4, 8), blocks_per_stage=(1, 1))
    out = cifar_costs.bench_epochs(net, batch=8, steps=2, epochs=2, checkpoint_every=1)
    assert (out["images"], out["epochs"], out["swag_starts"]) == (16, 2, [0, 1])
    assert out["compute_s_per_epoch"] > 0 and out["checkpoint"]["mb"] > 0
    per_epoch = (out["wall_s"] - out["setup_s"]) / 2
    assert out["overhead_s_per_epoch"] == pytest.approx(per_epoch - out["compute_s_per_epoch"])
    assert out["overhead_fraction"] == pytest.approx(
        out["overhead_s_per_epoch"] / out["compute_s_per_epoch"]
    )

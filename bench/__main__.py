"""Timing benchmark on an Ant-sized synthetic problem: ``python -m bench [--out FILE]``.

Ant-v5 dynamics sizes: inputs are 27 state + 8 action = 35 dimensions, targets 27 dimensions, the
paper's 4x200 Gaussian MLP. Measured (wall-clock seconds, after a warm-up call that compiles; the
compile times are reported separately as ``*_compile_s``):

- ``train_s``: 5,000 Adam steps of batch 64 through :func:`pnc.train`;
- ``pnc_build_s``: P&C with 50 members, ``K = 20``, ``bootstrap_frac = 0.1`` on 50,000
  calibration rows, every hidden layer perturbed (:func:`pnc.core.perturb_correct.build_members`);
- ``pnc_predict_s``: the 50 members on 10,000 inputs (:func:`pnc.core.perturb_correct.predict_members`);
- ``pnc_build_over_train``: the post-hoc cost relative to training;
- ``paper_regime``: the P&C build as the authors ran it on MuJoCo (:data:`PAPER_REGIME`:
  4,096 calibration rows drawn from the training inputs, hidden layers 0 and 2 perturbed, 50
  members, ``K = 20``, ``bootstrap_frac = 0.3``, radius-normalised perturbations, ridge towards
  zero), with ``pnc_build_first_call_s`` (compilation included), ``pnc_build_s`` (compiled),
  ``pnc_build_over_train``, the ``settings`` and ``flops`` (the work of build and training from
  their matrix products, :mod:`bench.flops`, with the rates it ran at and the build rate
  that would meet 5 % of the training time);
- ``methods``: per method ``train_s``, ``posthoc_s``, ``predict_s`` and ``total_over_base_train``
  (:func:`bench.method_costs.benchmark_methods`, first calls, compilation included), and
  ``pnc_over_deep_ensemble``: the whole cost of P&C (50 members) over that of the 5-member Deep
  Ensemble (first calls), and ``pnc_over_deep_ensemble_warm`` with its parts from a second call of
  everything (compiled code only; :func:`bench.method_costs.ratio_parts`); the same ratios
  with P&C in the paper's regime (:data:`PAPER_REGIME`, the configuration the study's tables come
  from) against the same Deep Ensemble, under ``paper_regime``: ``methods_pnc`` (P&C's entry),
  ``pnc_over_deep_ensemble_warm`` and its parts (compiled code only: the process has compiled
  the training and the prediction already; the first-call ratio of that regime comes from a
  process of its own, ``python -m bench.method_costs --methods pnc deep_ensemble --warm
  --pnc-regime paper``). ``--no-methods`` skips this part.

The reusable pieces (:func:`ant_sized_problem`, :func:`timed`, :func:`bench_pnc`,
:func:`bench_paper_regime`) let other benchmark sections be merged into the same JSON document.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bench.command_line import bench_parser, emit
from bench.flops import pnc_build_macs, train_macs
from bench.method_costs import (
    PAPER_REGIME,
    benchmark_methods,
    ratio_parts,
)
from pnc.core.mlp import MLPConfig
from pnc.core.perturb_correct import PnCConfig, build_members, predict_members
from pnc.core.training import Standardizer, TrainConfig, train
from pnc.methods.regression import DEEP_ENSEMBLE_ID, PNC_ID

STATE_DIM, ACTION_DIM = 27, 8


def ant_sized_problem(seed: int, n_rows: int = 60_000) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic transitions with Ant-v5's sizes: ``x [n, 35]`` (state, action), ``y [n, 27]``.

    States are correlated Gaussians, actions uniform in ``[-1, 1]``; the target (a state change) is
    a fixed random two-layer tanh map of ``(s, a)`` plus heteroscedastic noise. Float32, numpy only.
    """
    rng = np.random.default_rng(seed)
    mix = rng.normal(size=(STATE_DIM, STATE_DIM)) / np.sqrt(STATE_DIM)
    s = rng.normal(size=(n_rows, STATE_DIM)) @ mix
    a = rng.uniform(-1.0, 1.0, size=(n_rows, ACTION_DIM))
    x = np.concatenate([s, a], axis=1)
    w1 = rng.normal(size=(x.shape[1], 64)) / np.sqrt(x.shape[1])
    w2 = rng.normal(size=(64, STATE_DIM)) / 8.0
    noise = 0.02 + 0.05 * np.abs(np.tanh(s[:, :1]))
    y = np.tanh(x @ w1) @ w2 + noise * rng.normal(size=(n_rows, STATE_DIM))
    return x.astype(np.float32), y.astype(np.float32)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Run ``fn()`` once, block until its arrays are ready; return ``(seconds, result)``."""
    start = time.perf_counter()
    out = jax.block_until_ready(fn())
    return time.perf_counter() - start, out


def environment() -> dict:
    """Device, library versions and machine load at the start of the run."""
    return {
        "device": str(jax.devices()[0]),
        "platform": jax.default_backend(),
        "cpu_count": os.cpu_count(),
        "load_average_1min": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "python": platform.python_version(),
        "jax": jax.__version__,
        "numpy": np.__version__,
    }


def bench_pnc(
    *,
    steps: int = 5000,
    members: int = 50,
    cal_rows: int = 50_000,
    pred_rows: int = 10_000,
    member_chunk: int | None = None,
    seed: int = 0,
) -> dict:
    """Time training, the P&C build and P&C prediction; returns a flat dict of numbers."""
    x, y = ant_sized_problem(seed, n_rows=cal_rows + pred_rows)
    x_train, y_train, x_test = x[:cal_rows], y[:cal_rows], x[cal_rows:]
    model_config = MLPConfig(out_dim=y.shape[1])
    train_config = TrainConfig(steps=steps, batch_size=64)
    run_train = lambda k: train(
        x_train,
        y_train,
        key=jax.random.key(k),
        model_config=model_config,
        train_config=train_config,
    )[0]
    first_train, _ = timed(lambda: run_train(1).params)
    train_s, params = timed(lambda: run_train(2).params)
    x_norm = Standardizer.fit(x_train)  # what train() fitted
    x_cal = x_norm.transform(jnp.asarray(x_train))
    x_eval = x_norm.transform(jnp.asarray(x_test))
    config = PnCConfig(n_members=members, rank=20, bootstrap_frac=0.1)
    build = lambda k: build_members(
        params, model_config, x_cal, config, key=jax.random.key(k), member_chunk=member_chunk
    )
    first_build, _ = timed(lambda: build(3))
    build_s, ens = timed(lambda: build(4))
    first_predict, _ = timed(lambda: predict_members(ens, x_eval, model_config))
    predict_s, pred = timed(lambda: predict_members(ens, x_eval, model_config))
    if not bool(jnp.all(jnp.isfinite(pred.means))):
        raise RuntimeError("non-finite P&C predictions in the benchmark")
    paper = bench_paper_regime(
        params,
        model_config,
        x_cal,
        train_s,
        members=members,
        member_chunk=member_chunk,
        train_steps=steps,
        train_batch=train_config.batch_size,
    )
    return {
        "steps": steps,
        "members": members,
        "cal_rows": cal_rows,
        "pred_rows": pred_rows,
        "member_chunk": member_chunk,
        "train_s": train_s,
        "train_compile_s": max(first_train - train_s, 0.0),
        "pnc_build_s": build_s,
        "pnc_build_compile_s": max(first_build - build_s, 0.0),
        "pnc_predict_s": predict_s,
        "pnc_predict_compile_s": max(first_predict - predict_s, 0.0),
        "pnc_build_over_train": build_s / train_s,
        "targets_met": {
            "build_le_5pct_of_train": build_s <= 0.05 * train_s,
            "predict_le_1s": predict_s <= 1.0,
        },
        "paper_regime": paper,
    }


def bench_paper_regime(
    params,
    model_config: MLPConfig,
    x_pool: jnp.ndarray,
    train_s: float,
    *,
    members: int = 50,
    member_chunk: int | None = None,
    train_steps: int = 5000,
    train_batch: int = 64,
) -> dict:
    """Time the :data:`PAPER_REGIME` build on trained ``params``; ``x_pool`` holds the
    standardised training inputs the calibration rows are drawn from (``min(4096, N)`` rows).
    ``train_s`` is the time of ``train_steps`` steps of ``train_batch`` rows (for the ``flops``
    section: :mod:`bench.flops`)."""
    config = dataclasses.replace(
        PAPER_REGIME,
        n_members=members,
        calibration_size=min(PAPER_REGIME.calibration_size, x_pool.shape[0]),
    )
    build = lambda k: build_members(
        params, model_config, x_pool, config, key=jax.random.key(k), member_chunk=member_chunk
    )
    first_s, _ = timed(lambda: build(5))
    build_s, ens = timed(lambda: build(6))
    if not all(bool(jnp.all(jnp.isfinite(leaf))) for leaf in jax.tree.leaves(ens)):
        raise RuntimeError("non-finite P&C members in the paper-regime benchmark")
    settings = dataclasses.asdict(config)
    settings.update(
        layers=list(config.layers),
        calibration_pool_rows=int(x_pool.shape[0]),
        subset_rows=config.subset_size(config.calibration_size),
        member_chunk=member_chunk,
    )
    return {
        "settings": settings,
        "pnc_build_first_call_s": first_s,
        "pnc_build_s": build_s,
        "pnc_build_compile_s": max(first_s - build_s, 0.0),
        "pnc_build_over_train": build_s / train_s,
        "pnc_build_first_call_over_train": first_s / train_s,
        "targets_met": {"build_le_5pct_of_train": build_s <= 0.05 * train_s},
        "flops": work_and_rates(
            pnc_build_macs(model_config, x_pool.shape[1], config, config.calibration_size)["total"],
            build_s,
            train_macs(model_config, x_pool.shape[1], train_steps, train_batch),
            train_s,
        ),
    }


def work_and_rates(build_macs: int, build_s: float, train_macs: int, train_s: float) -> dict:
    """GFLOP (``2 * MACs``) and GFLOP/s of the build and of training, their work ratio, and the
    build rate at which the build would take 5 % of the training time."""
    build_gflop, train_gflop = 2e-9 * build_macs, 2e-9 * train_macs
    return {
        "build_gflop": build_gflop,
        "train_gflop": train_gflop,
        "build_over_train_work": build_gflop / train_gflop,
        "build_gflop_per_s": build_gflop / build_s,
        "train_gflop_per_s": train_gflop / train_s,
        "build_gflop_per_s_for_5pct": build_gflop / (0.05 * train_s),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = bench_parser(
        __doc__,
        out=True,
        steps=5000,
        members=50,
        cal_rows=50_000,
        pred_rows=10_000,
        member_chunk=None,
    )
    parser.add_argument(
        "--no-methods",
        action="store_true",
        help="skip the per-method costs (bench.method_costs) and pnc_over_deep_ensemble",
    )
    args = parser.parse_args(argv)
    result = {
        "environment": environment(),
        **bench_pnc(
            steps=args.steps,
            members=args.members,
            cal_rows=args.cal_rows,
            pred_rows=args.pred_rows,
            member_chunk=args.member_chunk,
        ),
    }
    if not args.no_methods:
        print("timing every method (bench.method_costs) ...", file=sys.stderr, flush=True)
        costs = benchmark_methods(
            n_train=args.cal_rows,
            n_predict=args.pred_rows,
            steps=args.steps,
            overrides={"pnc": {"n_members": args.members}},
            warm=True,
        )
        result["methods"] = costs["methods"]
        result["method_training_runs_s"] = costs["runs"]
        result["method_training_runs_warm_s"] = costs["runs_warm"]
        for key in (
            "pnc_over_deep_ensemble",
            "pnc_over_deep_ensemble_warm",
            "pnc_over_deep_ensemble_parts",
        ):
            result[key] = costs[key]
        print("timing P&C in the paper's regime ...", file=sys.stderr, flush=True)
        paper = benchmark_methods(
            n_train=args.cal_rows,
            n_predict=args.pred_rows,
            steps=args.steps,
            method_ids=(PNC_ID,),
            overrides={PNC_ID: {"n_members": args.members}},
            pnc_regime="paper",
            warm=True,
        )["methods"][PNC_ID]
        ensemble = costs["methods"][DEEP_ENSEMBLE_ID]
        # compiled code only: this process has compiled the training and the prediction already
        result["paper_regime"].update(methods_pnc=paper, **ratio_parts(paper, ensemble))
    return emit(result, args.out, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1:])

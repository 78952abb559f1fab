"""Cost of every method on an Ant-sized problem: training, post-hoc construction, prediction.

Defaults are the paper's Ant-v5 sizes (35 inputs, 27 targets, a 4x200 network trained for 5,000
steps of batch 64 on 50,000 rows) with 10,000 prediction inputs and each method's default
configuration (paper, Appendix C). Data are synthetic (only the sizes matter). Every time is wall
clock including compilation, i.e. what one workflow job pays; the methods sharing the ``base`` run
(P&C, P&C without correction, SWAG, Laplace, Subspace) are each charged its full training time.

P&C is timed in one of two regimes (``pnc_regime``): ``defaults``, the library's
:class:`pnc.core.perturb_correct.PnCConfig` (every hidden layer perturbed, correction subsets of
10 % of all the training rows), or ``paper``, P&C as the paper's MuJoCo protocol runs it
(:data:`PAPER_REGIME`: 4,096 calibration rows, hidden layers 0 and 2, 30 % subsets), which is
what the study's tables come from.

Usage::

    python -m bench.method_costs                      # full size, prints JSON
    python -m bench.method_costs --methods pnc deep_ensemble --warm --pnc-regime paper
    python -m bench.method_costs --n-train 2000 --n-predict 500 --steps 200 --hidden 32 32
"""

from __future__ import annotations

import dataclasses
import platform
import time
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import numpy as np

from bench.command_line import bench_parser, emit
from pnc.core.mlp import MLPConfig
from pnc.core.perturb_correct import PnCConfig
from pnc.core.training import TrainConfig
from pnc.methods import regression as registry

PAPER_REGIME = PnCConfig(
    n_members=50,
    rank=20,
    bootstrap_frac=0.3,
    layers=(0, 2),
    perturbation_norm="radius",
    ridge_center="zero",
    calibration_size=4096,
)
"""P&C as in the authors' MuJoCo runs and ``config.yaml``'s protocol (``docs/protocol.md``); ``sigma``
and ``ridge`` are the library defaults (the cost does not depend on them)."""

#: Values of ``pnc_regime``: the library's defaults or :data:`PAPER_REGIME`.
PNC_REGIMES: tuple[str, ...] = ("defaults", "paper")


def pnc_overrides(regime: str, *, n_rows: int, n_members: int | None = None) -> dict[str, Any]:
    """P&C's config overrides for ``regime`` (:data:`PNC_REGIMES`) on ``n_rows`` training rows.

    ``paper`` gives every field of :data:`PAPER_REGIME` that P&C's configuration takes, with the
    calibration set cut to ``min(4096, n_rows)``; ``defaults`` gives none. ``n_members`` replaces
    the member count of either.

    Raises:
        ValueError: an unknown regime.
    """
    if regime not in PNC_REGIMES:
        raise ValueError(f"unknown P&C regime {regime!r}; valid: {', '.join(PNC_REGIMES)}")
    out: dict[str, Any] = {}
    if regime == "paper":
        keys = registry.get(registry.PNC_ID).config_keys
        out = {k: v for k, v in dataclasses.asdict(PAPER_REGIME).items() if k in keys}
        out.update(
            layers=list(PAPER_REGIME.layers),
            calibration_size=min(PAPER_REGIME.calibration_size, int(n_rows)),
        )
    if n_members is not None:
        out["n_members"] = int(n_members)
    return out


def synthetic_problem(
    n_train: int, n_predict: int, in_dim: int, out_dim: int, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Raw ``x [n_train, in]``, ``y [n_train, out]`` from a random smooth map, and ``x_test``."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_train, in_dim)).astype(np.float32)
    w1 = rng.normal(size=(in_dim, 64)) / np.sqrt(in_dim)
    w2 = rng.normal(size=(64, out_dim)) / 8.0
    y = np.tanh(x @ w1) @ w2 + 0.1 * rng.normal(size=(n_train, out_dim))
    x_test = (1.5 * rng.normal(size=(n_predict, in_dim))).astype(np.float32)
    return x, y.astype(np.float32), x_test


def _timed(fn, *args, **kwargs):
    """``(fn(*args, **kwargs), seconds)``, waiting for every array of the result.

    Posteriors and predictions are pytrees of their arrays; training runs are returned once their
    arrays are computed.
    """
    start = time.perf_counter()
    out = jax.block_until_ready(fn(*args, **kwargs))
    return out, time.perf_counter() - start


def benchmark_methods(
    *,
    n_train: int = 50_000,
    n_predict: int = 10_000,
    in_dim: int = 35,
    out_dim: int = 27,
    hidden: Sequence[int] = (200, 200, 200, 200),
    steps: int = 5000,
    batch_size: int = 64,
    method_ids: Sequence[str] | None = None,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    pnc_regime: str = "defaults",
    warm: bool = False,
    seed: int = 0,
) -> dict[str, Any]:
    """Time every method once (training runs shared as in the workflow).

    Args:
        n_train, n_predict, in_dim, out_dim, hidden, steps, batch_size: problem and training sizes.
        method_ids: methods to time (default: all of :data:`pnc.methods.regression.METHOD_IDS`).
        overrides: per-method config overrides (default: each method's default configuration);
            P&C's are applied over those of ``pnc_regime``.
        pnc_regime: ``"defaults"`` or ``"paper"`` (:func:`pnc_overrides`), reported as
            ``pnc_regime``.
        warm: also time a second training of every run, post-hoc construction and prediction
            (compiled code only), reported as ``runs_warm`` and per method ``train_warm_s`` /
            ``posthoc_warm_s`` / ``predict_warm_s``, with ``pnc_over_deep_ensemble_warm`` and its
            parts (:func:`ratio_parts`).
        seed: seed of the synthetic data and of the keys.

    Returns:
        ``{"sizes", "device", "runs": {run_id: train_s}, "methods": {id: {"train_s", "posthoc_s",
        "predict_s", "total_over_base_train", "config_id", "run_id", "n_samples"}},
        "pnc_regime", "pnc_over_deep_ensemble"}`` (and with ``warm`` the ``*_warm`` entries above);
        ``total_over_base_train`` is
        ``(train_s + posthoc_s + predict_s) / base train_s`` and ``pnc_over_deep_ensemble`` the whole
        cost of P&C over the whole cost of the Deep Ensemble (when both are timed).
    """
    method_ids = tuple(method_ids or registry.METHOD_IDS)
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - set(method_ids))
    if unknown:
        raise ValueError(f"overrides for methods not timed: {unknown}")
    regime = pnc_overrides(pnc_regime, n_rows=n_train)
    if registry.PNC_ID in method_ids:
        overrides[registry.PNC_ID] = {**regime, **overrides.get(registry.PNC_ID, {})}
    model_config = MLPConfig(out_dim=out_dim, hidden=tuple(hidden))
    train_config = TrainConfig(steps=steps, batch_size=batch_size)
    x, y, x_test = synthetic_problem(n_train, n_predict, in_dim, out_dim, seed)
    key = jax.random.key(seed)

    chosen = {}
    for method_id in method_ids:
        method = registry.get(method_id)
        config = method.make_config(overrides.get(method_id))
        chosen[method_id] = (method, config, method.training_spec(config))
    specs = {spec.run_id: spec for _, _, spec in chosen.values()}
    if "base" not in specs:
        specs["base"] = registry.base_spec()

    def train_all() -> dict[str, tuple[Any, float]]:
        """Every run trained once, timed: ``{run_id: (run, seconds)}`` (the same keys each call)."""
        return {
            run_id: _timed(
                registry.train_spec,
                spec,
                x,
                y,
                model_config=model_config,
                train_config=train_config,
                key=jax.random.fold_in(key, 1),
            )
            for run_id, spec in specs.items()
        }

    trained = train_all()
    runs = {run_id: run for run_id, (run, _) in trained.items()}
    train_s = {run_id: seconds for run_id, (_, seconds) in trained.items()}
    base_s = train_s["base"]
    # with `warm`, the same networks again from compiled code
    train_warm_s = {run_id: seconds for run_id, (_, seconds) in train_all().items()} if warm else {}

    results = {}
    for method_id, (method, config, spec) in chosen.items():
        run = runs[spec.run_id]
        x_std = run.model.x_norm.transform(x)
        y_std = run.model.y_norm.transform(y)
        x_eval = run.model.x_norm.transform(x_test)
        k_build, k_pred = jax.random.split(jax.random.fold_in(key, 2))
        posterior, posthoc_s = _timed(method.build, run, config, x_std, y_std, key=k_build)
        pred, predict_s = _timed(method.predict, posterior, x_eval, key=k_pred)
        entry = {
            "train_s": train_s[spec.run_id],
            "posthoc_s": posthoc_s,
            "predict_s": predict_s,
            "total_over_base_train": (train_s[spec.run_id] + posthoc_s + predict_s) / base_s,
            "config_id": method.config_id(config),
            "run_id": spec.run_id,
            "n_samples": pred.n_samples,
        }
        if warm:
            entry["train_warm_s"] = train_warm_s[spec.run_id]
            posterior, entry["posthoc_warm_s"] = _timed(
                method.build, run, config, x_std, y_std, key=k_build
            )
            _, entry["predict_warm_s"] = _timed(method.predict, posterior, x_eval, key=k_pred)
        results[method_id] = entry

    out = {
        "sizes": {
            "n_train": n_train,
            "n_predict": n_predict,
            "in_dim": in_dim,
            "out_dim": out_dim,
            "hidden": list(hidden),
            "steps": steps,
            "batch_size": batch_size,
        },
        "device": f"{jax.devices()[0].platform}: {jax.devices()[0].device_kind}",
        "host": platform.processor() or platform.machine(),
        "runs": train_s,
        "methods": results,
        "pnc_regime": pnc_regime,
    }
    pnc, ensemble = registry.PNC_ID, registry.DEEP_ENSEMBLE_ID
    if pnc in results and ensemble in results:
        out["pnc_over_deep_ensemble"] = ratio_first_call(results[pnc], results[ensemble])
        if warm:
            out["runs_warm"] = train_warm_s
            out.update(ratio_parts(results[pnc], results[ensemble]))
    return out


def ratio_first_call(pnc: Mapping[str, float], ensemble: Mapping[str, float]) -> float:
    """P&C's whole cost over the Deep Ensemble's on first calls (compilation included):
    ``train_s + posthoc_s + predict_s`` of each entry of :func:`benchmark_methods`."""
    parts = ("train_s", "posthoc_s", "predict_s")
    return sum(pnc[k] for k in parts) / sum(ensemble[k] for k in parts)


def ratio_parts(pnc: Mapping[str, float], ensemble: Mapping[str, float]) -> dict[str, Any]:
    """P&C's whole cost over the Deep Ensemble's from compiled code, and what it is made of.

    Args:
        pnc, ensemble: the two methods' entries of :func:`benchmark_methods` with ``warm``.

    Returns:
        ``{"pnc_over_deep_ensemble_warm": ratio, "pnc_over_deep_ensemble_parts": {...}}``: the
        ratio of ``train + posthoc + predict`` (warm), each of P&C's three terms over the Deep
        Ensemble's whole cost (they add up to the ratio), ``deep_ensemble_train_over_base_train``
        (the members are trained as one vmapped program, so this is below the member count), and
        ``floor_with_free_posthoc``: the ratio if P&C's build and prediction cost nothing (its
        training alone over the Deep Ensemble's whole cost).
    """
    parts = ("train_warm_s", "posthoc_warm_s", "predict_warm_s")
    whole = sum(ensemble[k] for k in parts)
    return {
        "pnc_over_deep_ensemble_warm": sum(pnc[k] for k in parts) / whole,
        "pnc_over_deep_ensemble_parts": {
            "base_train": pnc["train_warm_s"] / whole,
            "pnc_build": pnc["posthoc_warm_s"] / whole,
            "pnc_predict": pnc["predict_warm_s"] / whole,
            "deep_ensemble_train_over_base_train": ensemble["train_warm_s"] / pnc["train_warm_s"],
            "floor_with_free_posthoc": pnc["train_warm_s"] / whole,
        },
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(
        __doc__,
        n_train=50_000,
        n_predict=10_000,
        in_dim=35,
        out_dim=27,
        steps=5000,
        batch_size=64,
        seed=0,
    )
    parser.add_argument("--hidden", type=int, nargs="+", default=[200, 200, 200, 200])
    parser.add_argument(
        "--methods", dest="method_ids", nargs="+", default=None, choices=registry.METHOD_IDS
    )
    parser.add_argument("--warm", action="store_true", help="also time compiled re-runs")
    parser.add_argument(
        "--pnc-regime",
        choices=PNC_REGIMES,
        default="defaults",
        help="P&C's configuration: the library's defaults or the paper's MuJoCo protocol",
    )
    emit(benchmark_methods(**vars(parser.parse_args(argv))))  # the options are its arguments


if __name__ == "__main__":
    main()

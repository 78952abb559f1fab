"""Synthetic long-format results tables shaped like the workflow's ``results/*.csv``.

Values are drawn deterministically from ``numpy.random.default_rng(seed)``; each method has a
quality offset so that orderings are stable but not trivial. Every configuration appears in each
calibration variant: the ``vcal`` rows repeat the ``raw`` rows with the NLL shifted by
:data:`VCAL_NLL_SHIFT` (lower for the methods in ``vcal_wins``, higher for the others), as variance
scaling changes the NLL only; so the variant with the lower validation NLL is ``vcal`` exactly for
the methods in ``vcal_wins``, and that variant of the first configuration is the selected pair.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from pnc.studies.mujoco.results import CALIBRATIONS, METHODS, VCAL

ALL_METHODS = METHODS
#: A small grid per method; the first entry is the selected configuration.
GRIDS = {
    "deep_ensemble": ["n_members=5"],
    "mc_dropout": ["rate=0.05", "rate=0.1", "rate=0.2"],
    "swag": ["scale=0.1", "scale=1.0", "scale=10.0"],
    "laplace": ["prior_precision=10000.0", "prior_precision=100.0"],
    "subspace": ["temperature=1.0", "temperature=100.0"],
    "pnc": [
        "sigma=16,bootstrap_frac=0.1,ridge=0.0001",
        "sigma=8,bootstrap_frac=0.1,ridge=0.0001",
        "sigma=32,bootstrap_frac=0.3,ridge=0.01",
    ],
    "pnc_nocorr": ["sigma=1", "sigma=8"],
    "deep_ensemble_mixture": ["n_members=5"],
}
#: Larger = better on every metric (RMSE/NLL decrease with it).
QUALITY = {
    "deep_ensemble": 0.6,
    "mc_dropout": 0.2,
    "swag": 0.0,
    "laplace": 0.3,
    "subspace": -0.2,
    "pnc": 1.0,
    "pnc_nocorr": -0.5,
    "deep_ensemble_mixture": 0.7,
}
#: The methods drawn from the main random stream (:func:`make_results`).
ORIGINAL_METHODS = (
    "deep_ensemble",
    "mc_dropout",
    "swag",
    "laplace",
    "subspace",
    "pnc",
    "pnc_nocorr",
)
#: Methods whose variance-calibrated variant has the lower NLL (and is selected).
VCAL_WINS: tuple[str, ...] = ("swag", "laplace")
#: How much ``vcal`` lowers (methods in ``vcal_wins``) or raises (the others) every NLL.
VCAL_NLL_SHIFT = 0.1


def make_results(
    envs: Sequence[str] = ("Ant-v5", "Hopper-v5", "Swimmer-v5"),
    *,
    methods: Sequence[str] = ALL_METHODS,
    seeds: Sequence[int] = (0, 1, 2),
    no_mid: Sequence[str] = ("Swimmer-v5",),
    data_source: str = "offline",
    seed: int = 0,
    calibrations: Sequence[str] = CALIBRATIONS,
    vcal_wins: Sequence[str] = VCAL_WINS,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(results, all_configs)`` long-format tables.

    Args:
        envs: environment names.
        methods: method ids to include.
        seeds: seed ids per environment.
        no_mid: environments without a Mid split.
        data_source: ``minari`` or ``offline`` for every env.
        seed: seed of the value generator.
        calibrations: the variants every configuration appears in.
        vcal_wins: methods whose ``vcal`` variant has the lower NLL (selected where present).

    Returns:
        ``results`` (selected (config, calibration) pair only; splits id/near/(mid)/far) and
        ``all_configs`` (every configuration and variant, plus ``val`` rows and a boolean
        ``selected`` column).
    """
    base_rng = np.random.default_rng(seed)
    # methods added to the study later draw from their own stream, so that the values of the
    # original seven (and the orderings the tests rely on) do not depend on their presence
    extra_rng = np.random.default_rng([seed, 1])

    def selected_variant(method: str) -> str:
        return VCAL if VCAL in calibrations and method in vcal_wins else calibrations[0]

    rows = []
    for e_i, env in enumerate(envs):
        scale = 10.0 ** (e_i % 3 - 1)  # RMSE units differ across envs
        splits = ["val", "id", "near"] + ([] if env in no_mid else ["mid"]) + ["far"]
        for method in methods:
            rng = base_rng if method in ORIGINAL_METHODS else extra_rng
            for c_i, config in enumerate(GRIDS[method]):
                q = QUALITY[method] - 0.15 * c_i + 0.2 * rng.normal()
                for s in seeds:
                    for split in splits:
                        shift = {"val": 0.0, "id": 0.0, "near": 0.5, "mid": 1.0, "far": 2.0}[split]
                        noise = lambda sd=0.05: float(sd * rng.normal())  # noqa: B023
                        values = {
                            "rmse": scale * np.exp(-0.3 * q + shift + noise()),
                            "rmse_std": np.exp(-0.3 * q + shift + noise()),
                            "nll": 1.0 + shift * (2.0 - q) + noise(0.2),
                            "spearman": float(np.tanh(0.3 + 0.4 * q - 0.2 * shift + noise(0.1))),
                        }
                        if split in ("near", "mid", "far"):
                            values["auroc"] = float(
                                1 / (1 + np.exp(-(0.5 * shift + q + noise(0.2))))
                            )
                            values["auroc_epistemic"] = values["auroc"] - 0.01
                        for calibration in calibrations:
                            for metric, value in values.items():
                                if metric == "nll" and calibration == VCAL:
                                    wins = method in vcal_wins
                                    value += -VCAL_NLL_SHIFT if wins else VCAL_NLL_SHIFT
                                rows.append(
                                    {
                                        "env": env,
                                        "method": method,
                                        "config": config,
                                        "calibration": calibration,
                                        "seed": s,
                                        "split": split,
                                        "metric": metric,
                                        "value": float(value),
                                        "data_source": data_source,
                                        "selected": c_i == 0
                                        and calibration == selected_variant(method),
                                    }
                                )
    all_configs = pd.DataFrame(rows)
    results = all_configs[all_configs.selected & (all_configs.split != "val")]
    return results.drop(columns="selected").reset_index(drop=True), all_configs

"""Jitter: the base network's prediction with Gaussian noise on its mean (a toy baseline)."""

import dataclasses
from typing import ClassVar

import jax
import jax.numpy as jnp

from pnc.core.predictive import Predictive
from pnc.methods.regression.base_run import OnBaseRun
from pnc.methods.regression.contract import MethodBase


@dataclasses.dataclass(frozen=True)
class JitterConfig:
    noise: float = 0.1
    n_samples: int = 4


class Jitter(OnBaseRun, MethodBase):
    id: ClassVar[str] = "jitter"
    config_cls: ClassVar[type] = JitterConfig
    posthoc_fields: ClassVar[tuple[str, ...]] = ("noise", "n_samples")
    id_fields: ClassVar[tuple[str, ...]] = ("noise",)
    label: ClassVar[str] = "Jitter"
    short_label: ClassVar[str] = "Jit."
    table_order: ClassVar[int] = 55
    style: ClassVar[dict] = {"color": "#000000", "marker": "*", "linestyle": "-", "hatch": "--"}
    hparam_abbreviations: ClassVar[dict[str, str]] = {"noise": "jn"}
    hparam_legend: ClassVar[dict[str, str]] = {"jn": "Jitter noise"}

    def build(self, run, config, x, y, *, key):
        self._check_config(config)
        eps = config.noise * jax.random.normal(key, (config.n_samples,))
        return {"eps": eps, "mean": jnp.mean(y, axis=0)}

    def predict(self, posterior, x, *, key):
        mean = jnp.broadcast_to(posterior["mean"], (x.shape[0], posterior["mean"].shape[0]))
        means = mean[None] + posterior["eps"][:, None, None]
        spread = 1.0 + jnp.mean(x**2, axis=1, keepdims=True)  # a variance that varies by point
        return Predictive(means, jnp.broadcast_to(spread[None], means.shape))

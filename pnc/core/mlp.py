"""The Gaussian MLP: a ReLU network with a mean head and a variance head.

The network maps standardised inputs ``x`` (shape ``[..., in_dim]``) to a Gaussian predictive
``(mean, variance)`` over standardised targets (each ``[..., out_dim]``). Hidden layers are named
``hidden_0 .. hidden_{L-1}`` and the output layer ``head``: one affine map whose ``2 * out_dim``
outputs are split into the mean and the raw variance parameter. Two separate affine heads on the
same last hidden layer (the authors' model) are exactly this map with their kernels side by side;
keeping them in one layer makes "the affine layer after the last hidden layer" a single
``(kernel, bias)`` pair, which is what Perturb-and-Correct corrects when it perturbs the last hidden
layer. The variance link is a config choice: ``softplus`` (``var = softplus(v) + min_variance``,
the authors' model) or ``bounded_logvar`` (a soft clamp of ``log var`` into
``[min_logvar, max_logvar]``).

Besides the Flax module there is a pure functional forward pass over the parameter pytree
(:func:`forward`, :func:`hidden_activations`, :func:`head_outputs`) that P&C and the baselines use
to substitute individual layers; it computes exactly what the module computes.
"""

from __future__ import annotations

import dataclasses
import math

import flax.linen as nn
import jax
import jax.numpy as jnp

from pnc.core import threefry

Array = jax.Array
Params = dict

#: The variance links of the head.
VARIANCE_LINKS: tuple[str, ...] = ("bounded_logvar", "softplus")


@dataclasses.dataclass(frozen=True)
class MLPConfig:
    """Architecture of the Gaussian MLP.

    Attributes:
        out_dim: number of target dimensions D.
        hidden: widths of the hidden layers (default: 4 layers of 200 units, the paper's 4x200).
        dropout_rate: dropout probability after each hidden activation (0 disables dropout).
        variance: the variance link, ``"bounded_logvar"`` or ``"softplus"``.
        min_logvar: lower bound of the predicted log-variance (``bounded_logvar``).
        max_logvar: upper bound of the predicted log-variance (``bounded_logvar``).
        min_variance: variance floor added after the softplus (``softplus``; authors: 1e-6).
    """

    out_dim: int
    hidden: tuple[int, ...] = (200, 200, 200, 200)
    dropout_rate: float = 0.0
    variance: str = "bounded_logvar"
    min_logvar: float = -10.0
    max_logvar: float = 4.0
    min_variance: float = 1e-6

    def __post_init__(self) -> None:
        if self.out_dim < 1:
            raise ValueError(f"out_dim must be >= 1, got {self.out_dim}")
        if len(self.hidden) < 1 or any(int(w) < 1 for w in self.hidden):
            raise ValueError(
                f"hidden must be a non-empty tuple of positive widths, got {self.hidden}"
            )
        if not 0.0 <= self.dropout_rate < 1.0:
            raise ValueError(f"dropout_rate must be in [0, 1), got {self.dropout_rate}")
        if self.variance not in VARIANCE_LINKS:
            raise ValueError(
                f"unknown variance link {self.variance!r}; expected one of {VARIANCE_LINKS}"
            )
        if not self.min_logvar < self.max_logvar:
            raise ValueError("min_logvar must be smaller than max_logvar")
        if not self.min_variance > 0:
            raise ValueError(f"min_variance must be > 0, got {self.min_variance}")
        object.__setattr__(self, "hidden", tuple(int(w) for w in self.hidden))

    @property
    def n_hidden(self) -> int:
        return len(self.hidden)

    def layer_names(self) -> list[str]:
        """Names of the affine layers in forward order: ``hidden_0 .. hidden_{L-1}, head``."""
        return [f"hidden_{i}" for i in range(self.n_hidden)] + ["head"]

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["hidden"] = list(self.hidden)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> MLPConfig:
        d = dict(d)
        d["hidden"] = tuple(d["hidden"])
        return cls(**d)


def bound_logvar(raw: Array, min_logvar: float, max_logvar: float) -> Array:
    """Softly clamp a raw log-variance into ``[min_logvar, max_logvar]`` (smooth, never NaN)."""
    lv = max_logvar - jax.nn.softplus(max_logvar - raw)
    lv = min_logvar + jax.nn.softplus(lv - min_logvar)
    # the outer softplus can overshoot the upper bound by < 1e-6; make the bound exact
    return jnp.minimum(lv, max_logvar)


def split_head(out: Array, config: MLPConfig) -> tuple[Array, Array]:
    """Turn the head's ``[..., 2D]`` output into ``(mean, variance)``, each ``[..., D]``."""
    mean, raw = out[..., : config.out_dim], out[..., config.out_dim :]
    if config.variance == "softplus":
        return mean, jax.nn.softplus(raw) + config.min_variance
    logvar = bound_logvar(raw, config.min_logvar, config.max_logvar)
    return mean, jnp.exp(logvar)


class Dropout(nn.Dropout):
    """``flax.linen.Dropout`` whose mask is drawn with :func:`pnc.core.threefry.bernoulli`: the same
    key (``make_rng``, the same module names ``Dropout_0``, ...), the same mask bits as Flax's
    ``jax.random.bernoulli``, a fraction of the CPU time (``pnc.core.threefry``)."""

    @nn.compact
    def __call__(self, inputs, deterministic: bool | None = None, rng=None):
        deterministic = nn.merge_param("deterministic", self.deterministic, deterministic)
        if self.rate == 0.0 or deterministic:
            return inputs
        if self.rate == 1.0:
            return jnp.zeros_like(inputs)
        keep_prob = 1.0 - self.rate
        if rng is None:
            rng = self.make_rng(self.rng_collection)
        shape = list(inputs.shape)
        for dim in self.broadcast_dims:
            shape[dim] = 1
        mask = jnp.broadcast_to(threefry.bernoulli(rng, keep_prob, tuple(shape)), inputs.shape)
        return jax.lax.select(mask, inputs / keep_prob, jnp.zeros_like(inputs))


class GaussianMLP(nn.Module):
    """Flax module of the Gaussian MLP. ``__call__(x) -> (mean, variance)``, shapes ``[..., D]``.

    With ``dropout_rate > 0`` and ``deterministic=False`` every hidden layer draws an independent
    dropout mask per element from the ``"dropout"`` RNG stream: each example of a batch gets its own
    mask (MC Dropout as in the authors' code, for training and for the test-time passes).
    """

    config: MLPConfig

    @nn.compact
    def __call__(self, x: Array, *, deterministic: bool = True) -> tuple[Array, Array]:
        cfg = self.config
        h = x
        for i, width in enumerate(cfg.hidden):
            h = nn.relu(nn.Dense(width, name=f"hidden_{i}")(h))
            if cfg.dropout_rate > 0.0:
                h = Dropout(rate=cfg.dropout_rate)(h, deterministic=deterministic)
        out = nn.Dense(2 * cfg.out_dim, name="head")(h)
        return split_head(out, cfg)


def init_params(config: MLPConfig, in_dim: int, key: Array) -> Params:
    """Initialise parameters: ``{"hidden_i": {"kernel": [d_in, d_out], "bias": [d_out]}, "head": ...}``."""
    variables = GaussianMLP(config).init(key, jnp.zeros((1, in_dim), jnp.float32))
    return variables["params"]


def hidden_activations(params: Params, x: Array, config: MLPConfig) -> list[Array]:
    """Post-activations of every hidden layer (no dropout).

    Args:
        params: parameter pytree of :func:`init_params`.
        x: standardised inputs ``[..., in_dim]``.

    Returns:
        ``[h_1, ..., h_L]`` with ``h_l`` of shape ``[..., hidden[l-1]]``.
    """
    hs = []
    h = x
    for i in range(config.n_hidden):
        layer = params[f"hidden_{i}"]
        h = jax.nn.relu(h @ layer["kernel"] + layer["bias"])
        hs.append(h)
    return hs


def head_outputs(params: Params, h_last: Array, config: MLPConfig) -> tuple[Array, Array]:
    """Apply the head to the last hidden post-activation ``[..., d_L]`` -> ``(mean, var)``."""
    out = h_last @ params["head"]["kernel"] + params["head"]["bias"]
    return split_head(out, config)


def forward(params: Params, x: Array, config: MLPConfig) -> tuple[Array, Array]:
    """Deterministic forward pass, identical to ``GaussianMLP(config).apply``.

    Args:
        x: standardised inputs ``[..., in_dim]``.

    Returns:
        ``(mean, variance)``, each ``[..., out_dim]``, in standardised target units.
    """
    return head_outputs(params, hidden_activations(params, x, config)[-1], config)


def gaussian_nll(mean: Array, var: Array, y: Array) -> Array:
    """Elementwise Gaussian negative log-likelihood ``0.5 (log 2 pi + log var + (y - mean)^2 / var)``."""
    return 0.5 * (math.log(2.0 * math.pi) + jnp.log(var) + jnp.square(y - mean) / var)

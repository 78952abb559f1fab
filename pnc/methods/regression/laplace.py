"""Kronecker-factored Laplace approximation (Ritter et al., 2018) around the base model.

For every affine layer ``l`` (the hidden layers and the head, which holds the mean and the variance
outputs) with augmented input ``a = [h_{l-1}, 1]`` (``d_in + 1``) and pre-activation ``s = a W``
(``W = [kernel; bias]``, ``[d_in + 1, d_out]``), the per-example gradient of the loss is
``vec(a g^T) = a (x) g`` with ``g = dL/ds``, so the layer's Fisher block ``E[(a a^T) (x) (g g^T)]``
is approximated by

    F_l ~= A_l (x) G_l,   A_l = E[a a^T],   G_l = E[g g^T]     (KFAC; row-major ``vec`` of ``W``).

The head's ``2D`` outputs are the mean head (columns ``0..D-1``) and the variance head (columns
``D..2D-1``) side by side; as in the authors' code, which gives the two heads Kronecker blocks of
their own, the head's ``G`` keeps only its two diagonal ``[D, D]`` blocks
(``G = blockdiag(G_mean, G_var)``), so ``A (x) G`` is exactly the two heads' blocks
``A (x) G_mean`` and ``A (x) G_var`` and the heads are independent under the posterior.

**Fisher.** ``L`` is the per-dimension *mean* Gaussian NLL of one example,
``L = (1/D) sum_d NLL(y_d | mean_d(x), var_d(x))`` (the authors' laplace.py scales both heads'
gradients by ``1/D``, so ``G`` is ``1/D^2`` times that of the summed NLL), and ``g`` is computed for
targets *sampled from the model's own predictive* ``y ~ N(mean(x), var(x))`` (``n_fisher_samples``
draws per input; the authors: one), i.e. the Monte Carlo estimate of the true Fisher of the
mean-and-variance head (not the empirical Fisher of the observed targets). ``A`` and ``G`` average
over the ``n`` rows used (and the draws).

**Posterior.** The layer's posterior precision is ``n (A_l (x) G_l) + delta I`` with ``n`` the
number of rows the factors were estimated on (all ``N`` training rows, or ``max_rows`` of them when
subsampled: the authors' ``data_size`` is the subset size) and ``delta`` the prior precision (post
hoc; grid {1e1, ..., 1e5}, paper Appendix C). With ``A = Q_A diag(a) Q_A^T`` and
``G = Q_G diag(g) Q_G^T`` it is exactly ``(Q_A (x) Q_G) diag(n a (x) g + delta) (Q_A (x) Q_G)^T``,
so a sample is

    W = W_MAP + Q_A (Z / sqrt(n a g^T + delta)) Q_G^T,   Z ~ N(0, I) of shape [d_in + 1, d_out].

Layers are independent (block-diagonal posterior).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any, ClassVar

import jax
import jax.numpy as jnp

from pnc.core.mlp import MLPConfig, Params, forward, gaussian_nll, split_head
from pnc.core.predictive import Predictive
from pnc.core.training import TrainedModel
from pnc.methods.configs import check_max_rows, check_positive
from pnc.methods.regression.base_run import OnBaseRun
from pnc.methods.regression.contract import MethodBase
from pnc.methods.regression.runs import TrainingRun
from pnc.methods.regression.sampling import check_inputs, sample_predictive

Array = jax.Array


@dataclasses.dataclass(frozen=True)
class LaplaceConfig:
    """KFAC Laplace hyperparameters.

    Attributes:
        prior_precision: ``delta`` (post hoc; grid {1e1, 1e2, 1e3, 1e4, 1e5}).
        n_samples: ``S`` weight samples.
        max_rows: training rows used to estimate the Kronecker factors (``None``: all rows;
            otherwise a random subset of that many rows); the precision's ``n`` is the rows used.
        n_fisher_samples: sampled targets per input for the Monte Carlo Fisher.
        chunk_size: samples evaluated together in :meth:`Laplace.predict`.
    """

    prior_precision: float = 1e4
    n_samples: int = 100
    max_rows: int | None = None
    n_fisher_samples: int = 1
    chunk_size: int = 25

    def __post_init__(self) -> None:
        check_positive(self, "prior_precision", "n_samples", "n_fisher_samples", "chunk_size")
        check_max_rows(self)


def augmented_layer(layer: dict) -> Array:
    """``W = [kernel; bias]``, shape ``[d_in + 1, d_out]``."""
    return jnp.concatenate([layer["kernel"], layer["bias"][None]], axis=0)


def _forward_with_offsets(
    params: Params, x: Array, config: MLPConfig, offsets: list[Array]
) -> tuple[Array, Array, list[Array]]:
    """Forward pass adding ``offsets[l]`` to layer ``l``'s pre-activation; also returns the inputs."""
    inputs = []
    h = x
    names = config.layer_names()
    for i, name in enumerate(names):
        inputs.append(h)
        s = h @ params[name]["kernel"] + params[name]["bias"] + offsets[i]
        h = s if name == "head" else jax.nn.relu(s)
    mean, var = split_head(h, config)
    return mean, var, inputs


def head_block_mask(out_dim: int, dtype=jnp.float32) -> Array:
    """``[2D, 2D]`` mask of ``blockdiag(1_{DxD}, 1_{DxD})``: zero between the mean and variance heads."""
    head = jnp.arange(2 * out_dim) >= out_dim
    return (head[:, None] == head[None, :]).astype(dtype)


@functools.partial(jax.jit, static_argnames=("config",))
def kfac_factors_for_targets(
    params: Params, x: Array, targets: Array, config: MLPConfig
) -> dict[str, tuple[Array, Array]]:
    """Kronecker factors ``(A_l, G_l)`` of every layer for given targets.

    ``G_l`` is built from ``g = dL/ds`` of the per-dimension mean NLL ``L = (1/D) sum_d NLL_d``
    of each example; the head's ``G`` is block-diagonal over the mean and variance heads (module
    docstring).

    Args:
        x: standardised inputs ``[n, in_dim]``.
        targets: ``[C, n, D]``; ``C`` target draws per input (``G`` averages over ``C`` and ``n``).

    Returns:
        ``{layer_name: (A [d_in + 1, d_in + 1], G [d_out, d_out])}``.
    """
    n = x.shape[0]
    names = config.layer_names()
    zeros = [jnp.zeros((n, params[name]["bias"].shape[0]), x.dtype) for name in names]
    _, _, inputs = _forward_with_offsets(params, x, config, zeros)

    def grads_for(y: Array) -> list[Array]:
        def loss(offsets: list[Array]) -> Array:
            mean, var, _ = _forward_with_offsets(params, x, config, offsets)
            # sum over rows of each row's mean over the D target dims
            return jnp.sum(jnp.mean(gaussian_nll(mean, var, y), axis=-1))

        # each row's pre-activation only affects its own loss term: rows of the gradient are the
        # per-example gradients g
        return jax.grad(loss)(zeros)

    grads = jax.vmap(grads_for)(targets)  # list of [C, n, d_out]
    factors = {}
    for name, a, g in zip(names, inputs, grads, strict=True):
        a_aug = jnp.concatenate([a, jnp.ones((n, 1), a.dtype)], axis=1)
        A = a_aug.T @ a_aug / n
        G = jnp.einsum("cnd,cne->de", g, g) / (g.shape[0] * n)
        if name == "head":  # the mean and variance heads are separate blocks (module docstring)
            G = G * head_block_mask(config.out_dim, G.dtype)
        factors[name] = (A, G)
    return factors


@functools.partial(jax.jit, static_argnames=("config", "n_fisher_samples"))
def kfac_factors(
    params: Params, x: Array, key: Array, *, config: MLPConfig, n_fisher_samples: int = 1
) -> dict[str, tuple[Array, Array]]:
    """Kronecker factors with targets sampled from the model's predictive (Monte Carlo Fisher)."""
    mean, var = forward(params, x, config)
    noise = jax.random.normal(key, (n_fisher_samples, *mean.shape), mean.dtype)
    targets = jax.lax.stop_gradient(mean + jnp.sqrt(var) * noise)
    return kfac_factors_for_targets(params, x, targets, config)


def eigen_factors(factors: dict[str, tuple[Array, Array]]) -> dict[str, dict[str, Array]]:
    """Eigendecompose every factor: ``{layer: {"q_a", "eig_a", "q_g", "eig_g"}}`` with
    ``A = Q_A diag(eig_a) Q_A^T`` and ``G = Q_G diag(eig_g) Q_G^T`` (eigenvalues clamped at 0)."""
    out = {}
    for name, (A, G) in factors.items():
        eig_a, q_a = jnp.linalg.eigh(A)
        eig_g, q_g = jnp.linalg.eigh(G)
        out[name] = {
            "q_a": q_a,
            "eig_a": jnp.maximum(eig_a, 0.0),
            "q_g": q_g,
            "eig_g": jnp.maximum(eig_g, 0.0),
        }
    return out


def layer_offset(eigen: dict[str, Array], n_data: Array, delta: Array, z: Array) -> Array:
    """``W - W_MAP = Q_A (Z / sqrt(n a g^T + delta)) Q_G^T`` for standard normal ``z [d_in+1,
    d_out]``.

    Maps ``N(0, I)`` to ``N(0, (n A (x) G + delta I)^{-1})`` (row-major ``vec``; module docstring).
    """
    precision = n_data * eigen["eig_a"][:, None] * eigen["eig_g"][None, :] + delta
    return eigen["q_a"] @ (z * jax.lax.rsqrt(precision)) @ eigen["q_g"].T


def sample_params(
    params: Params, eigen: dict, n_data: Array, delta: Array, key: Array, config: MLPConfig
) -> Params:
    """One weight sample from the block-diagonal KFAC Laplace posterior.

    One standard normal vector is drawn for all layers and cut into the layers' ``Z`` blocks.
    """
    names = config.layer_names()
    shapes = [(eigen[n]["q_a"].shape[0], eigen[n]["q_g"].shape[0]) for n in names]
    z_all = jax.random.normal(key, (sum(a * b for a, b in shapes),))
    out, start = {}, 0
    for name, (rows, cols) in zip(names, shapes, strict=True):
        z = z_all[start : start + rows * cols].reshape(rows, cols)
        start += rows * cols
        offset = layer_offset(eigen[name], n_data, delta, z)
        out[name] = {
            "kernel": params[name]["kernel"] + offset[:-1],
            "bias": params[name]["bias"] + offset[-1],
        }
    return out


@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=("eigen", "model"),
    meta_fields=("n_data", "prior_precision", "n_samples", "chunk_size"),
)
@dataclasses.dataclass(frozen=True)
class LaplacePosterior:
    """Eigendecomposed Kronecker factors around ``model.params`` (a pytree of its arrays).

    Attributes:
        eigen: ``{layer: {"q_a" [d_in + 1, d_in + 1], "eig_a" [d_in + 1], "q_g" [d_out, d_out],
            "eig_g" [d_out]}}``.
        n_data: ``n``, the rows the factors were estimated on (static).
        prior_precision: ``delta`` (static).
        model: the base model (the MAP parameters ``W_MAP``).
        n_samples: ``S`` weight samples (static).
        chunk_size: samples evaluated together (static).
    """

    eigen: dict
    n_data: int
    prior_precision: float
    model: TrainedModel
    n_samples: int
    chunk_size: int


@functools.partial(jax.jit, static_argnames=("model_config", "n_samples", "chunk_size"))
def _predict_laplace(
    params: Params,
    eigen: dict,
    n_data: Array,
    delta: Array,
    x: Array,
    key: Array,
    *,
    model_config: MLPConfig,
    n_samples: int,
    chunk_size: int,
) -> Predictive:
    def one(k: Array) -> tuple[Array, Array]:
        return forward(
            sample_params(params, eigen, n_data, delta, k, model_config), x, model_config
        )

    return sample_predictive(one, jax.random.split(key, n_samples), chunk_size)


class Laplace(OnBaseRun, MethodBase):
    """KFAC Laplace on the shared base run."""

    id: ClassVar[str] = "laplace"
    label: ClassVar[str] = "Laplace"
    short_label: ClassVar[str] = "Lap."
    table_order: ClassVar[int] = 40
    style: ClassVar[Mapping[str, object]] = {
        "color": "#CC79A7",
        "marker": "^",
        "linestyle": ":",
        "hatch": "..",
    }
    hparam_abbreviations: ClassVar[Mapping[str, str]] = {
        "prior_precision": "prior",
        "n_samples": "S",
    }
    hparam_legend: ClassVar[Mapping[str, str]] = {"prior": "Laplace prior precision"}
    config_cls: ClassVar[type] = LaplaceConfig
    training_fields: ClassVar[tuple[str, ...]] = ()
    posthoc_fields: ClassVar[tuple[str, ...]] = (
        "prior_precision",
        "n_samples",
        "max_rows",
        "n_fisher_samples",
        "chunk_size",
    )
    id_fields: ClassVar[tuple[str, ...]] = ("prior_precision",)

    def build(self, run: TrainingRun, config: LaplaceConfig, x, y, *, key) -> LaplacePosterior:
        """Estimate and eigendecompose the factors on (a subset of) standardised ``x [N, in]``.

        ``y`` is not used: the Fisher's targets are sampled from the model. The posterior's
        ``n_data`` is the number of rows used, ``min(N, max_rows)``.
        """
        self._check_config(config)
        x = check_inputs(x, run.model.in_dim)
        k_rows, k_fisher = jax.random.split(key)
        if config.max_rows is not None and x.shape[0] > config.max_rows:
            x = x[jax.random.choice(k_rows, x.shape[0], (config.max_rows,), replace=False)]
        n_data = x.shape[0]
        factors = kfac_factors(
            run.model.params,
            x,
            k_fisher,
            config=run.model.config,
            n_fisher_samples=config.n_fisher_samples,
        )
        return LaplacePosterior(
            eigen=eigen_factors(factors),
            n_data=n_data,
            prior_precision=config.prior_precision,
            model=run.model,
            n_samples=config.n_samples,
            chunk_size=config.chunk_size,
        )

    def parameter_samples(self, posterior: LaplacePosterior, key: Array) -> tuple[Any, Any]:
        """The parameter samples :meth:`predict` evaluates (same key use), ``[S]``-leading, and
        the reference network (the trained network, its MAP)."""
        model = posterior.model
        keys = jax.random.split(key, posterior.n_samples)
        n_data = jnp.asarray(posterior.n_data, jnp.float32)
        delta = jnp.asarray(posterior.prior_precision, jnp.float32)
        samples = jax.vmap(
            lambda k: sample_params(model.params, posterior.eigen, n_data, delta, k, model.config)
        )(keys)
        return samples, model.params

    def predict(self, posterior: LaplacePosterior, x: Array, *, key: Array) -> Predictive:
        x = check_inputs(x, posterior.model.in_dim)
        return _predict_laplace(
            posterior.model.params,
            posterior.eigen,
            jnp.asarray(posterior.n_data, jnp.float32),
            jnp.asarray(posterior.prior_precision, jnp.float32),
            x,
            key,
            model_config=posterior.model.config,
            n_samples=posterior.n_samples,
            chunk_size=posterior.chunk_size,
        )

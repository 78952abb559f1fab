"""The theory's objects (paper, Section 4), computed on a trained network, and the mechanism plots.

Everything here concerns one perturbed hidden layer ``l`` and the affine layer that follows it
(``hidden_{l+1}``, or the ``head`` after the last hidden layer), in the augmented notation of
Section 4.1: the representation is the post-activation ``y(x) = h_l(x)`` (``[d]``), augmented as
``y_bar(x) = [1, y(x)]`` (``[d+1]``); the next layer is ``z(x) = Theta y_bar(x)`` with
``Theta = [b, W] in R^{q x (d+1)}`` (``W`` is the transposed Flax kernel). A perturbation
``v in R^T`` (``T = K``, the low-rank basis of Section 3) moves the kernel of layer ``l`` to
``W_l + reshape(U v)``; with P&C's scale, ``v = sigma z``, ``z ~ N(0, I_K)``.

Calibration subsets ``S`` are passed as input rows ``x_S [B, in_dim]``; test inputs as
``x [N, in_dim]``. All inputs are standardised.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from pnc.mlp import MLPConfig, Params, forward, hidden_activations
from pnc.perturb_correct import ridge_correction

Array = jax.Array


# ----------------------------------------------------------------------------- the layer pair


def augment(y: Array) -> Array:
    """``y_bar = [1, y]``: prepend the constant bias coordinate, ``[..., d] -> [..., d+1]``."""
    return jnp.concatenate([jnp.ones(y.shape[:-1] + (1,), y.dtype), y], axis=-1)


def next_layer_name(mlp_config: MLPConfig, layer: int) -> str:
    """Name of the affine layer after hidden layer ``layer`` (``hidden_{l+1}`` or ``head``)."""
    if not 0 <= layer < mlp_config.n_hidden:
        raise ValueError(f"layer must be in [0, {mlp_config.n_hidden}), got {layer}")
    return mlp_config.layer_names()[layer + 1]


def theta(params: Params, mlp_config: MLPConfig, layer: int) -> Array:
    """``Theta = [b, W]`` of the layer after hidden layer ``layer``, ``[q, d+1]`` (Section 4.1)."""
    nxt = params[next_layer_name(mlp_config, layer)]
    return jnp.concatenate([nxt["bias"][:, None], nxt["kernel"].T], axis=1)


def representation(
    params: Params,
    mlp_config: MLPConfig,
    layer: int,
    x: Array,
    basis: Array | None = None,
    v: Array | None = None,
) -> Array:
    """Post-activation ``y_v(x)`` of hidden layer ``layer`` with kernel ``W_l + reshape(U v)``.

    Args:
        x: inputs ``[N, in_dim]``.
        basis: ``U`` of :func:`pnc.perturb_correct.perturbation_basis`, ``[d_in * d, T]``.
        v: perturbation coefficients ``[T]``; ``None`` (or no basis) gives the unperturbed ``y(x)``.

    Returns:
        ``[N, d]``.
    """
    next_layer_name(mlp_config, layer)  # validates ``layer``
    h = x if layer == 0 else hidden_activations(params, x, mlp_config)[layer - 1]
    p = params[f"hidden_{layer}"]
    kernel = p["kernel"]
    if basis is not None and v is not None:
        kernel = kernel + (basis @ v).reshape(kernel.shape)
    return jax.nn.relu(h @ kernel + p["bias"])


def _gram(y_cal: Array, ridge: float) -> Array:
    """``G = Y_bar_S^T Y_bar_S + lambda I``, ``[d+1, d+1]``."""
    yb = augment(y_cal)
    return yb.T @ yb + ridge * jnp.eye(yb.shape[1], dtype=yb.dtype)


# ----------------------------------------------------------------------------- Section 4.2


def ridge_leverage(y_cal: Array, y: Array, ridge: float) -> Array:
    """Ridge leverage ``h_S^lambda(x) = y_bar(x)^T (Y_bar_S^T Y_bar_S + lambda I)^{-1} y_bar(x)``.

    Section 4.2 (definition before Theorem 1): small on calibration-like ``x``, large where ``x``
    extrapolates beyond the calibration representations.

    Args:
        y_cal: calibration representations ``y(x_i)``, ``[B, d]``.
        y: test representations ``y(x)``, ``[N, d]``.
        ridge: ``lambda >= 0``.

    Returns:
        ``[N]``.
    """
    yb = augment(y)
    sol = jnp.linalg.solve(_gram(y_cal, ridge), yb.T)  # [d+1, N]
    return jnp.sum(yb.T * sol, axis=0)


def hat_weights(y_cal: Array, y: Array, ridge: float) -> Array:
    """Ridge hat weights ``w_S^lambda(x) = Y_bar_S (Y_bar_S^T Y_bar_S + lambda I)^{-1} y_bar(x)``.

    Section 4.3 (definition before Proposition 1); ``||w||^2 <= h_S^lambda(x)``
    (eq. hat-weight-leverage).

    Args:
        y_cal: ``[B, d]``; y: ``[N, d]``; ridge: ``lambda``.

    Returns:
        ``[N, B]``.
    """
    sol = jnp.linalg.solve(_gram(y_cal, ridge), augment(y).T)  # [d+1, N]
    return (augment(y_cal) @ sol).T


@functools.partial(jax.jit, static_argnames=("mlp_config", "layer"))
def post_correction_residual(
    params: Params,
    mlp_config: MLPConfig,
    layer: int,
    basis: Array,
    x_cal: Array,
    x: Array,
    v: Array,
    ridge: float,
) -> Array:
    """Post-correction residual ``r_S(x; v) = Theta_hat_S(v) y_bar_v(x) - Theta y_bar(x)``.

    Eq. (post-correction-residual). ``Theta_hat_S(v)`` is the ridge correction of Lemma 1 fitted on
    the calibration rows ``x_cal`` (computed by :func:`pnc.ridge_correction`, the same code P&C
    uses). Differentiable in ``v``.

    Args:
        basis: ``U``, ``[d_in * d, T]``; x_cal: ``S``, ``[B, in_dim]``; x: ``[N, in_dim]``;
        v: ``[T]``; ridge: ``lambda``.

    Returns:
        ``[N, q]``.
    """
    nxt = params[next_layer_name(mlp_config, layer)]
    y_cal = representation(params, mlp_config, layer, x_cal)
    y_cal_v = representation(params, mlp_config, layer, x_cal, basis, v)
    kernel_new, bias_new = ridge_correction(y_cal, y_cal_v, nxt["kernel"], nxt["bias"], ridge)
    y_v = representation(params, mlp_config, layer, x, basis, v)
    y = representation(params, mlp_config, layer, x)
    return (y_v @ kernel_new + bias_new) - (y @ nxt["kernel"] + nxt["bias"])


@functools.partial(jax.jit, static_argnames=("mlp_config", "layer"))
def corrected_sensitivity(
    params: Params,
    mlp_config: MLPConfig,
    layer: int,
    basis: Array,
    x_cal: Array,
    x: Array,
    ridge: float,
) -> Array:
    """First-order corrected sensitivity ``A_S(x) = d r_S(x; v) / dv`` at ``v = 0`` (Section 4.1).

    Computed by forward-mode autodiff (``jax.jacfwd``) of :func:`post_correction_residual`.

    Returns:
        ``[N, q, T]``.
    """
    v0 = jnp.zeros((basis.shape[1],), basis.dtype)
    residual = lambda v: post_correction_residual(
        params, mlp_config, layer, basis, x_cal, x, v, ridge
    )
    return jax.jacfwd(residual)(v0)


@functools.partial(jax.jit, static_argnames=("mlp_config", "layer"))
def representation_jacobian(
    params: Params, mlp_config: MLPConfig, layer: int, basis: Array, x: Array
) -> Array:
    """Augmented representation Jacobian ``J_x = d y_bar_v(x) / dv`` at ``v = 0`` (Section 4.3).

    Returns:
        ``[N, d+1, T]``; the first row (the bias coordinate) is zero.
    """
    v0 = jnp.zeros((basis.shape[1],), basis.dtype)
    rep = lambda v: augment(representation(params, mlp_config, layer, x, basis, v))
    return jax.jacfwd(rep)(v0)


@functools.partial(jax.jit, static_argnames=("mlp_config", "layer"))
def calibration_predicted_jacobian(
    params: Params,
    mlp_config: MLPConfig,
    layer: int,
    basis: Array,
    x_cal: Array,
    x: Array,
    ridge: float,
) -> Array:
    """``T_S^lambda(x) = sum_i w_S^lambda(x)_i J_{x_i}`` (Section 4.3, before Proposition 1).

    Returns:
        ``[N, d+1, T]``.
    """
    w = hat_weights(
        representation(params, mlp_config, layer, x_cal),
        representation(params, mlp_config, layer, x),
        ridge,
    )  # [N, B]
    j_cal = representation_jacobian(params, mlp_config, layer, basis, x_cal)  # [B, d+1, T]
    return jnp.einsum("nb,bdt->ndt", w, j_cal)


@functools.partial(jax.jit, static_argnames=("mlp_config", "layer"))
def sensitivity_decomposition(
    params: Params,
    mlp_config: MLPConfig,
    layer: int,
    basis: Array,
    x_cal: Array,
    x: Array,
    ridge: float,
) -> Array:
    """Right-hand side of Proposition 1 (eq. sensitivity-decomposition): ``Theta (J_x - T_S(x))``.

    Equals :func:`corrected_sensitivity` whenever ``G = Y_bar_S^T Y_bar_S + lambda I`` is
    nonsingular.

    Returns:
        ``[N, q, T]``.
    """
    j_x = representation_jacobian(params, mlp_config, layer, basis, x)
    t_x = calibration_predicted_jacobian(params, mlp_config, layer, basis, x_cal, x, ridge)
    return jnp.einsum("qd,ndt->nqt", theta(params, mlp_config, layer), j_x - t_x)


# ----------------------------------------------------------------------------- Section 4.4


def effective_rank(a: Array) -> Array:
    """Covariance effective rank of a linear map, ``r_eff(A) = ||A||_F^4 / ||A^T A||_F^2``.

    Section 4.4 (definition before Theorem 2); batched over leading axes of ``a [..., q, T]``.
    """
    fro2 = jnp.sum(jnp.square(a), axis=(-2, -1))
    ata = jnp.einsum("...qs,...qt->...st", a, a)
    return jnp.square(fro2) / jnp.sum(jnp.square(ata), axis=(-2, -1))


def covariance_effective_rank(c: Array) -> Array:
    """Effective rank of a PSD covariance, ``r_eff(C) = tr(C)^2 / ||C||_F^2`` (Section 4.4).

    The participation ratio of the eigenvalues; equals :func:`effective_rank` of ``A`` for
    ``C = A A^T``. Batched over leading axes of ``c [..., q, q]``.
    """
    tr = jnp.trace(c, axis1=-2, axis2=-1)
    return jnp.square(tr) / jnp.sum(jnp.square(c), axis=(-2, -1))


def random_probe_sensitivity(a: Array, sigma: float, n_probes: int, *, key: Array) -> Array:
    """Random sketch ``V_n = (1/n) sum_m ||A v_m||^2``, ``v_m ~ N(0, sigma^2 I_T)`` (Theorem 2).

    Unbiased for ``sigma^2 ||A||_F^2`` with relative variance ``2 / (n r_eff(A))``
    (eq. relative-sketch-variance). ``a`` is ``[..., q, T]``; the same probes are used for every
    leading index (as one finite ensemble would).

    Returns:
        ``[...]``.
    """
    v = sigma * jax.random.normal(key, (n_probes, a.shape[-1]), a.dtype)
    return jnp.mean(jnp.sum(jnp.square(jnp.einsum("...qt,mt->...mq", a, v)), axis=-1), axis=-1)


# ----------------------------------------------------------------------------- mechanism plots


@functools.partial(jax.jit, static_argnames=("mlp_config", "layer"))
def perturbation_magnitudes(
    params: Params, members: Params, mlp_config: MLPConfig, x: Array, layer: int | None = None
) -> tuple[Array, Array]:
    """Per input: mean over members of ``||dh||`` and ``||dy||`` (paper, Figure 1 B/C).

    ``dh = h_l^{(m)}(x) - h_l(x)`` is the change of the hidden post-activation of ``layer``
    (default: the last hidden layer) and ``dy = mu^{(m)}(x) - mu(x)`` the change of the predicted
    mean (standardised units), member ``m`` against the base network. Works for any method whose
    members are parameter pytrees with a leading ``[M]`` axis.

    Args:
        params: base parameters; members: stacked member parameters; x: ``[N, in_dim]``.

    Returns:
        ``(dh_norm [N], dy_norm [N])``.
    """
    layer = mlp_config.n_hidden - 1 if layer is None else layer
    next_layer_name(mlp_config, layer)

    def stats(p):
        return hidden_activations(p, x, mlp_config)[layer], forward(p, x, mlp_config)[0]

    h0, y0 = stats(params)
    hm, ym = jax.vmap(stats)(members)
    dh = jnp.linalg.norm(hm - h0[None], axis=-1)
    dy = jnp.linalg.norm(ym - y0[None], axis=-1)
    return jnp.mean(dh, axis=0), jnp.mean(dy, axis=0)


def mahalanobis_distance(h_cal: Array, h: Array, shrinkage: float = 1e-3) -> Array:
    """Mahalanobis distance of hidden activations to the calibration activations (Figure 3B).

    ``sqrt((h - mu)^T (Sigma + s I)^{-1} (h - mu))`` with ``mu``, ``Sigma`` the mean and covariance
    of ``h_cal`` and the regulariser ``s = shrinkage * tr(Sigma) / d`` (dead units would otherwise
    make ``Sigma`` singular). Computed in float32 with a Cholesky factor.

    Args:
        h_cal: calibration activations ``[B, d]``; h: ``[N, d]``; shrinkage: relative ridge > 0.

    Returns:
        ``[N]``.
    """
    if shrinkage <= 0:
        raise ValueError(f"shrinkage must be > 0, got {shrinkage}")
    mu = jnp.mean(h_cal, axis=0)
    centred = h_cal - mu
    cov = centred.T @ centred / h_cal.shape[0]
    d = cov.shape[0]
    reg = shrinkage * jnp.maximum(jnp.trace(cov) / d, jnp.finfo(cov.dtype).tiny)
    chol = jnp.linalg.cholesky(cov + reg * jnp.eye(d, dtype=cov.dtype))
    z = jax.scipy.linalg.solve_triangular(chol, (h - mu).T, lower=True)
    return jnp.sqrt(jnp.sum(jnp.square(z), axis=0))

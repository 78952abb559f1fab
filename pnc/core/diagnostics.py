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
import numpy as np

from pnc.core.mlp import MLPConfig, Params, forward, hidden_activations
from pnc.core.perturb_correct import ridge_correction

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
        basis: ``U`` of :func:`pnc.core.perturb_correct.perturbation_basis`, ``[d_in * d, T]``.
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


@jax.jit
def _nearest_block(reference: Array, ref_sq: Array, block: Array) -> Array:
    d2 = jnp.sum(jnp.square(block), -1)[:, None] - 2.0 * block @ reference.T + ref_sq[None, :]
    nearest = jnp.argmin(d2, axis=1)
    # the distance itself from the difference, not the expansion (exact for near-duplicates)
    return jnp.linalg.norm(block - reference[nearest], axis=-1)


def nearest_distance(reference: Array, points: Array, block_size: int = 256) -> np.ndarray:
    """Euclidean distance of each point to its nearest reference row (e.g. the training inputs).

    The nearest row is found blockwise from the expanded squared distances (``[block_size, R]`` at
    a time); its distance is then computed from the difference.

    Args:
        reference: ``[R, d]``; points: ``[N, d]``; block_size: points per block (> 0).

    Returns:
        ``[N]`` (NumPy float32).
    """
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    reference = jnp.asarray(reference)
    points = np.asarray(points, reference.dtype)
    n = points.shape[0]
    pad = (-n) % block_size  # every block has one shape: one compiled program
    padded = np.concatenate([points, np.zeros((pad, points.shape[1]), points.dtype)])
    ref_sq = jnp.sum(jnp.square(reference), -1)
    blocks = [
        np.asarray(_nearest_block(reference, ref_sq, padded[i : i + block_size]))
        for i in range(0, padded.shape[0], block_size)
    ]
    return np.concatenate(blocks)[:n] if blocks else np.zeros(0, np.float32)


# ----------------------------------------------------------------------------- the whole member


def corrected_member(
    params: Params,
    mlp_config: MLPConfig,
    bases: dict[int, Array],
    x_cal: Array,
    coeffs: dict[int, Array],
    ridge: float | Array,
    *,
    center: str = "original",
    correct: bool = True,
) -> Params:
    """The multi-layer P&C member for explicit perturbation coefficients (Section 3).

    The chain of :func:`pnc.build_members` with the coefficients given instead of drawn: the
    perturbed layers ``l`` (the keys of ``bases``) are visited in forward order; ``hidden_l``'s
    current kernel receives ``reshape(U_l v_l)``, the calibration rows are propagated through the
    member as modified so far, and layer ``l + 1`` is refit (:func:`pnc.ridge_correction`) so that
    its pre-activations reproduce the base network's on ``x_cal``. With
    ``v_l = sigma z_l`` (or ``sigma z_l / ||z_l||``) and ``x_cal`` a member's correction subset this
    is that member; with the whole calibration set it is the map whose derivative
    :func:`output_sensitivity` takes. Differentiable in ``coeffs``.

    Args:
        bases: ``{layer: U_l [d_in * d_out, K_l]}`` (:func:`pnc.core.perturb_correct.perturbation_bases`).
        x_cal: calibration rows ``[B, in_dim]`` (standardised).
        coeffs: ``{layer: v_l [K_l]}``, already scaled.
        ridge: ``lambda``; center: ``"original"`` or ``"zero"`` (see :func:`pnc.ridge_correction`).
        correct: ``False`` applies the perturbations without refit (the ablation).

    Returns:
        Parameter pytree of the member.
    """
    names = mlp_config.layer_names()
    layers = sorted(bases)
    if set(coeffs) != set(layers):
        raise ValueError(f"coeffs are for layers {sorted(coeffs)}, the bases for {layers}")
    member = dict(params)
    dws = {i: (bases[i] @ coeffs[i]).reshape(params[names[i]]["kernel"].shape) for i in layers}
    if not correct:
        for i in layers:
            member[names[i]] = dict(params[names[i]], kernel=params[names[i]]["kernel"] + dws[i])
        return member
    base = hidden_activations(params, x_cal, mlp_config)
    h, start = x_cal, 0
    for layer in layers:
        for i in range(start, layer + 1):
            p = member[names[i]]
            if i == layer:
                p = dict(p, kernel=p["kernel"] + dws[i])
                member[names[i]] = p
            h = jax.nn.relu(h @ p["kernel"] + p["bias"])
        after = params[names[layer + 1]]
        kernel, bias = ridge_correction(
            base[layer], h, after["kernel"], after["bias"], ridge, center=center
        )
        member[names[layer + 1]] = {"kernel": kernel, "bias": bias}
        start = layer + 1
    return member


def _split_coeffs(v: Array, bases: dict[int, Array]) -> dict[int, Array]:
    """Cut a flat coefficient vector ``[sum_l K_l]`` into ``{layer: v_l}`` (layers in order)."""
    out, start = {}, 0
    for layer in sorted(bases):
        k = bases[layer].shape[1]
        out[layer] = v[start : start + k]
        start += k
    return out


@functools.partial(jax.jit, static_argnames=("mlp_config", "center"))
def output_sensitivity(
    params: Params,
    mlp_config: MLPConfig,
    bases: dict[int, Array],
    x_cal: Array,
    x: Array,
    ridge: float | Array,
    *,
    center: str = "original",
) -> Array:
    """Output-level corrected sensitivity ``A(x) = d mu(x; v) / dv`` at ``v = 0`` (forward mode).

    ``mu(x; v)`` is the predicted mean of :func:`corrected_member` corrected on ``x_cal``, ``v``
    the perturbation coefficients of every perturbed layer concatenated in layer order
    (``T = sum_l K_l``). For one perturbed layer followed by the head this is the mean rows of
    :func:`corrected_sensitivity`; for multi-layer P&C it carries the chain of repairs through
    the rest of the network. Theorem 2: for ``v ~ N(0, s^2 I_T)`` the expected squared output
    change is ``s^2 ||A(x)||_F^2`` to first order.

    Returns:
        ``[N, D, T]`` (``D`` = ``mlp_config.out_dim``).
    """
    total = sum(b.shape[1] for b in bases.values())

    def mean_at(v):
        member = corrected_member(
            params, mlp_config, bases, x_cal, _split_coeffs(v, bases), ridge, center=center
        )
        return forward(member, x, mlp_config)[0]

    dtype = jnp.result_type(*bases.values())
    return jax.jacfwd(mean_at)(jnp.zeros((total,), dtype))


@functools.partial(
    jax.jit, static_argnames=("mlp_config", "center", "n_probes", "perturbation_norm")
)
def probe_sketch(
    params: Params,
    mlp_config: MLPConfig,
    bases: dict[int, Array],
    x_cal: Array,
    x: Array,
    ridge: float | Array,
    eps: float | Array,
    *,
    n_probes: int,
    key: Array,
    center: str = "original",
    perturbation_norm: str = "gaussian",
) -> Array:
    """Random-probe finite-difference sketch of corrected sensitivity (paper Figure 3C).

    ``s(x) = (1 / (J eps^2)) sum_j ||mu(x; eps u_j) - mu(x; 0)||^2`` over ``J = n_probes``
    probes: ``u_j`` has an independent ``N(0, I_K)`` block per perturbed layer (normalised to unit
    norm per layer with ``perturbation_norm="radius"``, so each probe moves every perturbed kernel
    by exactly ``eps`` in Frobenius norm), and ``mu(x; v)`` is the mean output of
    :func:`corrected_member` corrected on ``x_cal``. As ``eps -> 0`` its expectation is
    ``||A(x)||_F^2`` (gaussian) or ``sum_l ||A_l(x)||_F^2 / K_l`` (radius), ``A`` the
    :func:`output_sensitivity`; ``sigma^2 s(x)`` estimates the ensemble's squared output change at
    scale ``sigma``.

    Returns:
        ``[N]``.
    """
    zero = {layer: jnp.zeros((b.shape[1],), b.dtype) for layer, b in bases.items()}
    mu0 = forward(
        corrected_member(params, mlp_config, bases, x_cal, zero, ridge, center=center),
        x,
        mlp_config,
    )[0]

    def one(k):
        coeffs = {}
        for layer, b in bases.items():
            u = jax.random.normal(jax.random.fold_in(k, layer), (b.shape[1],), b.dtype)
            if perturbation_norm == "radius":
                u = u * jax.lax.rsqrt(jnp.sum(jnp.square(u)))
            coeffs[layer] = eps * u
        member = corrected_member(params, mlp_config, bases, x_cal, coeffs, ridge, center=center)
        return jnp.sum(jnp.square(forward(member, x, mlp_config)[0] - mu0), axis=-1)

    sq = jax.lax.map(one, jax.random.split(key, n_probes))  # [J, N]
    return jnp.mean(sq, axis=0) / jnp.square(eps)


# ----------------------------------------------------------------------------- Theorem 3


def bootstrap_rank_terms(a: np.ndarray) -> dict[str, np.ndarray]:
    """Theorem 3's quantities for per-member corrected sensitivities at one batch of points.

    With ``C_m = A_m A_m^T`` (``A_m = A_{S_m}(x)``, member ``m`` corrected on its subset ``S_m``),
    the mixture ``C_bar = mean_m C_m`` is the first-order ensemble covariance of bootstrapped P&C.
    Computed in float64 from the pairwise Frobenius products ``K_ij = <C_i, C_j>_F``, so that no
    ``[q, q]`` matrix is formed when ``q > T``.

    Args:
        a: ``[N, M, q, T]`` (``M >= 2``): the sensitivities of ``M`` members at ``N`` points.

    Returns:
        Per point (``[N]`` unless noted): ``rank_mixture`` ``r_eff(C_bar) = tr(C_bar)^2 /
        ||C_bar||_F^2``; ``rank_single`` ``[N, M]``, ``r_eff(C_m)`` of each member's subset alone
        (what one subset shared by all members gives); ``alignment`` ``alpha_bar``, the mean of
        ``K_ij / (||C_i||_F ||C_j||_F)`` over ``i != j``; ``rank_predicted``, the theorem's
        ``(tau / nu)^2 M / (1 + (M - 1) alpha_bar)`` with ``tau`` and ``nu`` the mean trace and
        mean Frobenius norm (equal to ``rank_mixture`` when every ``C_m`` has the same trace and
        norm); ``trace_cv`` and ``norm_cv``, the coefficients of variation of ``tr(C_m)`` and
        ``||C_m||_F`` over members (0 where the theorem's equal-trace, equal-norm condition holds).

    Raises:
        ValueError: ``a`` is not ``[N, M, q, T]`` with ``M >= 2``.
    """
    a = np.asarray(a, np.float64)
    if a.ndim != 4 or a.shape[1] < 2:
        raise ValueError(f"a must be [N, M, q, T] with M >= 2, got shape {a.shape}")
    n, m, q, t = a.shape
    if q <= t:
        c = np.einsum("nmqt,nmpt->nmqp", a, a).reshape(n, m, q * q)
        k = np.einsum("nif,njf->nij", c, c)
    else:  # K_ij = ||A_i^T A_j||_F^2 from the [M T, M T] Gram of the stacked A_m^T
        x = np.swapaxes(a, 2, 3).reshape(n, m * t, q)
        g = np.einsum("nrq,nsq->nrs", x, x).reshape(n, m, t, m, t)
        k = np.einsum("nisjt->nij", np.square(g))
    tau = np.einsum("nmqt,nmqt->nm", a, a)  # tr(C_m) = ||A_m||_F^2
    nu = np.sqrt(np.einsum("nmm->nm", k))
    cos = k / (nu[:, :, None] * nu[:, None, :])
    alignment = (cos.sum(axis=(1, 2)) - np.einsum("nmm->n", cos)) / (m * (m - 1))
    tau_bar, nu_bar = tau.mean(axis=1), nu.mean(axis=1)
    return {
        "rank_mixture": np.square(tau_bar) / (k.sum(axis=(1, 2)) / m**2),
        "rank_single": np.square(tau) / np.square(nu),
        "alignment": alignment,
        "rank_predicted": np.square(tau_bar / nu_bar) * m / (1.0 + (m - 1) * alignment),
        "trace_cv": tau.std(axis=1) / tau_bar,
        "norm_cv": nu.std(axis=1) / nu_bar,
    }

"""Perturb-and-Correct (paper, Section 3): an ensemble from one trained network.

Each member perturbs hidden-layer kernels along a random low-rank basis and repairs the damage by
refitting the *next* affine layer on calibration activations (ridge least squares, Lemma 1):

1. Optionally, ``D_cal`` is first reduced to ``calibration_size`` rows drawn once without
   replacement (:func:`calibration_indices`; the authors' MuJoCo runs used 4,096 rows).
2. For every perturbed hidden layer ``l`` draw once, shared by all members, an orthonormal basis
   ``U_l`` of ``K`` directions in the flat kernel space of ``W_l`` (:func:`perturbation_basis`).
3. Member ``m`` draws ``z ~ N(0, I_K)`` per perturbed layer and sets
   ``W_l <- W_l + sigma * reshape(U_l z)`` (Section 3, "Single-layer P&C"), or with
   ``perturbation_norm="radius"`` ``W_l <- W_l + sigma * reshape(U_l z / ||z||)``.
4. It refits layer ``l + 1`` (the next hidden layer, or the ``head`` after the last hidden layer)
   so that, on its correction subset ``S_m``, the perturbed post-activations reproduce the base
   network's pre-activations of layer ``l + 1`` (eq. PnC-correction; :func:`ridge_correction`).
5. ``S_m`` is a bootstrap sample of the calibration set (Section 3, "Bootstrapped correction").

Members are parameter pytrees with a leading member axis ``[M, ...]``; they are built with ``vmap``
over member keys inside one ``jit`` (:func:`build_members`), for several ridge values at once with
:func:`build_members_ridge_path`, and evaluated with :func:`predict_members`.

The engine. Every P&C build (this MLP's, the ResNet blocks' of :mod:`pnc.core.conv`, any Flax model's
of :mod:`pnc.core.any_model`) is made of the steps defined here, once: the key split
(:func:`ensemble_keys`, :func:`member_streams`), the shared bases (:func:`layer_bases`), the
perturbation with its norm convention (:func:`perturbation`), the calibration rows
(:func:`calibration_indices`) and bootstrap subsets (:func:`bootstrap_rows`), the ridge
correction towards its centre (:func:`ridge_correction`, split into :func:`correction_system` and
:func:`solve_correction` for ridge paths; :func:`ridge_solve` for the convolutional form), and one
member's skeleton and the member loop (:func:`perturb_and_correct`, :func:`map_members`). A
builder supplies only what depends on the model: how it computes the corrected layer's inputs on
a subset (hidden activations, a model's recorded layer inputs, unfolded ``Conv_2`` patches) and
how it writes the refit layer back.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from pnc.core._linalg import spd_solve
from pnc.core.mlp import MLPConfig, Params, forward, hidden_activations
from pnc.core.predictive import Predictive

Array = jax.Array

PERTURBATION_NORMS = ("gaussian", "radius")
"""Values of :attr:`PnCConfig.perturbation_norm`."""

RIDGE_CENTERS = ("original", "zero")
"""Values of :attr:`PnCConfig.ridge_center` and of ``center`` in :func:`ridge_correction`."""


def _check_choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}, got {value!r}")


@dataclasses.dataclass(frozen=True)
class PnCConfig:
    """Hyperparameters of Perturb-and-Correct (paper, Section 3 and Appendix C).

    The defaults are the paper's formulas; the authors' MuJoCo runs correspond to
    ``perturbation_norm="radius"``, ``ridge_center="zero"``, ``calibration_size=4096``,
    ``layers=(0, 2)`` (and the defaults ``min_subset=8``, ``subset_per_layer=False``).

    Attributes:
        n_members: ensemble size ``M`` (paper: 50).
        rank: perturbation rank ``K`` (dimension of each layer's random basis ``U_l``; paper: 20).
        sigma: perturbation scale ``sigma``; see ``perturbation_norm``.
        bootstrap_frac: each member corrects on its own sample, drawn with replacement, of
            ``max(min_subset, floor(bootstrap_frac * N_cal))`` calibration rows (the authors'
            ``max(8, int(bf * 4096))``); ``None`` makes every member correct on the whole
            calibration set.
        ridge: ridge parameter ``lambda >= 0`` of eq. (PnC-correction). It is a traced value in
            the compiled build, so configurations differing only in ``ridge`` share one
            compilation.
        layers: indices of the perturbed hidden layers (``0 .. n_hidden - 1``); ``None`` perturbs
            every hidden layer. The output head is never perturbed (paper, "Multi-layer P&C").
        correct: ``False`` gives the "P&C without correction" ablation (the same perturbations,
            no refit).
        perturbation_norm: ``"gaussian"``: ``dW = sigma * reshape(U z)``, ``z ~ N(0, I_K)`` (the
            paper's formula, Section 3); ``"radius"``: ``dW = sigma * reshape(U z / ||z||)``, so
            that ``||dW_l||_F = sigma`` for every member and layer (the authors' code, in which
            the paper's grid ``sigma in {8, 16, 32}`` was tuned).
        ridge_center: the point the refit layer is shrunk towards: ``"original"``, the layer
            before correction (paper, eq. PnC-correction), or ``"zero"`` (the authors' submitted
            MuJoCo runs). See :func:`ridge_correction`.
        min_subset: lower bound on the size of a member's correction subset (the authors': 8).
        calibration_size: if set, ``D_cal`` is reduced to this many rows drawn once without
            replacement and shared by all members (:func:`calibration_indices`; the authors'
            MuJoCo runs: 4,096 rows of the training split). ``None`` uses all rows given.
        subset_per_layer: ``False``: a member draws one correction subset used for every corrected
            layer (the authors' code); ``True``: an independent bootstrap subset per member and per
            corrected layer (one reading of the paper's "each ``S_m`` an independent bootstrap
            sample" for multi-layer P&C). Without effect when ``bootstrap_frac`` is ``None``.
    """

    n_members: int = 50
    rank: int = 20
    sigma: float = 16.0
    bootstrap_frac: float | None = 0.1
    ridge: float = 1e-4
    layers: tuple[int, ...] | None = None
    correct: bool = True
    perturbation_norm: str = "gaussian"
    ridge_center: str = "original"
    min_subset: int = 8
    calibration_size: int | None = None
    subset_per_layer: bool = False

    def __post_init__(self) -> None:
        check_ensemble_fields(self)
        if self.layers is not None:
            layers = tuple(int(i) for i in self.layers)
            if not layers:
                raise ValueError("layers must be None or a non-empty tuple of hidden-layer indices")
            if len(set(layers)) != len(layers) or any(i < 0 for i in layers):
                raise ValueError(f"layers must be distinct non-negative indices, got {self.layers}")
            object.__setattr__(self, "layers", tuple(sorted(layers)))
        _check_choice("ridge_center", self.ridge_center, RIDGE_CENTERS)
        if self.calibration_size is not None and int(self.calibration_size) < 1:
            raise ValueError(f"calibration_size must be >= 1 or None, got {self.calibration_size}")
        object.__setattr__(self, "n_members", int(self.n_members))
        object.__setattr__(self, "rank", int(self.rank))
        object.__setattr__(self, "min_subset", int(self.min_subset))
        if self.calibration_size is not None:
            object.__setattr__(self, "calibration_size", int(self.calibration_size))

    def perturbed_layers(self, n_hidden: int) -> tuple[int, ...]:
        """The perturbed hidden-layer indices ``l_1 < l_2 < ...`` for a network with ``n_hidden``."""
        if self.layers is None:
            return tuple(range(n_hidden))
        if self.layers[-1] >= n_hidden:
            raise ValueError(
                f"layers {self.layers} out of range for a network with {n_hidden} hidden layers"
            )
        return self.layers

    def subset_size(self, n_cal: int) -> int:
        """Size of each member's correction subset ``|S_m|`` for ``n_cal`` calibration rows.

        ``max(min_subset, floor(bootstrap_frac * n_cal))`` (the authors' rule), or ``n_cal`` when
        ``bootstrap_frac`` is ``None``. ``n_cal`` is the calibration set's size after the
        ``calibration_size`` reduction.
        """
        return correction_subset_size(n_cal, self.bootstrap_frac, self.min_subset)


def check_ensemble_fields(config) -> None:
    """Validate the fields every P&C configuration shares (:class:`PnCConfig`,
    :class:`pnc.core.conv.ConvPnCConfig`): ``n_members``, ``rank``, ``sigma``, ``bootstrap_frac``,
    ``ridge``, ``perturbation_norm`` and ``min_subset``.

    Raises:
        ValueError: naming the first field out of range and its value.
    """
    for name in ("n_members", "rank", "min_subset"):
        if int(getattr(config, name)) < 1:
            raise ValueError(f"{name} must be >= 1, got {getattr(config, name)}")
    if not (math.isfinite(config.sigma) and config.sigma >= 0):
        raise ValueError(f"sigma must be finite and >= 0, got {config.sigma}")
    frac = config.bootstrap_frac
    if frac is not None and not 0.0 < frac <= 1.0:
        raise ValueError(f"bootstrap_frac must be in (0, 1] or None, got {frac}")
    if not (math.isfinite(config.ridge) and config.ridge >= 0):
        raise ValueError(f"ridge must be finite and >= 0, got {config.ridge}")
    _check_choice("perturbation_norm", config.perturbation_norm, PERTURBATION_NORMS)


def correction_subset_size(n_cal: int, bootstrap_frac: float | None, min_subset: int) -> int:
    """``|S_m| = max(min_subset, floor(bootstrap_frac * n_cal))``, or ``n_cal`` when
    ``bootstrap_frac`` is ``None`` (the authors' rule, shared by the MLP and the conv builds)."""
    if bootstrap_frac is None:
        return n_cal
    return max(min_subset, math.floor(bootstrap_frac * n_cal))


# ----------------------------------------------------------------------------- the correction


def ridge_correction(
    h_cal: Array,
    h_cal_perturbed: Array,
    kernel: Array,
    bias: Array,
    ridge: float | Array,
    *,
    center: str = "original",
) -> tuple[Array, Array]:
    """Refit the next affine layer on perturbed calibration activations (Lemma 1).

    Solves eq. (PnC-correction) / (ls-correction) in the augmented form of Section 4.1, with
    ``Theta = [b; K]`` (``[d+1, q]``, bias row first), design rows ``X = [1, h]``,
    ``X_v = [1, h_pert]`` and the shrinkage target ``C = Theta`` (``center="original"``, the
    paper) or ``C = 0`` (``center="zero"``, the authors' submitted MuJoCo runs)::

        min_{Theta'} ||X_v Theta' - X Theta||_F^2 + ridge ||Theta' - C||_F^2,

    the bias included in the penalty. With ``A = X_v^T X_v + ridge I`` and the calibration
    target gap ``E = X Theta - X_v Theta = (h - h_pert) K`` (the biases cancel), the minimiser is
    evaluated in its residual form (Appendix A, eq. theta-diff-clean)::

        original:  Theta' - Theta = A^{-1} X_v^T E
        zero:      Theta' - Theta = A^{-1} (X_v^T E - ridge Theta)

    so that with ``center="original"`` ``h_pert == h`` returns the layer bit-for-bit and
    ``ridge -> inf`` returns the original layer (with ``"zero"``, ``ridge -> inf`` gives zero).
    At ``ridge = 0`` (and ``B > d + 1``) both centres give the same least-squares fit.

    Numerics: the ``(d+1) x (d+1)`` Gram is formed in the input precision (float32 by default,
    float64 when called on float64 arrays under ``jax.enable_x64``), Jacobi-scaled to unit
    diagonal, factorised by Cholesky and refined by one step of iterative refinement. When
    ``B <= d + 1`` the equivalent ``B x B`` dual system is solved instead
    (``A^{-1} X_v^T = X_v^T (X_v X_v^T + ridge I)^{-1}``)::

        original:  Theta' = Theta + X_v^T (X_v X_v^T + ridge I)^{-1} E
        zero:      Theta' = X_v^T (X_v X_v^T + ridge I)^{-1} X Theta

    with ``ridge = 0`` it gives the interpolating solution closest to ``C``. Pure and
    shape-static: works under ``jit``, ``vmap`` and autodiff in forward and reverse mode (the
    solve's derivative is the implicit one, :func:`pnc.core._linalg.spd_solve`).

    Args:
        h_cal: original post-activations on the correction subset, ``[B, d]``.
        h_cal_perturbed: perturbed post-activations on the same rows, ``[B, d]``.
        kernel: next layer's kernel in Flax layout, ``[d, q]``.
        bias: next layer's bias, ``[q]``.
        ridge: ``lambda >= 0`` (scalar, may be traced).
        center: ``"original"`` or ``"zero"`` (static).

    Returns:
        ``(kernel_new [d, q], bias_new [q])``.
    """
    system = correction_system(h_cal, h_cal_perturbed, kernel, bias, center=center)
    return solve_correction(system, kernel, bias, ridge, center=center)


def correction_system(
    h_cal: Array, h_cal_perturbed: Array, kernel: Array, bias: Array, *, center: str = "original"
) -> tuple[Array, Array, Array]:
    """The ridge-independent part of :func:`ridge_correction`: ``(X_v, Gram, right-hand side)``.

    Primal (``B > d + 1``): ``Gram = X_v^T X_v`` ``[d+1, d+1]`` and ``X_v^T E`` ``[d+1, q]``.
    Dual (``B <= d + 1``): ``Gram = X_v X_v^T`` ``[B, B]`` and ``E`` (``center="original"``) or
    ``X Theta`` (``center="zero"``), ``[B, q]``. ``X_v = [1, h_pert]`` is ``[B, d+1]``. Solve with
    :func:`solve_correction` for any number of ridge values.
    """
    _check_choice("center", center, RIDGE_CENTERS)
    if h_cal.ndim != 2 or h_cal.shape != h_cal_perturbed.shape:
        raise ValueError(
            f"h_cal and h_cal_perturbed must both be [B, d], got {h_cal.shape} and "
            f"{h_cal_perturbed.shape}"
        )
    if kernel.shape[0] != h_cal.shape[1] or bias.shape != (kernel.shape[1],):
        raise ValueError(
            f"kernel [d, q] / bias [q] do not match d={h_cal.shape[1]}: {kernel.shape}, {bias.shape}"
        )
    dtype = jnp.result_type(h_cal_perturbed, kernel, jnp.float32)
    h = h_cal.astype(dtype)
    hv = h_cal_perturbed.astype(dtype)
    n_rows, d = hv.shape
    kernel_c = kernel.astype(dtype)
    x_v = jnp.concatenate([jnp.ones((n_rows, 1), dtype), hv], axis=1)  # [B, d+1]
    if n_rows > d + 1:
        if kernel.shape[1] < d:  # narrow layer: E = (h - h_pert) K first, then X_v^T E
            gram = x_v.T @ x_v
            rhs = x_v.T @ ((h - hv) @ kernel_c)
        else:  # wide layer: one pass X_v^T [X_v, h - h_pert], then (X_v^T (h - h_pert)) K
            both = x_v.T @ jnp.concatenate([x_v, h - hv], axis=1)
            gram, rhs = both[:, : d + 1], both[:, d + 1 :] @ kernel_c
        return x_v, gram, rhs
    gram = x_v @ x_v.T
    if center == "original":
        target = (h - hv) @ kernel_c  # E = X Theta - X_v Theta, [B, q]
    else:
        target = h @ kernel_c + bias.astype(dtype)  # X Theta, [B, q]
    return x_v, gram, target


def solve_correction(
    system: tuple[Array, Array, Array],
    kernel: Array,
    bias: Array,
    ridge: float | Array,
    *,
    center: str = "original",
) -> tuple[Array, Array]:
    """Finish :func:`ridge_correction` from :func:`correction_system` for one ``ridge``.

    One Cholesky factorisation of ``Gram + ridge I``. ``kernel [d, q]`` and ``bias [q]`` are the
    layer before correction, ``center`` must be the one the system was formed with.

    Returns:
        ``(kernel_new [d, q], bias_new [q])``.
    """
    _check_choice("center", center, RIDGE_CENTERS)
    x_v, gram, rhs = system
    dtype = gram.dtype
    n_rows, d1 = x_v.shape
    ridge = jnp.asarray(ridge, dtype)
    if n_rows > d1:
        if center == "zero":
            theta = jnp.concatenate([bias[None, :], kernel], axis=0).astype(dtype)
            rhs = rhs - ridge * theta
        delta = ridge_solve(gram, rhs, ridge)  # [d+1, q]
    else:
        delta = x_v.T @ ridge_solve(gram, rhs, ridge)
        if center == "zero":  # delta is Theta' itself
            return delta[1:].astype(kernel.dtype), delta[0].astype(bias.dtype)
    return kernel + delta[1:].astype(kernel.dtype), bias + delta[0].astype(bias.dtype)


def ridge_solve(gram: Array, rhs: Array, ridge: float | Array) -> Array:
    """``(Gram + ridge I)^{-1} rhs``: the ridge system every correction ends in (Lemma 1; the
    convolutional correction's eq. conv-ridge-soln), by the SPD solver of :mod:`pnc.core._linalg`.

    Args:
        gram: symmetric positive semi-definite ``[n, n]``.
        rhs: ``[n, q]``.
        ridge: ``lambda >= 0`` (scalar, may be traced), cast to ``gram``'s dtype.

    Returns:
        ``[n, q]``.
    """
    ridge = jnp.asarray(ridge, gram.dtype)
    return spd_solve(gram + ridge * jnp.eye(gram.shape[0], dtype=gram.dtype), rhs)


# ----------------------------------------------------------------------------- perturbations


def perturbation_basis(key: Array, shape: tuple[int, ...], rank: int) -> Array:
    """Random orthonormal basis ``U`` of ``rank`` directions in the flat space of a kernel.

    ``U = Q`` from the QR factorisation of a standard Gaussian ``[prod(shape), rank]`` matrix, with
    column signs fixed by ``sign(diag(R))`` so that ``U`` is Haar-distributed (Section 3).

    Args:
        key: PRNG key.
        shape: kernel shape ``(d_in, d_out)``.
        rank: number of directions ``K`` (at most ``prod(shape)``).

    Returns:
        ``U`` of shape ``[prod(shape), rank]`` (float32) with ``U^T U = I_K``.
    """
    n = math.prod(shape)
    if not 1 <= rank <= n:
        raise ValueError(f"rank must be in [1, {n}] for a kernel of shape {shape}, got {rank}")
    g = jax.random.normal(key, (n, rank), jnp.float32)
    q, r = jnp.linalg.qr(g)
    return q * jnp.where(jnp.diagonal(r) < 0, -1.0, 1.0)[None, :]


def layer_bases(key: Array, shapes: Mapping[int, tuple[int, ...]], rank: int) -> dict:
    """The bases ``U_s`` of several perturbed kernels, shared by all members (Section 3).

    ``U_s`` is :func:`perturbation_basis` of ``fold_in(key, s)`` for every stream id ``s`` (a
    hidden-layer index for the MLP, a block index for a ResNet, a chosen id for any model).

    Args:
        key: the basis key (the first of :func:`ensemble_keys`).
        shapes: ``{stream id: kernel shape}``, in the order the bases are drawn.
        rank: ``K``.

    Returns:
        ``{stream id: U_s [prod(shape), K]}``.
    """
    return {
        s: perturbation_basis(jax.random.fold_in(key, s), shape, rank)
        for s, shape in shapes.items()
    }


def perturbation(
    key: Array, stream: int, basis: Array, config, shape, sigma: Array | None = None
) -> Array:
    """``dW = sigma * reshape(U z)`` with ``z ~ N(0, I_K)`` drawn from ``fold_in(key, stream)``.

    With ``config.perturbation_norm == "radius"`` the coefficients are rescaled to ``z / ||z||``,
    so that ``||dW||_F = sigma``.

    Args:
        key: the member's coefficient key (the second of :func:`member_streams`).
        stream: the layer's stream id (as in :func:`layer_bases`).
        basis: ``U [prod(shape), K]``.
        config: any P&C configuration (``sigma``, ``perturbation_norm``).
        shape: the kernel's shape.
        sigma: a traced float32 scalar used in place of ``config.sigma`` (the same product), so
            that builds differing only in sigma share one compiled program; ``None``:
            ``config.sigma``.

    Returns:
        ``dW`` of shape ``shape``.
    """
    z = jax.random.normal(jax.random.fold_in(key, stream), (basis.shape[1],), jnp.float32)
    if config.perturbation_norm == "radius":
        z = z * jax.lax.rsqrt(jnp.sum(jnp.square(z)))
    return ((config.sigma if sigma is None else sigma) * (basis @ z)).reshape(shape)


def perturbation_bases(
    params: Params, mlp_config: MLPConfig, config: PnCConfig, *, key: Array
) -> dict[int, Array]:
    """The bases ``U_l`` that :func:`build_members` draws from ``key``, ``{layer: [d_in * d_out, K]}``.

    ``key`` is the one passed to :func:`build_members`; its basis half (the first of
    ``jax.random.split(key)``) gives ``U_l`` from ``fold_in(., l)`` for every perturbed layer ``l``.
    For diagnostics that probe the same directions as an ensemble (:mod:`pnc.core.diagnostics`).
    """
    layers = config.perturbed_layers(mlp_config.n_hidden)
    return layer_bases(jax.random.split(key)[0], _kernel_shapes(params, layers), config.rank)


def _kernel_shapes(params: Params, layers: tuple[int, ...]) -> dict[int, tuple[int, ...]]:
    return {i: params[f"hidden_{i}"]["kernel"].shape for i in layers}


# ----------------------------------------------------------------------------- members

_CALIBRATION_STREAM = 0x0CA1B
"""``fold_in`` data of the calibration-subset key: ``fold_in(key, _CALIBRATION_STREAM)``."""


def calibration_indices(key: Array, n_rows: int, config: PnCConfig) -> Array | None:
    """Rows of ``x_cal`` that form ``D_cal`` when ``config.calibration_size`` is set.

    ``calibration_size`` distinct indices in ``[0, n_rows)``, drawn without replacement (a prefix
    of a uniform permutation) from ``fold_in(key, 0x0CA1B)``: they depend only on ``key``,
    ``n_rows`` and ``calibration_size``, not on the other fields nor on the member keys, so
    configurations built with the same key share the calibration set. The authors' MuJoCo runs drew
    4,096 rows of the training split once per seed.

    Args:
        key: the key passed to :func:`build_members`.
        n_rows: number of rows ``N`` of ``x_cal``.
        config: P&C hyperparameters.

    Returns:
        int32 indices ``[calibration_size]``, or ``None`` when ``calibration_size`` is ``None``.

    Raises:
        ValueError: if ``calibration_size > n_rows``.
    """
    size = config.calibration_size
    if size is None:
        return None
    if size > n_rows:
        raise ValueError(f"calibration_size={size} exceeds the {n_rows} rows of x_cal")
    perm = jax.random.permutation(jax.random.fold_in(key, _CALIBRATION_STREAM), n_rows)
    return perm[:size]


def ensemble_keys(key: Array, n_members: int) -> tuple[Array, Array]:
    """``(basis key, member keys [M])``: the first split of every P&C build's ``key``.

    The basis key draws the shared bases (:func:`layer_bases`); member ``m``'s key is the ``m``-th
    of ``M`` splits of the second half, and :func:`member_streams` splits it further.
    """
    k_basis, k_members = jax.random.split(key)
    return k_basis, jax.random.split(k_members, n_members)


def member_streams(member_key: Array) -> tuple[Array, Array]:
    """``(subset key, coefficient key)`` of one member: its correction subsets are drawn from the
    first (:func:`bootstrap_rows`), its coefficients ``z`` from the second (:func:`perturbation`),
    so the ablation without correction perturbs exactly as P&C with the same key."""
    k_sub, k_z = jax.random.split(member_key)
    return k_sub, k_z


def bootstrap_rows(
    subset_key: Array, stream: int, n_cal: int, n_sub: int, *, per_stream: bool
) -> Array:
    """A member's correction subset ``S_m`` (Section 3, "Bootstrapped correction").

    ``n_sub`` rows of ``D_cal`` drawn uniformly with replacement from ``fold_in(subset_key,
    stream)`` when every corrected layer has its own subset (``per_stream``), else from
    ``subset_key`` itself (one subset shared by the member's corrections).

    Returns:
        int32 indices into ``D_cal``, ``[n_sub]``.
    """
    key = jax.random.fold_in(subset_key, stream) if per_stream else subset_key
    return jax.random.randint(key, (n_sub,), 0, n_cal)


def perturb_and_correct(
    member_key: Array,
    config,
    bases: Mapping[int, Array],
    shapes: Mapping[int, tuple[int, ...]],
    *,
    unperturbed: Callable[[], object],
    uncorrected: Callable[[dict], object],
    corrected: Callable[[Array, dict], object],
    sigma: Array | None = None,
):
    """One member of any P&C build: its keys, its perturbations, and the model's correction.

    The member key is split by :func:`member_streams`; with ``sigma = 0`` the member is
    ``unperturbed()`` (the base model); otherwise ``dW_s`` is drawn for every stream ``s`` of
    ``bases`` (:func:`perturbation`, in the order of ``bases``) and the member is
    ``uncorrected(dws)`` (``config.correct = False``: the perturbations without refit) or
    ``corrected(subset_key, dws)`` (the model's chain of perturbations and ridge corrections).

    Args:
        member_key: one of :func:`ensemble_keys`'s member keys.
        config: any P&C configuration (``sigma``, ``perturbation_norm``, ``correct``).
        bases: ``{stream id: U_s}`` (:func:`layer_bases`).
        shapes: ``{stream id: kernel shape}``.
        unperturbed, uncorrected, corrected: the model's member for each case.
        sigma: a traced scale for :func:`perturbation` (``config.sigma`` then only tells zero
            from non-zero); ``None``: ``config.sigma``.

    Returns:
        What the chosen callable returns.
    """
    subset_key, coefficient_key = member_streams(member_key)
    if config.sigma == 0.0:  # no perturbation; the correction of Y_v = Y is the identity
        return unperturbed()
    dws = {
        s: perturbation(coefficient_key, s, basis, config, shapes[s], sigma)
        for s, basis in bases.items()
    }
    if not config.correct:
        return uncorrected(dws)
    return corrected(subset_key, dws)


def map_members(member: Callable, member_keys: Array, member_chunk: int | None):
    """``member`` over every member key: ``vmap`` at once, or ``member_chunk`` at a time (``vmap``
    within a ``lax.map``). Leaves get a leading ``[M]`` axis."""
    if member_chunk is None or member_chunk >= member_keys.shape[0]:
        return jax.vmap(member)(member_keys)
    return jax.lax.map(member, member_keys, batch_size=member_chunk)


def check_member_chunk(member_chunk: int | None) -> None:
    """Raise ``ValueError`` unless ``member_chunk`` is ``None`` or ``>= 1``."""
    if member_chunk is not None and member_chunk < 1:
        raise ValueError(f"member_chunk must be >= 1 or None, got {member_chunk}")


def member_subsets(key: Array, n_cal: int, config: PnCConfig) -> Array | None:
    """The rows of ``D_cal`` each member of :func:`build_members` corrects on (with the same key).

    Reproduces the members' subset draws: ``key`` is split into the basis key and the member keys,
    a member key into its subset key and its coefficient key, and the subset key draws
    ``config.subset_size(n_cal)`` rows with replacement. With ``subset_per_layer`` these are the
    rows of the correction after the first perturbed layer (``fold_in(subset key, layer)``).

    Args:
        key: the key passed to :func:`build_members`.
        n_cal: rows of ``D_cal`` (after ``calibration_size``, :func:`calibration_indices`).
        config: P&C hyperparameters.

    Returns:
        int32 indices into ``D_cal``, ``[M, B]``; ``None`` without bootstrap (every member
        corrects on all of ``D_cal``).
    """
    if config.bootstrap_frac is None:
        return None
    n_sub = config.subset_size(n_cal)
    stream = config.layers[0] if config.layers else 0

    def draw(mkey):
        subset_key = member_streams(mkey)[0]
        return bootstrap_rows(subset_key, stream, n_cal, n_sub, per_stream=config.subset_per_layer)

    return jax.vmap(draw)(ensemble_keys(key, config.n_members)[1])


def build_members(
    params: Params,
    mlp_config: MLPConfig,
    x_cal: Array,
    config: PnCConfig,
    *,
    key: Array,
    member_chunk: int | None = None,
) -> Params:
    """Build the P&C ensemble (Section 3): ``M`` perturbed-and-corrected copies of ``params``.

    Semantics of multi-layer P&C (a chain of local repairs): the perturbed layers
    ``l_1 < l_2 < ...`` are visited in forward order. At ``l_j`` the current kernel of ``hidden_l``
    receives ``sigma * reshape(U_l z)``; the correction subset is propagated through the member's
    network *as modified so far*, and layer ``l_j + 1`` (``hidden_{l+1}`` or the ``head``) is refit
    so that these perturbed post-activations reproduce the *base* network's pre-activations of
    layer ``l_j + 1`` on the same rows, shrinking towards ``config.ridge_center``. If
    ``l_{j+1} = l_j + 1`` the just-corrected layer is then perturbed on top of its correction
    (``W_{l+1} <- W_{l+1}^{corr} + dW``) and repaired in turn by layer ``l_j + 2``. The head is
    only ever corrected; layers neither perturbed nor corrected are returned unchanged. With
    ``config.correct = False`` the same perturbations (same key) are applied with no refit. With
    ``sigma = 0`` nothing is perturbed and every member is the base network exactly.

    Key use: ``key`` is split into a basis key (``U_l`` from ``fold_in(., l)``, shared by all
    members) and ``M`` member keys; a member key is split into a subset key and a coefficient key
    (``z`` for layer ``l`` from ``fold_in(., l)``), so ``correct=True`` and ``correct=False`` with
    the same key perturb identically. The subset key draws the member's subset directly, or with
    ``subset_per_layer`` the subset of the correction after layer ``l`` from ``fold_in(., l)``.
    The calibration rows (``calibration_size``) come from :func:`calibration_indices`.

    Args:
        params: trained parameter pytree (see :func:`pnc.init_params`).
        mlp_config: its architecture.
        x_cal: standardised calibration inputs, ``[N, in_dim]`` (``D_cal``, or the pool it is
            drawn from when ``config.calibration_size`` is set).
        config: P&C hyperparameters.
        key: PRNG key.
        member_chunk: members built at once (``vmap`` within a ``lax.map``); bounds memory to
            about ``member_chunk * |S_m| * width`` floats per activation. ``None``: all at once.

    Returns:
        Parameter pytree with the same structure as ``params`` and a leading ``[M]`` axis on every
        leaf (unchanged leaves are broadcast).
    """
    return _build_from(
        params, mlp_config, x_cal, config, np.float32(config.ridge), key, member_chunk
    )


def build_members_ridge_path(
    params: Params,
    mlp_config: MLPConfig,
    x_cal: Array,
    config: PnCConfig,
    ridges: Sequence[float],
    *,
    key: Array,
    member_chunk: int | None = None,
) -> Params:
    """:func:`build_members` for several ridge values at once, sharing the ridge-free work.

    For every ``r = ridges[i]`` the slice ``[i]`` of the result equals
    ``build_members(params, mlp_config, x_cal, dataclasses.replace(config, ridge=r), key=key)``
    up to float32 rounding (``config.ridge`` itself is ignored). Computed once and shared by all
    ridge values: the calibration subset, the bases ``U_l``, the member keys, coefficients ``z``
    and correction subsets, the base network's activations, and, for the first corrected layer,
    the member's perturbed post-activations and the Gram ``X_v^T X_v`` (``X_v X_v^T`` when
    ``|S_m| <= d + 1``) with its right-hand side. Per ridge value: one Cholesky factorisation of
    ``Gram + r I`` for the first corrected layer, and the whole rest of the chain (later perturbed
    layers see activations that pass through the ridge-dependent first correction). The ridge
    values are processed one after another (a loop over ``[R]`` inside the compiled build), each
    running the computation of a single build, so memory grows only by the ``[R, M]`` outputs.
    With ``correct=False`` or ``sigma = 0`` the members do not depend on the ridge and are
    broadcast.

    Args:
        params, mlp_config, x_cal, config, key, member_chunk: as for :func:`build_members`.
        ridges: the ridge values ``lambda >= 0``, a non-empty 1-D sequence ``[R]``.

    Returns:
        Parameter pytree with a leading ``[R, M]`` on every leaf.
    """
    ridges = np.asarray(ridges, np.float32)
    if ridges.ndim != 1 or ridges.size < 1:
        raise ValueError(f"ridges must be a non-empty 1-D sequence, got shape {ridges.shape}")
    if not np.all(np.isfinite(ridges) & (ridges >= 0)):
        raise ValueError(f"ridges must be finite and >= 0, got {ridges.tolist()}")
    return _build_from(params, mlp_config, x_cal, config, ridges, key, member_chunk)


def _build_from(params, mlp_config, x_cal, config, ridges, key, member_chunk) -> Params:
    x_cal = jnp.asarray(x_cal, jnp.float32)
    if x_cal.ndim != 2 or x_cal.shape[0] < 1:
        raise ValueError(f"x_cal must be [N, in_dim] with N >= 1, got shape {x_cal.shape}")
    if not bool(jnp.all(jnp.isfinite(x_cal))):
        raise ValueError("x_cal holds non-finite values (NaN or inf); members would be non-finite")
    in_dim = params["hidden_0"]["kernel"].shape[0]
    if x_cal.shape[1] != in_dim:
        raise ValueError(f"x_cal has {x_cal.shape[1]} columns, the network expects {in_dim}")
    layers = config.perturbed_layers(mlp_config.n_hidden)
    check_member_chunk(member_chunk)
    rows = calibration_indices(key, x_cal.shape[0], config)
    if rows is not None:
        x_cal = x_cal[rows]
    k_basis, member_keys = ensemble_keys(key, config.n_members)
    bases = layer_bases(k_basis, _kernel_shapes(params, layers), config.rank)
    # the static part of the configuration: ridge and sigma are traced (every sigma of a grid runs
    # the same compiled program; the static sigma only tells zero from non-zero), the calibration
    # rows are applied
    static = dataclasses.replace(
        config, ridge=0.0, calibration_size=None, sigma=float(config.sigma > 0)
    )
    return _build(
        params, bases, x_cal, member_keys, ridges, np.float32(config.sigma),
        mlp_config=mlp_config, config=static, layers=layers, member_chunk=member_chunk,
    )  # fmt: skip


@functools.partial(jax.jit, static_argnames=("mlp_config", "config", "layers", "member_chunk"))
def _build(
    params, bases, x_cal, member_keys, ridges, sigma, *, mlp_config, config, layers, member_chunk
):
    """Members ``[M, ...]`` for a scalar ``ridges``, ``[R, M, ...]`` for ``ridges [R]``.

    ``config.ridge`` and ``config.calibration_size`` are not read (``x_cal`` is ``D_cal``);
    ``sigma`` (a float32 scalar) scales the perturbations, ``config.sigma`` is 0 or 1.
    """
    scalar = ridges.ndim == 0
    ridges = jnp.reshape(ridges, (-1,))
    n_ridges = ridges.shape[0]
    n_cal = x_cal.shape[0]
    n_sub = config.subset_size(n_cal)
    bootstrap = config.bootstrap_frac is not None
    per_layer = bootstrap and config.subset_per_layer
    n_draws = len(layers) if per_layer else 1
    center = config.ridge_center
    names = mlp_config.layer_names()
    # Base activations are gathered from one pass over D_cal when the subsets together cover more
    # rows than D_cal, and otherwise recomputed on each subset (bounded memory).
    shared_base = (
        config.correct
        and config.sigma > 0
        and (not bootstrap or config.n_members * n_sub * n_draws >= n_cal)
    )
    base_full = hidden_activations(params, x_cal, mlp_config) if shared_base else None

    def subset(k_sub, layer):
        """Rows ``x_S`` and the base network's post-activations on them for layer ``layer``."""
        if not bootstrap:
            return x_cal, base_full
        idx = bootstrap_rows(k_sub, layer, n_cal, n_sub, per_stream=per_layer)
        x = x_cal[idx]
        if shared_base:
            return x, [hb[idx] for hb in base_full]
        return x, hidden_activations(params, x, mlp_config)

    def perturb(p, dws, i):
        return dict(p, **{names[i]: dict(p[names[i]], kernel=p[names[i]]["kernel"] + dws[i])})

    def propagate(p, h, start, stop, dws):
        """Post-activation of layer ``stop`` from that of ``start - 1``, perturbing ``stop``."""
        for i in range(start, stop + 1):
            if i == stop:
                p = perturb(p, dws, i)
            h = jax.nn.relu(h @ p[names[i]]["kernel"] + p[names[i]]["bias"])
        return p, h

    def broadcast(p):
        return jax.tree.map(lambda a: jnp.broadcast_to(a, (n_ridges,) + a.shape), p)

    def uncorrected(dws):
        p = dict(params)  # shallow copy; layers are replaced, never mutated
        for i in layers:
            p = perturb(p, dws, i)
        return broadcast(p)

    def corrected(k_sub, dws):
        """The chain of local repairs for every ridge value, ``[R, ...]``."""
        p = dict(params)
        # ridge-independent: subsets, base activations, the first perturbed layer and its system
        first = layers[0]
        subsets = {i: subset(k_sub, i) for i in (layers if per_layer else layers[:1])}
        x, base = subsets[first]
        p, h = propagate(p, x, 0, first, dws)
        nxt = params[names[first + 1]]
        system = correction_system(base[first], h, nxt["kernel"], nxt["bias"], center=center)

        def chain(ridge):  # the ridge-dependent rest of the chain
            kernel_new, bias_new = solve_correction(
                system, nxt["kernel"], nxt["bias"], ridge, center=center
            )
            q = dict(p, **{names[first + 1]: {"kernel": kernel_new, "bias": bias_new}})
            h_l, base_l, start = h, base, first + 1
            for layer in layers[1:]:
                if per_layer:
                    h_l, base_l = subsets[layer]
                    start = 0
                q, h_l = propagate(q, h_l, start, layer, dws)
                after = params[names[layer + 1]]
                kernel_new, bias_new = ridge_correction(
                    base_l[layer], h_l, after["kernel"], after["bias"], ridge, center=center
                )
                q[names[layer + 1]] = {"kernel": kernel_new, "bias": bias_new}
                start = layer + 1
            return q

        return jax.lax.map(chain, ridges)

    shapes = _kernel_shapes(params, layers)
    member = functools.partial(
        perturb_and_correct, config=config, bases=bases, shapes=shapes,
        unperturbed=lambda: broadcast(dict(params)), uncorrected=uncorrected, corrected=corrected,
        sigma=sigma,
    )  # fmt: skip
    out = map_members(member, member_keys, member_chunk)
    if scalar:
        return jax.tree.map(lambda a: a[:, 0], out)
    return jax.tree.map(lambda a: jnp.swapaxes(a, 0, 1), out)


# ----------------------------------------------------------------------------- prediction


def predict_members(
    members: Params, x: Array, mlp_config: MLPConfig, *, max_rows: int = 1 << 18
) -> Predictive:
    """Evaluate every member (a standard forward pass with its substituted layers, Section 3).

    Args:
        members: parameter pytree with a leading ``[M]`` axis (from :func:`build_members`).
        x: standardised inputs ``[N, in_dim]``.
        mlp_config: the architecture.
        max_rows: inputs are processed in chunks of ``max(1, max_rows // M)`` rows (memory bound).

    Returns:
        :class:`pnc.Predictive` with ``means`` and ``variances`` of shape ``[M, N, D]``.
    """
    x = jnp.asarray(x, jnp.float32)
    if x.ndim != 2:
        raise ValueError(f"x must be [N, in_dim], got shape {x.shape}")
    n_members = jax.tree.leaves(members)[0].shape[0]
    chunk = max(1, min(x.shape[0], max_rows // n_members))
    means, variances = _predict(members, x, mlp_config=mlp_config, chunk=chunk)
    return Predictive(means, variances)


@functools.partial(jax.jit, static_argnames=("mlp_config", "chunk"))
def _predict(members, x, *, mlp_config, chunk):
    n = x.shape[0]
    n_chunks = -(-n // chunk)
    xs = jnp.pad(x, ((0, n_chunks * chunk - n), (0, 0))).reshape(n_chunks, chunk, x.shape[1])
    batched = jax.vmap(forward, in_axes=(0, None, None))
    mean, var = jax.lax.map(lambda xc: batched(members, xc, mlp_config), xs)  # [C, M, chunk, D]
    merge = lambda a: jnp.moveaxis(a, 0, 1).reshape(a.shape[1], n_chunks * chunk, -1)[:, :n]
    return merge(mean), merge(var)

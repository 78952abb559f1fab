"""Perturb-and-Correct (paper, Section 3): an ensemble from one trained network.

Each member perturbs hidden-layer kernels along a random low-rank basis and repairs the damage by
refitting the *next* affine layer on calibration activations (ridge least squares, Lemma 1):

1. For every perturbed hidden layer ``l`` draw once, shared by all members, an orthonormal basis
   ``U_l`` of ``K`` directions in the flat kernel space of ``W_l`` (:func:`perturbation_basis`).
2. Member ``m`` draws ``z ~ N(0, I_K)`` per perturbed layer and sets
   ``W_l <- W_l + sigma * reshape(U_l z)`` (Section 3, "Single-layer P&C").
3. It refits layer ``l + 1`` (the next hidden layer, or the ``head`` after the last hidden layer)
   so that, on its correction subset ``S_m``, the perturbed post-activations reproduce the base
   network's pre-activations of layer ``l + 1`` (eq. PnC-correction; :func:`ridge_correction`).
4. ``S_m`` is a bootstrap sample of the calibration set (Section 3, "Bootstrapped correction").

Members are parameter pytrees with a leading member axis ``[M, ...]``; they are built with ``vmap``
over member keys inside one ``jit`` and evaluated with :func:`predict_members`.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp

from pnc._linalg import cholesky_and_inverse
from pnc.mlp import MLPConfig, Params, forward, hidden_activations
from pnc.predictive import Predictive

Array = jax.Array


@dataclasses.dataclass(frozen=True)
class PnCConfig:
    """Hyperparameters of Perturb-and-Correct (paper, Section 3 and Appendix C).

    Attributes:
        n_members: ensemble size ``M``.
        rank: perturbation rank ``K`` (dimension of each layer's random basis ``U_l``).
        sigma: perturbation scale ``sigma``; ``dW = sigma * reshape(U z)``, ``z ~ N(0, I_K)``.
        bootstrap_frac: each member corrects on its own bootstrap sample (with replacement) of
            ``round(bootstrap_frac * N_cal)`` calibration rows (at least one); ``None`` makes every
            member correct on the whole calibration set.
        ridge: ridge parameter ``lambda >= 0`` of eq. (PnC-correction), shrinking the corrected
            layer towards the original one.
        layers: indices of the perturbed hidden layers (``0 .. n_hidden - 1``); ``None`` perturbs
            every hidden layer. The output head is never perturbed.
        correct: ``False`` gives the "P&C without correction" ablation (the same perturbations,
            no refit).
    """

    n_members: int = 50
    rank: int = 20
    sigma: float = 16.0
    bootstrap_frac: float | None = 0.1
    ridge: float = 1e-4
    layers: tuple[int, ...] | None = None
    correct: bool = True

    def __post_init__(self) -> None:
        if int(self.n_members) < 1:
            raise ValueError(f"n_members must be >= 1, got {self.n_members}")
        if int(self.rank) < 1:
            raise ValueError(f"rank must be >= 1, got {self.rank}")
        if not (math.isfinite(self.sigma) and self.sigma >= 0):
            raise ValueError(f"sigma must be finite and >= 0, got {self.sigma}")
        if self.bootstrap_frac is not None and not 0.0 < self.bootstrap_frac <= 1.0:
            raise ValueError(f"bootstrap_frac must be in (0, 1] or None, got {self.bootstrap_frac}")
        if not (math.isfinite(self.ridge) and self.ridge >= 0):
            raise ValueError(f"ridge must be finite and >= 0, got {self.ridge}")
        if self.layers is not None:
            layers = tuple(int(i) for i in self.layers)
            if not layers:
                raise ValueError("layers must be None or a non-empty tuple of hidden-layer indices")
            if len(set(layers)) != len(layers) or any(i < 0 for i in layers):
                raise ValueError(f"layers must be distinct non-negative indices, got {self.layers}")
            object.__setattr__(self, "layers", tuple(sorted(layers)))
        object.__setattr__(self, "n_members", int(self.n_members))
        object.__setattr__(self, "rank", int(self.rank))

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
        """Size of each member's correction subset ``|S_m|`` for ``n_cal`` calibration rows."""
        if self.bootstrap_frac is None:
            return n_cal
        return max(1, int(round(self.bootstrap_frac * n_cal)))


# ----------------------------------------------------------------------------- the correction


def ridge_correction(
    h_cal: Array, h_cal_perturbed: Array, kernel: Array, bias: Array, ridge: float | Array
) -> tuple[Array, Array]:
    """Refit the next affine layer on perturbed calibration activations (Lemma 1).

    Solves eq. (PnC-correction) / (ls-correction) in the augmented form of Section 4.1, with
    ``Theta = [b, W]`` and design rows ``[1, h]``::

        min_{K', b'} ||h_pert K' + b' - (h K + b)||_F^2 + ridge (||K' - K||_F^2 + ||b' - b||^2).

    The closed form (eq. ridge-correction-closed-form) is evaluated through its equivalent
    residual form (Appendix A, eq. theta-diff-clean): with ``X_v = [1, h_pert]`` and the
    calibration target gap ``E = (h - h_pert) K`` (the biases cancel),
    ``[b'; K'] - [b; K] = (X_v^T X_v + ridge I)^{-1} X_v^T E``. Hence ``h_pert == h`` returns the
    layer bit-for-bit, and ``ridge -> inf`` returns the original layer.

    Numerics: the ``(d+1) x (d+1)`` Gram is formed in the input precision (float32 by default,
    float64 when called on float64 arrays under ``jax.enable_x64``), Jacobi-scaled to unit
    diagonal, factorised by Cholesky and refined by one step of iterative refinement. When
    ``B <= d + 1`` the equivalent ``B x B`` dual system ``X_v (X_v X_v^T + ridge I)^{-1} E`` is
    solved instead; with ``ridge = 0`` it gives the minimum-norm change that interpolates the
    calibration targets. Pure and shape-static: works under ``jit``, ``vmap`` and forward-mode
    autodiff (``jvp``, ``jacfwd``).

    Args:
        h_cal: original post-activations on the correction subset, ``[B, d]``.
        h_cal_perturbed: perturbed post-activations on the same rows, ``[B, d]``.
        kernel: next layer's kernel in Flax layout, ``[d, q]``.
        bias: next layer's bias, ``[q]``.
        ridge: ``lambda >= 0`` (scalar, may be traced).

    Returns:
        ``(kernel_new [d, q], bias_new [q])``.
    """
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
    ridge = jnp.asarray(ridge, dtype)
    if n_rows > d + 1:
        if kernel.shape[1] < d:  # narrow layer: E = (h - h_pert) K first, then X_v^T E
            gram = x_v.T @ x_v
            rhs = x_v.T @ ((h - hv) @ kernel_c)
        else:  # wide layer: one pass X_v^T [X_v, h - h_pert], then (X_v^T (h - h_pert)) K
            both = x_v.T @ jnp.concatenate([x_v, h - hv], axis=1)
            gram, rhs = both[:, : d + 1], both[:, d + 1 :] @ kernel_c
        delta = _spd_solve(gram + ridge * jnp.eye(d + 1, dtype=dtype), rhs)  # [d+1, q]
    else:
        gap = (h - hv) @ kernel_c  # E = X Theta^T - X_v Theta^T, [B, q]
        gram = x_v @ x_v.T + ridge * jnp.eye(n_rows, dtype=dtype)
        delta = x_v.T @ _spd_solve(gram, gap)
    bias_new = bias + delta[0].astype(bias.dtype)
    kernel_new = kernel + delta[1:].astype(kernel.dtype)
    return kernel_new, bias_new


_MAX_JITTER = 1e4  # the largest jitter tried, in units of n * eps


@jax.jit  # eager callers then reuse one compiled solve per shape (the loops inside are traced)
def _spd_solve(gram: Array, rhs: Array) -> Array:
    """Solve ``gram @ out = rhs`` for symmetric positive definite ``gram [n, n]``, ``rhs [n, q]``.

    Jacobi scaling to unit diagonal, the Cholesky factor and its explicit inverse
    (:func:`pnc._linalg.cholesky_and_inverse`: matrix products only, no LAPACK call, so the
    member-vmapped solves never wait on XLA's CPU thread pool), then one step of iterative
    refinement against the unscaled system. A Gram formed in float32 can come out indefinite at
    the rounding level; the factorisation is then redone with a jitter on the unit diagonal,
    ``n * eps`` first and ten times more on each further failure (at most five retries; the
    refinement step against the unjittered system removes the jitter's first-order effect).
    """
    n = gram.shape[0]
    diag = jnp.diagonal(gram)
    scale = jnp.where(diag > 0, jax.lax.rsqrt(jnp.where(diag > 0, diag, 1.0)), 1.0)
    scaled = gram * scale[:, None] * scale[None, :]
    eye = jnp.eye(n, dtype=gram.dtype)
    unit = n * jnp.finfo(gram.dtype).eps

    def failed(state):
        inv, jitter = state
        return ~jnp.all(jnp.isfinite(inv)) & (jitter <= _MAX_JITTER * unit)

    def attempt(state):  # jitter 0 first, then unit, 10 unit, ...
        _, jitter = state
        inv = cholesky_and_inverse(scaled + jitter * eye)[1]
        return inv, jnp.where(jitter == 0, unit, 10 * jitter).astype(gram.dtype)

    start = (jnp.full_like(gram, jnp.nan), jnp.zeros((), gram.dtype))
    inv_chol, _ = jax.lax.while_loop(failed, attempt, start)

    def solve(r):
        return scale[:, None] * (inv_chol.T @ (inv_chol @ (scale[:, None] * r)))

    out = solve(rhs)
    return out + solve(rhs - gram @ out)


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


def _layer_bases(key: Array, params: Params, layers: tuple[int, ...], rank: int) -> dict:
    return {
        i: perturbation_basis(
            jax.random.fold_in(key, i), params[f"hidden_{i}"]["kernel"].shape, rank
        )
        for i in layers
    }


def _perturbation(key: Array, layer: int, basis: Array, sigma: float, shape) -> Array:
    """``sigma * reshape(U z)`` with ``z ~ N(0, I_K)`` drawn from ``fold_in(key, layer)``."""
    z = jax.random.normal(jax.random.fold_in(key, layer), (basis.shape[1],), jnp.float32)
    return (sigma * (basis @ z)).reshape(shape)


# ----------------------------------------------------------------------------- members


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
    layer ``l_j + 1`` on the same rows, shrinking towards its original parameters. If
    ``l_{j+1} = l_j + 1`` the just-corrected layer is then perturbed on top of its correction
    (``W_{l+1} <- W_{l+1}^{corr} + dW``) and repaired in turn by layer ``l_j + 2``. The head is
    only ever corrected. With ``config.correct = False`` the same perturbations (same key) are
    applied with no refit. With ``sigma = 0`` nothing is perturbed and every member is the base
    network exactly (Lemma 1 with ``Y_v = Y`` returns ``Theta``).

    Key use: ``key`` is split into a basis key (``U_l`` from ``fold_in(., l)``, shared by all
    members) and ``M`` member keys; a member key is split into a subset key and a coefficient key
    (``z`` for layer ``l`` from ``fold_in(., l)``), so ``correct=True`` and ``correct=False`` with
    the same key perturb identically.

    Args:
        params: trained parameter pytree (see :func:`pnc.init_params`).
        mlp_config: its architecture.
        x_cal: standardised calibration inputs ``D_cal``, ``[N, in_dim]``.
        config: P&C hyperparameters.
        key: PRNG key.
        member_chunk: members built at once (``vmap`` within a ``lax.map``); bounds memory to
            about ``member_chunk * |S_m| * width`` floats per activation. ``None``: all at once.

    Returns:
        Parameter pytree with the same structure as ``params`` and a leading ``[M]`` axis on every
        leaf (unchanged leaves are broadcast).
    """
    x_cal = jnp.asarray(x_cal, jnp.float32)
    if x_cal.ndim != 2 or x_cal.shape[0] < 1:
        raise ValueError(f"x_cal must be [N, in_dim] with N >= 1, got shape {x_cal.shape}")
    in_dim = params["hidden_0"]["kernel"].shape[0]
    if x_cal.shape[1] != in_dim:
        raise ValueError(f"x_cal has {x_cal.shape[1]} columns, the network expects {in_dim}")
    layers = config.perturbed_layers(mlp_config.n_hidden)
    if member_chunk is not None and member_chunk < 1:
        raise ValueError(f"member_chunk must be >= 1 or None, got {member_chunk}")
    k_basis, k_members = jax.random.split(key)
    bases = _layer_bases(k_basis, params, layers, config.rank)
    return _build(
        params, bases, x_cal, jax.random.split(k_members, config.n_members),
        mlp_config=mlp_config, config=config, layers=layers, member_chunk=member_chunk,
    )  # fmt: skip


@functools.partial(jax.jit, static_argnames=("mlp_config", "config", "layers", "member_chunk"))
def _build(params, bases, x_cal, member_keys, *, mlp_config, config, layers, member_chunk):
    n_cal = x_cal.shape[0]
    n_sub = config.subset_size(n_cal)
    bootstrap = config.bootstrap_frac is not None
    # Base activations are gathered from one pass over D_cal when the subsets together cover more
    # rows than D_cal, and otherwise recomputed on each member's subset (bounded memory).
    shared_base = (
        config.correct and config.sigma > 0 and (not bootstrap or config.n_members * n_sub >= n_cal)
    )
    base_full = hidden_activations(params, x_cal, mlp_config) if shared_base else None

    def member(mkey):
        k_sub, k_z = jax.random.split(mkey)
        p = dict(params)  # shallow copy; layers are replaced, never mutated
        if config.sigma == 0.0:  # no perturbation; the correction of Y_v = Y is the identity
            return p
        if not config.correct:
            for i in layers:
                kern = p[f"hidden_{i}"]["kernel"]
                dw = _perturbation(k_z, i, bases[i], config.sigma, kern.shape)
                p[f"hidden_{i}"] = dict(p[f"hidden_{i}"], kernel=kern + dw)
            return p
        if bootstrap:
            idx = jax.random.randint(k_sub, (n_sub,), 0, n_cal)
            x = x_cal[idx]
            base = (
                [hb[idx] for hb in base_full]
                if shared_base
                else hidden_activations(params, x, mlp_config)
            )
        else:
            x, base = x_cal, base_full
        names = mlp_config.layer_names()
        h = x
        for i in range(layers[-1] + 1):
            name = names[i]
            if i in layers:
                kern = p[name]["kernel"]
                dw = _perturbation(k_z, i, bases[i], config.sigma, kern.shape)
                p[name] = dict(p[name], kernel=kern + dw)
            h = jax.nn.relu(h @ p[name]["kernel"] + p[name]["bias"])
            if i in layers:
                nxt = names[i + 1]
                kernel_new, bias_new = ridge_correction(
                    base[i], h, params[nxt]["kernel"], params[nxt]["bias"], config.ridge
                )
                p[nxt] = {"kernel": kernel_new, "bias": bias_new}
        return p

    if member_chunk is None or member_chunk >= member_keys.shape[0]:
        return jax.vmap(member)(member_keys)
    return jax.lax.map(member, member_keys, batch_size=member_chunk)


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

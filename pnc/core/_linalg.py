"""Cholesky factor and its inverse from elementwise arithmetic and matrix products only.

``jnp.linalg.cholesky`` and ``triangular_solve`` lower to LAPACK custom calls on the CPU. Under
``vmap`` they become *batched* calls, which jaxlib 0.10 splits over XLA's CPU thread pool while the
calling pool thread blocks until the pieces are done; when as many independent batched calls run at
once as the pool has threads, each waits on work that no free thread can pick up and the program
hangs. The ridge solves of Perturb-and-Correct are vmapped over members (and users may vmap or
compose them further), so they use the blocked factorisation below instead: plain XLA operations
that never wait on the thread pool and batch under ``vmap``. :func:`spd_solve` carries its own
derivative (the implicit one, in forward and reverse mode), so derivatives through a correction
never differentiate the factorisation's loops.

Both functions work on one matrix ``[n, n]``; batch them with ``vmap``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

Array = jax.Array

LEAF = 16
"""Size of the diagonal blocks handled by the unblocked column loops."""


@jax.jit
def cholesky_and_inverse(spd: Array) -> tuple[Array, Array]:
    """Lower Cholesky factor ``L`` of ``spd [n, n]`` and its inverse ``L^{-1}``, both ``[n, n]``.

    Right-looking blocked recursion on 16-row block boundaries (``spd`` is padded with an identity
    block to a multiple of 16)::

        [[A, .], [B, C]] = L L^T,   L = [[L_A, 0], [B L_A^{-T}, chol(C - B A^{-1} B^T)]],
        L^{-1} = [[L_A^{-1}, 0], [-L_C^{-1} L_B L_A^{-1}, L_C^{-1}]],

    with the ``16 x 16`` leaves factorised column by column and inverted by forward substitution.
    Only the lower triangle of ``spd`` is read. If ``spd`` is not numerically positive definite
    the result holds non-finite values (as LAPACK's ``potrf`` would report a failure).
    """
    n = spd.shape[0]
    if spd.ndim != 2 or spd.shape[1] != n:
        raise ValueError(f"expected a square matrix [n, n], got {spd.shape}")
    pad = -n % LEAF
    a = jnp.tril(spd)
    if pad:
        a = jnp.pad(a, ((0, pad), (0, pad)))
        a = a + jnp.diag(jnp.concatenate([jnp.zeros(n, a.dtype), jnp.ones(pad, a.dtype)]))
    chol, inv = _blocked(a)
    return chol[:n, :n], inv[:n, :n]


def _blocked(a: Array) -> tuple[Array, Array]:
    """``(L, L^{-1})`` of the lower-triangle-stored SPD ``a`` whose size is a multiple of LEAF."""
    n = a.shape[0]
    if n == LEAF:
        chol = _leaf_cholesky(a)
        return chol, _leaf_lower_inverse(chol)
    split = LEAF * ((n // LEAF + 1) // 2)
    l_a, inv_a = _blocked(a[:split, :split])
    b = a[split:, :split]
    l_b = b @ inv_a.T  # B L_A^{-T}, then one refinement step: products with an explicit inverse
    l_b = (
        l_b + (b - l_b @ l_a.T) @ inv_a.T
    )  # alone lose backward stability when A is ill-conditioned
    schur = a[split:, split:] - jnp.tril(l_b @ l_b.T)
    l_c, inv_c = _blocked(schur)
    zeros = jnp.zeros((split, n - split), a.dtype)
    chol = jnp.block([[l_a, zeros], [l_b, l_c]])
    inv = jnp.block([[inv_a, zeros], [-(inv_c @ (l_b @ inv_a)), inv_c]])
    return chol, inv


def _leaf_cholesky(a: Array) -> Array:
    """Unblocked column-by-column Cholesky of a small SPD block (lower triangle read)."""
    b = a.shape[0]
    rows = jnp.arange(b)

    def column(j, chol):
        # columns >= j of chol are still zero, so chol @ chol[j] sums over k < j only
        col = a[:, j] - chol @ chol[j]
        pivot = jnp.sqrt(col[j])
        new = jnp.where(rows > j, col / pivot, jnp.where(rows == j, pivot, 0.0))
        return chol.at[:, j].set(new)

    return jax.lax.fori_loop(0, b, column, jnp.zeros_like(a))


def _leaf_lower_inverse(chol: Array) -> Array:
    """Inverse of a small lower-triangular block by forward substitution:
    row ``i`` of ``X = L^{-1}`` is ``(e_i - L[i, :i] X[:i]) / L[i, i]``."""
    b = chol.shape[0]
    eye = jnp.eye(b, dtype=chol.dtype)

    def row(i, inv):
        # rows >= i of inv are still zero, so chol[i] @ inv sums over k < i only
        return inv.at[i].set((eye[i] - chol[i] @ inv) / chol[i, i])

    return jax.lax.fori_loop(0, b, row, jnp.zeros_like(chol))


_MAX_JITTER = 1e4  # the largest jitter tried, in units of n * eps


def _factor(gram: Array) -> tuple[Array, Array]:
    """Jacobi scale ``s [n]`` and the inverse Cholesky factor ``L^{-1} [n, n]`` of ``diag(s) gram
    diag(s)``, retried with a growing jitter on the unit diagonal while it is not finite."""
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
    return scale, inv_chol


def _refined_solve(gram: Array, scale: Array, inv_chol: Array, rhs: Array) -> Array:
    """``gram^{-1} rhs`` from :func:`_factor`'s factors, with one step of iterative refinement
    against the unscaled ``gram``."""

    def solve(r):
        return scale[:, None] * (inv_chol.T @ (inv_chol @ (scale[:, None] * r)))

    out = solve(rhs)
    return out + solve(rhs - gram @ out)


@jax.custom_jvp
def _spd_solve(gram: Array, rhs: Array) -> Array:
    return _refined_solve(gram, *_factor(gram), rhs)


@_spd_solve.defjvp
def _spd_solve_jvp(primals, tangents):
    """Implicit derivative ``d out = gram^{-1} (d rhs - d gram out)`` with the primal's factors: the
    factorisation is not differentiated (nor compiled a second time for the tangents)."""
    gram, rhs = primals
    d_gram, d_rhs = tangents
    scale, inv_chol = _factor(gram)
    out = _refined_solve(gram, scale, inv_chol, rhs)
    return out, _refined_solve(gram, scale, inv_chol, d_rhs - d_gram @ out)


@jax.jit  # eager callers then reuse one compiled solve per shape (the loops inside are traced)
def spd_solve(gram: Array, rhs: Array) -> Array:
    """Solve ``gram @ out = rhs`` for symmetric positive definite ``gram [n, n]``, ``rhs [n, q]``.

    Jacobi scaling to unit diagonal, the Cholesky factor and its explicit inverse
    (:func:`cholesky_and_inverse`: matrix products only, no LAPACK call, so the
    member-vmapped solves never wait on XLA's CPU thread pool), then one step of iterative
    refinement against the unscaled system. A Gram formed in float32 can come out indefinite at
    the rounding level; the factorisation is then redone with a jitter on the unit diagonal,
    ``n * eps`` first and ten times more on each further failure (at most five retries; the
    refinement step against the unjittered system removes the jitter's first-order effect).

    Differentiable in both arguments by the implicit rule ``d out = gram^{-1} (d rhs - d gram
    out)``, solved with the same factors and refinement step (forward mode, and reverse mode by
    transposition): the factorisation itself is never differentiated, so a program that takes
    derivatives through the solve (``jacfwd`` of a P&C member) holds one factorisation, not its
    tangent loops as well.
    """
    return _spd_solve(gram, rhs)


# ----------------------------------------------------------------------------- perturbations

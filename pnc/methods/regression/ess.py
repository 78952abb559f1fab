"""Elliptical slice sampling (Murray, Adams & MacKay, 2010) for a standard normal prior.

Targets ``p(f) ∝ L(f) N(f; 0, I)``. One step draws an auxiliary ``nu ~ N(0, I)`` and a slice level
``log y = log L(f) + log u``, then proposes ``f cos t + nu sin t`` on the ellipse through ``f`` and
``nu``, shrinking the angle bracket towards ``t = 0`` until the proposal is above the slice. Every
step is accepted; the loop is a ``lax.while_loop`` (bounded by ``max_shrinks``, after which the
chain stays at ``f``), the chain a ``lax.scan``; both jit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

Array = jax.Array
LogLik = Callable[[Array], Array]


class ESSStep(NamedTuple):
    f: Array
    log_lik: Array
    n_evals: Array


def elliptical_slice_step(
    log_lik_fn: LogLik, f: Array, log_lik_f: Array, key: Array, max_shrinks: int = 100
) -> ESSStep:
    """One elliptical slice sampling transition from ``f [k]`` with ``log L(f) = log_lik_f``."""
    k_nu, k_u, k_t, k_loop = jax.random.split(key, 4)
    nu = jax.random.normal(k_nu, f.shape, f.dtype)
    log_y = log_lik_f + jnp.log(jax.random.uniform(k_u, (), f.dtype))
    t = jax.random.uniform(k_t, (), f.dtype, 0.0, 2.0 * jnp.pi)
    lo, hi = t - 2.0 * jnp.pi, t

    def propose(t: Array) -> tuple[Array, Array]:
        f_new = f * jnp.cos(t) + nu * jnp.sin(t)
        return f_new, log_lik_fn(f_new)

    f_new, ll_new = propose(t)

    def cond(state):
        _, _, _, _, ll, i, _ = state
        return (~(ll > log_y)) & (i < max_shrinks)

    def body(state):
        t, lo, hi, _, _, i, key = state
        lo = jnp.where(t < 0.0, t, lo)
        hi = jnp.where(t < 0.0, hi, t)
        key, k = jax.random.split(key)
        t = jax.random.uniform(k, (), f.dtype, lo, hi)
        f_new, ll_new = propose(t)
        return t, lo, hi, f_new, ll_new, i + 1, key

    init = (t, lo, hi, f_new, ll_new, jnp.zeros((), jnp.int32), k_loop)
    _, _, _, f_new, ll_new, i, _ = jax.lax.while_loop(cond, body, init)
    accepted = ll_new > log_y
    return ESSStep(jnp.where(accepted, f_new, f), jnp.where(accepted, ll_new, log_lik_f), i + 1)


def elliptical_slice_chain(
    log_lik_fn: LogLik,
    f0: Array,
    key: Array,
    *,
    n_samples: int,
    burn_in: int = 0,
    thin: int = 1,
    max_shrinks: int = 100,
) -> tuple[Array, Array]:
    """Run ESS from ``f0 [k]``; keep every ``thin``-th state after ``burn_in`` steps.

    Returns:
        ``(samples [n_samples, k], n_evals)`` with the total number of likelihood evaluations.
    """
    if n_samples < 1 or burn_in < 0 or thin < 1:
        raise ValueError(
            f"need n_samples >= 1, burn_in >= 0, thin >= 1; got {n_samples, burn_in, thin}"
        )

    def step(carry: ESSStep, k: Array) -> tuple[ESSStep, Array]:
        out = elliptical_slice_step(log_lik_fn, carry.f, carry.log_lik, k, max_shrinks)
        return ESSStep(out.f, out.log_lik, carry.n_evals + out.n_evals), out.f

    init = ESSStep(f0, log_lik_fn(f0), jnp.ones((), jnp.int32))
    keys = jax.random.split(key, burn_in + n_samples * thin)
    state, _ = jax.lax.scan(lambda c, k: (step(c, k)[0], None), init, keys[:burn_in])
    state, fs = jax.lax.scan(step, state, keys[burn_in:])
    return fs[thin - 1 :: thin], state.n_evals

"""Elliptical slice sampling on a Gaussian posterior known in closed form."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pnc.methods.regression.ess import elliptical_slice_chain


def test_ess_recovers_a_gaussian_posterior():
    # prior N(0, I), likelihood N(y; f, diag(s2)) -> posterior N(m, diag(v))
    y = jnp.array([1.5, -0.5, 3.0])
    s2 = jnp.array([0.5, 2.0, 0.2])
    v = 1.0 / (1.0 + 1.0 / s2)
    m = v * y / s2

    def log_lik(f):
        return -0.5 * jnp.sum(jnp.square(f - y) / s2)

    run = jax.jit(
        lambda key: elliptical_slice_chain(
            log_lik, jnp.zeros(3), key, n_samples=8000, burn_in=200, thin=1
        )
    )
    samples, n_evals = run(jax.random.key(0))
    samples = np.asarray(samples)
    assert samples.shape == (8000, 3)
    assert int(n_evals) > 8200  # at least one evaluation per step plus the initial one
    np.testing.assert_allclose(samples.mean(0), m, atol=0.05)
    np.testing.assert_allclose(samples.var(0), v, rtol=0.1)
    again, _ = run(jax.random.key(0))
    np.testing.assert_array_equal(samples, np.asarray(again))


def test_thinning_and_argument_checks():
    samples, _ = jax.jit(
        lambda k: elliptical_slice_chain(
            lambda f: -jnp.sum(f**2), jnp.zeros(2), k, n_samples=7, burn_in=3, thin=4
        )
    )(jax.random.key(1))
    assert samples.shape == (7, 2)
    with pytest.raises(ValueError, match="thin"):
        elliptical_slice_chain(lambda f: 0.0, jnp.zeros(2), jax.random.key(0), n_samples=1, thin=0)

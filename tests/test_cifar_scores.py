"""How the CIFAR-10 OOD scores are composed, checked against values derived by hand: an
ensemble's confidence (minus the entropy of its temperature-scaled mixture), the metric rows of one
method, the Epinet's logits, and the last-layer Laplace covariance where the data term dominates."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pnc.cifar import baselines as B
from pnc.cifar import posthoc as P
from pnc.cifar.ood_tables import method_metrics


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _context(test: np.ndarray, ood: dict[str, np.ndarray]) -> P.Context:
    """A context whose evaluation "images" are member logits ``[M, N, K]`` themselves."""
    empty = np.zeros((0,))
    return P.Context(None, 0, empty, empty, empty, empty, test, np.zeros(test.shape[1]), ood)


def test_ensemble_confidence_is_minus_the_entropy_of_the_tempered_mixture():
    # two members, three images, three classes: a confident agreeing image, a confident
    # disagreeing one, a flat one
    test = np.array(
        [
            [[4.0, 0.0, 0.0], [4.0, 0.0, 0.0], [0.1, 0.0, 0.2]],
            [[4.0, 0.0, 0.0], [0.0, 4.0, 0.0], [0.0, 0.1, 0.0]],
        ]
    )
    ood = {"svhn": test[:, ::-1] * 0.5}
    out = P._ensemble_outputs(lambda x: x, _context(test, ood), temperature=2.0)
    assert set(out) == {"test_conf", "test_pred", "test_probs", "svhn_conf"}
    np.testing.assert_allclose(out["test_probs"], _softmax(test / 2.0).mean(axis=0), rtol=1e-5)
    for name, logits in (("test", test), ("svhn", ood["svhn"])):
        pbar = _softmax(logits / 2.0).mean(axis=0)
        np.testing.assert_allclose(out[f"{name}_conf"], np.sum(pbar * np.log(pbar), axis=-1), rtol=1e-5)  # fmt: skip
    np.testing.assert_array_equal(out["test_pred"], [0, 0, 2])
    # the agreeing image is the most in-distribution, the flat one the least
    assert out["test_conf"][0] > out["test_conf"][1] > out["test_conf"][2]


def test_method_metrics_put_in_distribution_confidence_on_the_positive_side():
    probs = np.array([[0.5, 0.25, 0.25], [0.2, 0.6, 0.2], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]])
    labels = np.array([0, 1, 2, 2])
    scores = {
        "test_pred": np.array([0, 1, 1, 2]),
        "test_probs": probs,
        "test_conf": np.array([-0.1, -0.2, -0.3, -0.4]),
        "svhn_conf": np.array([-1.0, -2.0, -0.25]),  # one OOD image above two ID ones
        "cifar100_conf": np.array([-0.05, -0.15]),  # above all four and three of four ID images
    }
    rows = method_metrics(scores, labels, {"svhn": "far", "cifar100": "near"})
    got = {(r["dataset"], r["group"], r["metric"]): r["value"] for r in rows}
    onehot = np.eye(3)[labels]
    expected = {
        ("cifar10", "id", "accuracy"): 75.0,
        ("cifar10", "id", "nll"): -np.mean(np.log(probs[np.arange(4), labels])),
        ("cifar10", "id", "brier"): np.mean(np.sum((probs - onehot) ** 2, axis=1)),
        # AUROC = P(c_id > c_ood): svhn 4 + 4 + 2 = 10 of 12 pairs, cifar100 0 + 1 of 8 pairs
        ("svhn", "far", "auroc"): 100 * 10 / 12,
        ("cifar100", "near", "auroc"): 100 / 8,
        # FPR@95: the TPR reaches 1 (>= 0.95) only at the lowest ID confidence -0.4: svhn 1 of 3
        # OOD images lie at or above it, cifar100 both
        ("svhn", "far", "fpr95"): 100 / 3,
        ("cifar100", "near", "fpr95"): 100.0,
        # AUPR-In (ID positive, ranked by confidence): svhn P P N P P N N -> (1 + 1 + 3/4 + 4/5) / 4
        ("svhn", "far", "aupr_in"): 100 * (1 + 1 + 0.75 + 0.8) / 4,
        # AUPR-Out (OOD positive, ranked by -confidence): svhn P P N N P N N -> (1 + 1 + 3/5) / 3
        ("svhn", "far", "aupr_out"): 100 * (1 + 1 + 0.6) / 3,
    }
    assert {k: got[k] for k in expected} == pytest.approx(expected)


def test_epinet_logits_are_base_plus_learnt_plus_scaled_prior():
    cfg = B.EpinetConfig(prior_scale=0.0, index_dim=3, hiddens=(5,))
    feats = np.random.default_rng(0).normal(size=(4, 6)).astype(np.float32)
    base = np.random.default_rng(1).normal(size=(4, 3)).astype(np.float32)
    net = B.EpinetMLP(cfg.hiddens, 3, cfg.index_dim)
    z0 = jnp.ones((cfg.index_dim,))
    params = net.init(jax.random.key(0), jnp.asarray(feats), z0)
    prior = net.init(jax.random.key(1), jnp.asarray(feats), z0)
    key = jax.random.key(2)

    def logits(scale, p=params, q=prior, b=base):
        return B.epinet_logits(p, q, feats, b, dataclasses.replace(cfg, prior_scale=scale), 4, key)

    learnt = logits(0.0) - base  # e(phi, z) alone, [S, N, K]
    assert np.abs(learnt).max() > 1e-2
    prior_part = logits(1.0) - logits(0.0)
    assert np.abs(prior_part).max() > 1e-2
    np.testing.assert_allclose(logits(3.0) - logits(0.0), 3 * prior_part, rtol=1e-4, atol=1e-5)
    # the prior enters with the same sign as the learnt network: with equal weights it doubles
    np.testing.assert_allclose(logits(1.0, q=params) - base, 2 * learnt, rtol=1e-4, atol=1e-5)
    # the base logits are added unchanged
    np.testing.assert_allclose(logits(1.0, b=base + 5.0), logits(1.0) + 5.0, rtol=1e-5, atol=1e-4)
    # one index per member, shared over images: members differ, the index draw is reproducible
    assert not np.allclose(learnt[0], learnt[1])
    np.testing.assert_array_equal(logits(1.0), logits(1.0))


def test_last_layer_laplace_covariance_where_the_data_term_dominates():
    """The whitened sample covariance ``P^1/2 C P^1/2`` is the identity for the precision
    ``P = N (A (x) G) + prior I`` written out in full; with ``N = 400`` and a prior of 0.01 the
    likelihood term is most of ``P``, so scaling it by any factor moves the whitened covariance
    far from the identity."""
    rng = np.random.default_rng(5)
    n, d, k = 400, 2, 3
    feats = rng.normal(size=(n, d))
    kernel = rng.normal(size=(d, k))
    bias = np.array([0.3, -0.2, 0.0])
    variables = {"params": {"head": {"kernel": jnp.asarray(kernel), "bias": jnp.asarray(bias)}}}
    laplace = B.LastLayerLaplace.fit(variables, feats)
    phi = np.c_[feats, np.ones(n)]
    p = _softmax(feats @ kernel + bias)
    a = phi.T @ phi / n
    g = sum(np.diag(q) - np.outer(q, q) for q in p) / n
    prior = 0.01
    data = n * np.kron(a, g)  # vec(W) row-major: (feature, class)
    precision = data + prior * np.eye((d + 1) * k)
    # the data term dominates every direction but the softmax's null direction (G 1 = 0)
    null = np.kron(np.eye(d + 1), np.ones((k, 1)) / np.sqrt(k))
    others = np.linalg.eigvalsh(data)[(d + 1) :]
    assert others.min() > 100 * prior and np.allclose(data @ null, 0, atol=1e-9)

    s = 60_000
    heads = laplace.sample_heads(prior, s, jax.random.key(0)).astype(np.float64)
    assert heads.shape == (s, d + 1, k)
    vals, vecs = np.linalg.eigh(precision)
    root = vecs @ np.diag(np.sqrt(vals)) @ vecs.T
    centred = (heads - laplace.w_map).reshape(s, -1)
    whitened = centred @ root
    # sampling error of each entry about 1 / sqrt(s) = 0.004
    np.testing.assert_allclose(whitened.T @ whitened / s, np.eye((d + 1) * k), atol=0.03)
    np.testing.assert_allclose(heads.mean(axis=0), laplace.w_map, atol=4 * 10 / np.sqrt(s))

"""How the CIFAR-10 OOD scores are composed, checked against values derived by hand: an
ensemble's confidence (minus the entropy of its temperature-scaled mixture), the metric rows of one
method, the Epinet's logits, and the last-layer Laplace covariance where the data term dominates."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pnc.core.classifier import model as classifier
from pnc.methods.ood import epinet_detector as epinet
from pnc.methods.ood import llla_detector as llla
from pnc.methods.ood import posthoc as P
from pnc.methods.ood import single_model_detectors as single
from pnc.studies.cifar.ood_tables import method_metrics


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
    out = P.ensemble_outputs(lambda x: x, _context(test, ood), temperature=2.0)
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
    cfg = epinet.EpinetConfig(prior_scale=0.0, index_dim=3, hiddens=(5,))
    feats = np.random.default_rng(0).normal(size=(4, 6)).astype(np.float32)
    base = np.random.default_rng(1).normal(size=(4, 3)).astype(np.float32)
    net = epinet.EpinetMLP(cfg.hiddens, 3, cfg.index_dim)
    z0 = jnp.ones((cfg.index_dim,))
    params = net.init(jax.random.key(0), jnp.asarray(feats), z0)
    prior = net.init(jax.random.key(1), jnp.asarray(feats), z0)
    key = jax.random.key(2)

    def logits(scale, p=params, q=prior, b=base):
        return epinet.epinet_logits(
            p, q, feats, b, dataclasses.replace(cfg, prior_scale=scale), 4, key
        )

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
    laplace = llla.LastLayerLaplace.fit(variables, feats)
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


# ----------------------------------------------------------------------------- baselines by hand


def test_single_model_scores_reduce_the_class_axis_of_member_logits():
    """MSP and energy of member logits ``[S, N, K]``: one score per member and image, over the
    classes only (a softmax or log-sum-exp over another axis gives other numbers)."""
    logits = np.random.default_rng(7).normal(size=(3, 4, 5)) * 2
    p = _softmax(logits)
    np.testing.assert_allclose(single.msp(logits), p.max(axis=-1), rtol=1e-5)
    np.testing.assert_allclose(
        single.energy(logits), np.log(np.exp(logits).sum(axis=-1)), rtol=1e-5
    )
    np.testing.assert_allclose(single.msp(logits[0]), p[0].max(axis=-1), rtol=1e-5)


def test_mahalanobis_fits_and_scores_float32_features_in_float64():
    rng = np.random.default_rng(8)
    labels = np.repeat(np.arange(3), 40)
    f64 = (
        rng.normal(size=(120, 6)) * 1e3 + labels[:, None] * 7.0 + 1e4
    )  # large offset, small spread
    f32 = f64.astype(np.float32)
    exact = single.Mahalanobis.fit(f32.astype(np.float64), labels, 3)
    maha = single.Mahalanobis.fit(f32, labels, 3)
    np.testing.assert_allclose(maha.means, exact.means, rtol=1e-13)
    np.testing.assert_allclose(maha.precision, exact.precision, rtol=1e-9)
    probe = f32[:7]
    np.testing.assert_allclose(
        maha.confidence(probe), exact.confidence(probe.astype(np.float64)), rtol=1e-9
    )


def _head_variables(rng, d, k):
    kernel = rng.normal(size=(d, k)).astype(np.float32)
    bias = rng.normal(size=k).astype(np.float32)
    return {"params": {"head": {"kernel": jnp.asarray(kernel), "bias": jnp.asarray(bias)}}}


def test_last_layer_laplace_factors_in_float64_from_float32_features():
    """The KFAC factors from float32 features equal the float64 ones written out by hand (the
    features widened first, the head applied in float32 as the network does).

    The near-zero eigenvalue of ``G`` is bounded by the float32 rounding of the softmax rows, not
    by a fixed 1e-12: its size and sign depend on how the CPU's XLA kernels round (it was 8e-10
    on an AVX2 machine), and the bound below holds on every one."""
    rng = np.random.default_rng(9)
    n, d, k = 50, 4, 3
    variables = jax.tree.map(lambda w: w * 0.01, _head_variables(rng, d, k))  # no saturation
    feats = (rng.normal(size=(n, d)) * 3 + 100).astype(np.float32)
    laplace = llla.LastLayerLaplace.fit(variables, feats)
    f = feats.astype(np.float64)
    phi = np.c_[f, np.ones(n)]
    p = np.asarray(jax.nn.softmax(classifier.head(variables, jnp.asarray(feats))), np.float64)
    a = phi.T @ phi / n
    g = np.diag(p.mean(axis=0)) - p.T @ p / n
    np.testing.assert_allclose(
        laplace.a_vecs @ np.diag(laplace.a_vals) @ laplace.a_vecs.T, a, rtol=1e-10, atol=1e-9
    )
    np.testing.assert_allclose(
        laplace.g_vecs @ np.diag(laplace.g_vals) @ laplace.g_vecs.T, g, rtol=1e-7, atol=1e-12
    )
    assert laplace.n == n and laplace.a_vals.dtype == np.float64
    assert laplace.g_vals.dtype == np.float64
    expected_map = np.r_[
        np.asarray(variables["params"]["head"]["kernel"]),
        np.asarray(variables["params"]["head"]["bias"])[None],
    ]
    np.testing.assert_array_equal(laplace.w_map, expected_map)
    # G would be singular if the softmax rows summed to 1 exactly; computed in float32 they sum to
    # s_i = 1 + e_i, |e_i| a few float32 ulps, and G's smallest eigenvalue is at most the Rayleigh
    # quotient of the ones vector, 1^T G 1 / K = -(1 / (N K)) sum_i s_i e_i, i.e. of the order of
    # float32 rounding (not of float64's): the factor must clip it, never keep it negative.
    s = p.sum(axis=1)
    assert np.abs(s - 1).max() <= k * np.finfo(np.float32).eps
    rayleigh = -np.sum(s * (s - 1)) / (n * k)
    assert np.linalg.eigvalsh(g).min() <= rayleigh + 8 * np.finfo(np.float64).eps * np.abs(g).max()
    assert (laplace.g_vals >= 0).all() and (laplace.a_vals >= 0).all()


def test_last_layer_laplace_clips_negative_eigenvalues_to_zero():
    """Eigenvalues a round-off makes negative are clipped to 0 (a variance can only grow)."""
    # a feature that is a constant multiple of the bias row makes A singular too
    base = np.random.default_rng(10).normal(size=(30, 2))
    feats = np.c_[base, np.full(30, 2.0)]
    phi = np.c_[feats, np.ones(30)]
    raw_a = np.linalg.eigvalsh(phi.T @ phi / 30)
    found = False
    for seed in range(40):
        variables = _head_variables(np.random.default_rng(100 + seed), 3, 4)
        laplace = llla.LastLayerLaplace.fit(variables, feats)
        head = classifier.head(variables, jnp.asarray(feats, jnp.float32))
        p = np.asarray(jax.nn.softmax(head), np.float64)
        raw_g = np.linalg.eigvalsh(np.diag(p.mean(axis=0)) - p.T @ p / 30)
        for got, raw in ((laplace.a_vals, raw_a), (laplace.g_vals, raw_g)):
            assert (got >= 0).all()
            np.testing.assert_allclose(got, np.clip(raw, 0, None), rtol=1e-9, atol=1e-14)
        found |= bool((raw_a < 0).any() or (raw_g < 0).any())
    assert found, "no draw had a negative round-off eigenvalue"


def test_last_layer_laplace_heads_by_hand():
    """``w_map + A_vecs (eps * scale) G_vecs^T`` with the key's standard normal draws ``eps``
    and ``scale = (N a_i g_j + prior)^-1/2``, returned in float32."""
    rng = np.random.default_rng(11)
    variables = _head_variables(rng, 3, 2)
    laplace = llla.LastLayerLaplace.fit(variables, rng.normal(size=(20, 3)))
    key = jax.random.key(4)
    heads = laplace.sample_heads(0.7, 5, key)
    eps = np.asarray(jax.random.normal(key, (5, 4, 2)), np.float64)
    scale = 1.0 / np.sqrt(20 * np.outer(laplace.a_vals, laplace.g_vals) + 0.7)
    expected = laplace.w_map[None] + laplace.a_vecs @ (eps * scale) @ laplace.g_vecs.T
    assert heads.dtype == np.float32 and heads.shape == (5, 4, 2)
    np.testing.assert_allclose(heads, expected.astype(np.float32), rtol=1e-6, atol=1e-7)
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match=rf"^prior_precision must be > 0, got {bad}$"):
            laplace.sample_heads(bad, 2, key)


def test_laplace_logits_by_hand():
    rng = np.random.default_rng(12)
    feats = rng.normal(size=(6, 3))
    heads = rng.normal(size=(4, 4, 5)).astype(np.float32)  # [S, D + 1, K]
    out = llla.laplace_logits(feats, heads)
    expected = np.einsum("nd,sdk->snk", feats, heads[:, :3].astype(np.float64)) + heads[:, None, 3]
    assert out.shape == (4, 6, 5) and out.dtype == np.float32
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    for s in range(4):
        np.testing.assert_allclose(out[s], feats @ heads[s, :3] + heads[s, 3], rtol=1e-5, atol=1e-5)


def test_network_logits_in_batches_equal_one_pass():
    from pnc.core.classifier.model import Classifier, normalize
    from pnc.core.conv.resnet import ResNetConfig

    config = ResNetConfig(num_classes=10, widths=(4, 8), blocks_per_stage=(1, 1))
    x = np.random.default_rng(13).integers(0, 256, (7, 32, 32, 3), dtype=np.uint8)
    model = Classifier(config)
    variables = model.init(jax.random.key(3), normalize(x), train=False)
    whole = np.asarray(model.apply(variables, normalize(x), train=False))
    for batch_size in (3, 7, 500):
        out = classifier.network_logits(variables, x, config, batch_size=batch_size)
        assert out.shape == (7, 10)
        np.testing.assert_allclose(out, whole, rtol=1e-5, atol=1e-5)


def _train_epinet_by_hand(feats, logits, labels, cfg, key):
    """The Epinet recipe written as plain loops: ``epochs`` epochs of ``N // batch`` AdamW steps
    (batch ``min(batch_size, N)``, rows from one permutation per epoch) on the mean over
    ``index_samples`` indices of the cross-entropy of ``base + e(phi, z) + scale * prior(phi, z)``;
    the prior stays at its initial parameters."""
    import optax

    f, base, y = jnp.asarray(feats), jnp.asarray(logits), jnp.asarray(labels, jnp.int32)
    net = epinet.EpinetMLP(tuple(cfg.hiddens), base.shape[1], cfg.index_dim)
    k_init, k_prior, k_train = jax.random.split(key, 3)
    z0 = jnp.zeros((cfg.index_dim,))
    params = net.init(k_init, f[:1], z0)
    prior = net.init(k_prior, f[:1], z0)
    batch = min(cfg.batch_size, f.shape[0])
    steps = max(1, f.shape[0] // cfg.batch_size)
    tx = optax.adamw(cfg.lr, weight_decay=cfg.weight_decay)
    state = tx.init(params)

    def loss(p, rows, zs):
        total = 0.0
        for z in zs:
            out = (
                base[rows]
                + net.apply(p, f[rows], z)
                + cfg.prior_scale * net.apply(prior, f[rows], z)
            )
            total += optax.softmax_cross_entropy_with_integer_labels(out, y[rows]).mean()
        return total / zs.shape[0]

    for k in jax.random.split(k_train, cfg.epochs):
        k_perm, k_z = jax.random.split(k)
        perm = jax.random.permutation(k_perm, f.shape[0])[: steps * batch].reshape(steps, batch)
        zs = jax.random.normal(k_z, (steps, cfg.index_samples, cfg.index_dim))
        for rows, z in zip(perm, zs, strict=True):
            grads = jax.grad(loss)(params, rows, z)
            updates, state = tx.update(grads, state, params)
            params = optax.apply_updates(params, updates)
    return params, prior


@pytest.mark.parametrize(
    "n, cfg",
    [
        (
            20,
            epinet.EpinetConfig(
                prior_scale=0.5,
                index_dim=2,
                hiddens=(6,),
                epochs=3,
                batch_size=8,
                index_samples=3,
                lr=0.01,
                weight_decay=0.1,
            ),
        ),
        (
            5,
            epinet.EpinetConfig(
                prior_scale=3.0,
                index_dim=3,
                hiddens=(4, 5),
                epochs=2,
                batch_size=8,
                index_samples=2,
            ),
        ),
    ],
)
@pytest.mark.slow
def test_epinet_training_follows_the_recipe_written_as_loops(n, cfg):
    rng = np.random.default_rng(14)
    feats = rng.normal(size=(n, 4)).astype(np.float32)
    logits = rng.normal(size=(n, 3)).astype(np.float32)
    labels = rng.integers(0, 3, n)
    key = jax.random.key(6)
    params, prior = epinet.train_epinet(feats, logits, labels, cfg, key)
    want_params, want_prior = _train_epinet_by_hand(feats, logits, labels, cfg, key)
    jax.tree.map(
        lambda a, b: np.testing.assert_array_equal(np.asarray(a), np.asarray(b)), prior, want_prior
    )
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=2e-6),
        params,
        want_params,
    )
    moved = jax.tree.map(
        lambda a, b: float(np.abs(np.asarray(a) - np.asarray(b)).max()), params, want_prior
    )
    assert max(jax.tree.leaves(moved)) > 1e-3


def test_epinet_training_fits_the_labels_the_base_gets_wrong():
    """With zero base logits and separable features, the trained epinet's mean logits over
    indices classify the training rows."""
    rng = np.random.default_rng(15)
    labels = np.repeat(np.arange(3), 30)
    feats = (np.eye(3)[labels] * 3 + rng.normal(size=(90, 3)) * 0.3).astype(np.float32)
    cfg = epinet.EpinetConfig(
        prior_scale=0.1, index_dim=2, hiddens=(16,), epochs=60, batch_size=30, lr=0.01
    )
    params, prior = epinet.train_epinet(
        feats, np.zeros((90, 3), np.float32), labels, cfg, jax.random.key(8)
    )
    members = epinet.epinet_logits(
        params, prior, feats, np.zeros((90, 3), np.float32), cfg, 8, jax.random.key(9)
    )
    assert np.mean(members.mean(axis=0).argmax(axis=1) == labels) > 0.95

"""The CIFAR-10 study's pieces: data formats and their errors, OOD metrics (ID positive), the
single-model scores, last-layer Laplace, the BN refresh, the training recipe's resumption, the
tables."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pandas as pd
import pytest
from jax.flatten_util import ravel_pytree

from pnc.core.classifier.model import Classifier, features_and_logits, normalize
from pnc.core.classifier.recipe import Recipe, augment, train
from pnc.core.conv import resnet
from pnc.core.conv.resnet import ResNetConfig
from pnc.methods.ood import epinet_detector as epinet
from pnc.methods.ood import llla_detector as llla
from pnc.methods.ood import mc_dropout_detector as mc_dropout
from pnc.methods.ood import single_model_detectors as single
from pnc.methods.ood import swag_detector as swag
from pnc.studies.cifar import data as D
from pnc.studies.cifar import ood_metrics as M
from pnc.studies.cifar import ood_tables as T

TINY_NET = ResNetConfig(num_classes=10, widths=(4, 8), blocks_per_stage=(1, 1))

# ----------------------------------------------------------------------------- data


def test_cifar_binary_round_trip_and_byte_layout(tmp_path):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (7, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, 7).astype(np.uint8)
    path = tmp_path / "batch.bin"
    D.write_cifar_batch(path, images, labels)
    raw = np.fromfile(path, np.uint8)
    assert raw.size == 7 * 3073
    # record 1: its label byte, then the red plane row by row, then green, then blue
    rec = raw[3073 : 2 * 3073]
    assert rec[0] == labels[1]
    assert rec[1 + 33] == images[1, 1, 1, 0]
    assert rec[1 + 1024 + 32 * 5 + 2] == images[1, 5, 2, 1]
    assert rec[1 + 2048 + 1023] == images[1, 31, 31, 2]
    x, y = D.read_cifar_batch(path)
    np.testing.assert_array_equal(x, images)
    np.testing.assert_array_equal(y, labels)


def test_malformed_cifar_files_are_named(tmp_path):
    images = np.zeros((2, 32, 32, 3), np.uint8)
    path = tmp_path / "cut.bin"
    D.write_cifar_batch(path, images, np.array([1, 2]))
    path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(D.DataError, match=r"cut\.bin.*3073-byte records"):
        D.read_cifar_batch(path)
    raw = np.zeros(2 * 3073, np.uint8)
    raw[3073] = 10
    raw.tofile(path)
    with pytest.raises(D.DataError, match=r"record 1 has label 10"):
        D.read_cifar_batch(path)
    with pytest.raises(D.DataError, match=r"missing CIFAR-10 file .*nothing\.bin(.|\n)*expected layout"):  # fmt: skip
        D.read_cifar_batch(tmp_path / "nothing.bin")


def test_prepare_names_every_missing_file_and_unknown_datasets(tmp_path):
    D.write_cifar_batch(tmp_path / D.CIFAR_DIR / "data_batch_1.bin", np.zeros((1, 32, 32, 3), np.uint8), np.array([0]))  # fmt: skip
    with pytest.raises(D.DataError) as err:
        D.prepare(tmp_path, ["svhn", "tin"], tmp_path / "out")
    text, layout = str(err.value).split("expected layout")
    assert "7 data file(s) missing" in text and "data_batch_1.bin" in layout
    assert (
        "data_batch_2.bin" in text and "test_batch.bin" in text and "data_batch_1.bin" not in text
    )
    assert "test_svhn.txt" in text and "test_tin.txt" in text and "images_classic" in layout
    assert not (tmp_path / "out").exists()
    with pytest.raises(D.DataError, match="unknown OOD dataset.*'cifar1000'"):
        D.prepare(tmp_path, ["cifar1000"], tmp_path / "out")


def test_image_lists_and_openood_test_transform(tmp_path):
    from PIL import Image

    (tmp_path / "images_classic/m").mkdir(parents=True)
    Image.fromarray(np.full((28, 28), 77, np.uint8)).save(tmp_path / "images_classic/m/a.png")
    wide = np.zeros((48, 64, 3), np.uint8)
    wide[:, 32:] = 200  # right half bright: the centre crop keeps a dark left and bright right part
    Image.fromarray(wide).save(tmp_path / "images_classic/m/b.png")
    grey = D.load_image(tmp_path / "images_classic/m/a.png")
    assert grey.shape == (32, 32, 3) and np.all(grey == 77)
    crop = D.load_image(tmp_path / "images_classic/m/b.png")
    assert crop.shape == (32, 32, 3)
    assert crop[:, :10].max() == 0 and crop[:, -10:].min() == 200
    lst = tmp_path / "list.txt"
    lst.write_text("m/a.png 0\nm/b.png 0\n\n")
    assert D.read_image_list(lst) == ["m/a.png", "m/b.png"]
    lst.write_text("m/a.png 0\n/data/m/b.png 0\n")
    with pytest.raises(D.DataError, match=r"line 2"):
        D.read_image_list(lst)
    with pytest.raises(D.DataError, match=r"missing image .*c\.png"):
        D.load_image(tmp_path / "images_classic/m/c.png")


def test_tiny_benchmark_is_read_through_the_real_readers(tmp_path):
    summary = D.write_tiny_benchmark(tmp_path, train_per_file=6, test=8, ood=5, ood_names=["mnist", "cifar100"])  # fmt: skip
    assert summary == {"id": "cifar10", "train": 30, "test": 8, "ood": {"mnist": 5, "cifar100": 5}}
    info = D.prepare(tmp_path, ["mnist", "cifar100"], tmp_path / "out")
    assert info["train"] == 30 and info["ood"] == {"mnist": 5, "cifar100": 5}
    data = D.load_prepared(tmp_path / "out")
    assert data.train_x.shape == (30, 32, 32, 3) and data.ood["mnist"].dtype == np.uint8
    # the generated MNIST stand-in is grey; the ID images are coloured
    mn = data.ood["mnist"].astype(int)
    assert np.abs(mn[..., 0] - mn[..., 1]).mean() < 1 < np.abs(np.diff(data.train_x.astype(int), axis=-1)).mean()  # fmt: skip
    tr, va = D.train_val_split(30, 6, seed=3)
    assert len(set(tr) | set(va)) == 30 and len(va) == 6
    assert not np.array_equal(va, D.train_val_split(30, 6, seed=4)[1])


# ----------------------------------------------------------------------------- metrics


def test_auroc_and_fpr95_by_hand():
    assert M.auroc([3, 4, 5], [1, 2, 3.5]) == pytest.approx(8 / 9)
    assert M.auroc([1, 2], [1, 2]) == pytest.approx(0.5)
    ids = np.arange(1, 21, dtype=float)  # 19 of 20 ID images have confidence >= 2
    assert M.fpr_at_tpr(ids, [0, 1.5, 2, 2.5, 30]) == pytest.approx(3 / 5)
    assert M.fpr_at_tpr(ids, [-1, 0]) == 0.0
    assert M.fpr_at_tpr([1.0, 1.0], [1.0]) == 1.0  # ties are called ID


def test_fpr95_matches_its_definition_on_random_scores():
    rng = np.random.default_rng(1)
    for _ in range(20):
        a = np.round(rng.normal(1, 1, rng.integers(5, 60)), 1)
        b = np.round(rng.normal(0, 1, rng.integers(5, 60)), 1)
        # the largest threshold that calls >= 95% of the ID images ID
        t = max(t for t in np.unique(np.r_[a, b]) if np.mean(a >= t) >= 0.95)
        assert M.fpr_at_tpr(a, b) == pytest.approx(np.mean(b >= t))


# ----------------------------------------------------------------------------- scores


def test_msp_energy_mahalanobis_react_by_hand():
    logits = np.array([[0.0, np.log(3.0)]])
    assert single.msp(logits)[0] == pytest.approx(0.75)
    assert single.energy(logits)[0] == pytest.approx(np.log(4.0))
    f = np.array([[1, 0], [-1, 0], [0, 1], [0, -1], [5, 0], [3, 0], [4, 1], [4, -1]], float)
    maha = single.Mahalanobis.fit(f, np.array([0, 0, 0, 0, 1, 1, 1, 1]), 2)
    np.testing.assert_allclose(maha.means, [[0, 0], [4, 0]])
    np.testing.assert_allclose(maha.precision, 2 * np.eye(2), atol=1e-12)
    np.testing.assert_allclose(maha.confidence(np.array([[2.0, 0], [0, 0], [4, 1]])), [-8, 0, -2])
    with pytest.raises(ValueError, match=r"class\(es\) \[1, 2\]"):
        single.Mahalanobis.fit(f, np.zeros(8, int), 3)
    variables = {"params": {"head": {"kernel": jnp.eye(2), "bias": jnp.zeros(2)}}}
    assert single.react_threshold(np.arange(101.0)) == pytest.approx(90.0)
    conf, clipped = single.react_energy(variables, np.array([[5.0, 0.5]]), 1.0)
    np.testing.assert_allclose(clipped, [[1.0, 0.5]])
    assert conf[0] == pytest.approx(np.log(np.e + np.exp(0.5)))


def test_last_layer_laplace_samples_have_the_kronecker_posterior_covariance():
    rng = np.random.default_rng(2)
    feats = rng.normal(size=(40, 2))
    kernel = rng.normal(size=(2, 3))
    variables = {"params": {"head": {"kernel": jnp.asarray(kernel), "bias": jnp.zeros(3)}}}
    laplace = llla.LastLayerLaplace.fit(variables, feats)
    phi = np.c_[feats, np.ones(40)]
    p = np.asarray(jax.nn.softmax(feats @ kernel))
    g = sum(np.diag(q) - np.outer(q, q) for q in p) / 40
    precision = 40 * np.kron(phi.T @ phi / 40, g) + 0.5 * np.eye(9)
    heads = laplace.sample_heads(0.5, 40_000, jax.random.key(0)).astype(np.float64)
    assert heads.shape == (40_000, 3, 3)
    np.testing.assert_allclose(heads.mean(0), laplace.w_map, atol=0.05)
    cov = np.cov(heads.reshape(40_000, 9), rowvar=False)
    np.testing.assert_allclose(cov, np.linalg.inv(precision), atol=0.08)
    tight = laplace.sample_heads(1e8, 10, jax.random.key(1))
    np.testing.assert_allclose(tight, np.broadcast_to(laplace.w_map, tight.shape), atol=1e-3)


def test_classifier_matches_the_functional_forward_that_pnc_uses():
    model = Classifier(TINY_NET, dropout_rate=0.3)
    x = np.random.default_rng(3).integers(0, 256, (5, 32, 32, 3), dtype=np.uint8)
    variables = model.init(jax.random.key(0), normalize(x), train=False)
    # non-trivial BN statistics
    variables = {**variables, "batch_stats": jax.tree.map(lambda s: s + 0.3, variables["batch_stats"])}  # fmt: skip
    module = model.apply(variables, normalize(x), train=False)
    _, logits = features_and_logits(variables, x, TINY_NET, batch_size=2)
    np.testing.assert_allclose(logits, module, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(resnet.forward(variables, normalize(x), TINY_NET), module, rtol=1e-5, atol=1e-5)  # fmt: skip


def test_bn_refresh_recomputes_the_batch_statistics():
    model = Classifier(TINY_NET)
    x = np.random.default_rng(4).integers(0, 256, (8, 32, 32, 3), dtype=np.uint8)
    variables = model.init(jax.random.key(1), normalize(x), train=False)
    stats = swag.refresh_batch_stats(variables["params"], variables["batch_stats"], jnp.asarray(x), config=TINY_NET, batch_size=4)  # fmt: skip
    stem = resnet.stem(variables, normalize(x))  # the input of block_0's first BN
    halves = [stem[:4], stem[4:]]
    mean = np.mean([h.mean(axis=(0, 1, 2)) for h in halves], axis=0)
    var = np.mean([h.var(axis=(0, 1, 2)) for h in halves], axis=0)
    np.testing.assert_allclose(stats["block_0"]["bn1"]["mean"], mean, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(stats["block_0"]["bn1"]["var"], var, rtol=1e-4, atol=1e-5)


def test_dropout_and_swag_members_differ_and_swag_needs_two_epochs():
    f = jnp.ones((4, 3))
    variables = {"params": {"head": {"kernel": jnp.ones((3, 2)), "bias": jnp.zeros(2)}}}
    logits = mc_dropout.dropout_logits(variables, f, 0.5, 16, jax.random.key(0))
    assert logits.shape == (16, 4, 2)
    assert set(np.unique(logits)) <= {0.0, 2.0, 4.0, 6.0} and len(np.unique(logits)) > 1
    params = {"w": jnp.zeros(3)}
    moments = {"n": 1, "mean": np.zeros(3), "sq_mean": np.zeros(3), "dev": np.zeros((2, 3))}
    with pytest.raises(ValueError, match=">= 2 collected epochs"):
        swag.swag_sample(moments, params, jax.random.key(0))
    moments = {"n": 2, "mean": np.ones(3), "sq_mean": np.ones(3) * 5, "dev": np.eye(3)[:2]}
    draws = np.stack(
        [swag.swag_sample(moments, params, jax.random.key(i))["w"] for i in range(2000)]
    )
    np.testing.assert_allclose(draws.mean(0), 1, atol=0.1)
    # diag/2 + D^T D / (2 (R - 1)) with var = 5 - 1 = 4
    np.testing.assert_allclose(draws.var(0), [2.5, 2.5, 2.0], atol=0.25)


def _former_cifar_swag_sample(moments: dict, params_template, key, rank: int | None = None):
    """The reference: the CIFAR SWAG sampler as pnc.core.classifier.baselines wrote it before it took the
    draw from pnc.core.swag_gaussian (copied verbatim)."""
    n = int(moments["n"])
    if n < 2:
        raise ValueError(f"SWAG needs >= 2 collected epochs, got {n}")
    mean = jnp.asarray(moments["mean"])
    var = jnp.clip(jnp.asarray(moments["sq_mean"]) - mean**2, 1e-30, None)
    dev = jnp.asarray(moments["dev"])[: min(n, moments["dev"].shape[0])]
    if rank is not None:
        dev = dev[:rank]
    k1, k2 = jax.random.split(key)
    z1 = jax.random.normal(k1, mean.shape)
    z2 = jax.random.normal(k2, (dev.shape[0],))
    w = mean + jnp.sqrt(var / 2.0) * z1 + dev.T @ z2 / jnp.sqrt(2.0 * max(dev.shape[0] - 1, 1))
    _, unravel = ravel_pytree(params_template)
    return unravel(w)


@pytest.mark.parametrize(
    ("n", "buffer", "rank"),
    [(2, 4, None), (3, 4, 2), (9, 4, None), (9, 4, 3), (5, 4, 1), (2, 2, 20)],
)
def test_swag_samples_are_bit_identical_to_the_former_cifar_sampler(n, buffer, rank):
    """Ring buffers part filled and wrapped, every rank cut (1 included), variances that round to
    zero or below (the floor), a pytree of several leaves, several keys: the same bits."""
    rng = np.random.default_rng(n * 10 + buffer)
    params = {"conv": {"kernel": jnp.zeros((3, 3, 2, 4))}, "head": {"bias": jnp.zeros(5)}}
    size = 3 * 3 * 2 * 4 + 5
    mean = rng.normal(size=size).astype(np.float32)
    sq_mean = (mean**2 + rng.uniform(0, 0.1, size)).astype(np.float32)
    sq_mean[:7] = mean[:7] ** 2  # zero variance (or a rounding below it): floored
    moments = {
        "n": np.int32(n),
        "mean": mean,
        "sq_mean": sq_mean,
        "dev": rng.normal(size=(buffer, size)).astype(np.float32),
    }
    for seed in range(4):
        key = jax.random.key(seed)
        new = jax.tree.leaves(swag.swag_sample(moments, params, key, rank))
        old = jax.tree.leaves(_former_cifar_swag_sample(moments, params, key, rank))
        for a, b in zip(new, old, strict=True):
            assert a.dtype == b.dtype == jnp.float32 and a.shape == b.shape
            np.testing.assert_array_equal(
                np.asarray(a).view(np.uint32), np.asarray(b).view(np.uint32)
            )


# ----------------------------------------------------------------------------- training


def test_augmentation_cuts_out_one_clipped_square():
    x = jnp.full((64, 32, 32, 3), 255, jnp.uint8)
    out = np.asarray(augment(jax.random.key(0), x, padding=0, cutout=8))
    zeros = (out == 0).all(-1).sum(axis=(1, 2))
    assert zeros.min() >= 16 and zeros.max() == 64  # a corner clips the square to 4x4 at worst
    padded = np.asarray(augment(jax.random.key(1), x, padding=4, cutout=0))
    black = normalize(jnp.zeros((1, 1, 1, 3)))[0, 0, 0]
    assert np.isclose(padded, black).all(-1).any()  # some crops show the zero padding


def test_interrupted_training_resumes_to_the_uninterrupted_result(tmp_path):
    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, (48, 32, 32, 3), dtype=np.uint8)
    y = rng.integers(0, 10, 48).astype(np.uint8)
    recipe = Recipe(epochs=3, batch_size=16, lr=0.05, warmup_epochs=1, swag_starts=(0, 1), swag_rank=2)  # fmt: skip
    whole, hist = train(x, y, TINY_NET, recipe, seed=0, run_id="base", checkpoint=tmp_path / "a.msgpack")  # fmt: skip
    part, _ = train(x, y, TINY_NET, recipe, seed=0, run_id="base", checkpoint=tmp_path / "b.msgpack", stop_after=1)  # fmt: skip
    assert int(part["epoch"]) == 1
    resumed, hist_b = train(x, y, TINY_NET, recipe, seed=0, run_id="base", checkpoint=tmp_path / "b.msgpack")  # fmt: skip
    assert hist_b["resumed_from"] == 1 and len(hist_b["loss"]) == 3
    np.testing.assert_allclose(hist_b["loss"], hist["loss"], rtol=1e-6)
    for a, b in zip(jax.tree.leaves(whole), jax.tree.leaves(resumed), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-7)
    assert int(whole["swag"]["0"]["n"]) == 3 and int(whole["swag"]["1"]["n"]) == 2
    other = Recipe(epochs=4, batch_size=16, lr=0.05, warmup_epochs=1, swag_starts=(0, 1), swag_rank=2)  # fmt: skip
    with pytest.raises(ValueError, match="another run or recipe"):
        train(x, y, TINY_NET, other, seed=0, run_id="base", checkpoint=tmp_path / "b.msgpack")
    with pytest.raises(ValueError, match="swag_starts"):
        Recipe(epochs=3, warmup_epochs=0, swag_starts=(3,))


def test_checkpoints_are_written_every_n_epochs_and_after_the_last(tmp_path, monkeypatch):
    from pnc.core.classifier import recipe as R

    rng = np.random.default_rng(6)
    x = rng.integers(0, 256, (32, 32, 32, 3), dtype=np.uint8)
    y = rng.integers(0, 10, 32).astype(np.uint8)
    recipe = Recipe(epochs=5, batch_size=16, lr=0.05, warmup_epochs=1)
    saved = []
    real_save = R.save_checkpoint
    monkeypatch.setattr(R, "save_checkpoint", lambda p, s, m: (saved.append(int(s["epoch"])), real_save(p, s, m)))  # fmt: skip
    ckpt = tmp_path / "c.msgpack"
    train(x, y, TINY_NET, recipe, seed=0, run_id="base", checkpoint=ckpt, checkpoint_every=2, stop_after=3)  # fmt: skip
    assert saved == [2, 3]  # every 2nd epoch, and the last one run
    train(x, y, TINY_NET, recipe, seed=0, run_id="base", checkpoint=ckpt, checkpoint_every=2)
    assert saved == [2, 3, 4, 5]
    with pytest.raises(ValueError, match="checkpoint_every"):
        train(x, y, TINY_NET, recipe, seed=0, run_id="base", checkpoint=ckpt, checkpoint_every=0)


def test_a_failed_checkpoint_write_fails_the_run(tmp_path, monkeypatch):
    """Checkpoints are written off the training thread; a write that fails still fails the run
    (no run goes on believing it can resume), and the checkpoint before it is left whole."""
    from pnc.core.classifier import recipe as R

    rng = np.random.default_rng(7)
    x = rng.integers(0, 256, (32, 32, 32, 3), dtype=np.uint8)
    y = rng.integers(0, 10, 32).astype(np.uint8)
    recipe = Recipe(epochs=3, batch_size=16, lr=0.05, warmup_epochs=1)
    ckpt = tmp_path / "c.msgpack"
    real_save = R.save_checkpoint

    def save(path, state, meta):
        if int(state["epoch"]) == 2:
            raise OSError("No space left on device")
        real_save(path, state, meta)

    monkeypatch.setattr(R, "save_checkpoint", save)
    with pytest.raises(OSError, match="No space left"):
        train(x, y, TINY_NET, recipe, seed=0, run_id="base", checkpoint=ckpt)
    meta = json.loads(ckpt.with_suffix(".json").read_text())
    assert meta["history"]["loss"] and len(meta["history"]["loss"]) == 1  # epoch 1's, whole
    monkeypatch.setattr(R, "save_checkpoint", real_save)
    _, history = train(x, y, TINY_NET, recipe, seed=0, run_id="base", checkpoint=ckpt)
    assert history["resumed_from"] == 1 and len(history["loss"]) == 3


def _recipe_updates_by_hand(recipe: Recipe, steps_per_epoch: int, grads, w0: float) -> np.ndarray:
    """The recipe's parameter trajectory written out in float64 (Appendix D.1): PyTorch's coupled
    weight decay (``g + wd w``), Nesterov momentum (``b = mu b + g``, step ``g + mu b``) and a
    learning rate rising linearly from 0 over the warm-up steps, then ``lr (1 + cos(pi s / S)) / 2``
    down to 0 at the last step (``s`` steps after the warm-up, ``S`` the steps after it)."""
    total = recipe.epochs * steps_per_epoch
    warm = recipe.warmup_epochs * steps_per_epoch
    w, buf, out = w0, 0.0, []
    for t, g in enumerate(grads):
        if t < warm:
            lr = recipe.lr * t / warm
        else:
            lr = recipe.lr * 0.5 * (1 + np.cos(np.pi * (t - warm) / (total - warm)))
        g = g + recipe.weight_decay * w
        buf = recipe.momentum * buf + g
        w = w - lr * (g + recipe.momentum * buf if recipe.nesterov else buf)
        out.append(w)
    return np.array(out)


@pytest.mark.parametrize("nesterov", [True, False])
def test_optimizer_follows_warmup_cosine_nesterov_with_coupled_decay(nesterov):
    from pnc.core.classifier.recipe import optimizer

    recipe = Recipe(epochs=6, warmup_epochs=2, lr=0.1, weight_decay=5e-2, nesterov=nesterov)
    steps_per_epoch = 3
    grads = np.random.default_rng(0).normal(size=recipe.epochs * steps_per_epoch)
    opt = optimizer(recipe, steps_per_epoch)
    w = jnp.asarray(1.5, jnp.float32)
    state = opt.init(w)
    trajectory = []
    for g in grads:
        updates, state = opt.update(jnp.asarray(g, jnp.float32), state, w)
        w = optax.apply_updates(w, updates)
        trajectory.append(float(w))
    expected = _recipe_updates_by_hand(recipe, steps_per_epoch, grads, 1.5)
    np.testing.assert_allclose(trajectory, expected, rtol=1e-5, atol=1e-6)
    # the learning rate is 0 at the first step (warm-up from 0): only the decay-free step is 0
    assert trajectory[0] == pytest.approx(1.5, abs=1e-7)


# ----------------------------------------------------------------------------- tables


def test_table2_averages_groups_then_seeds():
    rows = []
    for seed, shift in ((0, 0.0), (1, 2.0)):
        rows += [
            {
                "seed": seed,
                "method": "pnc",
                "dataset": "cifar10",
                "group": "id",
                "metric": "accuracy",
                "value": 90 + shift,
            },  # fmt: skip
            {
                "seed": seed,
                "method": "pnc",
                "dataset": "cifar100",
                "group": "near",
                "metric": "auroc",
                "value": 80 + shift,
            },  # fmt: skip
            {
                "seed": seed,
                "method": "pnc",
                "dataset": "tin",
                "group": "near",
                "metric": "auroc",
                "value": 84 + shift,
            },  # fmt: skip
            {
                "seed": seed,
                "method": "pnc",
                "dataset": "svhn",
                "group": "far",
                "metric": "fpr95",
                "value": 10 + shift,
            },  # fmt: skip
        ]
    table = T.table2(pd.DataFrame(rows))
    row = table.iloc[0]
    assert row["label"] == "P&C" and row["seeds"] == 2
    assert row["acc_mean"] == pytest.approx(91) and row["acc_std"] == pytest.approx(np.sqrt(2))
    assert row["near_auroc_mean"] == pytest.approx(83) and row["far_fpr95_mean"] == pytest.approx(
        11
    )
    assert "91.00 ± 1.41" in T.table2_markdown(table)
    assert r"P\&C" in T.table2_latex(table)


def test_sweep_table_lists_values_and_selected_per_seed():
    record = {
        "sweep": [
            {
                "config": {"block": [3, 0], "sigma": 25},
                "temperature": 1.0,
                "val_nll": 0.2,
                "selected": True,
            },  # fmt: skip
            {"config": {"block": [3, 1], "sigma": 25}, "temperature": 1.1, "val_nll": 0.3},
        ]
    }
    sweep = pd.DataFrame(T.sweep_rows("pnc", 4, record))
    assert sweep["selected"].tolist() == [True, False]
    text = T.sweep_markdown(sweep)
    assert "| P&C | block | [3, 0], [3, 1] | 4: [3, 0] |" in text
    assert json.loads(sweep["config"][1]) == {"block": [3, 1], "sigma": 25}


# ----------------------------------------------------------------------------- selection


def test_coordinate_descent_follows_the_paper_order():
    from pnc.methods.ood.posthoc import coordinate_descent

    calls = []

    def score(p):
        calls.append(dict(p))
        # block 1 is best; then sigma 50; bootstrap_frac prefers 0.2 only at sigma 50
        return (
            {0: 3.0, 1: 1.0, 2: 2.0}[p["block"]]
            + abs(p["sigma"] - 50) / 100
            + (-0.5 if (p["sigma"] == 50 and p["bootstrap_frac"] == 0.2) else 0.0)
        )

    point = coordinate_descent({"block": [0, 1, 2], "sigma": [25, 50, 100], "bootstrap_frac": [0.05, 0.2]}, score)  # fmt: skip
    assert point == {"block": 1, "sigma": 50, "bootstrap_frac": 0.2}
    # blocks at the first sigma and bootstrap_frac, then sigmas at block 1, then fractions at (1, 50)
    assert calls[:3] == [{"block": b, "sigma": 25, "bootstrap_frac": 0.05} for b in (0, 1, 2)]
    assert calls[3:6] == [{"block": 1, "sigma": s, "bootstrap_frac": 0.05} for s in (25, 50, 100)]
    assert calls[6:] == [{"block": 1, "sigma": 50, "bootstrap_frac": b} for b in (0.05, 0.2)]


def test_selection_fits_a_temperature_per_configuration_and_keeps_the_lowest_nll():
    from pnc.methods.ood.posthoc import Context, select_ensemble

    rng = np.random.default_rng(6)
    y = rng.integers(0, 10, 200)
    sharp = 8.0 * np.eye(10)[y][None] + rng.normal(size=(3, 200, 10))  # informative members
    noise = rng.normal(size=(3, 200, 10))  # uninformative ones
    ctx = Context(TINY_NET, 0, None, None, np.zeros((200, 32, 32, 3), np.uint8), y, None, None, {})  # fmt: skip
    best, sweep, _, t = select_ensemble([({"k": "noise"}, lambda x: noise), ({"k": "sharp"}, lambda x: sharp)], ctx, "test")  # fmt: skip
    assert best["config"] == {"k": "sharp"} and [r["selected"] for r in sweep] == [False, True]
    assert sweep[1]["val_nll"] < sweep[0]["val_nll"] and sweep[1]["val_accuracy"] > 0.9
    assert t == sweep[1]["temperature"] and sweep[0]["temperature"] > 5  # noise is flattened


def test_run_ids_and_the_runs_each_method_reads():
    from pnc.methods.ood import recipe_for, run_method, runs_of

    assert runs_of("deep_ensemble", {"fixed": {"n_models": 3}}) == ["base", "member1", "member2"]
    assert runs_of("mc_dropout", {"grid": {"rate": [0.1, 0.5]}}) == ["dropout0.1", "dropout0.5"]
    assert runs_of("pnc", {}) == ["base"]
    assert recipe_for("dropout0.3", {"epochs": 10}).dropout_rate == 0.3
    assert recipe_for("base", {"epochs": 10}, [1, 2]).swag_starts == (1, 2)
    assert recipe_for("member2", {"epochs": 10}, [1, 2]).swag_starts == ()
    with pytest.raises(ValueError, match="unknown run id 'swag'"):
        recipe_for("swag", {})
    with pytest.raises(ValueError, match="unknown OOD method 'odin'"):
        run_method("odin", {}, None, {})
    with pytest.raises(ValueError, match="grid.rate"):
        runs_of("mc_dropout", {})


def test_run_ids_are_named_by_their_kind_and_read_back_exactly():
    from pnc.methods.ood import run_kinds
    from pnc.methods.ood.deep_ensemble_detector import MEMBER_RUN, ensemble_runs
    from pnc.methods.ood.mc_dropout_detector import DROPOUT_RUN
    from pnc.methods.ood.training_runs import BASE_RUN, RunKind, parse_run

    assert run_kinds() == {"member": MEMBER_RUN, "dropout": DROPOUT_RUN}
    kinds = run_kinds()
    assert parse_run(BASE_RUN, kinds) == (None, None)
    for kind, values in ((MEMBER_RUN, (1, 12)), (DROPOUT_RUN, (0.05, 0.1, 0.2, 0.3, 0.5, 0.123))):
        for value in values:
            assert parse_run(kind.run_id(value), kinds) == (kind, value)
    assert [MEMBER_RUN.run_id(k) for k in (1, 12)] == ["member1", "member12"]
    assert ensemble_runs(3) == ["base", "member1", "member2"]
    assert DROPOUT_RUN.run_id(0.5) == "dropout0.5"
    # only the names a kind writes: no other spelling, kind or range
    for bad in ("swag", "member0", "member01", "member", "member+1", "member1.0", "dropout0",
                "dropout1", "dropout0.50", "dropout1e-1", "dropoutnan", "Base", ""):  # fmt: skip
        with pytest.raises(ValueError, match="unknown run id"):
            parse_run(bad, kinds)
    for kind, value, match in (
        (DROPOUT_RUN, 1.0, "in \\(0, 1\\)"),
        (MEMBER_RUN, 0, ">= 1"),
        (MEMBER_RUN, True, "must be a number"),
    ):
        with pytest.raises(ValueError, match=match):
            kind.run_id(value)
    for name in ("base", "member2", ""):
        with pytest.raises(ValueError, match="letters other than 'base'"):
            RunKind(name, int, lambda k: {})
    # a kind given besides the registered ones is read; two different kinds of one name are refused
    longer = RunKind("longer", int, lambda epochs: {"epochs": epochs})
    assert parse_run("longer30", run_kinds([longer])) == (longer, 30)
    with pytest.raises(ValueError, match="two different run kinds are named 'member'"):
        run_kinds([RunKind("member", int, lambda k: {"epochs": k})])


def test_the_schema_lists_each_methods_settings_and_copies_no_default():
    """Each method's block in the schema has ``fixed`` with its config dataclass's fields and
    ``grid`` with its grid keys, and no default: the dataclass is the one source of them."""
    import dataclasses
    from pathlib import Path

    import yaml

    from pnc.methods import ood as registry

    path = Path(__file__).resolve().parents[1] / "workflow/schemas/cifar.schema.yaml"
    schema = yaml.safe_load(path.read_text())["properties"]["methods"]["properties"]
    assert set(schema) == set(registry.METHOD_IDS)
    for method in registry.registered():
        block = schema[method.id]
        props = dict(block.get("properties", {}))
        assert set(props) <= {"fixed", "grid"}, method.id
        fixed = props.get("fixed", {}).get("properties", {})
        grid = props.get("grid", {}).get("properties", {})
        fields = [f.name for f in dataclasses.fields(method.config_cls) if f.name != "grid"]
        assert set(fixed) == set(fields), method.id
        assert set(grid) == set(method.config_cls.grid_keys), method.id
        assert "default" not in json.dumps(block), method.id


def test_unknown_methods_and_config_keys_are_named_with_the_valid_ones():
    from pnc.methods import ood as registry
    from pnc.methods.ood import method_config

    labels = registry.labels()
    assert labels == {m.id: m.label for m in registry.registered()}
    assert labels["pnc"] == "P&C" and list(labels)[:2] == ["mahalanobis", "react_energy"]
    config = method_config("pnc", {"fixed": {"n_members": 8}, "grid": {"sigma": [1.0]}})
    assert (config.n_members, config.calibration_size, config.member_chunk) == (8, 1024, None)
    assert config.values("sigma") == [1.0]
    with pytest.raises(ValueError, match=r"methods\.pnc: unknown key\(s\) sigma; valid keys: n_members, rank, ridge, .*, grid"):  # fmt: skip
        method_config("pnc", {"fixed": {"sigma": 1.0}})
    with pytest.raises(ValueError, match=r"methods\.pnc: unknown key\(s\) \['sigma'\]; valid: fixed, grid"):  # fmt: skip
        method_config("pnc", {"sigma": 1.0})
    with pytest.raises(ValueError, match=r"methods\.swag: unknown grid key\(s\) rank; valid grid keys: start_epoch"):  # fmt: skip
        method_config("swag", {"grid": {"rank": [2]}})
    with pytest.raises(ValueError, match=r"methods\.msp: unknown key\(s\) grid; valid keys: none"):
        method_config("msp", {"grid": {}})
    with pytest.raises(
        ValueError, match=r"methods\.llla\.n_samples must be an integer \(int\), got 'many'"
    ):
        method_config("llla", {"fixed": {"n_samples": "many"}})
    with pytest.raises(ValueError, match=r"unknown OOD method 'odin'; registered ids: mahalanobis, react_energy, llla"):  # fmt: skip
        method_config("odin", {})
    network = method_config("epinet", {"fixed": {"hiddens": [16], "epochs": 2}}).network(1.0)
    assert network == epinet.EpinetConfig(prior_scale=1.0, hiddens=(16,), epochs=2)


# ----------------------------------------------------------------------------- stored runs


def test_a_stored_run_is_checked_against_the_sha256_its_record_holds(tmp_path):
    from pnc.core.classifier.trained import TrainedNetwork
    from pnc.runtime.io import ArtifactError, file_sha256

    folder = tmp_path / "results/cifar/runs/seed0/base"
    variables = {"params": {"head": {"bias": np.arange(3.0, dtype=np.float32)}}, "batch_stats": {}}
    swag = {"0": {"n": np.int32(2), "mean": np.ones(3, np.float32)}}
    TrainedNetwork(variables, swag, {"run_id": "base"}).save(folder)
    info = json.loads((folder / "run.json").read_text())
    assert info == {"run_id": "base", "msgpack_sha256": file_sha256(folder / "run.msgpack")}
    run = TrainedNetwork.load(folder / "run.msgpack")
    assert run.checked and run.meta["run_id"] == "base"
    np.testing.assert_array_equal(run.variables["params"]["head"]["bias"], [0, 1, 2])
    np.testing.assert_array_equal(run.swag["0"]["mean"], 1.0)
    data = (folder / "run.msgpack").read_bytes()
    (folder / "run.msgpack").write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # one bit flipped
    hint = "snakemake -s cifar.smk --forcerun results/cifar/runs/seed0/base/run.json"
    with pytest.raises(ArtifactError, match="does not match the SHA-256") as err:
        TrainedNetwork.load(folder)
    assert str(folder / "run.msgpack") in str(err.value) and hint in str(err.value)
    # a run written before the hash was recorded: read unchecked
    (folder / "run.msgpack").write_bytes(data)
    (folder / "run.json").write_text(json.dumps({"run_id": "base"}))
    run = TrainedNetwork.load(folder)
    assert not run.checked and run.swag["0"]["n"] == 2


def test_a_checkpoint_is_checked_against_the_sha256_its_sidecar_holds(tmp_path):
    from pnc.core.classifier.recipe import load_checkpoint, save_checkpoint
    from pnc.runtime.io import ArtifactError

    path = tmp_path / "checkpoint.msgpack"
    state = {"epoch": jnp.asarray(3, jnp.int32), "params": {"w": jnp.arange(4.0)}}
    save_checkpoint(path, state, {"identity": {"seed": 0}, "history": {"loss": [1.0]}})
    meta = json.loads(path.with_suffix(".json").read_text())
    assert set(meta) == {"identity", "history", "msgpack_sha256"}
    template = jax.tree.map(jnp.zeros_like, state)
    loaded = load_checkpoint(path, template, meta["msgpack_sha256"])
    np.testing.assert_array_equal(loaded["params"]["w"], [0, 1, 2, 3])
    data = path.read_bytes()
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(ArtifactError, match=r"checkpoint\.msgpack does not match .* train the run from epoch 0"):  # fmt: skip
        load_checkpoint(path, template, meta["msgpack_sha256"])
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ArtifactError, match=r"checkpoint\.msgpack is truncated or corrupt"):
        load_checkpoint(path, template)  # an older checkpoint: no hash to check, still read whole
    path.write_bytes(data)
    assert int(load_checkpoint(path, template)["epoch"]) == 3  # unchecked, as before


def test_method_sections_check_themselves_against_the_study():
    """P&C's blocks against the network and its calibration images against the tiny training
    split, SWAG's start epochs against the training epochs (each method's ``study_problems``); the
    other methods have no checks."""
    from pnc.core.conv.resnet import ResNetConfig
    from pnc.methods import ood as registry
    from pnc.methods.ood import method_config
    from pnc.methods.ood.posthoc import SectionContext

    study = SectionContext(ResNetConfig(widths=(8, 16), blocks_per_stage=(1, 2)), 5, n_train=100)
    grid = {"block": [[1, 1], [2, 0]], "sigma": [1.0], "bootstrap_frac": [0.5]}
    pnc = method_config("pnc", {"fixed": {"calibration_size": 200}, "grid": grid})
    assert registry.get("pnc").study_problems(pnc, study) == [
        "methods.pnc.grid.block [2, 0]: no block (2, 0) in stages (1, 2)"
        " (model.blocks_per_stage = [1, 2])",
        "methods.pnc.calibration_size = 200 > the 100 training images of the tiny dataset",
    ]
    grid["block"] = [[1, 1]]
    assert (
        registry.get("pnc").study_problems(
            method_config("pnc", {"fixed": {"calibration_size": 100}, "grid": grid}), study
        )
        == []
    )
    swag = method_config("swag", {"grid": {"start_epoch": [2, 3, 4]}})
    assert registry.get("swag").study_problems(swag, study) == [
        "methods.swag.grid.start_epoch [4]: SWAG needs >= 2 epochs after its start, and"
        " train.epochs = 5"
    ]
    for method in registry.registered():
        if method.id not in ("pnc", "swag"):
            section = {"grid": {k: [1] for k in method.config_cls.grid_keys}}
            if not method.config_cls.grid_keys:
                section = {}
            assert method.study_problems(method.make_config(section), study) == []

"""P&C on any Flax model (pnc.ensemble): linen and NNX, Dense and Conv, chains, the ablation,
equivalence with the MLP build, prefix sharing, jit, and every bad input."""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import pnc
from pnc.core.conv import ood_scores

CFG = pnc.PnCConfig(n_members=6, rank=4, sigma=0.5, bootstrap_frac=0.5, ridge=1e-3)


class LinenMLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        for _i in range(3):
            x = nn.relu(nn.Dense(16)(x))
        return nn.Dense(2)(x)


class NNXMLP(nnx.Module):
    def __init__(self, rngs):
        self.linear1 = nnx.Linear(3, 16, rngs=rngs)
        self.layers = nnx.List([nnx.Linear(16, 16, rngs=rngs), nnx.Linear(16, 2, rngs=rngs)])

    def __call__(self, x):
        h = jax.nn.relu(self.linear1(x))
        h = jax.nn.relu(self.layers[0](h))
        return self.layers[1](h)


class LinenCNN(nn.Module):
    @nn.compact
    def __call__(self, x, groups: int = 1):
        x = nn.relu(nn.Conv(4, (3, 3))(x))
        x = nn.BatchNorm(use_running_average=True)(x)
        x = nn.relu(nn.Conv(6, (3, 3), strides=2, padding=1, feature_group_count=groups)(x))
        return nn.Dense(3)(x.mean(axis=(1, 2)))


class NNXCNN(nnx.Module):
    def __init__(self, rngs):
        self.conv1 = nnx.Conv(2, 4, (3, 3), rngs=rngs)
        self.conv2 = nnx.Conv(4, 5, (3, 3), padding="VALID", rngs=rngs)
        self.head = nnx.Linear(5, 3, rngs=rngs)

    def __call__(self, x):
        h = jax.nn.relu(self.conv2(jax.nn.relu(self.conv1(x))))
        return self.head(h.mean(axis=(1, 2)))


def _x(shape, seed=0):
    return jax.random.normal(jax.random.key(seed), shape)


@pytest.fixture(scope="module")
def linen_mlp():
    model = LinenMLP()
    return model, model.init(jax.random.key(1), jnp.ones((1, 3)))


@pytest.mark.slow
def test_linen_chain_matches_mlp_build():
    """The MLP path's members from the same key: a chain over every hidden layer and one pair.

    Compared in float64, where both paths give the same members to rounding: in float32 the ridge
    systems of a sigma-2 chain amplify the two paths' different summation orders to about 1e-3.
    """
    with jax.enable_x64(True):
        mlp_cfg = pnc.MLPConfig(hidden=(16, 16, 16), out_dim=1)
        params = jax.tree.map(
            lambda a: a.astype(jnp.float64), pnc.init_params(mlp_cfg, 3, jax.random.key(2))
        )
        model = pnc.GaussianMLP(mlp_cfg)
        x_cal = _x((40, 3)).astype(jnp.float64)
        for layers, ids in (((0, 1, 2), (0, 1, 2)), ((0, 2), (0, 2))):
            cfg = dataclasses.replace(CFG, layers=layers, sigma=2.0)
            ref = pnc.build_members(params, mlp_cfg, x_cal, cfg, key=jax.random.key(3))
            names = mlp_cfg.layer_names()
            ens = pnc.ensemble(
                model, x_cal, variables={"params": params}, config=CFG.__class__(**{
                    **dataclasses.asdict(cfg), "layers": None}),
                perturb=[names[i] for i in layers], correct=[names[i + 1] for i in layers],
                key=jax.random.key(3), stream_ids=ids,
            )  # fmt: skip
            assert ens.n_members == CFG.n_members
            assert set(ens.members) == {names[i] for i in layers} | {names[i + 1] for i in layers}
            for path, layer in ens.members.items():
                for leaf in ("kernel", "bias"):
                    assert layer[leaf].dtype == jnp.float64
                    np.testing.assert_allclose(layer[leaf], ref[path][leaf], rtol=1e-9, atol=1e-12)
            mean, var = ens(x_cal[:7])
            ref_pred = pnc.predict_members(ref, x_cal[:7], mlp_cfg)  # casts its inputs to float32
            np.testing.assert_allclose(mean, ref_pred.means, rtol=1e-5, atol=1e-7)
            np.testing.assert_allclose(var, ref_pred.variances, rtol=1e-5, atol=1e-7)
            mix_mean, mix_var = pnc.mixture(pnc.Predictive(mean, var))
            assert mix_mean.shape == (7, 1) and bool(jnp.all(mix_var > 0))


def test_correction_reproduces_base_at_zero_ridge(linen_mlp):
    """With full calibration, ridge 0 and fewer rows than d + 1 the corrected layer interpolates:
    the member reproduces the base network's output on the calibration rows."""
    model, variables = linen_mlp
    x_cal = _x((12, 3))
    cfg = dataclasses.replace(CFG, ridge=0.0, bootstrap_frac=None, sigma=1.0)
    ens = pnc.ensemble(model, x_cal, variables=variables, perturb=["Dense_2"],
                       correct=["Dense_3"], config=cfg, key=jax.random.key(0))  # fmt: skip
    base = model.apply(variables, x_cal)
    np.testing.assert_allclose(ens(x_cal), jnp.broadcast_to(base, (6,) + base.shape), atol=2e-4)
    abl = pnc.ensemble(model, x_cal, variables=variables, perturb=["Dense_2"], correct=None,
                       config=cfg, key=jax.random.key(0))  # fmt: skip
    assert float(jnp.max(jnp.abs(abl(x_cal) - base))) > 1e-2
    np.testing.assert_array_equal(abl.members["Dense_2"]["kernel"],
                                  ens.members["Dense_2"]["kernel"])  # fmt: skip


@pytest.mark.slow
def test_ablation_same_perturbations_config_flag(linen_mlp):
    model, variables = linen_mlp
    x_cal = _x((30, 3))
    kw = dict(variables=variables, perturb=["Dense_0", "Dense_2"], key=jax.random.key(5))
    a = pnc.ensemble(model, x_cal, correct=None, config=CFG, **kw)
    b = pnc.ensemble(model, x_cal, correct=["Dense_1", "Dense_3"],
                     config=dataclasses.replace(CFG, correct=False), **kw)  # fmt: skip
    c = pnc.ensemble(model, x_cal, correct=["Dense_1", "Dense_3"], config=CFG, **kw)
    for path in ("Dense_0", "Dense_2"):
        np.testing.assert_array_equal(a.members[path]["kernel"], b.members[path]["kernel"])
    np.testing.assert_array_equal(a.members["Dense_0"]["kernel"], c.members["Dense_0"]["kernel"])
    assert set(c.members) == {"Dense_0", "Dense_1", "Dense_2", "Dense_3"}
    assert b.correct is None and c.correct == ("Dense_1", "Dense_3")


@pytest.mark.slow
def test_nnx_dense_deterministic_jit_and_chunks():
    model = NNXMLP(nnx.Rngs(0))
    x_cal = _x((50, 3))
    kw = dict(perturb=["linear1", "layers/0"], correct=["layers/0", "layers/1"], config=CFG)
    a = pnc.ensemble(model, x_cal, key=jax.random.key(7), **kw)
    b = pnc.ensemble(model, x_cal, key=jax.random.key(7), member_chunk=4, **kw)
    c = pnc.ensemble(model, x_cal, key=jax.random.key(7), **kw)
    d = pnc.ensemble(model, x_cal, key=jax.random.key(8), **kw)
    jax.tree.map(np.testing.assert_array_equal, a.members, c.members)
    # chunked (lax.map) and vmapped builds differ by float32 rounding inside the Gram solves;
    # compare what the members predict (as the MLP build's test does)
    x = _x((9, 3), 1)
    out = a(x)
    scale = float(jnp.max(jnp.abs(out)))
    np.testing.assert_allclose(b(x), out, atol=1e-4 * scale)
    assert not np.allclose(a.members["linear1"]["kernel"], d.members["linear1"]["kernel"])
    assert out.shape == (6, 9, 2)
    np.testing.assert_allclose(jax.jit(lambda e, xx: e(xx))(a, x), out, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(jax.jit(a)(x), out, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(a.full_passes(x), out, rtol=1e-5, atol=1e-5)
    # member 0 substituted into the state reproduces member 0's output
    tree0 = a.member_variables(0)
    np.testing.assert_allclose(tree0["linear1"]["kernel"], a.members["linear1"]["kernel"][0])
    # the user's model is untouched
    np.testing.assert_array_equal(model.linear1.kernel[...], a.base["linear1"]["kernel"])


def test_prefix_runs_once():
    """The layers before the first perturbed one are evaluated unbatched: one call for M members."""
    model = NNXMLP(nnx.Rngs(0))
    ens = pnc.ensemble(model, _x((30, 3)), perturb=["layers/0"], correct=["layers/1"],
                       config=CFG, key=jax.random.key(0))  # fmt: skip
    jaxpr = str(jax.make_jaxpr(lambda x: ens(x))(jnp.ones((5, 3))))
    # linear1 [5, 3] x [3, 16] has no member axis; layers/0 and layers/1 carry M = 6
    assert "f32[5,16] = dot_general" in jaxpr
    assert "f32[6,5,16] = dot_general" not in jaxpr
    full = str(jax.make_jaxpr(lambda x: ens.full_passes(x))(jnp.ones((5, 3))))
    assert "f32[5,16] = dot_general" not in full and "f32[6,5,16] = dot_general" in full


@pytest.mark.slow
@pytest.mark.parametrize("center", ["original", "zero"])
def test_linen_conv_with_batchnorm(center):
    model = LinenCNN()
    x_cal = _x((20, 8, 8, 2))
    variables = model.init(jax.random.key(0), x_cal[:1])
    cfg = dataclasses.replace(CFG, ridge_center=center, sigma=1.0)
    ens = pnc.ensemble(model, x_cal, variables=variables, perturb=["Conv_0"],
                       correct=["Conv_1"], config=cfg, key=jax.random.key(1))  # fmt: skip
    assert ens.members["Conv_1"]["kernel"].shape == (6, 3, 3, 4, 6)
    logits = ens(_x((5, 8, 8, 2), 3))
    assert logits.shape == (6, 5, 3) and bool(jnp.all(jnp.isfinite(logits)))
    scores = ood_scores(logits)
    assert scores["entropy"].shape == (5,)
    # the corrected members are closer to the base network on the calibration rows
    abl = pnc.ensemble(model, x_cal, variables=variables, perturb=["Conv_0"], correct=None,
                       config=cfg, key=jax.random.key(1))  # fmt: skip
    base = model.apply(variables, x_cal)
    err = lambda e: float(jnp.mean(jnp.square(e(x_cal) - base)))  # noqa: E731
    assert err(ens) < 0.5 * err(abl)


@pytest.mark.slow
def test_nnx_conv_interpolates_at_zero_ridge():
    """Patchwise correction: few enough patch rows, ridge 0 -> conv2's base output reproduced."""
    model = NNXCNN(nnx.Rngs(0))
    x_cal = _x((1, 4, 4, 2))  # 4 output positions of conv2 <= 1 + 36 columns
    cfg = dataclasses.replace(CFG, ridge=0.0, bootstrap_frac=None, sigma=1.0, n_members=3)
    ens = pnc.ensemble(model, x_cal, perturb=["conv1"], correct=["conv2"], config=cfg,
                       key=jax.random.key(0))  # fmt: skip
    base = model(x_cal)
    np.testing.assert_allclose(ens(x_cal), jnp.broadcast_to(base, (3,) + base.shape), atol=1e-3)


def test_sigma_zero_is_base(linen_mlp):
    model, variables = linen_mlp
    x = _x((10, 3))
    ens = pnc.ensemble(model, x, variables=variables, perturb=["Dense_1"], correct=["Dense_2"],
                       config=dataclasses.replace(CFG, sigma=0.0), key=jax.random.key(0))
    jax.tree.map(np.testing.assert_array_equal, ens.members, {
        p: {k: jnp.broadcast_to(v, (CFG.n_members,) + v.shape) for k, v in
            variables["params"][p].items()} for p in ("Dense_1", "Dense_2")})  # fmt: skip
    np.testing.assert_allclose(ens(x)[2], model.apply(variables, x), rtol=1e-6, atol=1e-6)


# ----------------------------------------------------------------------------- bad input


def _bad(model, variables=None, x=None, **kw):
    args = dict(perturb=["Dense_0"], correct=["Dense_1"], config=CFG, key=jax.random.key(0))
    args.update(kw)
    return pnc.ensemble(model, _x((10, 3)) if x is None else x, variables=variables, **args)


def test_bad_paths(linen_mlp):
    model, variables = linen_mlp
    with pytest.raises(ValueError, match="'Dense_9' does not exist"):
        _bad(model, variables, perturb=["Dense_9"])
    with pytest.raises(ValueError, match="'nope' does not exist"):
        _bad(NNXMLP(nnx.Rngs(0)), perturb=["nope"], correct=["linear1"])
    with pytest.raises(ValueError, match="'layers' is a List; expected flax.nnx.Linear"):
        _bad(NNXMLP(nnx.Rngs(0)), perturb=["linear1"], correct=["layers"])
    cnn = LinenCNN()
    v = cnn.init(jax.random.key(0), jnp.ones((1, 8, 8, 2)))
    with pytest.raises(ValueError, match="'BatchNorm_0' is a BatchNorm; expected"):
        _bad(cnn, v, x=_x((4, 8, 8, 2)), perturb=["Conv_0"], correct=["BatchNorm_0"])


def test_bad_order_and_lengths(linen_mlp):
    model, variables = linen_mlp
    with pytest.raises(ValueError, match="'Dense_0' does not consume the output of perturb layer "
                                         "'Dense_2'"):  # fmt: skip
        _bad(model, variables, perturb=["Dense_2"], correct=["Dense_0"])
    with pytest.raises(ValueError, match="same length, got 2 and 1"):
        _bad(model, variables, perturb=["Dense_0", "Dense_2"], correct=["Dense_1"])
    with pytest.raises(ValueError, match="config.layers"):
        _bad(model, variables, config=dataclasses.replace(CFG, layers=(0,)))


def test_bad_conv():
    cnn = LinenCNN()
    x = _x((4, 8, 8, 2))
    v = cnn.init(jax.random.key(0), x[:1], groups=2)

    class Grouped(LinenCNN):
        def __call__(self, x):
            return super().__call__(x, groups=2)

    with pytest.raises(ValueError, match="'Conv_1': feature_group_count=2"):
        _bad(Grouped(), v, x=x, perturb=["Conv_0"], correct=["Conv_1"])

    class Dilated(nnx.Module):
        def __init__(self, rngs):
            self.a = nnx.Conv(2, 3, (3, 3), rngs=rngs)
            self.b = nnx.Conv(3, 3, (3, 3), padding=((1, 1), (1, 1)), input_dilation=2,
                                  rngs=rngs)

        def __call__(self, x):
            return self.b(self.a(x))

    with pytest.raises(ValueError, match="'b': input_dilation=2"):
        _bad(Dilated(nnx.Rngs(0)), x=x, perturb=["a"], correct=["b"])


def test_bad_calibration_inputs(linen_mlp):
    model, variables = linen_mlp
    x = np.array(_x((10, 3)))
    x[3, 1] = np.nan
    with pytest.raises(ValueError, match="non-finite values in 1 of its 10 rows"):
        _bad(model, variables, x=x)
    mlp_cfg = pnc.MLPConfig(hidden=(8,), out_dim=1)
    params = pnc.init_params(mlp_cfg, 3, jax.random.key(0))
    with pytest.raises(ValueError, match="non-finite"):
        pnc.build_members(params, mlp_cfg, x, CFG, key=jax.random.key(0))


@pytest.mark.slow
def test_preact_resnet_block_matches_conv_build():
    """The PreAct ResNet path's members from the same key: perturb a block's conv1, correct its
    bias-free conv2 (the new bias is an output offset, as the conv build's added bias)."""
    from pnc.core import conv as C

    rcfg = C.ResNetConfig(num_classes=3, widths=(4, 8), blocks_per_stage=(2, 1))
    variables = C.init_variables(rcfg, jax.random.key(0), image_shape=(8, 8, 3))
    x_cal = _x((12, 8, 8, 3))
    ccfg = C.ConvPnCConfig(n_members=3, rank=4, sigma=1.0, bootstrap_frac=0.5, ridge=1e-3,
                           blocks=((0, 1),))  # fmt: skip
    index = rcfg.block_index(0, 1)
    ref = C.build_members(variables, rcfg, x_cal, ccfg, key=jax.random.key(4))
    cfg = pnc.PnCConfig(n_members=3, rank=4, sigma=1.0, bootstrap_frac=0.5, ridge=1e-3,
                        perturbation_norm="radius", subset_per_layer=True)  # fmt: skip
    name = rcfg.block_specs()[index].name
    ens = pnc.ensemble(C.PreActResNet(rcfg), x_cal, variables=variables,
                       perturb=[f"{name}/conv1"], correct=[f"{name}/conv2"], config=cfg,
                       key=jax.random.key(4), stream_ids=[index])  # fmt: skip
    np.testing.assert_allclose(ens.members[f"{name}/conv1"]["kernel"],
                               ref[name]["conv1"]["kernel"], rtol=1e-6, atol=1e-7)  # fmt: skip
    for leaf in ("kernel", "bias"):
        np.testing.assert_allclose(ens.members[f"{name}/conv2"][leaf], ref[name]["conv2"][leaf],
                                   rtol=1e-3, atol=1e-4)  # fmt: skip
    x = _x((5, 8, 8, 3), 2)
    expected = C.predict_logits(variables, ref, x, rcfg)
    np.testing.assert_allclose(ens(x), expected, rtol=1e-3, atol=1e-4)


def test_importing_pnc_does_not_import_flax_nnx():
    # every workflow job imports pnc; flax.nnx (~0.16 s) is imported only with an nnx model
    import subprocess
    import sys

    code = "import sys, pnc; print('flax.nnx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"

"""Convolutional P&C (pnc.core.conv): patches, the chunked correction, the ResNet, members, inference."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pnc.core import conv as C
from pnc.core.conv import resnet
from pnc.core.conv.correction import design_rows, use_dual

PAD1 = ((1, 1), (1, 1))
TINY = C.ResNetConfig(num_classes=3, widths=(4, 8), blocks_per_stage=(2, 1))
IMAGE = (8, 8, 2)


@pytest.fixture(scope="module")
def base():
    """A tiny PreAct ResNet with non-trivial BN running statistics, and calibration images."""
    variables = C.init_variables(TINY, jax.random.key(0), IMAGE)
    x = jax.random.normal(jax.random.key(1), (24,) + IMAGE)
    _, updates = C.PreActResNet(TINY).apply(variables, x, train=True, mutable=["batch_stats"])
    # a few train-mode passes move the running statistics away from (0, 1)
    for _ in range(3):
        _, updates = C.PreActResNet(TINY).apply(
            dict(variables, batch_stats=updates["batch_stats"]),
            x,
            train=True,
            mutable=["batch_stats"],
        )
    return dict(variables, batch_stats=updates["batch_stats"]), x


MULTI = C.ConvPnCConfig(
    n_members=4,
    rank=5,
    sigma=0.5,
    bootstrap_frac=0.5,
    ridge=1e-3,
    blocks=((0, 1), (1, 0)),
    chunk_size=5,
)


@pytest.fixture(scope="module")
def members(base):
    variables, x = base
    return C.build_members(variables, TINY, x, MULTI, key=jax.random.key(7))


# ----------------------------------------------------------------------------- patches


@pytest.mark.parametrize(
    "k,stride,padding",
    [
        (3, 1, "SAME"),
        (3, 2, "SAME"),
        (3, 1, "VALID"),
        (3, 2, PAD1),
        (1, 1, "VALID"),
        (1, 2, "VALID"),
        (1, 2, "SAME"),
    ],
)
def test_patches_times_kernel_matrix_is_the_convolution(k, stride, padding):
    x = jax.random.normal(jax.random.key(0), (2, 7, 6, 3))
    w = jax.random.normal(jax.random.key(1), (k, k, 3, 5))
    direct = jax.lax.conv_general_dilated(
        x, w, (stride, stride), padding, dimension_numbers=("NHWC", "HWIO", "NHWC")
    )
    np.testing.assert_allclose(
        C.conv_as_matmul(x, w, stride, padding), direct, rtol=1e-5, atol=1e-5
    )
    np.testing.assert_array_equal(C.kernel_from_matrix(C.kernel_matrix(w), w.shape), w)


def test_patch_rows_are_ordered_channel_slowest():
    x = jax.random.normal(jax.random.key(0), (1, 5, 5, 2))
    p = C.unfold(x, 3, 1, "VALID")  # [1, 3, 3, 18]
    h, w, c, u, v = 1, 2, 1, 2, 0
    assert p[0, h, w, c * 9 + u * 3 + v] == x[0, h + u, w + v, c]


# ----------------------------------------------------------------------------- the correction


def _one_shot(u, targets, w2):
    y = design_rows(u, w2, 1, PAD1)
    y_bar = jnp.concatenate([jnp.ones((y.shape[0], 1)), y], axis=1)
    return y_bar.T @ y_bar, y_bar.T @ (targets.reshape(y.shape[0], -1) - y @ C.kernel_matrix(w2))


def test_chunked_accumulation_equals_one_shot_normal_equations():
    u = jax.nn.relu(jax.random.normal(jax.random.key(0), (7, 4, 4, 3)))
    targets = jax.random.normal(jax.random.key(1), (7, 4, 4, 5))
    w2 = jax.random.normal(jax.random.key(2), (3, 3, 3, 5))
    index, mask = C.stack_chunks(7, 3)  # chunks of 3, 3 and a padded 1
    assert index.shape == (3, 3) and float(mask.sum()) == 7 and float(mask[-1].sum()) == 1
    design = lambda rows: jnp.abs(u[rows])  # a non-trivial design map, evaluated inside the scan
    gram, beta = jax.jit(C.accumulate_normal_equations, static_argnums=(0, 5, 6))(
        design, index, targets[index], mask, w2, 1, PAD1
    )
    gram_ref, beta_ref = _one_shot(jnp.abs(u), targets, w2)
    np.testing.assert_allclose(gram, gram_ref, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(beta, beta_ref, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("system", ["primal", "dual"])
def test_infinite_ridge_returns_the_original_conv2_and_zero_bias(system):
    u = jax.nn.relu(jax.random.normal(jax.random.key(0), (6, 4, 4, 3)))
    targets = jax.random.normal(jax.random.key(1), (6, 4, 4, 5))
    w2 = jax.random.normal(jax.random.key(2), (3, 3, 3, 5))
    kernel, bias = C.conv_ridge_correction(u, targets, w2, 1e12, chunk_size=4, system=system)
    np.testing.assert_allclose(kernel, w2, atol=1e-6)
    np.testing.assert_allclose(bias, 0.0, atol=1e-6)
    kernel, bias = C.conv_ridge_correction(u, targets, w2, 1e-3, chunk_size=4, system=system)
    assert float(jnp.max(jnp.abs(kernel - w2))) > 1e-2  # a finite ridge does move it


def test_primal_and_dual_agree():
    u = jax.nn.relu(jax.random.normal(jax.random.key(0), (6, 4, 4, 3)))
    targets = jax.random.normal(jax.random.key(1), (6, 4, 4, 5))
    w2 = jax.random.normal(jax.random.key(2), (3, 3, 3, 5))
    primal = C.conv_ridge_correction(u, targets, w2, 0.5, chunk_size=4, system="primal")
    dual = C.conv_ridge_correction(u, targets, w2, 0.5, system="dual")
    for a, b in zip(primal, dual, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)


def _ridge_reference_float64(u, targets, w2, ridge):
    """Eq. conv-correction solved in float64 from patches built by hand (1-pixel zero padding).

    Minimises ``||[1, P] Theta - T||^2 + ridge ||Theta - [0; W_2]||^2`` over ``Theta`` whose
    rows are the bias then the kernel flattened ``(u, v, c_in)``; returns ``(kernel, bias)``.
    """
    u, t, w2 = (np.asarray(a, np.float64) for a in (u, targets, w2))
    n, h, w, c_in = u.shape
    k = w2.shape[0]
    padded = np.pad(u, ((0, 0), (1, 1), (1, 1), (0, 0)))
    rows = [
        np.concatenate([[1.0], padded[i, y : y + k, x : x + k, :].ravel()])
        for i in range(n)
        for y in range(h)
        for x in range(w)
    ]
    y_bar = np.stack(rows)  # [N H W, 1 + k k C_in], the kernel part ordered (u, v, c_in)
    theta0 = np.concatenate([np.zeros((1, w2.shape[3])), w2.reshape(-1, w2.shape[3])])
    lhs = y_bar.T @ y_bar + ridge * np.eye(y_bar.shape[1])
    rhs = y_bar.T @ t.reshape(n * h * w, -1) + ridge * theta0
    theta = np.linalg.solve(lhs, rhs)
    return theta[1:].reshape(w2.shape), theta[0]


@pytest.mark.parametrize("system", ["primal", "dual"])
@pytest.mark.parametrize("ridge", [0.3, 3.0, 30.0])
def test_finite_ridge_matches_a_float64_reference(system, ridge):
    """At finite lambda the fit and the pull towards ``W_2`` are both active: the kernel and bias
    move by an amount that depends on lambda (a mis-scaled ridge moves them by a different one)."""
    u = jax.nn.relu(jax.random.normal(jax.random.key(3), (5, 4, 4, 2)))
    targets = jax.random.normal(jax.random.key(4), (5, 4, 4, 3))
    w2 = jax.random.normal(jax.random.key(5), (3, 3, 2, 3))
    kernel, bias = C.conv_ridge_correction(u, targets, w2, ridge, chunk_size=2, system=system)
    kernel_ref, bias_ref = _ridge_reference_float64(u, targets, w2, ridge)
    # the correction is far from both limits, so the comparison below pins lambda's scale
    assert np.max(np.abs(kernel_ref - np.asarray(w2, np.float64))) > 0.05
    np.testing.assert_allclose(kernel, kernel_ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(bias, bias_ref, rtol=1e-4, atol=1e-4)


def test_ridge_zero_with_fewer_patch_rows_than_columns_reproduces_the_targets(base):
    """Block 2 of TINY: conv2 has 1 + 9 * 8 = 73 columns; 4 images at 4x4 give 64 patch rows."""
    variables, x = base
    config = C.ConvPnCConfig(
        n_members=2,
        rank=5,
        sigma=0.5,
        bootstrap_frac=None,
        ridge=0.0,
        blocks=((1, 0),),
        chunk_size=3,
    )
    x_cal = x[:4]
    members = C.build_members(variables, TINY, x_cal, config, key=jax.random.key(3))
    spec = TINY.block_specs()[2]
    a_base = resnet.pre_activation(
        *resnet.block_parts(variables, spec.name),
        resnet.block_inputs(variables, x_cal, TINY, [2])[2],
    )
    params, stats = resnet.block_parts(variables, spec.name)
    targets = resnet.conv2_output(params, resnet.conv2_input(params, stats, a_base, spec))
    for m in range(2):
        p, s = resnet.block_parts(C.substitute(variables, C.member(members, m)), spec.name)
        u = resnet.conv2_input(p, s, a_base, spec)
        assert float(jnp.max(jnp.abs(p["conv1"]["kernel"] - params["conv1"]["kernel"]))) > 1e-3
        before = float(jnp.max(jnp.abs(resnet.conv2_output(params, u) - targets)))
        after = float(jnp.max(jnp.abs(resnet.conv2_output(p, u) - targets)))
        assert after < 1e-3 * max(1.0, float(jnp.max(jnp.abs(targets)))) < before


# ----------------------------------------------------------------------------- the network


def test_resnet18_layout():
    config = C.ResNetConfig()
    specs = config.block_specs()
    assert len(specs) == 8 and config.block_index(3, 0) == 6
    assert [s.projection for s in specs] == [False, False, True, False, True, False, True, False]
    assert [s.stride for s in specs] == [1, 1, 2, 1, 2, 1, 2, 1]
    assert (specs[6].c_in, specs[6].c_out) == (256, 512)


def test_functional_forward_equals_the_flax_module(base):
    variables, x = base
    logits = C.PreActResNet(TINY).apply(variables, x, train=False)
    np.testing.assert_allclose(C.forward(variables, x, TINY), logits, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- members


def test_sigma_zero_reproduces_the_base_network_exactly(base):
    variables, x = base
    config = dataclasses.replace(MULTI, sigma=0.0)
    members = C.build_members(variables, TINY, x, config, key=jax.random.key(7))
    for name, block in members.items():
        for m in range(config.n_members):
            np.testing.assert_array_equal(
                block["conv1"]["kernel"][m], variables["params"][name]["conv1"]["kernel"]
            )
            np.testing.assert_array_equal(
                block["conv2"]["kernel"][m], variables["params"][name]["conv2"]["kernel"]
            )
            np.testing.assert_array_equal(block["conv2"]["bias"][m], 0.0)
    logits = C.predict_logits(variables, members, x, TINY, share_prefix=False)
    base_logits = jax.jit(C.forward, static_argnums=2)(variables, x, TINY)
    for m in range(config.n_members):
        np.testing.assert_array_equal(logits[m], base_logits)


def test_replacing_a_block_branch_leaves_the_shortcut_untouched(base, members):
    variables, x = base
    spec = TINY.block_specs()[2]  # the projection block (1, 0)
    assert spec.projection
    inputs = resnet.block_inputs(variables, x, TINY, [2])[2]
    p0, s0 = resnet.block_parts(variables, spec.name)
    p1, s1 = resnet.block_parts(C.substitute(variables, C.member(members, 1)), spec.name)
    assert set(p1) == set(p0) and p1["shortcut"] is p0["shortcut"] and s1 is s0
    a = resnet.pre_activation(p0, s0, inputs)
    z0 = resnet.conv2_output(p0, resnet.conv2_input(p0, s0, a, spec))
    z1 = resnet.conv2_output(p1, resnet.conv2_input(p1, s1, a, spec))
    assert float(jnp.max(jnp.abs(z1 - z0))) > 1e-3  # the branch did change
    np.testing.assert_allclose(
        resnet.block(p1, s1, inputs, spec) - z1, resnet.block(p0, s0, inputs, spec) - z0, atol=1e-6
    )


@pytest.mark.parametrize("member_chunk", [None, 3])
def test_prefix_shared_prediction_equals_full_prediction(base, members, member_chunk):
    variables, x = base
    shared = C.predict_logits(variables, members, x, TINY, member_chunk=member_chunk, batch_size=10)
    full = C.predict_logits(variables, members, x, TINY, share_prefix=False, batch_size=24)
    assert shared.shape == (4, 24, 3)
    np.testing.assert_allclose(shared, full, rtol=1e-5, atol=1e-5)
    assert float(jnp.max(jnp.std(shared, axis=0))) > 1e-4  # members differ


def test_same_key_same_members(base, members):
    variables, x = base
    again = C.build_members(variables, TINY, x, MULTI, key=jax.random.key(7))
    jax.tree.map(np.testing.assert_array_equal, members, again)
    chunked = C.build_members(variables, TINY, x, MULTI, key=jax.random.key(7), member_chunk=2)
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5), members, chunked
    )
    other = C.build_members(variables, TINY, x, MULTI, key=jax.random.key(8))
    assert not np.allclose(
        other["block_1"]["conv1"]["kernel"], members["block_1"]["conv1"]["kernel"]
    )


def test_multi_block_corrects_each_block_from_unperturbed_upstream_activations(base, members):
    """Block 2 of a multi-block member equals block 2 built alone with the same key: its design
    does not see the perturbation of block 1 upstream."""
    variables, x = base
    alone = C.build_members(
        variables, TINY, x, dataclasses.replace(MULTI, blocks=((1, 0),)), key=jax.random.key(7)
    )
    assert set(alone) == {"block_2"} and set(members) == {"block_1", "block_2"}
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6),
        alone["block_2"],
        members["block_2"],
    )


def test_perturbation_conventions_and_no_correction(base):
    variables, x = base
    for norm in ("radius", "gaussian"):
        config = dataclasses.replace(
            MULTI, correct=False, perturbation_norm=norm, n_members=6, sigma=2.0
        )
        members = C.build_members(variables, TINY, x, config, key=jax.random.key(7))
        w1 = variables["params"]["block_2"]["conv1"]["kernel"]
        norms = jnp.sqrt(
            jnp.sum(jnp.square(members["block_2"]["conv1"]["kernel"] - w1), axis=(1, 2, 3, 4))
        )
        if norm == "radius":
            np.testing.assert_allclose(norms, 2.0, rtol=1e-5)
        else:  # sigma ||z||, z ~ N(0, I_5)
            assert float(jnp.std(norms)) > 0.05
        np.testing.assert_array_equal(
            members["block_2"]["conv2"]["kernel"][0],
            variables["params"]["block_2"]["conv2"]["kernel"],
        )
        np.testing.assert_array_equal(members["block_2"]["conv2"]["bias"], 0.0)


# ----------------------------------------------------------------------------- predictive


def test_ood_scores_of_agreeing_and_disagreeing_members():
    agree = jnp.tile(jnp.array([[4.0, 0.0, 0.0]]), (5, 1, 1))  # [M=5, N=1, K=3]
    disagree = jnp.stack([jnp.roll(jnp.array([[4.0, 0.0, 0.0]]), m, axis=1) for m in range(3)])
    s_agree, s_dis = C.ood_scores(agree), C.ood_scores(disagree)
    np.testing.assert_allclose(s_agree["mutual_information"], 0.0, atol=1e-6)
    np.testing.assert_allclose(s_dis["entropy"], np.log(3.0), rtol=1e-5)  # uniform mixture
    np.testing.assert_allclose(s_dis["msp"], 1 / 3, rtol=1e-5)
    assert float(s_dis["mutual_information"][0]) > 0.5


def test_fit_temperature_recovers_the_generating_temperature():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(1, 4000, 4)).astype(np.float32) * 3
    labels = np.argmax(logits[0] / 2.0 + rng.gumbel(size=logits.shape[1:]), axis=-1)  # T = 2
    assert abs(C.fit_temperature(logits, labels) - 2.0) < 0.2


def test_stack_chunks_indices_and_mask():
    index, mask = C.stack_chunks(7, 3)
    np.testing.assert_array_equal(index, [[0, 1, 2], [3, 4, 5], [6, 0, 0]])
    np.testing.assert_array_equal(mask, [[1, 1, 1], [1, 1, 1], [1, 0, 0]])
    assert mask.dtype == jnp.float32
    index, mask = C.stack_chunks(3, 1)  # one row per chunk
    np.testing.assert_array_equal(index, [[0], [1], [2]])
    np.testing.assert_array_equal(mask, [[1], [1], [1]])
    index, mask = C.stack_chunks(2, 64)  # the chunk shrinks to the rows
    np.testing.assert_array_equal(index, [[0, 1]])


def test_use_dual_follows_the_system_and_the_row_count():
    shape = (3, 3, 2, 5)  # 1 + 3 * 3 * 2 = 19 columns
    assert use_dual("dual", 1000, shape) and not use_dual("primal", 1, shape)
    assert use_dual("auto", 19, shape) and not use_dual("auto", 20, shape)
    with pytest.raises(
        ValueError, match=r"^system must be one of \('auto', 'primal', 'dual'\), got 'Dual'$"
    ):
        use_dual("Dual", 1, shape)


@pytest.mark.parametrize("system", [None, "primal", "dual", "auto"])
def test_correction_keeps_float64_and_float32_inputs_precision(system):
    """Under x64 the solve follows its inputs' dtype: float64 inputs match the float64 reference
    to rounding (non-square images, the default system when None), float32 inputs stay float32."""
    kwargs = {} if system is None else {"system": system}
    with jax.enable_x64(True):
        u = jax.nn.relu(jax.random.normal(jax.random.key(3), (3, 4, 5, 2), jnp.float64))
        targets = jax.random.normal(jax.random.key(4), (3, 4, 5, 3), jnp.float64)
        w2 = jax.random.normal(jax.random.key(5), (3, 3, 2, 3), jnp.float64)
        kernel, bias = C.conv_ridge_correction(u, targets, w2, 0.7, chunk_size=2, **kwargs)
        assert kernel.dtype == bias.dtype == jnp.float64
        kernel_ref, bias_ref = _ridge_reference_float64(u, targets, w2, 0.7)
        np.testing.assert_allclose(kernel, kernel_ref, rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(bias, bias_ref, rtol=1e-9, atol=1e-10)
        low = [a.astype(jnp.float32) for a in (u, targets, w2)]
        kernel, bias = C.conv_ridge_correction(*low, 0.7, chunk_size=2, **kwargs)
        assert kernel.dtype == bias.dtype == jnp.float32
        np.testing.assert_allclose(kernel, kernel_ref, rtol=1e-3, atol=1e-3)


def test_patch_helpers_name_bad_shapes():
    from pnc.core.conv import patches as P

    with pytest.raises(ValueError, match=r"^x must be NHWC \[N, H, W, C\], got shape \(4, 4, 3\)$"):
        P.unfold(jnp.zeros((4, 4, 3)), (2, 2), 1, "VALID")
    with pytest.raises(
        ValueError, match=r"^kernel must be HWIO \[k_h, k_w, C_in, C_out\], got shape \(3, 3, 2\)$"
    ):
        P.kernel_matrix(jnp.zeros((3, 3, 2)))
    with pytest.raises(
        ValueError, match=r"^matrix of shape \(10, 4\) does not fit an HWIO kernel \(3, 3, 2, 4\)$"
    ):
        P.kernel_from_matrix(jnp.zeros((10, 4)), [3, 3, 2, 4])


def test_with_ones_prepends_a_ones_column_on_the_last_axis_in_the_rows_dtype():
    from pnc.core.conv import patches as P

    rows = jnp.arange(24.0, dtype=jnp.float32).reshape(2, 3, 4)  # batched rows [B, R, D]
    out = P.with_ones(rows)
    assert out.shape == (2, 3, 5) and out.dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(out[..., 0]), np.ones((2, 3)))
    np.testing.assert_array_equal(np.asarray(out[..., 1:]), np.asarray(rows))
    assert P.with_ones(rows.astype(jnp.float16)).dtype == jnp.float16
    with jax.enable_x64(True):
        assert P.with_ones(jnp.ones((3, 2), jnp.float32)).dtype == jnp.float32
        assert P.with_ones(jnp.ones((3, 2), jnp.float64)).dtype == jnp.float64

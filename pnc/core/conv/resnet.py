"""PreAct ResNet for CIFAR-sized images (paper, Section 5.4 and Appendix B.2).

A ``3x3`` stride-1 stem (no max-pool), stages of pre-activation basic blocks and a head
BN-ReLU-global-average-pool-Dense. The basic block is BN-ReLU-Conv-BN-ReLU-Conv::

    a(x)      = ReLU(BN_1(x))
    y(x)      = Conv_1(a(x); W_1)                      (3x3, the block's stride)
    z(x)      = Conv_2(ReLU(BN_2(y(x))); W_2) [+ b_2]   (3x3, stride 1)
    Block(x)  = z(x) + Shortcut(x)

with ``Shortcut(x) = x``, or a ``1x1`` projection of ``a(x)`` at the first block of every stage
after the first (He et al., 2016, "Identity mappings"). Convolutions carry no bias; P&C adds the
bias ``b_2`` to the second convolution of a corrected block. The default :class:`ResNetConfig` is
PreAct ResNet-18 (stages 64/128/256/512, two blocks each); width and depth are configurable.

Blocks are numbered in network order and named ``block_{i}``; :meth:`ResNetConfig.block_index`
maps the paper's ``(stage, block)`` (both 0-based; the paper's selected block is ``(3, 0)``) to
``i``. Besides the Flax module (:class:`PreActResNet`, for training) a pure functional forward over
the variables (:func:`stem`, :func:`block`, :func:`head`, :func:`forward`) computes exactly what the
module computes in inference mode (BN with running statistics); Perturb-and-Correct substitutes
block parameters through it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp

from pnc.core.conv.patches import conv

Array = jax.Array
Variables = Mapping  # {"params": ..., "batch_stats": ...}

BN_EPSILON = 1e-5
BN_MOMENTUM = 0.9
PAD_3X3 = ((1, 1), (1, 1))
"""Padding of every 3x3 convolution (PyTorch's ``padding=1``, also at stride 2)."""
PAD_1X1 = "VALID"


@dataclasses.dataclass(frozen=True)
class BlockSpec:
    """One basic block: its name, channels, stride of ``Conv_1`` and whether it projects."""

    name: str
    c_in: int
    c_out: int
    stride: int
    projection: bool


@dataclasses.dataclass(frozen=True)
class ResNetConfig:
    """Architecture of the PreAct ResNet.

    Attributes:
        num_classes: number of classes (CIFAR-10: 10).
        widths: channels of each stage (PreAct ResNet-18: 64, 128, 256, 512). The stem has
            ``widths[0]`` channels; every stage after the first halves the spatial size.
        blocks_per_stage: basic blocks per stage (ResNet-18: 2 each).
    """

    num_classes: int = 10
    widths: tuple[int, ...] = (64, 128, 256, 512)
    blocks_per_stage: tuple[int, ...] = (2, 2, 2, 2)

    def __post_init__(self) -> None:
        widths = tuple(int(w) for w in self.widths)
        depth = tuple(int(b) for b in self.blocks_per_stage)
        if not widths or len(widths) != len(depth) or min(widths) < 1 or min(depth) < 1:
            raise ValueError(
                f"widths and blocks_per_stage must be equally long tuples of positive ints, got "
                f"{self.widths} and {self.blocks_per_stage}"
            )
        if int(self.num_classes) < 2:
            raise ValueError(f"num_classes must be >= 2, got {self.num_classes}")
        object.__setattr__(self, "widths", widths)
        object.__setattr__(self, "blocks_per_stage", depth)

    def block_specs(self) -> tuple[BlockSpec, ...]:
        """Every block in network order."""
        specs, c_in = [], self.widths[0]
        for stage, (width, depth) in enumerate(
            zip(self.widths, self.blocks_per_stage, strict=True)
        ):
            for b in range(depth):
                stride = 2 if (stage > 0 and b == 0) else 1
                name = f"block_{len(specs)}"
                specs.append(BlockSpec(name, c_in, width, stride, stride != 1 or c_in != width))
                c_in = width
        return tuple(specs)

    def block_index(self, stage: int, block: int) -> int:
        """Flat index of the paper's ``(stage, block)`` (0-based), e.g. ``(3, 0)`` -> 6 for ResNet-18."""
        if not (0 <= stage < len(self.widths) and 0 <= block < self.blocks_per_stage[stage]):
            raise ValueError(f"no block ({stage}, {block}) in stages {self.blocks_per_stage}")
        return sum(self.blocks_per_stage[:stage]) + block


# ----------------------------------------------------------------------------- Flax module


class PreActBlock(nn.Module):
    """BN-ReLU-Conv-BN-ReLU-Conv with an identity or 1x1 projection shortcut."""

    spec: BlockSpec

    @nn.compact
    def __call__(self, x: Array, train: bool = False) -> Array:
        s = self.spec
        bn = lambda name: nn.BatchNorm(
            use_running_average=not train, momentum=BN_MOMENTUM, epsilon=BN_EPSILON, name=name
        )
        a = nn.relu(bn("bn1")(x))
        shortcut = x
        if s.projection:
            shortcut = nn.Conv(
                s.c_out, (1, 1), (s.stride,) * 2, PAD_1X1, use_bias=False, name="shortcut"
            )(a)
        y = nn.Conv(s.c_out, (3, 3), (s.stride,) * 2, PAD_3X3, use_bias=False, name="conv1")(a)
        z = nn.Conv(s.c_out, (3, 3), (1, 1), PAD_3X3, use_bias=False, name="conv2")(
            nn.relu(bn("bn2")(y))
        )
        return z + shortcut


class PreActResNet(nn.Module):
    """PreAct ResNet on NHWC images ``[N, H, W, C]``; returns logits ``[N, num_classes]``.

    ``dropout_rate > 0`` drops the pooled features (the dense head's input) when ``train`` (an
    ``"dropout"`` rng is then needed); dropout has no variables, so the variables are the same.
    """

    config: ResNetConfig = ResNetConfig()
    dropout_rate: float = 0.0

    @nn.compact
    def __call__(self, x: Array, train: bool = False) -> Array:
        h = nn.Conv(self.config.widths[0], (3, 3), (1, 1), PAD_3X3, use_bias=False, name="stem")(x)
        for spec in self.config.block_specs():
            h = PreActBlock(spec, name=spec.name)(h, train)
        h = nn.BatchNorm(
            use_running_average=not train, momentum=BN_MOMENTUM, epsilon=BN_EPSILON, name="head_bn"
        )(h)
        h = jnp.mean(nn.relu(h), axis=(1, 2))
        if self.dropout_rate > 0:
            h = nn.Dropout(self.dropout_rate, deterministic=not train)(h)
        return nn.Dense(self.config.num_classes, name="head")(h)


def init_variables(config: ResNetConfig, key: Array, image_shape=(32, 32, 3)) -> dict:
    """``{"params", "batch_stats"}`` of a freshly initialised :class:`PreActResNet`."""
    x = jnp.zeros((1,) + tuple(image_shape), jnp.float32)
    return dict(PreActResNet(config).init(key, x, train=False))


# ----------------------------------------------------------------------------- functional forward


def batch_norm(x: Array, params: Mapping, stats: Mapping) -> Array:
    """BN in inference mode: ``(x - mean) / sqrt(var + eps) * scale + bias`` (running statistics)."""
    inv = jax.lax.rsqrt(stats["var"] + BN_EPSILON) * params["scale"]
    return (x - stats["mean"]) * inv + params["bias"]


def block_parts(variables: Variables, name: str):
    """``(params, batch_stats)`` of block ``name``."""
    return variables["params"][name], variables["batch_stats"][name]


def pre_activation(params: Mapping, stats: Mapping, x: Array) -> Array:
    """``a(x) = ReLU(BN_1(x))``, ``[N, H, W, C_in]``."""
    return jax.nn.relu(batch_norm(x, params["bn1"], stats["bn1"]))


def conv2_input(params: Mapping, stats: Mapping, a: Array, spec: BlockSpec) -> Array:
    """``U = ReLU(BN_2(Conv_1(a; W_1)))`` (eq. U-conv-input) from ``a = a(x)``, ``[N, H', W', C_out]``."""
    y = conv(a, params["conv1"]["kernel"], spec.stride, PAD_3X3)
    return jax.nn.relu(batch_norm(y, params["bn2"], stats["bn2"]))


def conv2_output(params: Mapping, u: Array) -> Array:
    """``z = Conv_2(U; W_2) + b_2`` (``b_2`` only if ``params["conv2"]`` has a ``"bias"``)."""
    z = conv(u, params["conv2"]["kernel"], 1, PAD_3X3)
    if "bias" in params["conv2"]:
        z = z + params["conv2"]["bias"]
    return z


def shortcut(params: Mapping, x: Array, a: Array, spec: BlockSpec) -> Array:
    """``Shortcut(x)``: ``x``, or the 1x1 projection of ``a(x)``."""
    if spec.projection:
        return conv(a, params["shortcut"]["kernel"], spec.stride, PAD_1X1)
    return x


def block(params: Mapping, stats: Mapping, x: Array, spec: BlockSpec) -> Array:
    """``Block(x) = z(x) + Shortcut(x)`` with BN in inference mode."""
    a = pre_activation(params, stats, x)
    return conv2_output(params, conv2_input(params, stats, a, spec)) + shortcut(params, x, a, spec)


def stem(variables: Variables, x: Array) -> Array:
    """The 3x3 stride-1 stem convolution."""
    return conv(x, variables["params"]["stem"]["kernel"], 1, PAD_3X3)


def pooled_features(variables: Variables, h: Array) -> Array:
    """BN-ReLU and global average pooling of the last block's output: ``[N, widths[-1]]``."""
    p, s = variables["params"], variables["batch_stats"]
    return jnp.mean(jax.nn.relu(batch_norm(h, p["head_bn"], s["head_bn"])), axis=(1, 2))


def dense_head(variables: Variables, f: Array) -> Array:
    """The dense classifier on pooled features ``f [..., D]``: logits ``[..., num_classes]``."""
    p = variables["params"]["head"]
    return f @ p["kernel"] + p["bias"]


def head(variables: Variables, h: Array) -> Array:
    """BN-ReLU, global average pooling and the dense classifier: logits ``[N, num_classes]``."""
    return dense_head(variables, pooled_features(variables, h))


def blocks(variables: Variables, h: Array, config: ResNetConfig, start: int, stop: int) -> Array:
    """Blocks ``start .. stop - 1`` applied to ``h`` (the input of block ``start``)."""
    specs = config.block_specs()
    for spec in specs[start:stop]:
        h = block(*block_parts(variables, spec.name), h, spec)
    return h


def forward(variables: Variables, x: Array, config: ResNetConfig) -> Array:
    """Logits ``[N, num_classes]`` of images ``x [N, H, W, C]`` (inference mode)."""
    h = blocks(variables, stem(variables, x), config, 0, len(config.block_specs()))
    return head(variables, h)


def block_inputs(variables: Variables, x: Array, config: ResNetConfig, indices) -> dict[int, Array]:
    """The input of every block in ``indices`` on images ``x`` (one base forward pass)."""
    wanted = sorted(set(int(i) for i in indices))
    out, h = {}, stem(variables, x)
    specs = config.block_specs()
    for i, spec in enumerate(specs[: wanted[-1] + 1]):
        if i in wanted:
            out[i] = h
        h = block(*block_parts(variables, spec.name), h, spec)
    return out

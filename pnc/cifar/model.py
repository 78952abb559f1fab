"""The CIFAR classifier: :class:`pnc.conv.PreActResNet` with optional dropout before the head.

:class:`Classifier` has exactly the variables of :class:`pnc.conv.PreActResNet` (dropout has
none), so the functional forward of :mod:`pnc.conv.resnet`, and with it convolutional P&C, runs on
every trained run. MC Dropout drops the pooled penultimate features (the input of the dense head)
with rate ``dropout_rate``, in training and at prediction. Images enter as uint8 and are
normalised with the CIFAR-10 channel means and standard deviations (:func:`normalize`).
"""

from __future__ import annotations

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from pnc.conv import resnet
from pnc.conv.resnet import BN_EPSILON, BN_MOMENTUM, PAD_3X3, PreActBlock, ResNetConfig

Array = jax.Array
CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)


def normalize(x_uint8: Array) -> Array:
    """uint8 (or float in ``[0, 255]``) NHWC images -> float32 with per-channel mean 0, std 1."""
    x = jnp.asarray(x_uint8, jnp.float32) / 255.0
    return (x - jnp.asarray(CIFAR_MEAN)) / jnp.asarray(CIFAR_STD)


class Classifier(nn.Module):
    """PreAct ResNet on normalised NHWC images; ``dropout_rate > 0`` drops the pooled features."""

    config: ResNetConfig
    dropout_rate: float = 0.0

    @nn.compact
    def __call__(self, x: Array, train: bool = False) -> Array:
        h = nn.Conv(self.config.widths[0], (3, 3), (1, 1), PAD_3X3, use_bias=False, name="stem")(x)
        for spec in self.config.block_specs():
            h = PreActBlock(spec, name=spec.name)(h, train)
        h = nn.BatchNorm(
            use_running_average=not train, momentum=BN_MOMENTUM, epsilon=BN_EPSILON, name="head_bn"
        )(h)
        f = jnp.mean(nn.relu(h), axis=(1, 2))
        if self.dropout_rate > 0:
            f = nn.Dropout(self.dropout_rate, deterministic=not train)(f)
        return nn.Dense(self.config.num_classes, name="head")(f)


def features(variables, x: Array, config: ResNetConfig) -> Array:
    """Penultimate features ``[N, widths[-1]]`` (pooled ``ReLU(BN(h))``) of normalised images."""
    p, s = variables["params"], variables["batch_stats"]
    h = resnet.blocks(variables, resnet.stem(variables, x), config, 0, len(config.block_specs()))
    return jnp.mean(jax.nn.relu(resnet.batch_norm(h, p["head_bn"], s["head_bn"])), axis=(1, 2))


def head(variables, f: Array) -> Array:
    """Logits of the dense head on features ``f [..., D]``."""
    p = variables["params"]["head"]
    return f @ p["kernel"] + p["bias"]


def batched(fn, x: np.ndarray, batch_size: int = 500) -> np.ndarray:
    """``fn`` (jitted, on one batch) over ``x`` in batches, the last one padded; numpy out."""
    n = x.shape[0]
    b = max(1, min(batch_size, n))
    outs = []
    for start in range(0, n, b):
        xb = x[start : start + b]
        pad = b - xb.shape[0]
        if pad:
            xb = np.concatenate([xb, np.repeat(xb[-1:], pad, axis=0)])
        out = np.asarray(fn(jnp.asarray(xb)))
        outs.append(out[: b - pad] if pad else out)
    return np.concatenate(outs)


@functools.partial(jax.jit, static_argnames=("config",))
def _features_logits(variables, x_uint8, config):
    f = features(variables, normalize(x_uint8), config)
    return f, head(variables, f)


def features_and_logits(
    variables, x_uint8: np.ndarray, config: ResNetConfig, batch_size: int = 500
):
    """``(features [N, D], logits [N, K])`` of uint8 images in inference mode (numpy)."""
    fn = lambda xb: jnp.concatenate(_features_logits(variables, xb, config), axis=1)
    out = batched(fn, x_uint8, batch_size)
    d = config.widths[-1]
    return out[:, :d], out[:, d:]

"""The CIFAR classifier: :class:`pnc.core.conv.PreActResNet` with optional dropout before the head.

:class:`Classifier` has exactly the variables of :class:`pnc.core.conv.PreActResNet` (dropout has
none), so the functional forward of :mod:`pnc.core.conv.resnet`, and with it convolutional P&C, runs on
every trained run. MC Dropout drops the pooled penultimate features (the input of the dense head)
with rate ``dropout_rate``, in training and at prediction. Images enter as uint8 and are
normalised with the CIFAR-10 channel means and standard deviations (:func:`normalize`).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from pnc.core.conv import resnet
from pnc.core.conv.resnet import ResNetConfig

Array = jax.Array
CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)


def normalize(x_uint8: Array) -> Array:
    """uint8 (or float in ``[0, 255]``) NHWC images -> float32 with per-channel mean 0, std 1."""
    x = jnp.asarray(x_uint8, jnp.float32) / 255.0
    return (x - jnp.asarray(CIFAR_MEAN)) / jnp.asarray(CIFAR_STD)


Classifier = resnet.PreActResNet
"""The CIFAR classifier: ``Classifier(config, dropout_rate)`` (:class:`pnc.core.conv.PreActResNet`)."""


def features(variables, x: Array, config: ResNetConfig) -> Array:
    """Penultimate features ``[N, widths[-1]]`` (pooled ``ReLU(BN(h))``) of normalised images."""
    h = resnet.blocks(variables, resnet.stem(variables, x), config, 0, len(config.block_specs()))
    return resnet.pooled_features(variables, h)


head = resnet.dense_head
"""Logits of the dense head on features ``f [..., D]``."""


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


@functools.partial(jax.jit, static_argnames=("config",))
def _logits(variables, x_uint8, config):
    return head(variables, features(variables, normalize(x_uint8), config))


def network_logits(variables, x_uint8, config: ResNetConfig, batch_size: int = 500) -> np.ndarray:
    """Logits ``[N, K]`` of uint8 images ``[N, H, W, C]`` in inference mode (numpy)."""
    return batched(lambda xb: _logits(variables, xb, config), x_uint8, batch_size)

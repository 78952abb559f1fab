"""Throughput of the CIFAR-10 study on this machine and its projected GPU cost:
``python -m pnc.bench.cifar_costs`` (JSON on stdout).

Measured here, on the full-width PreAct ResNet-18 at 32x32 with random weights and images (only
sizes matter), wall clock after a compiling call, the fastest of ``REPEATS`` calls:

- ``train``: images per second of :func:`pnc.core.classifier.recipe.train_epoch` (augmentation on the
  device, forward, backward, SGD update) over ``--train-steps`` steps of ``--train-batch`` images;
- ``forward``: images per second of a plain forward pass (evaluation mode) on ``--eval-batch``
  images, the pass every post-hoc job makes over every split;
- ``pnc_predict``: images per second of P&C prediction with the shared prefix
  (:func:`pnc.core.conv.predict_logits`) for ``--members`` members at block (3, 0), and extrapolated to
  50 members as prefix + 50 x (per-member suffix).

FLOPs per image come from XLA's cost analysis of the same functions as lowered, before the
backend's compilation (``lowered.cost_analysis()["flops"]``): a training step, a plain forward
pass, and P&C's prefix and per-member suffix. The lowered count is the same on every backend; the
compiled one is not: on a GPU the convolutions become library calls that the analysis counts as
no FLOPs (an H200 reported 12.9 M per training image against 2.9 G on a CPU). XLA counts the
body of a loop once, so the training FLOPs per image are those of one step over its batch.

The projected wall time of one seed of ``config/cifar.yaml`` on one GPU is the FLOP total of its
jobs divided by an assumed sustained throughput ``--gpu-tflops`` (default 20 TFLOP/s: an
assumption, not a measurement; a plain float32/TF32 ResNet-18 CIFAR training loop running at
5,000-8,000 images/s on an A100 or H100 sustains about 15-23 TFLOP/s at the 2.9 GFLOP per
training image counted here; pass your own). Run on the GPU itself, the same image counts
(:func:`image_counts`) divided by the rates measured above give ``projection_at_measured_rates``:
a measurement of this machine, not an assumption (on a CPU it projects the CPU).

The image counts, and so the FLOP totals, count: 9 training runs (base, 4 further Deep Ensemble
members, 4 dropout rates) x 300 epochs x 45,000 images; one forward pass over train (45,000), val
(5,000), test (10,000) and the six OpenOOD v1.5 sets (:data:`OPENOOD_SIZES`) per network the
post-hoc jobs read; SWAG's 2 starts x 50 samples x (BN refresh on 2,048 + val) and the selected
start's 50 samples on test + OOD; P&C's coordinate descent (at most 6 + 2 + 2 = 10
configurations, each 50 members on val) plus the selected one on test + OOD, each member costed
at a full forward pass (an upper bound: the prefix is shared); and the head-only methods as free.
Data loading, checkpoint writes and compilation are not counted.
"""

from __future__ import annotations

import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from pnc.bench.__main__ import environment
from pnc.bench.command_line import bench_parser, emit
from pnc.core.classifier.model import normalize
from pnc.core.classifier.recipe import Recipe, init_state, train_epoch
from pnc.core.conv import ConvPnCConfig, ResNetConfig, build_members, resnet
from pnc.core.conv.inference import shared_prefix_logits

REPEATS = 2
OPENOOD_SIZES = {
    "cifar100": 10_000,
    "tin": 7_793,
    "mnist": 70_000,
    "svhn": 26_032,
    "texture": 5_640,
    "places365": 35_195,
}
"""Images per OpenOOD v1.5 CIFAR-10 OOD test list (its benchmark_imglist/cifar10/test_*.txt)."""


def _flops(lowered) -> float:
    cost = lowered.cost_analysis()
    if isinstance(cost, list | tuple):
        cost = cost[0]
    return float(cost.get("flops", float("nan")))


def _best(fn) -> float:
    jax.block_until_ready(fn())
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return min(times)


def bench_train(config: ResNetConfig, batch: int, steps: int) -> dict:
    recipe = Recipe(epochs=300, batch_size=batch)
    state = init_state(config, recipe, steps, jax.random.key(0))
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.integers(0, 256, (batch * steps, 32, 32, 3), dtype=np.uint8))
    y = jnp.asarray(rng.integers(0, 10, batch * steps).astype(np.int32))
    kw = dict(config=config, recipe=recipe, steps_per_epoch=steps)
    lowered = train_epoch.lower(state, x, y, jax.random.key(1), **kw)
    compiled = lowered.compile()
    seconds = _best(lambda: compiled(state, x, y, jax.random.key(1)))
    return {
        "batch": batch,
        "steps": steps,
        "seconds": seconds,
        "images_per_s": batch * steps / seconds,
        # XLA's cost analysis counts the body of the epoch's scan (one step) once
        "flops_per_image": _flops(lowered) / batch,
    }


def bench_forward(config: ResNetConfig, variables, batch: int) -> dict:
    x = jnp.zeros((batch, 32, 32, 3), jnp.float32)
    lowered = jax.jit(lambda v, xb: resnet.forward(v, xb, config)).lower(variables, x)
    compiled = lowered.compile()
    seconds = _best(lambda: compiled(variables, x))
    return {
        "batch": batch,
        "seconds": seconds,
        "images_per_s": batch / seconds,
        "flops_per_image": _flops(lowered) / batch,
    }


def bench_pnc(config: ResNetConfig, variables, members: int, images: int) -> dict:
    rng = np.random.default_rng(1)
    x = normalize(rng.integers(0, 256, (max(images, 64), 32, 32, 3), dtype=np.uint8))
    pnc = ConvPnCConfig(n_members=members, blocks=((3, 0),), correct=False)
    ens = build_members(variables, config, x[:64], pnc, key=jax.random.key(2))
    first = pnc.block_indices(config)[0]
    xb = x[:images]
    kw = dict(resnet_config=config, first=first, member_chunk=None)
    shared_lowered = shared_prefix_logits.lower(variables, ens, xb, **kw)
    shared = shared_lowered.compile()
    prefix_fn = jax.jit(lambda v, b: resnet.blocks(v, resnet.stem(v, b), config, 0, first))
    prefix_lowered = prefix_fn.lower(variables, xb)
    prefix = prefix_lowered.compile()
    shared_s = _best(lambda: shared(variables, ens, xb))
    prefix_s = _best(lambda: prefix(variables, xb))
    suffix_s = max(shared_s - prefix_s, 0.0) / members
    prefix_flops = _flops(prefix_lowered) / images
    suffix_flops = (_flops(shared_lowered) / images - prefix_flops) / members
    return {
        "members": members,
        "images": images,
        "images_per_s": images / shared_s,
        "images_per_s_50_members_extrapolated": images / (prefix_s + 50 * suffix_s),
        "prefix_flops_per_image": prefix_flops,
        "suffix_flops_per_member_per_image": suffix_flops,
    }


RUNS, EPOCHS, SAMPLES = 9, 300, 50
N_TRAIN, N_VAL, N_TEST, N_BN = 45_000, 5_000, 10_000, 2_048


def image_counts() -> dict:
    """Images each part of one seed of config/cifar.yaml passes through the network (see the
    module docstring): ``training`` (training steps), ``forward_passes`` (plain forward passes),
    ``swag`` and ``pnc`` (member forward passes, each costed as a full pass)."""
    n_eval = N_TEST + sum(OPENOOD_SIZES.values())
    return {
        "training": RUNS * EPOCHS * N_TRAIN,
        # a forward pass of every run over every split (features, logits of base, ensembles)
        "forward_passes": RUNS * (N_TRAIN + N_VAL + n_eval),
        "swag": 2 * SAMPLES * (N_BN + N_VAL) + SAMPLES * n_eval,
        "pnc": 10 * SAMPLES * N_VAL + SAMPLES * n_eval,
    }


def projection_at_rates(train_images_per_s: float, forward_images_per_s: float) -> dict:
    """Hours of one seed of config/cifar.yaml at measured images per second: the training steps
    at ``train_images_per_s``, every forward pass (SWAG's and P&C's members included, each a full
    pass) at ``forward_images_per_s``."""
    counts = image_counts()
    training = counts["training"] / train_images_per_s
    posthoc = (counts["forward_passes"] + counts["swag"] + counts["pnc"]) / forward_images_per_s
    return {
        "train_images_per_s": train_images_per_s,
        "forward_images_per_s": forward_images_per_s,
        "images": counts,
        "hours": {
            "training": training / 3600,
            "training_per_run": training / RUNS / 3600,
            "posthoc": posthoc / 3600,
            "total_per_seed": (training + posthoc) / 3600,
        },
    }


def projection(train_flops: float, forward_flops: float, gpu_tflops: float) -> dict:
    """FLOPs and hours of one seed of config/cifar.yaml on one GPU (see the module docstring)."""
    counts = image_counts()
    training = counts["training"] * train_flops
    passes = counts["forward_passes"] * forward_flops
    swag = counts["swag"] * forward_flops
    pnc = counts["pnc"] * forward_flops
    dropout_epinet_llla = 0.0  # head-only members: negligible against the above
    total = training + passes + swag + pnc + dropout_epinet_llla
    rate = gpu_tflops * 1e12
    return {
        "assumed_gpu_tflops": gpu_tflops,
        "flops": {
            "training": training,
            "forward_passes": passes,
            "swag": swag,
            "pnc": pnc,
            "total": total,
        },  # fmt: skip
        "hours": {
            "training": training / rate / 3600,
            "training_per_run": training / RUNS / rate / 3600,
            "posthoc": (passes + swag + pnc) / rate / 3600,
            "total_per_seed": total / rate / 3600,
        },
    }


def main(argv: list[str] | None = None) -> dict:
    parser = bench_parser(
        __doc__, train_batch=32, train_steps=2, members=4, images=16, eval_batch=64
    )
    parser.add_argument("--gpu-tflops", type=float, default=20.0)
    args = parser.parse_args(argv)
    config = ResNetConfig()
    variables = resnet.init_variables(config, jax.random.key(0))
    train = bench_train(config, args.train_batch, args.train_steps)
    forward = bench_forward(config, variables, args.eval_batch)
    pnc = bench_pnc(config, variables, args.members, args.images)
    result = {
        "environment": environment(),
        "devices": [str(d) for d in jax.devices()],
        "network": "PreAct ResNet-18 (64/128/256/512), 32x32x3",
        "train": train,
        "forward": forward,
        "forward_flops_per_image": forward["flops_per_image"],
        "pnc_predict": pnc,
        "projection_one_seed_one_gpu": projection(
            train["flops_per_image"], forward["flops_per_image"], args.gpu_tflops
        ),  # fmt: skip
        "projection_at_measured_rates": projection_at_rates(
            train["images_per_s"], forward["images_per_s"]
        ),  # fmt: skip
    }
    return emit(result, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1:])

"""Throughput of the CIFAR-10 study on this machine and its projected GPU cost:
``python -m bench.cifar_costs`` (JSON on stdout).

Measured here, on the full-width PreAct ResNet-18 at 32x32 with random weights and images (only
sizes matter), wall clock after a compiling call, the fastest of ``REPEATS`` calls:

- ``train``: images per second of :func:`pnc.core.classifier.recipe.train_epoch` (augmentation on the
  device, forward, backward, SGD update) over ``--train-steps`` steps of ``--train-batch`` images;
- ``forward``: images per second of a plain forward pass (evaluation mode) on ``--eval-batch``
  images, the pass every post-hoc job makes over every split;
- ``pnc_predict``: images per second of P&C prediction with the shared prefix
  (:func:`pnc.core.conv.predict_logits`) for ``--members`` members at block (3, 0), and extrapolated to
  50 members as prefix + 50 x (per-member suffix).

- ``epochs``: a training run's per-epoch computation against what it spends between epochs, at
  a width of its own (``--epoch-width``, default 8: an eighth of ResNet-18's, so that a CPU runs
  it in seconds) and batch ``--epoch-batch`` (default 128, the paper's):
  :func:`pnc.core.classifier.recipe.train` for ``--epochs`` epochs of ``--epoch-steps`` steps
  with checkpoints (``--checkpoint-every``) and the base run's SWAG buffers (two starts, rank 20,
  as the paper's base run carries them), its jit cache warm. ``compute_s_per_epoch`` is the
  fastest of two bare epochs (:func:`~pnc.core.classifier.recipe.train_epoch` alone);
  ``overhead_s_per_epoch`` is the rest of the run's wall time per epoch (checkpoints, host work,
  the waits between epochs), the run's set-up (:func:`train` stopped before its first epoch)
  subtracted; ``overhead_fraction`` is their ratio. ``compile_s`` (the first epoch's call less a
  computed one), ``load`` (reading a prepared ``cifar10.npz`` of the real size and putting a
  seed's training split on the device) and ``checkpoint`` (one checkpoint of this state written
  on the calling thread: its size and seconds) are what each run costs besides. On a GPU,
  ``--epoch-width 64 --epoch-steps 351`` measures the paper's run (45,000 images per epoch).

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
Data loading, checkpoint writes and compilation are not counted there; ``job_costs`` counts them
from this machine's ``epochs`` measurement (:func:`projection_with_job_costs`).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from bench.__main__ import environment
from bench.command_line import bench_parser, emit
from pnc.core.classifier.model import normalize
from pnc.core.classifier.recipe import Recipe, init_state, save_checkpoint, train, train_epoch
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


def _timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    out = jax.block_until_ready(fn())
    return time.perf_counter() - start, out


def bench_epochs(
    config: ResNetConfig,
    batch: int,
    steps: int,
    epochs: int,
    checkpoint_every: int,
    swag_starts: tuple[int, ...] = (0, 1),
) -> dict:
    """Per-epoch computation against the time a training run spends between epochs (the module
    docstring, ``epochs``)."""
    recipe = Recipe(
        epochs=epochs, batch_size=batch, warmup_epochs=1, swag_starts=swag_starts, swag_rank=20
    )
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (batch * steps, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, batch * steps).astype(np.uint8)
    state = init_state(config, recipe, steps, jax.random.key(0))
    x, y = jnp.asarray(images), jnp.asarray(labels.astype(np.int32))
    kw = dict(config=config, recipe=recipe, steps_per_epoch=steps)
    first_s, _ = _timed(lambda: train_epoch(state, x, y, jax.random.key(1), **kw))
    compute_s = min(
        _timed(lambda: train_epoch(state, x, y, jax.random.key(1), **kw))[0] for _ in range(2)
    )
    run = dict(seed=0, run_id="base", checkpoint_every=checkpoint_every)
    with tempfile.TemporaryDirectory() as tmp:
        setup_s, _ = _timed(
            lambda: train(images, labels, config, recipe, checkpoint=Path(tmp, "a.msgpack"),
                          stop_after=0, **run)[0]
        )  # fmt: skip
        ckpt = Path(tmp, "b.msgpack")
        wall_s, (final, _) = _timed(
            lambda: train(images, labels, config, recipe, checkpoint=ckpt, **run)
        )
        path = Path(tmp, "c.msgpack")
        write_s, _ = _timed(lambda: save_checkpoint(path, final, {"history": {}}))
        size = path.stat().st_size
    overhead_s = max(wall_s - setup_s, 0.0) / epochs - compute_s
    return {
        "widths": list(config.widths),
        "batch": batch,
        "steps": steps,
        "images": batch * steps,
        "epochs": epochs,
        "checkpoint_every": checkpoint_every,
        "swag_starts": list(swag_starts),
        "compile_s": max(first_s - compute_s, 0.0),
        "compute_s_per_epoch": compute_s,
        "overhead_s_per_epoch": overhead_s,
        "overhead_fraction": overhead_s / compute_s,
        "setup_s": setup_s,
        "wall_s": wall_s,
        "checkpoint": {"mb": size / 1e6, "write_s": write_s},
    }


def bench_load(n_images: int = 50_000, val_size: int = 5_000) -> dict:
    """Seconds to read a prepared ``cifar10.npz`` of ``n_images`` training and 10,000 test images
    and take a seed's training split (:func:`pnc.studies.cifar.data.load_prepared`'s reads)."""
    from pnc.studies.cifar.data import train_val_split

    rng = np.random.default_rng(0)
    arrays = {
        "train_x": rng.integers(0, 256, (n_images, 32, 32, 3), dtype=np.uint8),
        "train_y": rng.integers(0, 10, n_images).astype(np.uint8),
        "test_x": rng.integers(0, 256, (N_TEST, 32, 32, 3), dtype=np.uint8),
        "test_y": rng.integers(0, 10, N_TEST).astype(np.uint8),
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "cifar10.npz")
        np.savez(path, **arrays)

        def read():
            with np.load(path, allow_pickle=False) as f:
                data = {k: f[k] for k in f.files}
            tr, _ = train_val_split(n_images, val_size, 0)
            return jnp.asarray(data["train_x"][tr])

        seconds, _ = _timed(read)
    return {"images": n_images, "seconds": seconds}


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


def projection_with_job_costs(
    train_images_per_s: float,
    forward_images_per_s: float,
    *,
    compile_s: float,
    load_s: float,
    overhead_s_per_epoch: float,
    posthoc_jobs: int = 16,
) -> dict:
    """:func:`projection_at_rates` plus what each job costs besides its images: every training
    run and each of the ``posthoc_jobs`` post-hoc jobs of a seed (6 sweeps and 10 score jobs)
    compiles (``compile_s``) and loads the data (``load_s``); every epoch of every run spends
    ``overhead_s_per_epoch`` between epochs (checkpoints, host work)."""
    base = projection_at_rates(train_images_per_s, forward_images_per_s)
    jobs = RUNS + posthoc_jobs
    fixed = jobs * (compile_s + load_s) / 3600
    epochs = RUNS * EPOCHS * overhead_s_per_epoch / 3600
    hours = dict(base["hours"])
    hours["compile_and_load"] = fixed
    hours["between_epochs"] = epochs
    hours["training_per_run"] += (compile_s + load_s + EPOCHS * overhead_s_per_epoch) / 3600
    hours["total_per_seed"] += fixed + epochs
    return {
        **base,
        "job_costs": {
            "jobs_per_seed": jobs,
            "compile_s": compile_s,
            "load_s": load_s,
            "overhead_s_per_epoch": overhead_s_per_epoch,
        },
        "hours": hours,
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
        __doc__, train_batch=32, train_steps=2, members=4, images=16, eval_batch=64,
        epoch_width=8, epoch_batch=128, epoch_steps=2, epochs=3, checkpoint_every=1,
    )  # fmt: skip
    parser.add_argument("--gpu-tflops", type=float, default=20.0)
    parser.add_argument(
        "--only-epochs", action="store_true",
        help="measure the per-epoch computation and overhead (and data loading) only",
    )  # fmt: skip
    args = parser.parse_args(argv)
    w = args.epoch_width
    narrow = ResNetConfig(widths=(w, 2 * w, 4 * w, 8 * w))
    epochs = bench_epochs(
        narrow, args.epoch_batch, args.epoch_steps, args.epochs, args.checkpoint_every
    )
    load = bench_load()
    if args.only_epochs:
        result = {"environment": environment(), "epochs": epochs, "load": load}
        return emit(result, sort_keys=True)
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
        "epochs": epochs,
        "load": load,
        "projection_with_job_costs": projection_with_job_costs(
            train["images_per_s"],
            forward["images_per_s"],
            compile_s=epochs["compile_s"],
            load_s=load["seconds"],
            overhead_s_per_epoch=epochs["overhead_s_per_epoch"],
        ),
    }
    return emit(result, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1:])

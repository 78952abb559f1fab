"""The CIFAR-10 training recipe (paper, Appendix D.1) with per-epoch checkpoints and SWAG moments.

SGD with Nesterov momentum 0.9, weight decay ``5e-4`` added to the gradient (PyTorch's coupled
L2, on every parameter), learning rate 0.1 with a linear warm-up over the first 5 epochs and a
cosine decay to 0 at the last step (per step), batch 128 (the last incomplete batch of an epoch is
dropped), 300 epochs, cross-entropy without label smoothing. Augmentation runs on the device inside
the jitted epoch: random crop of the zero-padded image (padding 4), horizontal flip with
probability 1/2, then Cutout: one ``8 x 8`` square (clipped at the border) centred uniformly in the
image is set to 0 after normalisation (DeVries and Taylor, 2017). An epoch is one jitted
``lax.scan`` over its steps; the training images stay on the device as uint8.

Keys: the run key is :func:`pnc.core.keys.derive_key` of ``("cifar", seed, run_id)``; epoch ``e``
(0-based) shuffles, augments and draws dropout masks from ``fold_in(run_key, e)``. After every
``checkpoint_every``-th epoch (and the last one run) the whole state (parameters, BN statistics,
optimiser state with its step count, SWAG moments, the epoch) is written to
``checkpoint.msgpack`` (flax msgpack) with a JSON sidecar that records its SHA-256, atomically;
:func:`train` resumes from it (refusing a checkpoint that does not match its hash), and a resumed
run equals an uninterrupted one.

Between epochs the device does not wait for the host. :func:`train` hands epoch ``e + 1`` to the
device before it reads epoch ``e``'s loss (the one value it fetches per epoch: the log and the
finiteness check), and a checkpoint is copied off the device, hashed and written on a thread of
its own while the next epochs compute (one write at a time, in order; the next one due waits for
it). A job killed during a write loses that write only: each file is replaced atomically, the
large one after its temporary copy is complete and the small sidecar right after it, so the run
resumes from the previous checkpoint.

SWAG (Maddox et al., 2019) moments are collected on the same run from the end of epoch
``start + 1`` on, once per epoch (``swag_collect_freq = 1``), for every ``start`` in
``swag_starts`` (the paper's grid is {160, 240}): the running mean and second moment of the
flattened parameters, and the last ``swag_rank`` deviations ``w - mean`` in a ring buffer.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import json
import logging
import threading
import time
from pathlib import Path

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree

from pnc.core.classifier.model import Classifier, normalize
from pnc.core.conv.resnet import ResNetConfig
from pnc.core.keys import derive_key
from pnc.runtime.io import ArtifactError, atomic_path

log = logging.getLogger(__name__)

#: The key of the SWAG moments the base run collects, in the training state and the stored run.
SWAG_MOMENTS = "swag"


@dataclasses.dataclass(frozen=True)
class Recipe:
    """Training hyperparameters (defaults: the paper's, Appendix D.1)."""

    epochs: int = 300
    batch_size: int = 128
    lr: float = 0.1
    warmup_epochs: int = 5
    momentum: float = 0.9
    nesterov: bool = True
    weight_decay: float = 5e-4
    crop_padding: int = 4
    cutout: int = 8
    dropout_rate: float = 0.0
    swag_starts: tuple[int, ...] = ()
    swag_rank: int = 20

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1 or self.swag_rank < 1:
            raise ValueError("epochs, batch_size and swag_rank must be >= 1")
        if not 0 <= self.warmup_epochs <= self.epochs:
            raise ValueError(f"warmup_epochs must be in 0..epochs, got {self.warmup_epochs}")
        if not 0.0 <= self.dropout_rate < 1.0:
            raise ValueError(f"dropout_rate must be in [0, 1), got {self.dropout_rate}")
        starts = tuple(sorted(int(s) for s in self.swag_starts))
        if any(not 0 <= s < self.epochs for s in starts):
            raise ValueError(
                f"swag_starts must be in 0..epochs-1 = {self.epochs - 1}, got {starts}"
            )
        object.__setattr__(self, "swag_starts", starts)


def optimizer(recipe: Recipe, steps_per_epoch: int) -> optax.GradientTransformation:
    """Coupled weight decay + SGD Nesterov on the warm-up cosine schedule (per step)."""
    total = recipe.epochs * steps_per_epoch
    warmup = recipe.warmup_epochs * steps_per_epoch
    schedule = optax.warmup_cosine_decay_schedule(
        init_value=0.0, peak_value=recipe.lr, warmup_steps=warmup, decay_steps=total, end_value=0.0
    )
    return optax.chain(
        optax.add_decayed_weights(recipe.weight_decay),
        optax.sgd(schedule, momentum=recipe.momentum, nesterov=recipe.nesterov),
    )


def augment(key: jax.Array, x_uint8: jax.Array, padding: int, cutout: int) -> jax.Array:
    """Flip + crop (zero padding ``padding``) + Cutout(``cutout``) of uint8 images; normalised."""
    n, h, w, c = x_uint8.shape
    k_flip, k_crop, k_cut = jax.random.split(key, 3)
    x = jnp.asarray(x_uint8, jnp.float32)
    flip = jax.random.bernoulli(k_flip, 0.5, (n,))
    x = jnp.where(flip[:, None, None, None], x[:, :, ::-1], x)
    if padding:
        xp = jnp.pad(x, ((0, 0), (padding, padding), (padding, padding), (0, 0)))
        offsets = jax.random.randint(k_crop, (n, 2), 0, 2 * padding + 1)
        crop = lambda img, o: jax.lax.dynamic_slice(img, (o[0], o[1], 0), (h, w, c))
        x = jax.vmap(crop)(xp, offsets)
    x = normalize(x)
    if cutout:
        centre = jax.random.randint(k_cut, (n, 2), 0, jnp.array([h, w]))
        yy, xx = jnp.arange(h)[:, None], jnp.arange(w)[None, :]
        lo, hi = centre - cutout // 2, centre + (cutout - cutout // 2)
        inside = (
            (yy[None] >= lo[:, 0, None, None])
            & (yy[None] < hi[:, 0, None, None])
            & (xx[None] >= lo[:, 1, None, None])
            & (xx[None] < hi[:, 1, None, None])
        )
        x = jnp.where(inside[..., None], 0.0, x)
    return x


def init_state(config: ResNetConfig, recipe: Recipe, steps_per_epoch: int, key: jax.Array) -> dict:
    """The training state at epoch 0: variables from ``key``, optimiser state, empty SWAG moments."""
    model = Classifier(config, recipe.dropout_rate)
    variables = model.init(key, jnp.zeros((1, 32, 32, 3), jnp.float32), train=False)
    params = variables["params"]
    flat, _ = ravel_pytree(params)
    swag = {
        str(s): {
            "n": jnp.zeros((), jnp.int32),
            "mean": jnp.zeros_like(flat),
            "sq_mean": jnp.zeros_like(flat),
            "dev": jnp.zeros((recipe.swag_rank, flat.size), flat.dtype),
        }
        for s in recipe.swag_starts
    }
    return {
        "epoch": jnp.zeros((), jnp.int32),
        "params": params,
        "batch_stats": variables["batch_stats"],
        "opt_state": optimizer(recipe, steps_per_epoch).init(params),
        SWAG_MOMENTS: swag,
    }


@functools.partial(jax.jit, static_argnames=("config", "recipe", "steps_per_epoch"))
def train_epoch(state, images, labels, key, *, config, recipe, steps_per_epoch):
    """One epoch (a ``lax.scan`` over its steps); returns the new state and the mean loss."""
    model = Classifier(config, recipe.dropout_rate)
    tx = optimizer(recipe, steps_per_epoch)
    k_perm, k_steps = jax.random.split(key)
    batch = recipe.batch_size
    perm = jax.random.permutation(k_perm, images.shape[0])[: steps_per_epoch * batch]
    idx = perm.reshape(steps_per_epoch, batch)
    keys = jax.random.split(k_steps, steps_per_epoch)

    def step(carry, inputs):
        params, stats, opt_state = carry
        rows, k = inputs
        k_aug, k_drop = jax.random.split(k)
        x = augment(k_aug, images[rows], recipe.crop_padding, recipe.cutout)
        y = labels[rows]

        def loss_fn(p):
            logits, updated = model.apply(
                {"params": p, "batch_stats": stats},
                x,
                train=True,
                mutable=["batch_stats"],
                rngs={"dropout": k_drop},
            )
            loss = optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
            return loss, updated["batch_stats"]

        (loss, stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), stats, opt_state), loss

    carry = (state["params"], state["batch_stats"], state["opt_state"])
    (params, stats, opt_state), losses = jax.lax.scan(step, carry, (idx, keys))
    epoch = state["epoch"] + 1
    flat, _ = ravel_pytree(params)
    swag = {}
    for start, moments in state[SWAG_MOMENTS].items():
        swag[start] = jax.lax.cond(
            epoch > int(start),
            lambda m: _swag_update(m, flat),
            lambda m: m,
            moments,
        )
    new = {
        "epoch": epoch,
        "params": params,
        "batch_stats": stats,
        "opt_state": opt_state,
        SWAG_MOMENTS: swag,
    }
    return new, jnp.mean(losses)


def _swag_update(m: dict, w: jax.Array) -> dict:
    n = m["n"] + 1
    mean = m["mean"] + (w - m["mean"]) / n
    sq_mean = m["sq_mean"] + (w * w - m["sq_mean"]) / n
    dev = m["dev"].at[(n - 1) % m["dev"].shape[0]].set(w - mean)
    return {"n": n, "mean": mean, "sq_mean": sq_mean, "dev": dev}


def save_checkpoint(path: Path, state: dict, meta: dict) -> None:
    """``path`` (msgpack of the state) and ``path.json`` (``meta`` with the SHA-256 of the msgpack,
    ``msgpack_sha256``), each written atomically."""
    tree = jax.tree.map(np.asarray, flax.serialization.to_state_dict(state))
    data = flax.serialization.msgpack_serialize(tree)
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    meta = {**meta, "msgpack_sha256": hashlib.sha256(data).hexdigest()}
    with atomic_path(path.with_suffix(".json")) as tmp:
        tmp.write_text(json.dumps(meta, indent=2, sort_keys=True))


class _CheckpointWriter:
    """Writes checkpoints (:func:`save_checkpoint`) on a thread of its own, one at a time and in
    order: :meth:`submit` first waits for the write before it, and :meth:`wait` for the last one;
    an error of a write is raised by the call that waits for it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def submit(self, state: dict, meta: dict) -> None:
        self.wait()

        def write() -> None:
            try:
                save_checkpoint(self.path, state, meta)
            except BaseException as err:  # raised again by wait(), in the training thread
                self._error = err

        self._thread = threading.Thread(target=write, name="checkpoint", daemon=True)
        self._thread.start()

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            raise error


def load_checkpoint(path: Path, template: dict, sha256: str | None = None) -> dict:
    """The state in checkpoint ``path``, in the structure of ``template``.

    Raises:
        pnc.runtime.io.ArtifactError: ``path`` does not match ``sha256`` (the hash its JSON records; a
            checkpoint written before it was recorded is read unchecked), or is truncated or
            corrupt; the message names the file and how to start the run over.
    """
    data = path.read_bytes()
    start_over = f"delete it and {path.with_suffix('.json').name} to train the run from epoch 0"
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        raise ArtifactError(
            f"{path} does not match the SHA-256 recorded in {path.with_suffix('.json')} "
            f"(truncated, corrupt or replaced); {start_over}"
        )
    try:
        raw = flax.serialization.msgpack_restore(data)
    except Exception as err:  # msgpack raises several unrelated types on bad input
        raise ArtifactError(
            f"{path} is truncated or corrupt ({type(err).__name__}: {err}); {start_over}"
        ) from err
    return jax.tree.map(jnp.asarray, flax.serialization.from_state_dict(template, raw))


def train(
    images: np.ndarray,
    labels: np.ndarray,
    config: ResNetConfig,
    recipe: Recipe,
    *,
    seed: int,
    run_id: str,
    checkpoint: str | Path | None = None,
    stop_after: int | None = None,
    checkpoint_every: int = 1,
) -> tuple[dict, dict]:
    """Train from scratch, or resume from ``checkpoint`` if it holds an earlier epoch of this run.

    Args:
        images: uint8 ``[N, 32, 32, 3]`` training images; labels ``[N]``.
        config, recipe: architecture and recipe (a checkpoint of another recipe is an error).
        seed, run_id: the run's key is ``derive_key("cifar", seed, run_id)``.
        checkpoint: the per-epoch checkpoint file (``None``: no checkpoints).
        stop_after: stop after this many epochs in total (to test resumption).
        checkpoint_every: write the checkpoint after every ``checkpoint_every``-th epoch and after
            the last one run (a restart repeats at most ``checkpoint_every - 1`` epochs; the
            result does not depend on it). Each is written on a thread of its own while the next
            epochs compute; the function returns once the last one is written, and raises the
            error of a write that failed.

    Returns:
        ``(state, history)`` with ``history = {"loss": [...], "seconds": [...], "resumed_from"}``.
    """
    if int(checkpoint_every) < 1:
        raise ValueError(f"checkpoint_every must be >= 1, got {checkpoint_every}")
    images = np.asarray(images)
    if images.dtype != np.uint8 or images.shape[1:] != (32, 32, 3):
        raise ValueError(f"images must be uint8 [N, 32, 32, 3], got {images.dtype} {images.shape}")
    steps = images.shape[0] // recipe.batch_size
    if steps < 1:
        raise ValueError(f"{images.shape[0]} images cannot fill a batch of {recipe.batch_size}")
    run_key = derive_key("cifar", seed, run_id)
    state = init_state(config, recipe, steps, derive_key("cifar", seed, run_id, "init"))
    identity = {
        "seed": seed,
        "run_id": run_id,
        "recipe": dataclasses.asdict(recipe),
        "config": dataclasses.asdict(config),
        "n_images": int(images.shape[0]),
    }
    history = {"loss": [], "seconds": [], "resumed_from": 0}
    ckpt = Path(checkpoint) if checkpoint is not None else None
    if ckpt is not None and ckpt.is_file() and ckpt.with_suffix(".json").is_file():
        meta = json.loads(ckpt.with_suffix(".json").read_text())
        if meta.get("identity") != json.loads(json.dumps(identity)):
            raise ValueError(
                f"checkpoint {ckpt} belongs to another run or recipe; delete it to start over"
            )
        state = load_checkpoint(ckpt, state, meta.get("msgpack_sha256"))
        history = meta["history"]
        history["resumed_from"] = int(state["epoch"])
        log.info("resumed %s from epoch %d", run_id, int(state["epoch"]))
    x, y = jnp.asarray(images), jnp.asarray(labels.astype(np.int32))
    last = recipe.epochs if stop_after is None else min(stop_after, recipe.epochs)
    writer = _CheckpointWriter(ckpt) if ckpt is not None else None
    clock = [time.perf_counter()]

    def finish(epoch: int, done: dict, loss: jax.Array) -> None:
        """Epoch ``epoch``'s host work, while the next epoch computes: its loss (waiting for it),
        the log, and its checkpoint handed to the writer when one is due."""
        value = float(loss)
        now = time.perf_counter()
        history["loss"].append(value)
        history["seconds"].append(now - clock[0])
        clock[0] = now
        log.info(
            "epoch %d/%d loss %.4f (%.1fs)", epoch + 1, recipe.epochs, value, history["seconds"][-1]
        )
        if not np.isfinite(value):
            raise FloatingPointError(f"{run_id}: non-finite training loss at epoch {epoch + 1}")
        if writer is not None and ((epoch + 1) % checkpoint_every == 0 or epoch + 1 == last):
            writer.submit(done, {"identity": identity, "history": copy.deepcopy(history)})

    pending = None  # the epoch handed to the device last, its host work not done yet
    try:
        for epoch in range(int(state["epoch"]), last):
            state, loss = train_epoch(
                state,
                x,
                y,
                jax.random.fold_in(run_key, epoch),
                config=config,
                recipe=recipe,
                steps_per_epoch=steps,
            )
            if pending is not None:
                finish(*pending)
            pending = (epoch, state, loss)
        if pending is not None:
            finish(*pending)
    except BaseException:
        if writer is not None:  # the write in flight ends whole; the error under way is reported
            try:
                writer.wait()
            except Exception:
                log.exception("checkpoint write failed")
        raise
    if writer is not None:
        writer.wait()
    return state, history


def swag_moments(state: dict) -> dict:
    """The collected SWAG moments ``{start: {"n", "mean", "sq_mean", "dev"}}`` (numpy)."""
    return jax.tree.map(np.asarray, state[SWAG_MOMENTS])


def variables_of(state: dict) -> dict:
    return {"params": state["params"], "batch_stats": state["batch_stats"]}

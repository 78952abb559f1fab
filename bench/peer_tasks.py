"""The tasks of :mod:`bench.peers`: data, shifts, the shared model and its training.

A task holds its ID splits (train, validation, test) and named shifts. Every method of the
benchmark starts from the same trained network (:func:`train_digits_cnn`, or the study's Gaussian
MLP through :func:`pnc.train`); nothing here looks at a method.

- ``digits``: scikit-learn's 8x8 digits (shipped with the package), classes 0-4 as ID and 5-9
  as the held-out-class shift; rotated and noisy ID test images at three severities each.
- ``halfcheetah``, ``hopper``, ``ant``: offline transitions generated from the stored behaviour
  policies (:mod:`pnc.studies.mujoco.data.offline`): ID = expert, Near = medium, Far =
  uniform-random actions.
- ``transformer``: the stripe images of ``examples/transformer.py``; shifts: more pixel noise.
"""

from __future__ import annotations

import dataclasses
import time

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

__all__ = [
    "DIGITS_STEPS",
    "DIGITS_TRAIN_PER_CLASS",
    "OFFLINE_ENVS",
    "VIT_STEPS",
    "VIT_TRAIN",
    "DigitsCNN",
    "Task",
    "check_task",
    "digits_task",
    "epochs_for",
    "offline_task",
    "train_digits_cnn",
    "train_vit",
    "transformer_task",
]

#: ID classes of the digits task: the first five digits, the classic split-MNIST halves.
DIGITS_ID_CLASSES = (0, 1, 2, 3, 4)
#: Rotation angles (degrees) and Gaussian noise standard deviations (pixel range [0, 1]).
DIGITS_ROTATIONS = (15.0, 30.0, 45.0)
DIGITS_NOISE = (0.1, 0.25, 0.5)
#: Training images per ID class (the rest of the ID images: validation and test, half each);
#: chosen from the base network's ID validation accuracy alone (``python -m bench.peers
#: --probe``, docs/peers.md).
DIGITS_TRAIN_PER_CLASS: int | None = 8
#: Optimiser steps of every training of a classification task's recipe (the epochs follow from
#: the training set's size, at least one).
DIGITS_STEPS = 500


@dataclasses.dataclass
class Task:
    """One benchmark task.

    Attributes:
        name: the task's name (used in errors and the JSON).
        kind: ``"classification"`` (integer labels) or ``"regression"`` (targets ``[N, D]``).
        train, val, test: ID ``(x, y)`` pairs.
        shifts: shift name -> inputs ``[N, ...]`` (targets where the task is a regression, as
            ``(x, y)``; inputs only for classification).
        info: what the JSON records about the data (sizes, the split, how shifts were made).
    """

    name: str
    kind: str
    train: tuple[np.ndarray, np.ndarray]
    val: tuple[np.ndarray, np.ndarray]
    test: tuple[np.ndarray, np.ndarray]
    shifts: dict[str, tuple[np.ndarray, np.ndarray | None]]
    info: dict = dataclasses.field(default_factory=dict)


def _row_keys(x: np.ndarray) -> set[bytes]:
    flat = np.ascontiguousarray(np.asarray(x, np.float32).reshape(len(x), -1))
    return {row.tobytes() for row in flat}


def check_task(task: Task) -> None:
    """Refuse a task without shifts or whose shifted inputs repeat ID inputs, naming it.

    Raises:
        ValueError: the shift set is empty, a shift has no rows, or a shifted row equals an
            ID row (train, validation or test) exactly.
    """
    if not task.shifts:
        raise ValueError(f"task {task.name!r}: the shift set is empty; OOD metrics need a shift")
    id_rows = set()
    for x, _ in (task.train, task.val, task.test):
        id_rows |= _row_keys(x)
    for name, (x, _) in task.shifts.items():
        if len(x) == 0:
            raise ValueError(f"task {task.name!r}: shift {name!r} has no rows")
        shared = len(_row_keys(x) & id_rows)
        if shared:
            raise ValueError(
                f"task {task.name!r}: shift {name!r} shares {shared} input rows with the ID "
                "data (train, validation or test); ID and OOD rows must not overlap"
            )


# ----------------------------------------------------------------------------- digits


def digits_task(
    seed: int = 0,
    *,
    train_per_class: int | None = DIGITS_TRAIN_PER_CLASS,
    evaluation: int | None = None,
) -> Task:
    """scikit-learn's digits: train on 0-4, OOD = 5-9 and corrupted ID test images.

    ``train_per_class`` images of each ID class (drawn at random, the same number per class) are
    the training set; the other ID images are split at random in half into validation and test.
    ``train_per_class=None`` gives the first version's split instead: 60 / 15 / 25 % of the ID
    images (about 900) into train, validation and test. Held-out classes: every image of 5-9.
    Corruptions of the ID test images: rotation by :data:`DIGITS_ROTATIONS` degrees (bilinear,
    zero fill) and additive Gaussian noise of :data:`DIGITS_NOISE` standard deviation, clipped to
    ``[0, 1]``. ``evaluation`` keeps at most that many validation and test images each (the
    held-out classes likewise).
    """
    import scipy.ndimage
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[..., None]  # [N, 8, 8, 1] in [0, 1]
    y = digits.target.astype(np.int32)
    is_id = np.isin(y, DIGITS_ID_CLASSES)
    rng = np.random.default_rng(seed)
    if train_per_class is None:
        order = rng.permutation(np.flatnonzero(is_id))
        n_train, n_val = int(0.6 * order.size), int(0.15 * order.size)
        parts = np.split(order, [n_train, n_train + n_val])
    else:
        chosen = [
            rng.permutation(np.flatnonzero(y == c))[:train_per_class] for c in DIGITS_ID_CLASSES
        ]
        train_rows = rng.permutation(np.concatenate(chosen))
        rest = rng.permutation(np.setdiff1d(np.flatnonzero(is_id), train_rows))
        half = rest.size // 2
        parts = [train_rows, rest[:half], rest[half:]]
    if evaluation is not None:
        parts = [parts[0], parts[1][:evaluation], parts[2][:evaluation]]
    relabel = np.full(10, -1, np.int32)
    relabel[list(DIGITS_ID_CLASSES)] = np.arange(len(DIGITS_ID_CLASSES))
    train, val, test = ((x[p], relabel[y[p]]) for p in parts)
    held_out = x[~is_id] if evaluation is None else x[~is_id][:evaluation]
    shifts: dict[str, tuple[np.ndarray, None]] = {"held_out_classes": (held_out, None)}
    for angle in DIGITS_ROTATIONS:
        rotated = scipy.ndimage.rotate(test[0], angle, axes=(1, 2), reshape=False, order=1)
        shifts[f"rotation_{angle:g}"] = (np.clip(rotated, 0.0, 1.0).astype(np.float32), None)
    noise_rng = np.random.default_rng([seed, 1])
    for std in DIGITS_NOISE:
        noisy = test[0] + std * noise_rng.standard_normal(test[0].shape)
        shifts[f"noise_{std:g}"] = (np.clip(noisy, 0.0, 1.0).astype(np.float32), None)
    info = {
        "source": "sklearn.datasets.load_digits (8x8, 1,797 images)",
        "id_classes": list(DIGITS_ID_CLASSES),
        "train_per_class": train_per_class,
        "rows": {"train": int(parts[0].size), "val": int(parts[1].size), "test": int(parts[2].size)}
        | {name: int(len(v[0])) for name, v in shifts.items()},
    }
    return Task("digits", "classification", train, val, test, shifts, info)


class DigitsCNN(nn.Module):
    """``x [N, 8, 8, 1] -> logits [N, classes]``: two 3x3 convolutions, two dense layers
    (``fc_0``, ``fc_1``, dropout after each) and a dense ``head``."""

    classes: int = len(DIGITS_ID_CLASSES)
    dropout: float = 0.2

    def setup(self):
        self.conv_0 = nn.Conv(16, (3, 3))
        self.conv_1 = nn.Conv(32, (3, 3), strides=2)
        self.fc_0 = nn.Dense(128)
        self.fc_1 = nn.Dense(64)
        self.head = nn.Dense(self.classes)
        self.drop = nn.Dropout(self.dropout)

    def features(self, x, train: bool = False):
        """The last hidden activations ``[N, 64]`` (the head's input)."""
        h = nn.relu(self.conv_1(nn.relu(self.conv_0(x))))
        h = h.reshape(h.shape[:-3] + (-1,))
        h = self.drop(nn.relu(self.fc_0(h)), deterministic=not train)
        return self.drop(nn.relu(self.fc_1(h)), deterministic=not train)

    def __call__(self, x, train: bool = False):
        return self.head(self.features(x, train))


def train_digits_cnn(
    x: np.ndarray, y: np.ndarray, *, key: jax.Array, epochs: int, model: DigitsCNN | None = None
) -> tuple[dict, dict]:
    """Adam (learning rate 1e-3), batch 32, ``epochs`` passes over ``(x, y)`` with dropout.

    Returns:
        ``(variables, cost)``; ``cost`` holds the CPU and wall seconds of the whole run (the
        first epoch includes compilation) and per epoch (``epoch_cpu_s``: median of the epochs
        after the first).
    """
    model = model or DigitsCNN()
    init_key, drop_key, order_key = jax.random.split(key, 3)
    params = model.init(init_key, jnp.asarray(x[:1]))["params"]
    tx = optax.adam(1e-3)
    opt_state = tx.init(params)

    @jax.jit
    def step(params, opt_state, xb, yb, k):
        def loss_fn(p):
            logits = model.apply({"params": p}, xb, train=True, rngs={"dropout": k})
            return optax.softmax_cross_entropy_with_integer_labels(logits, yb).mean()

        loss, grads = jax.value_and_grad(loss_fn)(params)
        upd, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, upd), opt_state, loss

    def update(state, idx, epoch, start):
        k = jax.random.fold_in(drop_key, epoch * len(x) + start)
        params, opt_state, loss = step(*state, x[idx], y[idx], k)
        return (params, opt_state), loss

    (params, _), cost = _timed_epochs(
        update, (params, opt_state), len(x), batch=32, epochs=epochs, order_key=order_key
    )
    return {"params": params}, cost


def epochs_for(steps: int, rows: int, batch: int) -> int:
    """Epochs of ``rows`` rows in minibatches of ``batch`` that give about ``steps`` optimiser
    steps (at least one epoch)."""
    per_epoch = -(-rows // batch)
    return max(1, round(steps / per_epoch))


def _timed_epochs(update, state, n_rows: int, *, batch: int, epochs: int, order_key: jax.Array):
    """``epochs`` passes of ``update(state, rows, epoch, start) -> (state, loss)`` over minibatches
    of ``batch`` rows (``rows = order[start : start + batch]``), each epoch in a new random order
    drawn by numpy from ``order_key``.

    Returns:
        ``(state, cost)``: the final state, and the ``epochs`` with the CPU and wall seconds of the
        whole run (``train_cpu_s``, ``train_wall_s``; the first epoch includes compilation) and
        per epoch (``epoch_cpu_s``: median of the epochs after the first).
    """
    rng = np.random.default_rng(np.asarray(jax.random.key_data(order_key)).ravel().tolist())
    cpu, wall = [], []
    for epoch in range(epochs):
        c0, w0 = time.process_time(), time.perf_counter()
        order = rng.permutation(n_rows)
        for start in range(0, n_rows, batch):
            state, loss = update(state, order[start : start + batch], epoch, start)
        jax.block_until_ready(loss)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    later = cpu[1:] or cpu
    cost = {
        "epochs": epochs,
        "train_cpu_s": float(sum(cpu)),
        "train_wall_s": float(sum(wall)),
        "epoch_cpu_s": float(np.median(later)),
    }
    return state, cost


# ----------------------------------------------------------------------------- offline MuJoCo

#: The regression tasks: task name -> environment of the offline generator (each has stored
#: expert and medium policies under ``pnc/studies/mujoco/data/policies/``).
OFFLINE_ENVS = {"halfcheetah": "HalfCheetah", "hopper": "Hopper", "ant": "Ant"}


def offline_task(
    name: str = "halfcheetah", seed: int = 0, *, pool: int = 10000, evaluation: int = 2000
) -> Task:
    """Offline transitions of one environment of :data:`OFFLINE_ENVS` (``x = (s_t, a_t)``,
    ``y = s_{t+1}``, raw units).

    ID pool: ``pool`` expert transitions (data seed ``seed``), a random 10 % of its rows held out
    for validation (the study's rule). ID test: ``evaluation`` expert transitions from fresh
    episodes (data seed ``seed + 1``). Near: the medium policy; Far: uniform-random actions; each
    ``evaluation`` transitions. Policies and action noise as in :mod:`pnc.studies.mujoco.data.offline`.
    """
    from pnc.studies.mujoco.data.action_noise import action_noise_for
    from pnc.studies.mujoco.data.far import collect_random_episodes
    from pnc.studies.mujoco.data.minari_io import transitions
    from pnc.studies.mujoco.data.offline import rollout_policy
    from pnc.studies.mujoco.data.policy_checks import load_checked_policies

    if name not in OFFLINE_ENVS:
        raise ValueError(f"unknown regression task {name!r}; expected one of {list(OFFLINE_ENVS)}")
    env = OFFLINE_ENVS[name]
    loaded, _ = load_checked_policies(env, None)
    noise = action_noise_for(env)

    def level(level_name: str, data_seed: int, n: int):
        episodes = rollout_policy(
            env,
            loaded[level_name],
            seed=data_seed,
            level=level_name,
            n_transitions=n,
            action_noise=noise,
        )
        x, y, _ = transitions(episodes, "next_state")
        return x.astype(np.float32), y.astype(np.float32)

    x, y = level("expert", seed, pool)
    order = np.random.default_rng([seed, 2]).permutation(len(x))
    n_val = len(x) // 10
    val, train = order[:n_val], order[n_val:]
    x_far, y_far, _ = transitions(collect_random_episodes(env, evaluation, seed), "next_state")
    shifts = {
        "near": level("medium", seed, evaluation),
        "far": (x_far.astype(np.float32), y_far.astype(np.float32)),
    }
    test = level("expert", seed + 1, evaluation)
    info = {
        "source": f"pnc.studies.mujoco.data.offline rollouts of the stored {env} policies",
        "env": env,
        "target": "next_state",
        "rows": {"train": int(train.size), "val": int(n_val), "test": len(test[0])}
        | {name: len(v[0]) for name, v in shifts.items()},
    }
    return Task(name, "regression", (x[train], y[train]), (x[val], y[val]), test, shifts, info)


# ----------------------------------------------------------------------------- transformer

#: Pixel-noise standard deviations of the transformer task's shifts (training images: 0.3).
STRIPE_NOISE = (0.45, 0.6, 0.75)
#: Training images of the transformer task, chosen from the base network's ID validation
#: accuracy alone (``python -m bench.peers --probe``, docs/peers.md).
VIT_TRAIN = 2048
#: Optimiser steps of the transformer's recipe (the example's 8 epochs of 2,048 images).
VIT_STEPS = 256


def transformer_task(seed: int = 0, *, train: int = 2048, evaluation: int = 512) -> Task:
    """The stripe images of ``examples/transformer.py`` (three orientations, 12x12, pixel noise
    0.3). Shifts: the same stripes under more pixel noise (:data:`STRIPE_NOISE`), the class still
    visible; the example's own shift (inverted contrast plus noise 1) is separated perfectly by
    the single network, these are not."""
    from bench.any_model_costs import load_example

    bar_images = load_example("transformer").bar_images
    base = 10 * seed
    info = {"source": "examples/transformer.py stripe images (12x12, noise 0.3)"}
    shifts = {
        f"noise_{noise:g}": (bar_images(evaluation, 12, seed=base + 4 + i, noise=noise)[0], None)
        for i, noise in enumerate(STRIPE_NOISE)
    }
    parts = [
        bar_images(n, 12, seed=base + k) for k, n in enumerate((train, evaluation, evaluation))
    ]
    info["rows"] = {"train": train, "val": evaluation, "test": evaluation} | {
        name: evaluation for name in shifts
    }
    return Task("transformer", "classification", *parts, shifts, info)


def train_vit(
    x: np.ndarray, y: np.ndarray, *, key: jax.Array, epochs: int, model: nn.Module | None = None
) -> tuple[dict, dict]:
    """The recipe of ``examples/transformer.py``: Adam (learning rate 2e-3), batch 64,
    ``epochs`` passes. Returns ``(variables, cost)`` as :func:`train_digits_cnn`."""
    if model is None:
        from bench.any_model_costs import load_example

        model = load_example("transformer").ViT()
    init_key, order_key = jax.random.split(key)
    params = model.init(init_key, jnp.asarray(x[:1]))["params"]
    tx = optax.adam(2e-3)
    opt_state = tx.init(params)

    @jax.jit
    def step(params, opt_state, xb, yb):
        def loss_fn(p):
            logits = model.apply({"params": p}, xb)
            return optax.softmax_cross_entropy_with_integer_labels(logits, yb).mean()

        loss, grads = jax.value_and_grad(loss_fn)(params)
        upd, opt_state = tx.update(grads, opt_state)
        return optax.apply_updates(params, upd), opt_state, loss

    def update(state, idx, epoch, start):
        params, opt_state, loss = step(*state, x[idx], y[idx])
        return (params, opt_state), loss

    (params, _), cost = _timed_epochs(
        update, (params, opt_state), len(x), batch=64, epochs=epochs, order_key=order_key
    )
    return {"params": params}, cost

"""P&C beside what a user would pick instead, on the same trained models:
``python -m bench.peers [--quick] [--seeds 0 1 2] [--tasks ...] [--pieces DIR] [--out FILE]``,
and ``--probe`` (the classification tasks' base networks alone, for choosing the ID task).

Tasks (:mod:`bench.peer_tasks`): ``digits`` (a small CNN on 8 training images per class of
digits 0-4) and one regression task per offline environment (``halfcheetah``, ``hopper``,
``ant``: the study's Gaussian MLP); ``transformer`` (the ViT example on stripe images) runs only
when named, since no candidate of ``--probe`` made its ID task imperfect. Each task runs once per
seed (default 0, 1, 2; ``--quick``: seed 0, digits and HalfCheetah); with
``--pieces DIR`` every (task, seed) is written to ``DIR/{task}-seed{seed}.json`` when it finishes
and read from there by a later run with the same settings, so an interrupted run resumes.

Every (task, seed) trains one network that all methods share, then runs:

- ``base``: the network alone (classification: its softmax; regression: its own variance);
- ``pnc``: :func:`pnc.ensemble` on the named layers (digits: perturb ``fc_0``, correct ``fc_1``;
  the MLP: perturb ``hidden_2``, correct ``hidden_3``; transformer: perturb ``block_1/fc1``,
  correct ``block_1/fc2``), with the settings of :data:`FIXED`;
- ``pnc_study`` (the MLP only): the study's configuration (:func:`pnc.build_members`, hidden
  layers 0 and 2 perturbed, 1 and 3 refit, radius norm, ridge toward zero, 4,096 calibration rows);
- ``laplace_last_layer_diag`` and ``laplace_all_lowrank``: laplax's GGN Laplace approximation on
  the last layer (diagonal) and on all weights (low rank, Lanczos), linearised predictive sampled
  with as many draws as P&C has members, prior precision chosen on validation;
- ``deep_ensemble``: the base network and ``ensemble_size - 1`` more trained from other keys;
- ``mc_dropout`` where the model has dropout (the digits CNN).

Selection rule, the same for every method with a grid: the lowest ID validation NLL; no shifted
data enter any choice. The grids are fixed in :data:`GRIDS` (same size for P&C and laplax) and
written into the JSON. OOD score: the predictive entropy of the mixture (classification, AUROC
and FPR95 with ID as the positive class) or the total predictive variance averaged over target
dimensions (regression, as in the study).

Costs, per method: ``construct_cpu_s`` / ``construct_wall_s`` (everything after the shared base
training: extra trainings, curvature, every grid point built and scored on validation; XLA
compilation included), ``construct_epochs`` (CPU seconds over one training epoch of the base
network), ``predict_s_per_1000`` (the selected predictor on the ID test rows, compiled, best of
three, per 1,000 rows) and ``peak_rss_mb`` / ``extra_rss_mb`` (the process's resident memory,
sampled every 5 ms while the method is built and evaluated, and its rise over the level at
the method's start).
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import pnc
from bench.any_model_costs import load_example
from bench.command_line import bench_parser, emit
from bench.peer_tasks import (
    DIGITS_STEPS,
    DIGITS_TRAIN_PER_CLASS,
    OFFLINE_ENVS,
    VIT_STEPS,
    VIT_TRAIN,
    DigitsCNN,
    Task,
    check_task,
    digits_task,
    epochs_for,
    offline_task,
    train_digits_cnn,
    train_vit,
    transformer_task,
)
from pnc.core.conv.classification import entropy, mixture_probabilities
from pnc.core.mlp import GaussianMLP, MLPConfig, forward, hidden_activations, split_head
from pnc.core.roc import auroc
from pnc.studies.cifar import ood_metrics
from pnc.studies.mujoco.metrics import mean_gaussian_nll, rmse

#: The tasks of the full run.
TASKS = ("digits", *OFFLINE_ENVS)
#: Tasks run only when named (``--tasks transformer``): the stripe images stay solved (ID
#: validation accuracy above 0.95) with as few as 64 training images (``--probe``, docs/peers.md).
OPTIONAL_TASKS = ("transformer",)
#: The tasks of ``--quick`` (the test suite's run, seed 0): one regression environment.
QUICK_TASKS = ("digits", "halfcheetah")
SEEDS = (0, 1, 2)

#: Hyperparameter grids, fixed before any run; ``quick`` uses the second entry of each pair.
#: P&C and laplax have grids of the same size (6; 2 in quick mode); the study configuration's
#: has 3 (its bootstrap fraction fixed), to keep the three-seed run within its CPU budget.
GRIDS: dict[str, tuple[dict, dict]] = {
    "pnc": ({"sigma": [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]}, {"sigma": [2.0, 16.0]}),
    "pnc_study": (
        {"sigma": [8.0, 16.0, 32.0], "bootstrap_frac": [0.3]},
        {"sigma": [8.0, 32.0], "bootstrap_frac": [0.3]},
    ),
    "laplace_last_layer_diag": (
        {"prior_prec": [1.0, 10.0, 100.0, 1000.0, 10000.0, 100000.0]},
        {"prior_prec": [1.0, 10000.0]},
    ),
    "laplace_all_lowrank": (
        {"prior_prec": [1.0, 10.0, 100.0, 1000.0, 10000.0, 100000.0]},
        {"prior_prec": [1.0, 10000.0]},
    ),
}

#: Fixed settings of each method (not searched).
FIXED = {
    "pnc": {
        "rank": 20,
        "bootstrap_frac": 0.3,
        "ridge": 1e-3,
        "perturbation_norm": "radius",
        "ridge_center": "original",
    },
    "pnc_study": {
        "rank": 20,
        "layers": [0, 2],
        "ridge": 1e-4,
        "perturbation_norm": "radius",
        "ridge_center": "zero",
        "calibration_size": 4096,
    },
    "laplace_last_layer_diag": {"curv_type": "diagonal", "pushforward": "linear"},
    "laplace_all_lowrank": {"curv_type": "lanczos", "pushforward": "linear"},
}


@dataclasses.dataclass(frozen=True)
class Settings:
    """Sizes of one run (``quick``: the suite's small run)."""

    quick: bool = False
    seed: int = 0
    members: int = 50  # P&C members, laplax draws and MC Dropout passes
    ensemble_size: int = 5
    digits_train_per_class: int | None = DIGITS_TRAIN_PER_CLASS
    digits_steps: int = DIGITS_STEPS
    digits_eval: int | None = None  # at most this many validation, test and held-out images
    mujoco_pool: int = 4000
    mujoco_eval: int = 1000
    mlp_hidden: tuple[int, ...] = (200, 200, 200, 200)
    mlp_steps: int = 5000
    lanczos_rank: int = 20
    vit_train: int = VIT_TRAIN
    vit_steps: int = VIT_STEPS
    vit_eval: int = 512

    @classmethod
    def make(cls, quick: bool, seed: int = 0) -> Settings:
        if not quick:
            return cls(seed=seed)
        return cls(
            quick=True,
            seed=seed,
            members=8,
            ensemble_size=3,
            digits_steps=150,
            digits_eval=150,
            mujoco_pool=1500,
            mujoco_eval=300,
            mlp_hidden=(32, 32, 32, 32),
            mlp_steps=300,
            lanczos_rank=5,
            vit_steps=96,
            vit_eval=128,
        )

    def grid(self, method: str) -> list[dict]:
        axes = GRIDS[method][1 if self.quick else 0]
        points = [{}]
        for name, values in axes.items():
            points = [p | {name: v} for p in points for v in values]
        return points


# ----------------------------------------------------------------------------- measurement


class PeakRSS:
    """Samples the process's resident set size every ``every`` seconds in a thread."""

    def __init__(self, every: float = 0.005):
        self.every = every
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.start_bytes = self.peak_bytes = self._rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _rss(self) -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * self.page

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_bytes = max(self.peak_bytes, self._rss())
            time.sleep(self.every)

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_bytes = max(self.peak_bytes, self._rss())


def _block(out):
    return jax.tree.map(lambda a: np.asarray(a), jax.block_until_ready(out))


#: Rows per prediction call: every input set is cut into chunks of this size (the last one
#: padded), so each method compiles its predictor once for all sets.
CHUNK_ROWS = 128


def in_chunks(predict: Callable, rows: int = CHUNK_ROWS) -> Callable:
    """``predict`` applied to ``x`` in chunks of ``rows`` rows (the last padded with copies of
    the last row, its padding dropped), outputs (arrays or tuples of arrays) joined on axis 0."""

    def chunked(x):
        x = np.asarray(x)
        n = len(x)
        padded = np.concatenate([x, np.repeat(x[-1:], -n % rows, axis=0)])
        outs = [predict(padded[i : i + rows]) for i in range(0, len(padded), rows)]
        joined = jax.tree.map(lambda *parts: np.concatenate(parts)[:n], *outs)
        return joined

    return chunked


@dataclasses.dataclass
class Fitted:
    """A built method: ``predict(x)`` -> mixture probabilities ``[N, K]`` (classification) or
    raw-unit ``(mean, var)`` ``[N, D]`` (regression); the chosen grid point and every point's
    validation NLL."""

    predict: Callable
    selected: dict = dataclasses.field(default_factory=dict)
    grid: list[dict] = dataclasses.field(default_factory=list)
    excluded_cpu_s: float = 0.0
    excluded_wall_s: float = 0.0
    chunked: bool = False

    def __post_init__(self):
        if not self.chunked:
            self.predict, self.chunked = in_chunks(self.predict), True


def _select(
    points: list[dict],
    make: Callable[[dict], Callable],
    val_nll: Callable,
    describe: Callable[[Callable], dict] | None = None,
) -> Fitted:
    """Build every grid point, keep the one with the lowest validation NLL (ties: the first).

    ``describe(predict)`` (the shifted data's AUROCs, for the record only) runs after the choice
    inputs are computed; its time is reported as excluded from the construction cost.
    """
    best, best_nll, record = None, np.inf, []
    excluded_cpu = excluded_wall = 0.0
    for point in points:
        c0, w0 = time.process_time(), time.perf_counter()
        predict = in_chunks(make(point))
        nll = float(val_nll(predict))
        entry = point | {
            "val_nll": nll,
            "cpu_s": time.process_time() - c0,  # build and validation (compilation included)
            "wall_s": time.perf_counter() - w0,
        }
        if describe is not None:
            c0, w0 = time.process_time(), time.perf_counter()
            entry["not_used_for_selection"] = describe(predict)
            excluded_cpu += time.process_time() - c0
            excluded_wall += time.perf_counter() - w0
        record.append(entry)
        if best is None or (np.isfinite(nll) and nll < best_nll):
            best, best_nll, chosen = predict, nll, point
    return Fitted(best, chosen, record, excluded_cpu, excluded_wall, chunked=True)


# ----------------------------------------------------------------------------- metrics


def _classification_metrics(fitted: Fitted, task: Task) -> dict:
    p_test = np.asarray(fitted.predict(task.test[0]), np.float64)
    y = task.test[1]
    conf_id = -np.asarray(entropy(jnp.asarray(p_test)))
    out = {
        "accuracy": ood_metrics.accuracy(p_test.argmax(1), y),
        "nll": ood_metrics.nll(p_test, y),
        "ece": ood_metrics.ece(p_test, y),
        "shifts": {},
    }
    for name, (x, _) in task.shifts.items():
        p = np.asarray(fitted.predict(x), np.float64)
        conf = -np.asarray(entropy(jnp.asarray(p)))
        out["shifts"][name] = {
            "auroc": ood_metrics.auroc(conf_id, conf),
            "fpr95": ood_metrics.fpr_at_tpr(conf_id, conf),
            "auroc_msp": ood_metrics.auroc(p_test.max(1), p.max(1)),
        }
    return out


def _regression_metrics(fitted: Fitted, task: Task) -> dict:
    mean, var = fitted.predict(task.test[0])
    y = task.test[1]
    score_id = np.asarray(var, np.float64).mean(1)
    out = {"rmse": rmse(mean, y), "nll": mean_gaussian_nll(mean, var, y), "shifts": {}}
    for name, (x, y_shift) in task.shifts.items():
        m, v = fitted.predict(x)
        score = np.asarray(v, np.float64).mean(1)
        out["shifts"][name] = {
            "auroc": auroc(score_id, score),
            "fpr95": ood_metrics.fpr_at_tpr(-score_id, -score),
            "rmse": rmse(m, y_shift),
            "nll": mean_gaussian_nll(m, v, y_shift),
        }
    return out


def _describe(task: Task) -> Callable[[Callable], dict]:
    """Each shift's AUROC of a grid point (recorded in the JSON, never used to choose)."""
    metrics = _classification_metrics if task.kind == "classification" else _regression_metrics

    def describe(predict):
        out = metrics(Fitted(predict, chunked=True), task)
        return {"id_nll": out["nll"]} | {k: v["auroc"] for k, v in out["shifts"].items()}

    return describe


def _val_nll(task: Task) -> Callable[[Callable], float]:
    x, y = task.val
    if task.kind == "classification":
        return lambda predict: ood_metrics.nll(np.asarray(predict(x), np.float64), y)
    return lambda predict: mean_gaussian_nll(*predict(x), y)


# ----------------------------------------------------------------------------- laplax


def _laplax_sampler(
    model_fn,
    params,
    data: dict,
    *,
    loss_fn: str,
    curv_type: str,
    curv_kwargs: dict,
    sigma_squared: float,
    num_samples: int,
    key,
):
    """laplax's GGN Laplace approximation of ``params`` on ``data`` (``{"input", "target"}``).

    Returns ``make(prior_prec)``, a function giving ``x -> samples [S, N, out]`` of the
    linearised predictive (laplax's ``lin_samples``) under that prior precision. ``model_fn``
    maps one example (no batch axis) to its output, as laplax's ``vmap_over_data`` expects.
    """
    from laplax.api import laplace
    from laplax.eval.pushforward import lin_pred_mean, lin_samples, lin_setup, set_lin_pushforward

    posterior_fn, _ = laplace(
        model_fn, params, data, loss_fn=loss_fn, curv_type=curv_type, **curv_kwargs
    )

    @jax.jit
    def samples(prior_prec, x):
        predictive = set_lin_pushforward(
            model_fn=model_fn,
            mean_params=params,
            posterior_fn=posterior_fn,
            prior_arguments={"prior_prec": prior_prec, "sigma_squared": sigma_squared},
            pushforward_fns=[lin_setup, lin_pred_mean, lin_samples],
            key=key,
            num_samples=num_samples,
        )
        return jnp.swapaxes(jax.vmap(lambda xi: predictive(xi)["samples"])(x), 0, 1)

    def make(prior_prec: float):
        prec = jnp.float32(prior_prec)
        return lambda x: samples(prec, jnp.asarray(x))

    return make


# ----------------------------------------------------------------------------- digits


@dataclasses.dataclass(frozen=True)
class Classifier:
    """A trained classification network and how each method reaches into it.

    Attributes:
        model, variables: the linen module (``apply(variables, x)`` is its inference-mode
            prediction) and its trained variables.
        features: ``x -> [N, F]``, the input of the dense ``head`` layer (last-layer Laplace).
        perturb, correct: the layer paths P&C perturbs and refits.
        train_member: ``key -> variables``, one more network trained by the base recipe.
        dropout: whether ``apply(..., train=True, rngs={"dropout": k})`` samples dropout masks.
    """

    model: object
    variables: dict
    features: Callable
    perturb: tuple[str, ...]
    correct: tuple[str, ...]
    train_member: Callable
    dropout: bool


def _classifier_methods(task: Task, s: Settings, net: Classifier, key, record: bool) -> dict:
    model, variables = net.model, net.variables
    x_train, y_train = task.train
    val_nll, describe = _val_nll(task), _describe(task) if record else None
    head = variables["params"]["head"]
    keys = jax.random.split(key, 6)

    apply = jax.jit(lambda x: model.apply(variables, x))
    run_ensemble = jax.jit(lambda ens, x: ens(x))  # one compilation for every grid point
    features = jax.jit(net.features)

    def base():
        return Fitted(lambda x: _block(jax.nn.softmax(apply(x), -1)))

    def pnc_method():
        def make(point):
            config = pnc.PnCConfig(n_members=s.members, sigma=point["sigma"], **_fixed("pnc"))
            ens = pnc.ensemble(
                model,
                x_train,
                variables=variables,
                perturb=list(net.perturb),
                correct=list(net.correct),
                config=config,
                key=keys[0],
            )
            return lambda x: _block(mixture_probabilities(run_ensemble(ens, jnp.asarray(x))))

        return _select(s.grid("pnc"), make, val_nll, describe)

    def laplace_ll():
        def model_fn(input, params):
            return input @ params["kernel"] + params["bias"]

        make = _laplax_sampler(
            model_fn,
            head,
            {"input": features(x_train), "target": y_train},
            loss_fn="cross_entropy",
            curv_type="diagonal",
            curv_kwargs={},
            sigma_squared=1.0,
            num_samples=s.members,
            key=keys[1],
        )

        def make_predict(point):
            samples = make(point["prior_prec"])
            return lambda x: _block(mixture_probabilities(samples(features(jnp.asarray(x)))))

        return _select(s.grid("laplace_last_layer_diag"), make_predict, val_nll, describe)

    def laplace_all():
        def model_fn(input, params):
            return model.apply({"params": params}, input[None])[0]

        make = _laplax_sampler(
            model_fn,
            variables["params"],
            {"input": x_train, "target": y_train},
            loss_fn="cross_entropy",
            curv_type="lanczos",
            curv_kwargs={"rank": s.lanczos_rank, "key": keys[2]},
            sigma_squared=1.0,
            num_samples=s.members,
            key=keys[3],
        )

        def make_predict(point):
            samples = make(point["prior_prec"])
            return lambda x: _block(mixture_probabilities(samples(x)))

        return _select(s.grid("laplace_all_lowrank"), make_predict, val_nll, describe)

    def deep_ensemble():
        members = [variables] + [
            net.train_member(jax.random.fold_in(keys[4], i)) for i in range(1, s.ensemble_size)
        ]
        stacked = jax.tree.map(lambda *a: jnp.stack(a), *members)
        run = jax.jit(jax.vmap(model.apply, in_axes=(0, None)))
        return Fitted(lambda x: _block(mixture_probabilities(run(stacked, jnp.asarray(x)))))

    def mc_dropout():
        draw_keys = jax.random.split(keys[5], s.members)

        @jax.jit
        def run(x):
            one = lambda k: model.apply(variables, x, train=True, rngs={"dropout": k})  # noqa: E731
            return mixture_probabilities(jax.vmap(one)(draw_keys))

        return Fitted(lambda x: _block(run(jnp.asarray(x))))

    methods = {
        "base": base,
        "pnc": pnc_method,
        "laplace_last_layer_diag": laplace_ll,
        "laplace_all_lowrank": laplace_all,
        "deep_ensemble": deep_ensemble,
    }
    if net.dropout:
        methods["mc_dropout"] = mc_dropout
    return methods


def _fixed(method: str) -> dict:
    return {k: v for k, v in FIXED[method].items()}


def _digits_base(task: Task, s: Settings, key) -> tuple[Classifier, dict]:
    model = DigitsCNN()
    epochs = epochs_for(s.digits_steps, len(task.train[0]), 32)
    train = partial(train_digits_cnn, *task.train, epochs=epochs, model=model)
    variables, cost = train(key=key)
    net = Classifier(
        model=model,
        variables=variables,
        features=lambda x: model.apply(variables, x, method=DigitsCNN.features),
        perturb=("fc_0",),
        correct=("fc_1",),
        train_member=lambda k: train(key=k)[0],
        dropout=True,
    )
    return net, cost


def _transformer_base(task: Task, s: Settings, key) -> tuple[Classifier, dict]:
    """The ViT of ``examples/transformer.py`` and its recipe; P&C on the last block's MLP."""
    model = load_example("transformer").ViT()
    epochs = epochs_for(s.vit_steps, len(task.train[0]), 64)
    train = partial(train_vit, *task.train, epochs=epochs, model=model)
    variables, cost = train(key=key)

    def features(x):  # the head's input: the final LayerNorm's tokens, mean-pooled
        _, state = model.apply(variables, x, capture_intermediates=True, mutable=["intermediates"])
        return state["intermediates"]["ln_out"]["__call__"][0].mean(axis=1)

    net = Classifier(
        model=model,
        variables=variables,
        features=features,
        perturb=("block_1/fc1",),
        correct=("block_1/fc2",),
        train_member=lambda k: train(key=k)[0],
        dropout=False,
    )
    return net, cost


# ----------------------------------------------------------------------------- HalfCheetah


def _mlp_train_config(s: Settings) -> pnc.TrainConfig:
    """The study's recipe (``config.yaml``: AdamW 1e-3, weight decay 1e-4, batch 64, early
    stopping on validation NLL with patience 10 checks of 100 steps, raw units)."""
    return pnc.TrainConfig(
        steps=s.mlp_steps,
        batch_size=64,
        learning_rate=1e-3,
        weight_decay=1e-4,
        patience=10,
        eval_every=100 if not s.quick else 50,
        standardize=False,
    )


def _train_mlp(task: Task, s: Settings, key):
    config = MLPConfig(out_dim=task.train[1].shape[1], hidden=s.mlp_hidden, variance="softplus")
    c0, w0 = time.process_time(), time.perf_counter()
    model, losses = pnc.train(
        *task.train,
        key=key,
        model_config=config,
        train_config=_mlp_train_config(s),
        validation=task.val,
    )
    jax.block_until_ready(model.params)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    steps = int(np.sum(np.isfinite(losses)))
    epochs = steps * 64 / len(task.train[0])
    cost = {
        "steps": steps,
        "epochs": epochs,
        "train_cpu_s": cpu,
        "train_wall_s": wall,
        "epoch_cpu_s": cpu / epochs,
    }
    return model, cost


def _raw_mixture(means, variances, y_norm) -> tuple[np.ndarray, np.ndarray]:
    """Members' standardised ``(mean, var)`` ``[M, N, D]`` -> raw-unit mixture ``[N, D]``."""
    mean, var = pnc.mixture(pnc.Predictive(jnp.asarray(means), jnp.asarray(variances)))
    return np.asarray(y_norm.inverse(mean)), np.asarray(var * jnp.square(y_norm.std))


def _mlp_methods(task: Task, s: Settings, trained, key, record: bool) -> dict:
    cfg, params, x_norm, y_norm = trained.config, trained.params, trained.x_norm, trained.y_norm
    x_cal = np.asarray(x_norm.transform(jnp.asarray(task.train[0])))
    val_nll, describe = _val_nll(task), _describe(task) if record else None
    keys = jax.random.split(key, 6)
    D = cfg.out_dim

    def std_in(x):
        return x_norm.transform(jnp.asarray(x, jnp.float32))

    base_fn = jax.jit(lambda x: forward(params, std_in(x), cfg))
    run_ensemble = jax.jit(lambda ens, x: ens(std_in(x)))  # one compilation for every grid point
    run_members = jax.jit(lambda members, x: pnc.predict_members(members, std_in(x), cfg))

    def base():
        def predict(x):
            m, v = base_fn(x)
            return _raw_mixture(m[None], v[None], y_norm)

        return Fitted(predict)

    def pnc_method():
        model = GaussianMLP(cfg)

        def make(point):
            config = pnc.PnCConfig(n_members=s.members, sigma=point["sigma"], **_fixed("pnc"))
            ens = pnc.ensemble(
                model,
                x_cal,
                variables={"params": params},
                perturb=["hidden_2"],
                correct=["hidden_3"],
                config=config,
                key=keys[0],
            )
            return lambda x: _raw_mixture(*run_ensemble(ens, x), y_norm)

        return _select(s.grid("pnc"), make, val_nll, describe)

    def pnc_study():
        fixed = _fixed("pnc_study")
        fixed["layers"] = tuple(fixed["layers"])
        fixed["calibration_size"] = min(fixed["calibration_size"], len(x_cal))

        def make(point):
            config = pnc.PnCConfig(n_members=s.members, **fixed, **point)
            members = pnc.build_members(params, cfg, x_cal, config, key=keys[1])
            return lambda x: _raw_mixture(*run_members(members, x), y_norm)

        return _select(s.grid("pnc_study"), make, val_nll, describe)

    # laplax sees the mean divided by the base network's predictive standard deviation (held
    # fixed at the trained weights): its MSE loss then has the GGN of the Gaussian likelihood,
    # J^T diag(1 / var) J, once scaled by sigma_squared = 1/2 (laplax's MSE Hessian is 2).
    def whitened_laplace(method, features, mean_fn, scale, mean_params, **curvature):
        """laplax on ``mean_fn(h, mean_params) / scale(h)`` with ``h = features(x)``; its samples
        are scaled back by ``scale(h)`` and mixed with the variance ``scale(h)**2``."""

        def model_fn(input, params):
            return mean_fn(input, params) / scale(input)

        inputs = features(task.train[0])
        y_white = y_norm.transform(jnp.asarray(task.train[1])) / scale(inputs)
        make = _laplax_sampler(
            model_fn,
            mean_params,
            {"input": inputs, "target": y_white},
            loss_fn="mse",
            sigma_squared=0.5,
            num_samples=s.members,
            **curvature,
        )

        def make_predict(point):
            samples = make(point["prior_prec"])

            def predict(x):
                h = features(x)
                sd = scale(h)
                return _raw_mixture(
                    samples(h) * sd, jnp.broadcast_to(sd**2, (1, *sd.shape)), y_norm
                )

            return predict

        return _select(s.grid(method), make_predict, val_nll, describe)

    def laplace_ll():
        head = params["head"]

        def scale(h):
            return jnp.sqrt(split_head(h @ head["kernel"] + head["bias"], cfg)[1])

        return whitened_laplace(
            "laplace_last_layer_diag",
            jax.jit(lambda x: hidden_activations(params, std_in(x), cfg)[-1]),
            lambda h, p: h @ p["kernel"] + p["bias"],
            scale,
            {"kernel": head["kernel"][:, :D], "bias": head["bias"][:D]},
            curv_type="diagonal",
            curv_kwargs={},
            key=keys[2],
        )

    def laplace_all():
        def scale(x):
            return jnp.sqrt(forward(params, x, cfg)[1])

        return whitened_laplace(
            "laplace_all_lowrank",
            std_in,
            lambda x, p: forward(p, x, cfg)[0],
            scale,
            params,
            curv_type="lanczos",
            curv_kwargs={"rank": s.lanczos_rank, "key": keys[3]},
            key=keys[4],
        )

    def deep_ensemble():
        members = [trained] + [
            _train_mlp(task, s, jax.random.fold_in(keys[5], i))[0]
            for i in range(1, s.ensemble_size)
        ]

        def predict(x):
            outs = [m.predict(x) for m in members]
            means = jnp.stack([m.y_norm.inverse(o[0]) for m, o in zip(members, outs, strict=True)])
            variances = jnp.stack(
                [o[1] * m.y_norm.std**2 for m, o in zip(members, outs, strict=True)]
            )
            mean, var = pnc.mixture(pnc.Predictive(means, variances))
            return np.asarray(mean), np.asarray(var)

        return Fitted(predict)

    return {
        "base": base,
        "pnc": pnc_method,
        "pnc_study": pnc_study,
        "laplace_last_layer_diag": laplace_ll,
        "laplace_all_lowrank": laplace_all,
        "deep_ensemble": deep_ensemble,
    }


# ----------------------------------------------------------------------------- runner


def _classifier_base(task: Task, s: Settings, key) -> tuple[Classifier, dict]:
    make_base = _transformer_base if task.name == "transformer" else _digits_base
    return make_base(task, s, key)


#: The candidate ID tasks of ``--probe``: per classification task, the setting it varies and the
#: values tried, smallest training set first (digits ``None``: the first version's 60 % split).
PROBE = {
    "digits": ("digits_train_per_class", (8, 16, 32, 64, None)),
    "transformer": ("vit_train", (64, 128, 256, 512, 2048)),
}
#: ``--probe``'s rule: the largest training set whose base network's ID validation accuracy,
#: averaged over the seeds, is at most this.
PROBE_MAX_ACCURACY = 0.95


def probe(seeds, quick: bool = False, log=None) -> dict:
    """Train only each classification task's base network (the key a run gives it) for every
    candidate of :data:`PROBE`, and score it on the ID validation split; no method runs.

    Returns:
        Per task: the varied setting, each candidate's training rows and per-seed validation
        accuracy and NLL with their means, and the chosen candidate (:data:`PROBE_MAX_ACCURACY`;
        ``None`` where no candidate qualifies).
    """
    out = {}
    for name, (field, values) in PROBE.items():
        rows = []
        for value in values:
            per_seed = []
            for seed in seeds:
                s = dataclasses.replace(Settings.make(quick, seed), **{field: value})
                task = make_task(name, s)
                base_key, _ = jax.random.split(jax.random.key(seed))
                net, cost = _classifier_base(task, s, base_key)
                probs = np.asarray(jax.nn.softmax(net.model.apply(net.variables, task.val[0])))
                per_seed.append(
                    {
                        "seed": seed,
                        "train_rows": len(task.train[0]),
                        "val_rows": len(task.val[0]),
                        "epochs": cost["epochs"],
                        "val_accuracy": ood_metrics.accuracy(probs.argmax(1), task.val[1]),
                        "val_nll": ood_metrics.nll(probs.astype(np.float64), task.val[1]),
                    }
                )
                if log is not None:
                    log(f"probe {name} {field}={value} seed {seed}: {per_seed[-1]}")
            rows.append(
                {
                    field: value,
                    "seeds": per_seed,
                    "val_accuracy": float(np.mean([r["val_accuracy"] for r in per_seed])),
                    "val_nll": float(np.mean([r["val_nll"] for r in per_seed])),
                }
            )
        fits = [r[field] for r in rows if r["val_accuracy"] <= PROBE_MAX_ACCURACY]
        out[name] = {
            "setting": field,
            "candidates": rows,
            "rule": f"the largest training set whose mean ID validation accuracy is at most "
            f"{PROBE_MAX_ACCURACY}",
            "chosen": fits[-1] if fits else None,
            "chosen_exists": bool(fits),
        }
    return out


def make_task(name: str, s: Settings) -> Task:
    if name == "digits":
        return digits_task(
            s.seed, train_per_class=s.digits_train_per_class, evaluation=s.digits_eval
        )
    if name in OFFLINE_ENVS:
        return offline_task(name, s.seed, pool=s.mujoco_pool, evaluation=s.mujoco_eval)
    if name == "transformer":
        return transformer_task(s.seed, train=s.vit_train, evaluation=s.vit_eval)
    raise ValueError(f"unknown task {name!r}; expected one of {TASKS + OPTIONAL_TASKS}")


def _predict_seconds(fitted: Fitted, x: np.ndarray) -> float:
    fitted.predict(x)  # compile
    best = np.inf
    for _ in range(3):
        start = time.perf_counter()
        fitted.predict(x)
        best = min(best, time.perf_counter() - start)
    return float(best) * 1000.0 / len(x)


def run_task(
    task: Task,
    s: Settings,
    methods: list[str] | None = None,
    log=None,
    grid_aurocs: bool = False,
) -> dict:
    """Train the task's shared network, then build, time and score every method (with
    ``grid_aurocs``, also every grid point on the shifts, recorded as ``not_used_for_selection``
    and left out of the construction cost).

    Raises:
        ValueError: the task has no shifts or its shifted rows repeat ID rows (before training).
    """
    check_task(task)
    base_key, method_key = jax.random.split(jax.random.key(s.seed))
    if task.kind == "classification":
        net, base_cost = _classifier_base(task, s, base_key)
        builders = _classifier_methods(task, s, net, method_key, grid_aurocs)
        metrics = _classification_metrics
    else:
        _, first = _train_mlp(task, s, base_key)  # compiles; the second run is timed
        trained, base_cost = _train_mlp(task, s, base_key)
        base_cost["first_call_cpu_s"] = first["train_cpu_s"]
        builders = _mlp_methods(task, s, trained, method_key, grid_aurocs)
        metrics = _regression_metrics
    val_nll = _val_nll(task)
    results = {}
    for name in methods or list(builders):
        if name not in builders:
            raise ValueError(f"task {task.name!r} has no method {name!r}; it has {list(builders)}")
        with PeakRSS() as memory:
            c0, w0 = time.process_time(), time.perf_counter()
            fitted = builders[name]()
            cpu = time.process_time() - c0 - fitted.excluded_cpu_s
            wall = time.perf_counter() - w0 - fitted.excluded_wall_s
            entry = {
                "construct_cpu_s": cpu,
                "construct_wall_s": wall,
                "construct_epochs": cpu / base_cost["epoch_cpu_s"],
                "construct_over_training": cpu / base_cost["epoch_cpu_s"] / base_cost["epochs"],
                "predict_s_per_1000": _predict_seconds(fitted, task.test[0]),
                "val_nll": float(val_nll(fitted.predict)),
                "selected": fitted.selected,
                "grid": fitted.grid,
            }
            entry |= metrics(fitted, task)
        entry["peak_rss_mb"] = memory.peak_bytes / 2**20
        entry["extra_rss_mb"] = (memory.peak_bytes - memory.start_bytes) / 2**20
        results[name] = entry
        if log is not None:
            log(f"{task.name}/{name}: {cpu:.1f} CPU s")
    return {"data": task.info, "base_training": base_cost, "methods": results}


def _environment() -> dict:
    import importlib.metadata as md

    return {
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "versions": {p: md.version(p) for p in ("jax", "flax", "laplax")},
        "devices": [str(d) for d in jax.devices()],
    }


def run_piece(
    name: str, s: Settings, methods: list[str] | None = None, log=None, grid_aurocs=False
) -> dict:
    """One (task, seed): the task's data, its base network and every method, with the CPU and
    wall seconds of the whole piece (data included) and the load average at its end.

    JAX's in-memory compilation caches are emptied first, so that every piece compiles its
    programs as a fresh process would (a later seed of a task would otherwise reuse the
    executables of an earlier one, and its construction costs would leave compilation out).
    """
    jax.clear_caches()
    c0, w0 = time.process_time(), time.perf_counter()
    entry = run_task(make_task(name, s), s, methods, log, grid_aurocs)
    entry |= {
        "cpu_s": time.process_time() - c0,
        "wall_s": time.perf_counter() - w0,
        "load_average_end": list(os.getloadavg()),
        "grid_aurocs": grid_aurocs,
    }
    return entry


def _piece(pieces: Path | None, name: str, s: Settings, methods, log, grid_aurocs) -> dict:
    """:func:`run_piece`, read from ``pieces/{name}-seed{seed}.json`` where an earlier run left it
    with the same settings, grids and methods, and written there otherwise.

    Raises:
        ValueError: the stored piece was made with other settings, grids or methods.
    """
    path = None if pieces is None else pieces / f"{name}-seed{s.seed}.json"
    expect = {
        "settings": json.loads(json.dumps(_task_settings(name, s))),
        "grids": json.loads(json.dumps(_grids(s, name))),
        "methods_asked": methods,
    }
    if path is not None and path.exists():
        entry = json.loads(path.read_text())
        stored = {k: entry.get(k) for k in ("settings", "grids", "methods_asked")}
        if stored != expect:
            raise ValueError(
                f"{path} was made with other settings, grids or methods than this run's; "
                "delete it (or pass another --pieces folder) to run the piece again"
            )
        if log is not None:
            log(f"{name} seed {s.seed}: read from {path}")
        entry["reused"] = True
        return entry
    entry = run_piece(name, s, methods, log, grid_aurocs) | expect
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(entry, indent=1) + "\n")
        tmp.replace(path)
    entry["reused"] = False
    return entry


#: The settings each kind of task reads besides the shared ones (a piece is reused where these
#: and the shared ones are unchanged).
_TASK_FIELDS = {
    "digits": ("digits_train_per_class", "digits_steps", "digits_eval"),
    "transformer": ("vit_train", "vit_steps", "vit_eval"),
    "mlp": ("mujoco_pool", "mujoco_eval", "mlp_hidden", "mlp_steps"),
}
_SHARED_FIELDS = ("quick", "seed", "members", "ensemble_size", "lanczos_rank")


def _task_settings(name: str, s: Settings) -> dict:
    kind = "mlp" if name in OFFLINE_ENVS else name
    return {k: getattr(s, k) for k in _SHARED_FIELDS + _TASK_FIELDS[kind]}


def _grids(s: Settings, name: str | None = None) -> dict:
    """The grids of the run (``name``: of that task's methods only)."""
    methods = [m for m in GRIDS if name is None or name in OFFLINE_ENVS or m != "pnc_study"]
    return {m: GRIDS[m][1 if s.quick else 0] for m in methods}


def main(argv: list[str] | None = None) -> dict:
    parser = bench_parser(__doc__, out=True)
    parser.add_argument("--quick", action="store_true", help="small data, models and grids")
    parser.add_argument(
        "--seeds",
        nargs="+",
        type=int,
        default=None,
        help=f"seeds (default {' '.join(map(str, SEEDS))}; --quick: 0)",
    )
    parser.add_argument(
        "--tasks",
        nargs="+",
        choices=TASKS + OPTIONAL_TASKS,
        default=None,
        help=f"default: all ({' '.join(TASKS)}); --quick: {' '.join(QUICK_TASKS)}",
    )
    parser.add_argument("--methods", nargs="+", default=None, help="a subset, in this order")
    parser.add_argument(
        "--pieces",
        type=Path,
        default=None,
        help="folder of one JSON per (task, seed): finished pieces are read, not run again",
    )
    parser.add_argument(
        "--grid-aurocs",
        action="store_true",
        help="also score every grid point on the shifts (recorded as not_used_for_selection)",
    )
    parser.add_argument(
        "--probe",
        action="store_true",
        help="train only the classification tasks' base networks for each candidate ID task "
        "and report their ID validation accuracy and NLL (no method runs)",
    )
    args = parser.parse_args(argv)
    seeds = args.seeds or ([0] if args.quick else list(SEEDS))
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    c0, w0 = time.process_time(), time.perf_counter()
    if args.probe:
        report = {"seeds": seeds, "quick": args.quick, "probe": probe(seeds, args.quick, log)}
        report |= _environment()
        report |= {"cpu_s": time.process_time() - c0, "wall_s": time.perf_counter() - w0}
        return emit(report, args.out)
    from loguru import logger

    logger.disable("laplax")  # its per-call debug lines would go to stderr
    names = args.tasks or list(QUICK_TASKS if args.quick else TASKS)
    tasks = {name: {"seeds": {}} for name in names}
    for seed in seeds:  # every task of one seed before the next seed
        s = Settings.make(args.quick, seed)
        for name in names:
            piece = _piece(args.pieces, name, s, args.methods, log, args.grid_aurocs)
            tasks[name]["seeds"][str(seed)] = piece
    pieces = [p for t in tasks.values() for p in t["seeds"].values()]
    report = {
        "settings": dataclasses.asdict(Settings.make(args.quick)) | {"seed": None},
        "seeds": seeds,
        "grids": _grids(Settings.make(args.quick)),
        "fixed": FIXED,
        "selection": "lowest ID validation NLL over each method's grid; no shifted data used",
        "ood_score": {
            "classification": "entropy of the mixture (ID positive)",
            "regression": "total predictive variance, mean over target dimensions",
        },
        **_environment(),
        # the run: every piece's CPU and wall seconds (a resumed run adds those of the pieces
        # an earlier process finished), and this process's own
        "total_cpu_s": float(sum(p["cpu_s"] for p in pieces)),
        "total_wall_s": float(sum(p["wall_s"] for p in pieces)),
        "peak_rss_mb": float(max(m["peak_rss_mb"] for p in pieces for m in p["methods"].values())),
        "load_average_end": [p["load_average_end"] for p in pieces],
        "process_cpu_s": time.process_time() - c0,
        "process_wall_s": time.perf_counter() - w0,
        "pieces_reused": sum(p["reused"] for p in pieces),
        "tasks": tasks,
    }
    return emit(report, args.out)


if __name__ == "__main__":
    main()

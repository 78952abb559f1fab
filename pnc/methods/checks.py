"""The one check suite of the method contract, for the methods of both studies (as scikit-learn's
``check_estimator`` holds classifiers and regressors to one contract): :func:`check_method` runs
the common checks on every method, then the checks its family selects (:func:`checks_for`).

Each check takes the method, a setting (:class:`CheckSetting` for the regression family: small
data, a small network, the method's overrides; :class:`OODCheckSetting` for the OOD family: a tiny
network, tiny random images, the method's section) and what the checks before it left, and raises
:class:`ContractError` naming the method and what it broke.

Common checks (:data:`COMMON_CHECKS`, every method):

- ``declarations``: the method is the one its family's registry holds under its id; it declares a
  label and a dataclass ``config_cls`` whose fields include ``config_keys``; its family's own
  declarations hold (:meth:`pnc.methods.base.BaseMethod._declaration_problems`);
- ``configs``: the setting's overrides give a ``config_cls``; an unknown key is refused naming
  the valid ones; ``True`` for an integer key is refused naming the key, the value and ``int``;
  ``config_id`` is text (and read back exactly by ``parse_config_id`` where a family reads ids);
- ``determinism``: the family's outputs (regression: the predictive samples; OOD: the scores)
  given again from the same key are the same, bit for bit.

Regression checks (:data:`REGRESSION_CHECKS`): ``training`` (``training_spec`` is of the method's
``run_kind`` and ``train_spec`` trains it), ``posterior`` (a pytree of arrays; ``build_many`` one
per configuration), ``prediction`` (finite means, non-negative variances ``[S, N, D]``),
``input_width`` (inputs of the wrong width refused), ``parameter_samples`` (``[S, ...]`` weight
samples and a reference of the same structure).

OOD checks (:data:`OOD_CHECKS`): ``section`` (an unknown grid key refused naming the valid ones;
the training runs read are run ids; the study checks give lines of text), ``scores`` (a finite
confidence per image of every set, test predictions and probabilities, a selection record),
``stages`` (the workflow's three jobs give what one run gives, bit for bit).
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from pnc.core.classifier.model import Classifier
from pnc.core.classifier.trained import TrainedNetwork
from pnc.core.conv.resnet import ResNetConfig
from pnc.core.mlp import MLPConfig
from pnc.core.predictive import Predictive
from pnc.core.training import Collection, TrainConfig
from pnc.methods.base import BaseMethod
from pnc.methods.ood.posthoc import Context, SectionContext, mark_selected
from pnc.methods.ood.training_runs import BASE_RUN, parse_run
from pnc.methods.registry import Registry
from pnc.methods.regression.runs import TrainingRun
from pnc.methods.selection_rule import finite_or_none

Method = Any  # a method of either family (:class:`pnc.methods.base.BaseMethod`)


class ContractError(AssertionError):
    """A method breaks the contract; the message names the method and the check."""


@dataclasses.dataclass(frozen=True)
class CheckSetting:
    """What the checks run a method on.

    Attributes:
        overrides: the method's config overrides (keep ``n_samples``, members and training steps
            small: the checks train and sample it).
        n_train: rows of the 1-D toy regression ``y = sin(2 x) + noise`` trained on.
        model_config: the network.
        train_config: the training (its SWAG collection fits ``steps``).
        seed: the seed of the data and the keys.
    """

    overrides: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    n_train: int = 128
    model_config: MLPConfig = MLPConfig(out_dim=1, hidden=(24, 24))
    train_config: TrainConfig = TrainConfig(
        steps=200,
        batch_size=32,
        learning_rate=3e-3,
        collection=Collection(start_step=100, every=25, rank=4),
    )
    seed: int = 0


@dataclasses.dataclass(frozen=True)
class OODCheckSetting:
    """What the checks run a method on.

    Attributes:
        section: the method's config section (keep its samples, members and grids small).
        network: the tiny classifier every training run is an initialisation of.
        n_train, n_val, n_test, n_ood: images of the tiny seed's splits and of each OOD set.
        ood: the names of the OOD sets.
        epochs: the study's training epochs (what ``study_problems`` checks against).
        seed: the seed of the images, the networks and the method's keys.
    """

    section: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    network: ResNetConfig = ResNetConfig(num_classes=4, widths=(4, 8), blocks_per_stage=(1, 1))
    n_train: int = 48
    n_val: int = 24
    n_test: int = 16
    n_ood: int = 8
    ood: tuple[str, ...] = ("near", "far")
    epochs: int = 4
    seed: int = 0

    @property
    def overrides(self) -> Mapping[str, Any]:
        """The section, as the common checks read a setting's configuration."""
        return self.section


def _fail(method: Method, check: str, problem: str) -> ContractError:
    return ContractError(f"{method.family} method {method.id!r}, check {check}: {problem}")


def family_registry(method: BaseMethod) -> Registry:
    """The registry of ``method``'s family."""
    if method.family == "regression":
        from pnc.methods.regression import REGISTRY
    else:
        from pnc.methods.ood import REGISTRY
    return REGISTRY


def _int_keys(method: Method) -> list[str]:
    """The keys of ``method`` whose field holds an integer (``int`` or ``int | None``)."""
    hints = typing.get_type_hints(method.config_cls)
    out = []
    for name in method.config_keys:
        hint = hints[name]
        kinds = typing.get_args(hint) if typing.get_origin(hint) is not tuple else ()
        if int in (kinds or (hint,)):
            out.append(name)
    return out


def check_declarations(method: Method, setting: Any, state: dict) -> None:
    """The method its registry holds under its id; a label; its config class; its family's own
    declarations."""
    registry = family_registry(method)
    if method.id not in registry or registry.get(method.id) is not method:
        raise _fail(method, "declarations", "not the method registered under its id")
    if not isinstance(getattr(method, "label", None), str) or not method.label:
        raise _fail(method, "declarations", "declares no label")
    cls = method.config_cls
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise _fail(method, "declarations", f"config_cls {cls!r} is not a dataclass")
    if not set(method.config_keys) <= {f.name for f in dataclasses.fields(cls)}:
        raise _fail(method, "declarations", "config_keys are not fields of config_cls")
    problems = type(method)._declaration_problems()
    if problems:
        raise _fail(method, "declarations", "; ".join(problems))


def _refused(method: Method, overrides: dict, named: list[str]) -> str | None:
    """``None`` when ``overrides`` are refused with a message naming ``named``, else the problem."""
    try:
        method.make_config(overrides)
    except ValueError as err:
        missing = [n for n in named if n not in str(err)]
        return f"the message does not name {missing}: {err}" if missing else None
    return f"{overrides} was accepted"


def check_configs(method: Method, setting: Any, state: dict) -> None:
    """The setting's overrides give a config; an unknown key and ``True`` for an integer are
    refused by name; ``config_id`` is text, read back exactly where the family reads ids."""
    config = method.make_config(dict(setting.overrides))
    if not isinstance(config, method.config_cls):
        raise _fail(method, "configs", f"make_config gave a {type(config).__name__}")
    unknown = "no_such_key_" + method.id
    problem = _refused(method, {unknown: 1}, [unknown, *method.config_keys])
    if problem:
        raise _fail(method, "configs", f"an unknown key: {problem}")
    for name in _int_keys(method):
        problem = _refused(method, {name: True}, [name, "True", "int"])
        if problem:
            raise _fail(method, "configs", f"a bool for an integer: {problem}")
    text = method.config_id(config)
    if not isinstance(text, str) or not text:
        raise _fail(method, "configs", f"config_id gave {text!r}")
    if hasattr(method, "parse_config_id"):
        for overrides in ({}, dict(setting.overrides)):
            config = method.make_config(overrides)
            text = method.config_id(config)
            back = method.parse_config_id(text)
            if back != config or method.config_id(back) != text:
                raise _fail(method, "configs", f"parse_config_id({text!r}) is not {config!r}")
    state["config"] = config


def check_determinism(method: Method, setting: Any, state: dict) -> None:
    """The family's outputs given again from the same key (``state["again"]``) are
    ``state["outputs"]``, bit for bit."""
    first, again = state["outputs"], state["again"]()
    if set(again) != set(first) or not all(np.array_equal(first[k], again[k]) for k in first):
        raise _fail(method, "determinism", "the same key gave other outputs")


#: The checks every method of both families passes, first.
COMMON_CHECKS: tuple[Callable[[Method, Any, dict], None], ...] = (
    check_declarations,
    check_configs,
)


# ----------------------------------------------------------------------------- regression


def _data(setting: CheckSetting) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(setting.seed)
    x = rng.uniform(-2.0, 2.0, size=(setting.n_train, 1)).astype(np.float32)
    y = (np.sin(2.0 * x) + 0.1 * rng.normal(size=x.shape)).astype(np.float32)
    return x, y


def check_training(method: Method, setting: CheckSetting, state: dict) -> None:
    """The training spec is of the method's run kind, and the registry trains it."""
    from pnc.methods import regression as registry

    spec = method.training_spec(state["config"])
    if spec.kind != method.run_kind:
        raise _fail(method, "training", f"spec kind {spec.kind!r} is not {method.run_kind!r}")
    x, y = _data(setting)
    x_val, y_val = _data(dataclasses.replace(setting, seed=setting.seed + 1))
    run = registry.train_spec(
        spec,
        x,
        y,
        model_config=setting.model_config,
        train_config=setting.train_config,
        key=jax.random.key(setting.seed),
        validation=(x_val, y_val),
    )
    if not isinstance(run, TrainingRun) or run.spec != spec:
        raise _fail(method, "training", "train_spec did not give a TrainingRun of its spec")
    state["run"] = run
    state["x"] = run.model.x_norm.transform(jnp.asarray(x))
    state["y"] = run.model.y_norm.transform(jnp.asarray(y))


def check_posterior(method: Method, setting: CheckSetting, state: dict) -> None:
    """``build`` gives a pytree of arrays; ``build_many`` one posterior per configuration."""
    run, config, x, y = state["run"], state["config"], state["x"], state["y"]
    key = jax.random.key(setting.seed + 2)
    posterior = method.build(run, config, x, y, key=key)
    leaves = jax.tree.leaves(posterior)
    if not leaves or not all(isinstance(leaf, jax.Array) for leaf in leaves):
        raise _fail(method, "posterior", "the posterior's leaves are not all jax arrays")
    if jax.block_until_ready(posterior) is not posterior:
        raise _fail(method, "posterior", "block_until_ready does not return the posterior")
    configs = [config, config]
    groups = method.build_groups(configs)
    if sorted(i for group in groups for i in group) != [0, 1]:
        raise _fail(method, "posterior", f"build_groups {groups} is not a partition of [0, 1]")
    if len(method.build_many(run, configs, x, y, key=key)) != 2:
        raise _fail(method, "posterior", "build_many does not give one posterior per config")
    state["posterior"] = posterior


def check_prediction(method: Method, setting: CheckSetting, state: dict) -> None:
    """Finite means, non-negative variances ``[S, N, D]``."""
    posterior = state["posterior"]
    x = state["x"][:7]
    key = jax.random.key(setting.seed + 3)
    a = method.predict(posterior, x, key=key)
    if not isinstance(a, Predictive):
        raise _fail(method, "prediction", f"predict gave a {type(a).__name__}, not a Predictive")
    s, n, d = a.means.shape
    if (n, d) != (7, setting.model_config.out_dim) or a.variances.shape != a.means.shape:
        raise _fail(method, "prediction", f"shapes {a.means.shape}, {a.variances.shape}")
    if not (bool(jnp.all(jnp.isfinite(a.means))) and bool(jnp.all(a.variances >= 0))):
        raise _fail(method, "prediction", "non-finite means or negative variances")
    state["n_samples"] = s
    state["outputs"] = {"means": a.means, "variances": a.variances}

    def again() -> dict:
        b = method.predict(posterior, x, key=key)
        return {"means": b.means, "variances": b.variances}

    state["again"] = again


def check_input_width(method: Method, setting: CheckSetting, state: dict) -> None:
    """Inputs of the wrong width are refused."""
    x = state["x"]
    try:
        method.predict(state["posterior"], jnp.zeros((3, x.shape[1] + 1)), key=jax.random.key(0))
    except (ValueError, TypeError):
        return
    raise _fail(method, "input_width", "inputs of the wrong width were accepted")


def check_parameter_samples(method: Method, setting: CheckSetting, state: dict) -> None:
    """A method with weight samples: ``[S, ...]`` samples, a reference of the same structure."""
    if not getattr(method, "has_parameter_samples", False):
        return
    samples, reference = method.parameter_samples(
        state["posterior"], jax.random.key(setting.seed + 3)
    )
    if jax.tree.structure(samples) != jax.tree.structure(reference):
        raise _fail(method, "parameter_samples", "samples and reference differ in structure")
    pairs = zip(jax.tree.leaves(samples), jax.tree.leaves(reference), strict=True)
    if not all(s.shape[1:] == r.shape and s.shape[0] >= 1 for s, r in pairs):
        raise _fail(method, "parameter_samples", "samples are not [S, *reference shape]")


# ----------------------------------------------------------------------------- OOD


def tiny_context(setting: OODCheckSetting) -> Context:
    """The tiny seed: random uint8 images, labels cycling through the classes."""
    rng = np.random.default_rng(setting.seed)
    k = setting.network.num_classes

    def images(n):
        return rng.integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8)

    def labels(n):
        return np.arange(n) % k

    n_train, n_val, n_test = setting.n_train, setting.n_val, setting.n_test
    return Context(
        config=setting.network,
        seed=setting.seed,
        train_x=images(n_train),
        train_y=labels(n_train),
        val_x=images(n_val),
        val_y=labels(n_val),
        test_x=images(n_test),
        test_y=labels(n_test),
        ood={name: images(setting.n_ood) for name in setting.ood},
        batch_size=16,
    )


def tiny_runs(
    run_ids: list[str], setting: OODCheckSetting, swag_starts=()
) -> dict[str, TrainedNetwork]:
    """A freshly initialised network per run id; the base run with SWAG moments (4 collected
    epochs around its weights) from each of ``swag_starts``."""
    runs = {}
    for i, run_id in enumerate(run_ids):
        key = jax.random.fold_in(jax.random.key(setting.seed), i)
        variables = Classifier(setting.network).init(key, jnp.zeros((1, 32, 32, 3)), train=False)
        variables = {"params": variables["params"], "batch_stats": variables["batch_stats"]}
        swag = {}
        if run_id == BASE_RUN:
            flat, _ = ravel_pytree(variables["params"])
            dev = 0.01 * jax.random.normal(jax.random.fold_in(key, 1), (4, flat.size))
            for start in swag_starts:
                swag[str(start)] = {
                    "n": np.int32(4),
                    "mean": np.asarray(flat),
                    "sq_mean": np.asarray(flat**2 + 1e-4),
                    "dev": np.asarray(dev),
                }
        runs[run_id] = TrainedNetwork(variables, swag, {"run_id": run_id})
    return runs


def check_section(method: Method, setting: OODCheckSetting, state: dict) -> None:
    """An unknown grid key is refused by name; the runs it reads are run ids; its study checks
    give lines of text."""
    config, cls = state["config"], method.config_cls
    unknown = "no_such_key_" + method.id
    if cls.grid_keys:
        problem = _refused(method, {"grid": {unknown: [1]}}, [unknown, *cls.grid_keys])
        if problem:
            raise _fail(method, "section", f"an unknown grid key: {problem}")
    from pnc.methods.ood import run_kinds

    runs = method.runs_of(config)
    try:
        kinds = run_kinds(method.run_kinds)
        for run_id in runs:
            parse_run(run_id, kinds)
    except (TypeError, ValueError) as err:
        raise _fail(method, "section", f"runs_of gave {runs!r}, not run ids: {err}") from None
    if not runs:
        raise _fail(method, "section", "runs_of gave no run")
    study = SectionContext(setting.network, setting.epochs, setting.n_train)
    problems = method.study_problems(config, study)
    if not isinstance(problems, list) or not all(isinstance(p, str) for p in problems):
        raise _fail(method, "section", f"study_problems gave {problems!r}, not lines of text")
    state.update(runs=runs, study_problems=problems)


def check_scores(method: Method, setting: OODCheckSetting, state: dict) -> None:
    """Finite confidences of every set, test predictions and probabilities, a selection record."""
    ctx = tiny_context(setting)
    starts = setting.section.get("grid", {}).get("start_epoch", ()) if setting.section else ()
    runs = tiny_runs(state["runs"], setting, starts)
    outputs, rec = method.run(state["config"], ctx, runs)
    for name, x in ctx.eval_sets().items():
        conf = np.asarray(outputs.get(f"{name}_conf", np.zeros(0)))
        if conf.shape != (x.shape[0],) or not np.all(np.isfinite(conf)):
            raise _fail(method, "scores", f"{name}_conf is not a finite confidence per image")
    n, k = ctx.test_x.shape[0], ctx.config.num_classes
    pred = np.asarray(outputs.get("test_pred", np.zeros(0)))
    probs = np.asarray(outputs.get("test_probs", np.zeros(0)))
    if pred.shape != (n,) or probs.shape != (n, k):
        raise _fail(method, "scores", f"test_pred {pred.shape}, test_probs {probs.shape}")
    if not (np.all(probs >= 0) and np.allclose(probs.sum(-1), 1.0, atol=1e-4)):
        raise _fail(method, "scores", "test_probs rows are not probabilities")
    if not {"config", "temperature", "val_nll", "sweep"} <= set(rec):
        raise _fail(method, "scores", f"the record has no {'config, temperature, val_nll, sweep'}")
    if rec["sweep"] and sum(bool(r.get("selected")) for r in rec["sweep"]) != 1:
        raise _fail(method, "scores", "the sweep does not mark exactly one selected configuration")
    state.update(context=ctx, training_runs=runs, outputs=outputs, record=rec)
    state["again"] = lambda: method.run(state["config"], ctx, runs)[0]


def check_stages(method: Method, setting: OODCheckSetting, state: dict) -> None:
    """The sweep through JSON, the selection from it and the scores of the chosen configuration
    give the outputs and record of one run, bit for bit."""
    config, ctx, runs = state["config"], state["context"], state["training_runs"]
    try:
        sweep = json.loads(json.dumps(finite_or_none(method.validate(config, ctx, runs))))
        chosen = json.loads(json.dumps(mark_selected(sweep, method.choose(config, sweep))))
        outputs, rec = method.score_selected(config, ctx, runs, chosen)
    except (TypeError, ValueError, KeyError) as err:
        raise _fail(method, "stages", f"the jobs fail where one run does not: {err!r}") from err
    first = state["outputs"]
    if set(outputs) != set(first) or not all(np.array_equal(first[k], outputs[k]) for k in first):
        raise _fail(method, "stages", "the scores of the selected configuration differ")
    if finite_or_none(rec) != finite_or_none(state["record"]):
        raise _fail(method, "stages", "the record differs from the one of a single run")


#: The regression family's checks after the common ones, in order.
REGRESSION_CHECKS: tuple[Callable[[Method, CheckSetting, dict], None], ...] = (
    check_training,
    check_posterior,
    check_prediction,
    check_determinism,
    check_input_width,
    check_parameter_samples,
)

#: The OOD family's checks after the common ones, in order.
OOD_CHECKS: tuple[Callable[[Method, OODCheckSetting, dict], None], ...] = (
    check_section,
    check_scores,
    check_determinism,
    check_stages,
)


def checks_for(method: Method) -> tuple[Callable[[Method, Any, dict], None], ...]:
    """The checks :func:`check_method` runs on ``method``: :data:`COMMON_CHECKS`, then its
    family's (:data:`REGRESSION_CHECKS` or :data:`OOD_CHECKS`)."""
    family = REGRESSION_CHECKS if method.family == "regression" else OOD_CHECKS
    return COMMON_CHECKS + family


def check_method(method: Method, setting: CheckSetting | OODCheckSetting | None = None) -> dict:
    """Run the contract (:func:`checks_for`) on a registered method of either family.

    Args:
        method: the method (``pnc.methods.regression.get(id)``, ``pnc.methods.ood.get(id)``).
        setting: what to run it on (default: the family's setting with no overrides; methods
            whose defaults are paper-sized train and sample for a while, so pass small ones).

    Returns:
        What the checks produced (``config``, then the family's: ``run``, ``posterior``,
        ``n_samples``; ``runs``, ``outputs``, ``record``, ...).

    Raises:
        ContractError: the first check the method fails, naming it.
    """
    if setting is None:
        setting = CheckSetting() if method.family == "regression" else OODCheckSetting()
    state: dict = {}
    for check in checks_for(method):
        check(method, setting, state)
    return state

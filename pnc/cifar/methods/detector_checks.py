"""The CIFAR study's method contract as checks any registered method can be run through (the
sibling of :mod:`pnc.methods.checks` for the MuJoCo methods; scikit-learn's ``check_estimator``
is the model): :func:`check_method` and the checks it runs, :data:`CHECKS`.

Each check takes the method, a :class:`CifarCheckSetting` (a tiny network and tiny random images, the
method's section) and what the checks before it left, and raises :class:`CifarContractError`
naming the method and what it broke. The checks:

- ``declarations``: the method is the one registered under its id, with a label and a config
  section class (:class:`pnc.cifar.posthoc.MethodSection`) whose grid keys are not its fields;
- ``configs``: the setting's section gives a config; an unknown key and an unknown grid key are
  refused naming the valid ones; the training runs it reads are run ids read back exactly
  (:meth:`pnc.cifar.trained.RunSpec.parse`); its checks against the study give lines of text;
- ``scores``: :meth:`~pnc.cifar.posthoc.PosthocMethod.run` on the tiny seed gives a finite
  confidence per image of the test set and every OOD set, the test predictions and probabilities
  ``[N, K]`` (rows summing to one), and a selection record (``config``, ``temperature``,
  ``val_nll``, ``sweep`` with exactly one configuration selected when there is a sweep);
- ``determinism``: a second run gives the same outputs, bit for bit;
- ``stages``: the workflow's three jobs give what one run gives, bit for bit: the sweep of
  :meth:`~pnc.cifar.posthoc.PosthocMethod.validate` written as JSON and read back, the selection
  :meth:`~pnc.cifar.posthoc.PosthocMethod.choose` makes from it, the chosen configuration built
  again and scored (:meth:`~pnc.cifar.posthoc.PosthocMethod.score_selected`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from pnc.cifar.model import Classifier
from pnc.cifar.posthoc import (
    Context,
    MethodSection,
    PosthocMethod,
    SectionContext,
    finite_or_none,
    mark_selected,
)
from pnc.cifar.trained import RunSpec, TrainedNetwork
from pnc.conv.resnet import ResNetConfig


class CifarContractError(AssertionError):
    """A CIFAR method breaks the contract; the message names the method and the check."""


@dataclasses.dataclass(frozen=True)
class CifarCheckSetting:
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


def _fail(method: PosthocMethod, check: str, problem: str) -> CifarContractError:
    return CifarContractError(f"CIFAR method {method.id!r}, check {check}: {problem}")


def check_declarations(method: PosthocMethod, setting: CifarCheckSetting, state: dict) -> None:
    """Registered under its id; a label; a section class whose grid keys are not its fields."""
    from pnc.cifar import methods as registry

    if method.id not in registry.METHOD_IDS or registry.get(method.id) is not method:
        raise _fail(method, "declarations", "not the method registered under its id")
    if not isinstance(getattr(method, "label", None), str) or not method.label:
        raise _fail(method, "declarations", "declares no label")
    cls = method.config_cls
    if not (isinstance(cls, type) and issubclass(cls, MethodSection)):
        raise _fail(method, "declarations", f"config_cls {cls!r} is not a MethodSection")
    fields = {f.name for f in dataclasses.fields(cls)}
    if set(cls.grid_keys) & fields:
        raise _fail(
            method, "declarations", f"grid keys {sorted(set(cls.grid_keys) & fields)} are fields"
        )


def _refused(method: PosthocMethod, section: dict, named: list[str]) -> str | None:
    """``None`` when ``section`` is refused with a message naming ``named``, else the problem."""
    try:
        method.config(section)
    except ValueError as err:
        missing = [n for n in named if n not in str(err)]
        return f"the message does not name {missing}: {err}" if missing else None
    return f"the section {section} was accepted"


def check_configs(method: PosthocMethod, setting: CifarCheckSetting, state: dict) -> None:
    """The setting's section gives a config; unknown keys are refused by name; the runs it reads
    are run ids; its study checks give lines of text."""
    config = method.config(dict(setting.section))
    if not isinstance(config, method.config_cls):
        raise _fail(method, "configs", f"config gave a {type(config).__name__}")
    cls = method.config_cls
    settings = [f.name for f in dataclasses.fields(cls) if f.name != "grid"]
    unknown = "no_such_key_" + method.id
    problem = _refused(method, {unknown: 1}, [unknown, *settings])
    if problem is None and cls.grid_keys:
        problem = _refused(method, {"grid": {unknown: [1]}}, [unknown, *cls.grid_keys])
    if problem:
        raise _fail(method, "configs", f"an unknown key: {problem}")
    runs = method.runs_of(config)
    if not runs or any(RunSpec.parse(r).run_id != r for r in runs):
        raise _fail(method, "configs", f"runs_of gave {runs!r}, not run ids")
    study = SectionContext(setting.network, setting.epochs, setting.n_train)
    problems = method.study_problems(config, study)
    if not isinstance(problems, list) or not all(isinstance(p, str) for p in problems):
        raise _fail(method, "configs", f"study_problems gave {problems!r}, not lines of text")
    state.update(config=config, runs=runs, study_problems=problems)


def tiny_context(setting: CifarCheckSetting) -> Context:
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
    run_ids: list[str], setting: CifarCheckSetting, swag_starts=()
) -> dict[str, TrainedNetwork]:
    """A freshly initialised network per run id; the base run with SWAG moments (4 collected
    epochs around its weights) from each of ``swag_starts``."""
    runs = {}
    for i, run_id in enumerate(run_ids):
        key = jax.random.fold_in(jax.random.key(setting.seed), i)
        variables = Classifier(setting.network).init(key, jnp.zeros((1, 32, 32, 3)), train=False)
        variables = {"params": variables["params"], "batch_stats": variables["batch_stats"]}
        swag = {}
        if run_id == RunSpec("base").run_id:
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


def check_scores(method: PosthocMethod, setting: CifarCheckSetting, state: dict) -> None:
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


def check_determinism(method: PosthocMethod, setting: CifarCheckSetting, state: dict) -> None:
    """The same seed, runs and config give the same outputs, bit for bit."""
    again, _ = method.run(state["config"], state["context"], state["training_runs"])
    first = state["outputs"]
    if set(again) != set(first) or not all(np.array_equal(first[k], again[k]) for k in first):
        raise _fail(method, "determinism", "a second run gave other outputs")


def check_stages(method: PosthocMethod, setting: CifarCheckSetting, state: dict) -> None:
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


#: The checks :func:`check_method` runs, in order (each may use what the ones before it left).
CHECKS: tuple[Callable[[PosthocMethod, CifarCheckSetting, dict], None], ...] = (
    check_declarations,
    check_configs,
    check_scores,
    check_determinism,
    check_stages,
)


def check_method(method: PosthocMethod | str, setting: CifarCheckSetting | None = None) -> dict:
    """Run the CIFAR method contract (:data:`CHECKS`) on a registered method.

    Args:
        method: the method or its id.
        setting: what to run it on (default: :class:`CifarCheckSetting` with the empty section; pass
            small samples and grids for the methods whose defaults are paper-sized).

    Returns:
        What the checks produced (``config``, ``runs``, ``outputs``, ``record``, ...).

    Raises:
        CifarContractError: the first check the method fails, naming it.
        ValueError: ``method`` is an id that is not registered.
    """
    from pnc.cifar import methods as registry

    method = registry.get(method) if isinstance(method, str) else method
    setting = setting or CifarCheckSetting()
    state: dict = {}
    for check in CHECKS:
        check(method, setting, state)
    return state

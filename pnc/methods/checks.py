"""The method contract as checks any method can be run through (as scikit-learn's
``check_estimator`` runs its estimator contract): :func:`check_method` and the checks it runs,
:data:`CHECKS`.

Each check takes the method, a :class:`CheckSetting` (small data, a small network, the method's
overrides) and the outputs of the steps before it, and raises :class:`ContractError` naming the
method and what it broke. The checks:

- ``declarations``: the method is registered under its id, declares the attributes of
  :class:`pnc.methods.contract.MethodBase`, and ``config_keys`` are fields of ``config_cls``;
- ``configs``: ``make_config`` refuses an unknown key naming the valid ones, and ``config_id`` is
  read back exactly by ``parse_config_id`` (the default configuration and the setting's);
- ``training``: ``training_spec`` is of the method's ``run_kind``, and ``train_spec`` trains it;
- ``posterior``: ``build`` gives a pytree whose leaves are arrays, and ``build_many`` a posterior
  per configuration in groups that partition them;
- ``prediction``: ``predict`` gives finite means and non-negative variances ``[S, N, D]``, the same
  samples for the same key, and refuses inputs of the wrong width;
- ``parameter_samples``: a method with weight samples gives ``[S, ...]`` samples and a reference
  network of the same structure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pnc.methods.contract import STYLE_KEYS, Method
from pnc.methods.runs import TrainingRun
from pnc.mlp import MLPConfig
from pnc.predictive import Predictive
from pnc.training import Collection, TrainConfig


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


def _fail(method: Method, check: str, problem: str) -> ContractError:
    return ContractError(f"method {method.id!r}, check {check}: {problem}")


def check_declarations(method: Method, setting: CheckSetting, state: dict) -> None:
    """Registered under its id; the declared attributes; ``config_keys`` among the fields."""
    from pnc import methods as registry

    if method.id not in registry.METHOD_IDS or registry.get(method.id) is not method:
        raise _fail(method, "declarations", "not the method registered under its id")
    for name in ("run_kind", "label", "short_label", "row", "style"):
        if not hasattr(method, name):
            raise _fail(method, "declarations", f"declares no {name}")
    if set(method.style) != set(STYLE_KEYS):
        raise _fail(method, "declarations", f"style must set exactly {', '.join(STYLE_KEYS)}")
    fields = {f.name for f in dataclasses.fields(method.config_cls)}
    if not set(method.config_keys) <= fields:
        raise _fail(method, "declarations", "config_keys are not fields of config_cls")


def check_configs(method: Method, setting: CheckSetting, state: dict) -> None:
    """Unknown keys refused by name; ``parse_config_id`` inverts ``config_id``."""
    unknown = "no_such_key_" + method.id
    try:
        method.make_config({unknown: 1})
    except ValueError as err:
        if unknown not in str(err) or not all(k in str(err) for k in method.config_keys):
            raise _fail(
                method, "configs", f"the unknown-key message does not name it: {err}"
            ) from err
    else:
        raise _fail(method, "configs", f"make_config accepted the unknown key {unknown!r}")
    for overrides in ({}, dict(setting.overrides)):
        config = method.make_config(overrides)
        text = method.config_id(config)
        back = method.parse_config_id(text)
        if back != config or method.config_id(back) != text:
            raise _fail(method, "configs", f"parse_config_id({text!r}) is not {config!r}")
    state["config"] = config


def _data(setting: CheckSetting) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(setting.seed)
    x = rng.uniform(-2.0, 2.0, size=(setting.n_train, 1)).astype(np.float32)
    y = (np.sin(2.0 * x) + 0.1 * rng.normal(size=x.shape)).astype(np.float32)
    return x, y


def check_training(method: Method, setting: CheckSetting, state: dict) -> None:
    """The training spec is of the method's run kind, and the registry trains it."""
    from pnc import methods as registry

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
    """Finite means, non-negative variances ``[S, N, D]``; the same key gives the same samples;
    inputs of the wrong width are refused."""
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
    b = method.predict(posterior, x, key=key)
    if not (np.array_equal(a.means, b.means) and np.array_equal(a.variances, b.variances)):
        raise _fail(method, "prediction", "the same key gave different samples")
    try:
        method.predict(posterior, jnp.zeros((3, x.shape[1] + 1)), key=key)
    except (ValueError, TypeError):
        pass
    else:
        raise _fail(method, "prediction", "inputs of the wrong width were accepted")
    state["n_samples"] = s


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


#: The checks :func:`check_method` runs, in order (each may use what the ones before it left).
CHECKS: tuple[Callable[[Method, CheckSetting, dict], None], ...] = (
    check_declarations,
    check_configs,
    check_training,
    check_posterior,
    check_prediction,
    check_parameter_samples,
)


def check_method(method: Method | str, setting: CheckSetting | None = None) -> dict:
    """Run the method contract (:data:`CHECKS`) on a registered method.

    Args:
        method: the method or its id.
        setting: what to run it on (default: :class:`CheckSetting` with no overrides; methods
            whose defaults are paper-sized train and sample for a while, so pass small ones).

    Returns:
        What the checks produced (``config``, ``run``, ``posterior``, ``n_samples``).

    Raises:
        ContractError: the first check the method fails, naming it.
        pnc.methods.UnknownMethodError: ``method`` is an id that is not registered.
    """
    from pnc import methods as registry

    method = registry.get(method) if isinstance(method, str) else method
    setting = setting or CheckSetting()
    state: dict = {}
    for check in CHECKS:
        check(method, setting, state)
    return state

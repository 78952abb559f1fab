"""Config checks across keys of the MuJoCo study: :func:`cross_key_problems` checks a study
config (pools, log-variance bounds, and each method's configurations against the study, by the
method's own :meth:`~pnc.methods.regression.contract.MethodBase.study_problems`) and returns every problem as
one line; :func:`run_methods` reads which methods run. The schema checks both studies share are
:mod:`pnc.runtime.config_schema`.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any


def overlay(defaults: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` merged into a copy of ``defaults`` as Snakemake merges a ``--configfile`` into
    the Snakefile's ``configfile:`` (``snakemake.utils.update_config``): mappings merged key by key
    (the defaults' keys keep their order, new keys follow), any other value replaced."""
    out = copy.deepcopy(dict(defaults))
    for key, value in config.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = overlay(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def ordered_like(config: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with every mapping's keys in ``defaults``' order (keys the defaults lack follow,
    in their order). Snakemake starts the config from the ``--configfile`` overlay and merges the
    defaults into it, so a merged mapping lists the overlay's keys first; a method's grid is a cross
    product in key order and the methods' order orders the tables, so both must be the defaults'."""
    if not isinstance(defaults, Mapping):
        return dict(config)
    keys = [k for k in defaults if k in config] + [k for k in config if k not in defaults]
    return {
        k: ordered_like(config[k], defaults.get(k)) if isinstance(config[k], Mapping) else config[k]
        for k in keys
    }


def run_methods(config: Mapping[str, Any]) -> dict[str, Any]:
    """The ``methods`` entries of the methods that run: config ``run_methods`` (default: every
    method of ``methods``, in its order), in that order.

    config.yaml names every method; a config given with ``--configfile`` is merged into it key by
    key, so its ``methods`` entries change only what they name and ``run_methods`` says which run.

    Raises:
        ValueError: ``run_methods`` names a method without an entry in ``methods`` (named, with
            the entries).
    """
    methods = config["methods"]
    names = list(config.get("run_methods") or methods)
    missing = [m for m in names if m not in methods]
    if missing:
        raise ValueError(
            f"run_methods names {missing}, which have no entry in `methods` (entries: "
            f"{', '.join(methods)})"
        )
    return {m: methods[m] for m in names}


# ----------------------------------------------------------------------------- across keys


@dataclasses.dataclass(frozen=True)
class StudyContext:
    """What a method's cross-key config check may read about the study (:func:`study_context`).

    Attributes:
        hidden: ``model.hidden``.
        envs: the study's environments.
        train: the ``train`` mapping (steps, collection, ...).
        max_train_rows: train rows of the ID pool (``transitions_per_regime`` minus validation).
        pool_text: how ``max_train_rows`` comes from the config, for messages.
        input_dims: per environment, its observation and action sizes (the network's input).
    """

    hidden: tuple[int, ...]
    envs: tuple[str, ...]
    train: Mapping[str, Any]
    max_train_rows: int
    pool_text: str
    input_dims: Mapping[str, tuple[int, int]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Problems:
    """Config problems: ``errors`` fail the study, ``warnings`` are logged."""

    errors: list[str] = dataclasses.field(default_factory=list)
    warnings: list[str] = dataclasses.field(default_factory=list)


GPU_MEASUREMENT = (
    "device: gpu makes the MuJoCo study slower, not faster: its networks (small MLPs, batch 64)"
    " are launch-bound on a GPU. Measured on one NVIDIA H200 machine (16 cores), config/quick.yaml"
    " with device: gpu and with device: cpu side by side (6 cores each): per job, training took"
    " 2.26 times and evaluation 3.84 times the CPU's wall time (HalfCheetah's base run: train_s"
    " 35.4 on the GPU, 7.9 on the CPU); the CPU run finished its DAG in 220 s, the GPU run had"
    " not finished after 330 s. The study belongs on CPUs: use device: cpu (the default), or set"
    " device_warning: false to keep the GPU without this message (docs/workflow.md)."
)
"""The warning :func:`device_warnings` gives for ``device: gpu``: the measurement behind it and
how to silence it."""


def device_warnings(config: Mapping[str, Any]) -> list[str]:
    """``[GPU_MEASUREMENT]`` when the config computes on a GPU (``device: gpu``) and does not
    silence it (``device_warning: false``); else none."""
    if config.get("device", "cpu") == "gpu" and config.get("device_warning", True):
        return [GPU_MEASUREMENT]
    return []


def _split_config(data: Mapping[str, Any]):
    from pnc.studies.mujoco.data import SplitConfig

    return SplitConfig(
        transitions_per_regime=int(data["transitions_per_regime"]),
        val_fraction=float(data["val_fraction"]),
        id_transitions=data.get("id_transitions"),
        target=data["target"],
    )


def study_context(config: Mapping[str, Any]) -> StudyContext:
    """The :class:`StudyContext` of a schema-validated MuJoCo study config.

    Raises:
        ValueError: ``data`` describes no valid split (:class:`pnc.studies.mujoco.data.SplitConfig`).
    """
    from pnc.studies.mujoco.data import env_spec

    pool = _split_config(config["data"])
    envs = tuple(str(e) for e in config["envs"])
    specs = {env: env_spec(env) for env in envs}
    return StudyContext(
        hidden=tuple(int(h) for h in config["model"]["hidden"]),
        envs=envs,
        train=config["train"],
        max_train_rows=pool.transitions_per_regime - pool.n_val,
        pool_text=(
            f"the train rows: data.transitions_per_regime = {pool.transitions_per_regime} minus "
            f"data.val_fraction = {pool.val_fraction} of it"
        ),
        input_dims={env: (spec.obs_dim, spec.act_dim) for env, spec in specs.items()},
    )


def data_problems(config: Mapping[str, Any]) -> list[str]:
    """The ``data`` and ``model`` keys against each other: the Far and offline pools large enough
    for the splits, the log-variance bounds ordered (Minari sizes are checked by the split job)."""
    data, model = config["data"], config["model"]
    try:
        pool = _split_config(data)
    except ValueError as err:
        return [f"data: {err}"]
    problems = []
    far = int(data["far_transitions"])
    if far < pool.transitions_per_regime:
        problems.append(
            f"data.far_transitions = {far} is smaller than"
            f" data.transitions_per_regime = {pool.transitions_per_regime} (the Far pool)"
        )
    if data["source"] == "offline":
        need = pool.transitions_per_regime + pool.n_id
        have = int(data["offline_transitions"])
        if have < need:
            problems.append(
                f"data.offline_transitions = {have} cannot hold the ID pool"
                f" (data.transitions_per_regime = {pool.transitions_per_regime}) and the"
                f" episode-disjoint ID evaluation rows (data.id_transitions = {pool.n_id}):"
                f" it needs more than {need} (one episode is cut at the pool's end)"
            )
    low, high = model["min_logvar"], model["max_logvar"]
    if low >= high:
        problems.append(f"model.min_logvar = {low} must be < model.max_logvar = {high}")
    return problems


def base_steps_problems(
    config: Mapping[str, Any], points: Mapping[str, Sequence[Any]]
) -> list[str]:
    """P&C's own base run (``methods.pnc.base_steps``, :mod:`pnc.studies.mujoco.grid`) against
    ``train.steps``: equal steps would train a second copy of the shared base run."""
    steps = int(config["train"]["steps"])
    problems = []
    for method_id, method_points in points.items():
        for point in method_points[:1]:
            own = dict(point.spec.options).get("steps") if point.spec.kind == "base" else None
            if own is not None and int(own) == steps:
                problems.append(
                    f"methods.{method_id}.base_steps = {own} equals train.steps = {steps}: "
                    "leave it null to build on the shared base run"
                )
    return problems


def cross_key_problems(config: Mapping[str, Any], points: Mapping[str, Sequence[Any]]) -> Problems:
    """Every problem across keys of a schema-validated MuJoCo study config.

    :func:`data_problems`, then each method's own check of its configurations against the study
    (:meth:`pnc.methods.regression.contract.MethodBase.study_problems`: P&C's layers, ranks and
    calibration size, SWAG's and Subspace's snapshots).

    Args:
        config: the config with the schema's defaults filled in.
        points: the expanded grid, ``{method id: [GridPoint, ...]}`` (:func:`pnc.studies.mujoco.grid.
            expand_all`).

    Returns:
        The errors (one line each, without the ``invalid config:`` prefix) and warnings.
    """
    from pnc.methods import regression as registry

    out = Problems(errors=data_problems(config), warnings=device_warnings(config))
    if out.errors:
        return out
    context = study_context(config)
    out.errors.extend(base_steps_problems(config, points))
    pool = _split_config(config["data"]).transitions_per_regime
    id_pool = dataclasses.replace(
        context,
        max_train_rows=pool,
        pool_text=f"the ID pool, calibration_pool: id_pool; data.transitions_per_regime = {pool}",
    )
    for method_id, method_points in points.items():
        method = registry.get(method_id)
        for point in method_points:
            where = id_pool if getattr(point, "calibration_pool", "train") == "id_pool" else context
            errors, warnings = method.study_problems(point.config, where)
            out.errors.extend(e for e in errors if e not in out.errors)
            out.warnings.extend(w for w in warnings if w not in out.warnings)
    return out

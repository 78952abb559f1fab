"""The OOD family's contract (the CIFAR study's post-hoc methods, on the base contract
:class:`pnc.methods.base.BaseMethod`), and what they share: the seed's data
(:class:`Context`), a method's config section (:class:`MethodSection`), the study it is checked
against (:class:`SectionContext`), the base class of a method (:class:`PosthocMethod`), and
selection (temperature per configuration, :func:`select_ensemble`; P&C's
:func:`coordinate_descent`). The methods themselves are classes in :mod:`pnc.methods.ood`, one
module per method (the single-model scores share one), registered there.

Selection (paper, Appendix D.2): per method, on the 5,000-image ID validation split only; every
configuration of an ensemble gets its own temperature ``T`` (:func:`pnc.core.conv.fit_temperature`,
golden-section search on ``[1e-2, 1e2]``) and is scored by the validation NLL of its mixture at
that temperature; the lowest wins. P&C is selected by coordinate descent in the order of the
paper's table: the block (with ``sigma`` and ``bootstrap_frac`` at the first values of their
grids), then ``sigma`` at the chosen block, then ``bootstrap_frac``. Every tried configuration is kept (the sweep table).

Outputs of a method (``scores.npz``): for the ID test set and every OOD dataset a confidence per
image ``<set>_conf`` (larger = more ID; an ensemble's is minus the entropy of its
temperature-scaled mixture); for the test set the predicted class ``test_pred`` and the
predictive probabilities ``test_probs`` ``[N, K]`` after the method's temperature (the
calibration metrics); for the single-model scores also ``<set>_entropy_conf``, minus the entropy
of the base network's softmax (the authors' FPR95 convention for MSP, Energy and Mahalanobis);
plus the selection record (:func:`record`).

A method's entry (``methods.<id>`` of ``config/cifar.yaml``: ``fixed`` settings and a ``grid``, as
in the MuJoCo study, :mod:`pnc.methods.entry`) becomes a frozen dataclass,
a :class:`MethodSection` (``PnCSection``, ``SWAGSection``, ...; named apart from the MuJoCo
methods' configs, :mod:`pnc.methods.regression`, which hold one configuration each) by
:meth:`PosthocMethod.make_config`: its fixed settings are the fields, whose defaults are stated
there once (the schema lists the fields and repeats no default) and whose values the strict
:func:`pnc.methods.coerce.coerce` converts, and its ``grid`` lists the values swept in selection;
an unknown key fails naming the valid ones.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import types
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from pnc.core.classifier.model import features_and_logits
from pnc.core.classifier.trained import TrainedNetwork
from pnc.core.conv.classification import (
    entropy,
    fit_temperature,
    mixture_nll,
    mixture_probabilities,
)
from pnc.core.conv.resnet import ResNetConfig
from pnc.core.keys import derive_key
from pnc.methods.base import BaseMethod
from pnc.methods.configs import field_names, make_config
from pnc.methods.entry import point_id
from pnc.methods.ood.training_runs import BASE_RUN, RunKind
from pnc.methods.selection_rule import lowest

log = logging.getLogger(__name__)

#: The training runs a method reads: run id -> run.
Runs = Mapping[str, TrainedNetwork]


@dataclasses.dataclass
class Context:
    """One seed's data: the train/val split of the CIFAR-10 training images, test, OOD."""

    config: ResNetConfig
    seed: int
    train_x: np.ndarray
    train_y: np.ndarray
    val_x: np.ndarray
    val_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    ood: dict[str, np.ndarray]
    batch_size: int = 500

    def eval_sets(self) -> dict[str, np.ndarray]:
        return {"test": self.test_x, **self.ood}


def method_key(ctx: Context, method: str, *parts) -> jax.Array:
    """The key of ``method``'s draws on ``ctx``'s seed, derived from ``parts`` (a configuration's
    values, a sample index)."""
    return derive_key("cifar", ctx.seed, method, *parts)


# ----------------------------------------------------------------------------- ensembles


def ensemble_outputs(logits_of: Callable, ctx: Context, temperature: float) -> dict:
    out = {}
    for name, x in ctx.eval_sets().items():
        pbar = mixture_probabilities(logits_of(x), temperature)
        out[f"{name}_conf"] = -np.asarray(entropy(pbar))
        if name == "test":
            out["test_pred"] = np.asarray(jnp.argmax(pbar, axis=-1))
            out["test_probs"] = np.asarray(pbar, np.float32)
    return out


def select_ensemble(
    candidates: list[tuple[dict, Callable]], ctx: Context, method: str
) -> tuple[dict, list[dict], Callable, float]:
    """Fit ``T`` and the validation NLL of every candidate ``(config, logits_of)``; return the
    best record (:func:`lowest_nll`), the sweep with ``selected`` marked, the best's
    ``logits_of`` and its temperature."""
    sweep = []
    for cfg, logits_of in candidates:
        rec = validate_candidate(cfg, logits_of, ctx)
        sweep.append(rec)
        log.info("%s %s: T %.3f val NLL %.4f", method, cfg, rec["temperature"], rec["val_nll"])
    index = lowest_nll(sweep)
    sweep = mark_selected(sweep, index)
    return sweep[index], sweep, candidates[index][1], sweep[index]["temperature"]


def validate_candidate(cfg: dict, logits_of: Callable, ctx: Context) -> dict:
    val_logits = jnp.asarray(logits_of(ctx.val_x))
    t = fit_temperature(val_logits, ctx.val_y)
    nll = float(mixture_nll(val_logits, ctx.val_y, t))
    acc = float(
        np.mean(np.asarray(jnp.argmax(mixture_probabilities(val_logits, t), -1)) == ctx.val_y)
    )
    if not math.isfinite(nll):
        nll = float("inf")
    return {"config": cfg, "temperature": t, "val_nll": nll, "val_accuracy": acc}


# ----------------------------------------------------------------------------- configs


@dataclasses.dataclass(frozen=True)
class SectionContext:
    """What a method's section is checked against before any job runs
    (:meth:`MethodSection.study_problems`).

    Attributes:
        network: the network the study trains.
        epochs: its training epochs.
        n_train: the training images of the generated tiny dataset (``None``: the real data,
            whose size is not checked here).
    """

    network: ResNetConfig
    epochs: int
    n_train: int | None = None


@dataclasses.dataclass(frozen=True)
class MethodSection:
    """A method's config section: its fixed settings (the fields of a subclass, with their
    defaults) and ``grid``, the lists of values selection sweeps (keys :attr:`grid_keys`), kept as
    given (they name the configurations in ``selection.json`` and derive their keys)."""

    grid_keys: ClassVar[tuple[str, ...]] = ()

    grid: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_section(cls, section: Mapping | None, method: str = "") -> MethodSection:
        """The config of ``section`` (``{setting: value, ..., "grid": {key: [values]}}``).

        Raises:
            ValueError: an unknown setting or grid key (the message lists the valid ones), or a
                value that is not of the setting's type.
        """
        section = dict(section or {})
        where = f"methods.{method}" if method else cls.__name__
        names = [f.name for f in dataclasses.fields(cls) if f.name != "grid"]
        allowed = names + (["grid"] if cls.grid_keys else [])
        unknown = [k for k in section if k not in allowed]
        if unknown:
            raise ValueError(
                f"{where}: unknown key(s) {', '.join(map(str, unknown))}; valid keys: "
                + (", ".join(allowed) or "none")
            )
        grid = dict(section.pop("grid", None) or {})
        unknown = [k for k in grid if k not in cls.grid_keys]
        if unknown:
            raise ValueError(
                f"{where}: unknown grid key(s) {', '.join(map(str, unknown))}; valid grid keys: "
                + ", ".join(cls.grid_keys)
            )
        fixed = {"grid": types.MappingProxyType(grid)}
        return make_config(cls, section, keys=tuple(names), fixed=fixed, where=where)

    def study_problems(self, study: SectionContext, method: str) -> list[str]:
        """This section checked against the study it runs in (``study``), one line per problem
        naming the key ``methods.<method>....`` (default: none)."""
        return []

    def values(self, name: str) -> list:
        """The values of ``grid.<name>``, as given."""
        values = self.grid.get(name)
        if not values:
            raise ValueError(f"methods: grid.{name} must list at least one value")
        return list(values)


def _base_features(ctx: Context, variables, names=("train", "val", "eval")) -> dict:
    out = {}
    sets = {"train": ctx.train_x, "val": ctx.val_x, **ctx.eval_sets()}
    for name, x in sets.items():
        if name in names or (name not in ("train", "val") and "eval" in names):
            out[name] = features_and_logits(variables, x, ctx.config, ctx.batch_size)
    return out


def single_score(ctx: Context, variables, score: Callable, logits_override=None) -> dict:
    """Outputs of a single-model score: ``score(features, logits)`` per image; the predictions and
    probabilities (no temperature: ``T = 1``) are those of the base logits, or of
    ``logits_override(features)`` (ReAct's clipped features)."""
    feats = _base_features(ctx, variables, ("eval",))
    out = {}
    for name, (f, logits) in feats.items():
        out[f"{name}_conf"] = np.asarray(score(f, logits))
        out[f"{name}_entropy_conf"] = -np.asarray(entropy(jax.nn.softmax(jnp.asarray(logits), -1)))
        if name == "test":
            used = logits if logits_override is None else logits_override(f)
            out["test_pred"] = np.argmax(used, -1)
            out["test_probs"] = np.asarray(jax.nn.softmax(jnp.asarray(used), -1), np.float32)
    return out


def record(**kw) -> dict:
    return {"config": {}, "temperature": None, "val_nll": None, "sweep": [], **kw}


def coordinate_descent(grids: Mapping[str, list], score: Callable[[dict], float]) -> dict:
    """The point chosen by one pass of coordinate descent: start at the first value of every
    grid, then, coordinate by coordinate in the order of ``grids``, take the value with the
    lowest ``score`` (the first on ties) with the others held. ``score`` may be called again on a
    point it has seen (the caller caches).

    Raises:
        pnc.methods.selection_rule.NoFiniteCandidateError: every point along a coordinate has a
            non-finite score (named by their ids).
    """
    point = {name: values[0] for name, values in grids.items()}
    for name, values in grids.items():
        points = [{**point, name: value} for value in values]
        point[name] = values[lowest([score(p) for p in points], [point_id(p) for p in points])]
    return point


# ----------------------------------------------------------------------------- the contract


class PosthocMethod(BaseMethod):
    """The OOD family's contract (the CIFAR study) on :class:`pnc.methods.base.BaseMethod`: a
    subclass per method, one instance in the registry (:mod:`pnc.methods.ood`).

    Class attributes (declared by every method, checked when its class is defined):
        id: the method id (``methods.<id>`` in the config, ``--method`` of its jobs).
        label: its name in the tables.
        config_cls: its config section's dataclass (a :class:`MethodSection`).
        run_kinds: the kinds of training run of its own that it reads
            (:class:`pnc.methods.ood.training_runs.RunKind`; default none: the base run only).
        authors_entropy_fpr95: whether the authors' Table 2 reports the base network's entropy
            FPR95 as this method's (their convention for MSP, Energy and Mahalanobis; the tables'
            ``fpr95: authors`` option follows it).

    A method is run in three steps, each a job of the workflow: :meth:`validate` builds the
    configurations it selects from and scores them on the validation split (the sweep),
    :meth:`choose` picks one from the sweep (the selection stage), and :meth:`score` builds the
    chosen one again and gives the confidences of every evaluation set. :meth:`run` does the three
    in one process. A method with a grid lists its configurations in :meth:`candidates` (the
    default :meth:`validate`, :meth:`choose` and :meth:`score` then select the lowest validation
    NLL at each configuration's own temperature and read the ensemble's mixture); a method
    without selection (a single-model score) overrides :meth:`score` only. Where it differs from
    the defaults it also overrides :meth:`runs_of` (the training runs it reads, declaring in
    :attr:`run_kinds` the kinds of run of its own; default: the base run) and
    :meth:`study_problems` (its section checked against the study; default: none).
    """

    family: ClassVar[str] = "OOD"
    config_cls: ClassVar[type[MethodSection]]
    run_kinds: ClassVar[tuple[RunKind, ...]] = ()
    authors_entropy_fpr95: ClassVar[bool] = False

    @classmethod
    def _declaration_problems(cls) -> list[str]:
        if not issubclass(cls.config_cls, MethodSection):
            return [f"config_cls {cls.config_cls!r} is not a MethodSection"]
        if set(cls.config_cls.grid_keys) & set(field_names(cls.config_cls)):
            return [f"grid keys {list(cls.config_cls.grid_keys)} must not be fields"]
        return []

    @property
    def config_keys(self) -> tuple[str, ...]:
        """The settings of its section (the fields of :attr:`config_cls` but ``grid``)."""
        return tuple(name for name in field_names(self.config_cls) if name != "grid")

    @property
    def config_where(self) -> str:
        return f"methods.{self.id}"

    def make_config(self, overrides: Mapping | None = None) -> MethodSection:
        """Its config from its section, ``grid`` included (:meth:`MethodSection.from_section`)."""
        return self.config_cls.from_section(overrides, self.id)

    def runs_of(self, config: MethodSection) -> list[str]:
        """The ids of the training runs it reads (:mod:`pnc.methods.ood.training_runs`)."""
        return [BASE_RUN]

    def study_problems(self, config: MethodSection, study: SectionContext) -> list[str]:
        """``config`` checked against the study it runs in (``study``), one line per problem
        naming the key ``methods.<id>....`` (default: none)."""
        return []

    @property
    def selects(self) -> bool:
        """Whether it selects among configurations (implements :meth:`candidates` or
        :meth:`validate`): the workflow runs its sweep and selection jobs only then; a method
        that does not is scored directly (its sweep is empty)."""
        own = type(self)
        return (
            own.candidates is not PosthocMethod.candidates
            or own.validate is not PosthocMethod.validate
        )

    def candidates(
        self, config: MethodSection, ctx: Context, runs: Runs
    ) -> list[tuple[dict, Callable[[], Callable]]]:
        """The configurations it selects from, in the sweep's order: ``(name, build)``, ``name``
        the configuration's values (``selection.json``), ``build()`` its ``logits_of(x)``
        (``[S, N, K]`` member logits of uint8 images ``x``), built only when called (default:
        none, a method without selection)."""
        return []

    def validate(self, config: MethodSection, ctx: Context, runs: Runs) -> list[dict]:
        """The sweep: every configuration of :meth:`candidates` built and scored on the
        validation split (:func:`validate_candidate`: its temperature, validation NLL and
        accuracy), in order."""
        sweep = []
        for name, build in self.candidates(config, ctx, runs):
            rec = validate_candidate(name, build(), ctx)
            log.info(
                "%s %s: T %.3f val NLL %.4f", self.id, name, rec["temperature"], rec["val_nll"]
            )
            sweep.append(rec)
        return sweep

    def choose(self, config: MethodSection, sweep: list[dict]) -> int | None:
        """The index in ``sweep`` of the selected configuration: the lowest validation NLL, the
        first on ties; a missing (``None``, non-finite) NLL never wins over a finite one.
        ``None`` for an empty sweep."""
        return lowest_nll(sweep)

    def score(
        self, config: MethodSection, ctx: Context, runs: Runs, chosen: Mapping | None
    ) -> tuple[dict, dict]:
        """``(outputs, fields)``: the confidences of every evaluation set of ``ctx`` from the
        configuration ``chosen`` (its sweep record: ``config``, ``temperature``), built again,
        and the record's fields it sets itself (default: none; the record of a selected
        configuration is its sweep record)."""
        for name, build in self.candidates(config, ctx, runs):
            if name == chosen["config"]:
                return ensemble_outputs(build(), ctx, chosen["temperature"]), {}
        raise ValueError(f"{self.id}: no configuration {chosen['config']} in its grid")

    def finish(
        self, config: MethodSection, ctx: Context, runs: Runs, sweep: list[dict]
    ) -> tuple[dict, dict]:
        """``(outputs, record)`` from the sweep :meth:`validate` gave: :meth:`choose`, then
        :meth:`score_selected`."""
        return self.score_selected(
            config, ctx, runs, mark_selected(sweep, self.choose(config, sweep))
        )

    def score_selected(
        self, config: MethodSection, ctx: Context, runs: Runs, sweep: list[dict]
    ) -> tuple[dict, dict]:
        """``(outputs, record)`` of the configuration marked ``selected`` in ``sweep`` (the
        selection stage's, read back from its JSON or not; none for an empty sweep):
        :meth:`score`; the record holds the chosen configuration, its temperature and NLL, and
        the sweep."""
        chosen = [r for r in sweep if r["selected"]]
        if len(chosen) != (1 if sweep else 0):
            raise ValueError(f"{self.id}: {len(chosen)} configurations of the sweep are selected")
        outputs, fields = self.score(config, ctx, runs, chosen[0] if chosen else None)
        if not chosen:
            return outputs, record(**fields)
        t, nll = chosen[0]["temperature"], chosen[0]["val_nll"]
        return outputs, record(config=chosen[0]["config"], temperature=t, val_nll=nll, sweep=sweep)

    def run(self, config: MethodSection, ctx: Context, runs: Runs) -> tuple[dict, dict]:
        """``(outputs, record)``: :meth:`validate`, :meth:`choose` and :meth:`score` in one
        process, on the training ``runs`` (run id -> run; those of :meth:`runs_of`)."""
        return self.finish(config, ctx, runs, self.validate(config, ctx, runs))

    def key(self, ctx: Context, *parts) -> jax.Array:
        """The key of its draws on ``ctx``'s seed (:func:`method_key` with its id)."""
        return method_key(ctx, self.id, *parts)


def sweep_nll(rec: Mapping) -> float:
    """A sweep record's validation NLL; ``inf`` where it is missing (``None`` in JSON)."""
    nll = rec.get("val_nll")
    return math.inf if nll is None else float(nll)


def lowest_nll(sweep: list[Mapping]) -> int | None:
    """The index of the lowest validation NLL in ``sweep``, the first on ties; a missing or
    non-finite NLL (:func:`sweep_nll`) never wins over a finite one
    (:func:`pnc.methods.selection_rule.lowest`). ``None`` for an empty sweep.

    Raises:
        pnc.methods.selection_rule.NoFiniteCandidateError: no record has a finite NLL (each named
            by its configuration).
    """
    if not sweep:
        return None
    return lowest([sweep_nll(r) for r in sweep], [point_id(r.get("config") or {}) for r in sweep])


def mark_selected(sweep: list[dict], index: int | None) -> list[dict]:
    """Copies of the sweep's records with ``selected`` true at ``index`` only."""
    return [{**rec, "selected": i == index} for i, rec in enumerate(sweep)]

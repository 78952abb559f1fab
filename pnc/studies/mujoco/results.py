"""The vocabulary of the MuJoCo study's results tables and their one validator.

Every table the study writes or reads (per-job metric tables, ``results/all_configs.csv``,
``results/results.csv``) is in long format, one row per measured value, with the columns
:data:`RESULT_COLUMNS`. This module names what may appear in them and how it is shown: the
columns, the post-hoc calibration variants (:data:`CALIBRATION_INFO`), the methods
(:data:`METHOD_INFO` and the other names read from the method registry when used, so a method
registered after import is seen), the splits (:data:`EVAL_SPLITS`, the selection criterion
:data:`SELECTION_SPLIT`/:data:`SELECTION_METRIC`, the frontier sample :data:`SAMPLED_SPLITS`) and
the metrics (:data:`METRIC_INFO`); :mod:`pnc.studies.mujoco.results_table` reads a table and checks
it against them. A ``config`` cell is a configuration id, a key into the methods' grid tables
(:mod:`pnc.studies.mujoco.grid`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import Any, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# --------------------------------------------------------------------------------------------
# Columns
# --------------------------------------------------------------------------------------------

#: Columns of the per-job metric tables, ``results/all_configs.csv`` and ``results/results.csv``.
RESULT_COLUMNS: tuple[str, ...] = (
    "env",
    "method",
    "config",
    "calibration",
    "seed",
    "split",
    "metric",
    "value",
    "data_source",
)
#: Columns every results table must have (the others take :data:`OPTIONAL_DEFAULTS`).
REQUIRED_COLUMNS: tuple[str, ...] = ("env", "method", "seed", "split", "metric", "value")
#: Optional columns and the value they take when absent. Tables written before the post-hoc
#: calibration variants existed lack ``calibration``: their rows are the raw predictive.
OPTIONAL_DEFAULTS: dict[str, str] = {
    "config": "default",
    "calibration": "raw",
    "data_source": "unspecified",
}
#: Boolean column of ``all_configs.csv``: whether the row's configuration was selected.
SELECTED_COLUMN = "selected"
#: Columns that identify one measured value (no two rows may share them).
MEASUREMENT_KEY: tuple[str, ...] = (
    "env",
    "method",
    "config",
    "calibration",
    "seed",
    "split",
    "metric",
)
#: Where an environment's data came from (``unspecified`` where the table does not say).
DATA_SOURCES: tuple[str, ...] = ("minari", "offline", "unspecified")

# --------------------------------------------------------------------------------------------
# Post-hoc calibration variants
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class CalibrationInfo:
    """One post-hoc calibration variant of a configuration's predictive.

    Attributes:
        id: the value of the ``calibration`` column.
        label: how a selected variant is marked next to its configuration (empty for ``raw``).
        description: one sentence for captions.
    """

    id: str
    label: str
    description: str


#: The variants every configuration may be evaluated in, in candidate order (on equal validation
#: NLL the earlier wins). ``vcal`` multiplies the moment-matched predictive variance by one scalar
#: fitted on the validation split (:mod:`pnc.studies.mujoco.calibration`).
RAW = "raw"
VCAL = "vcal"
CALIBRATION_INFO: dict[str, CalibrationInfo] = {
    c.id: c
    for c in (
        CalibrationInfo(RAW, "", "raw: the method's predictive as constructed."),
        CalibrationInfo(
            VCAL,
            "+ vcal",
            "+ vcal: post-hoc variance calibration, the predictive variance multiplied by one "
            "scalar per (configuration, seed) fitted on the validation split (mean squared "
            "standardised residual of the raw predictive).",
        ),
    )
}
CALIBRATIONS: tuple[str, ...] = tuple(CALIBRATION_INFO)

# --------------------------------------------------------------------------------------------
# Methods
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class MethodInfo:
    """How a method appears in the results, read from its registered class
    (:class:`pnc.methods.regression.contract.MethodBase`).

    Attributes:
        id: the method id (``pnc.methods.regression.METHOD_IDS``).
        label: display name (table rows, figure legends).
        short: abbreviation (table column headers, figure axis ticks).
        ranked: whether the method takes part in ranks and Wilcoxon-Holm tests (ablations do not).
        style: figure style (``color``, ``marker``, ``linestyle``, ``hatch``).
    """

    id: str
    label: str
    short: str
    ranked: bool
    style: Mapping[str, object] = dataclasses.field(default_factory=dict)


class RegistryView(Mapping[str, V]):
    """A read-only mapping built from the method registry when it is read, so a method registered
    after import (:func:`pnc.methods.regression.register`) is seen; rebuilt whenever the registry
    changed.

    Args:
        build: returns the mapping from the registered methods.
        doc: what the mapping holds (its ``repr`` and ``__doc__``).
    """

    def __init__(self, build: Callable[[], Mapping[str, V]], doc: str) -> None:
        self._build = build
        self._cache: tuple[tuple[object, ...] | None, Mapping[str, V]] = (None, {})
        self.__doc__ = doc

    def _current(self) -> Mapping[str, V]:
        from pnc.methods.regression import registered

        key = registered()
        if self._cache[0] != key:
            self._cache = (key, self._build())
        return self._cache[1]

    def __getitem__(self, name: str) -> V:
        return self._current()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())

    def __repr__(self) -> str:
        return f"RegistryView({dict(self._current())!r})"


def _method_info() -> dict[str, MethodInfo]:
    from pnc.methods.regression import registered

    return {
        m.id: MethodInfo(m.id, m.label, m.short_label, m.ranked, dict(m.style))
        for m in sorted(registered(), key=lambda m: m.table_order)
    }


def _merged(attribute: str, what: str) -> dict[str, str]:
    """The registered methods' ``attribute`` mappings merged in row order; a key given two values
    raises ``ValueError``."""
    from pnc.methods.regression import registered

    found: dict[str, str] = {}
    for method in sorted(registered(), key=lambda m: m.table_order):
        for name, value in getattr(method, attribute).items():
            if found.setdefault(name, value) != value:
                raise ValueError(f"{what} {name!r} is given two ways: "
                                 f"{found[name]!r} and {value!r} ({method.id})")  # fmt: skip
    return found


def _hparam_legend() -> dict[str, str]:
    from pnc.methods.regression.contract import SHARED_HPARAM_LEGEND

    return {**_merged("hparam_legend", "abbreviation"), **SHARED_HPARAM_LEGEND}


#: Every registered method in the tables' row order (each method's ``table_order``; the paper's: the six
#: ranked methods, P&C last, then the ablation), read from the registry when used.
METHOD_INFO: Mapping[str, MethodInfo] = RegistryView(
    _method_info, "method id -> MethodInfo, in the tables' row order"
)
#: Abbreviations of hyperparameter names in the selected-configuration table (paper Table 3),
#: merged from the registered methods' ``hparam_abbreviations`` (a name abbreviated two ways
#: raises ``ValueError`` when read).
HPARAM_ABBREVIATIONS: Mapping[str, str] = RegistryView(
    lambda: _merged("hparam_abbreviations", "hyperparameter"),
    "hyperparameter name -> abbreviation",
)
#: The caption text of each abbreviation, in caption order: the methods' own
#: (``hparam_legend``, in row order), then the shared ones
#: (:data:`pnc.methods.regression.contract.SHARED_HPARAM_LEGEND`).
HPARAM_LEGEND: Mapping[str, str] = RegistryView(_hparam_legend, "abbreviation -> caption text")


def _readings() -> dict[str, str]:
    from pnc.methods.regression import registered

    return {m.reading_of: m.id for m in registered() if m.reading_of is not None}


#: Ranked method -> the unranked method that reads its run and members with another predictive
#: (each method's ``reading_of``: the Deep Ensemble and its mixture reading), ranked in its place
#: in the report's second reading of Table 1.
READINGS: Mapping[str, str] = RegistryView(_readings, "ranked method id -> its second reading")


def _deep_ensemble() -> str:
    from pnc.methods.regression import DEEP_ENSEMBLE_ID

    return DEEP_ENSEMBLE_ID


def _subspace() -> str:
    from pnc.methods.regression import SUBSPACE_ID

    return SUBSPACE_ID


def method_ids() -> tuple[str, ...]:
    """Every registered method id in the tables' row order (:data:`METHODS`)."""
    return tuple(METHOD_INFO)


def ranked_methods() -> tuple[str, ...]:
    """The methods of the ranking, in the paper's row order (P&C last) (:data:`RANKED_METHODS`)."""
    return tuple(m for m, info in METHOD_INFO.items() if info.ranked)


def ablation_methods() -> tuple[str, ...]:
    """Methods reported in the summary and figures but never ranked or tested
    (:data:`ABLATION_METHODS`)."""
    return tuple(m for m, info in METHOD_INFO.items() if not info.ranked)


#: The method every baseline is tested against.
REFERENCE = "pnc"

# --------------------------------------------------------------------------------------------
# Splits
# --------------------------------------------------------------------------------------------

#: Splits a configuration is evaluated on, in table order (``mid`` only where the env has it).
EVAL_SPLITS: tuple[str, ...] = ("val", "id", "near", "mid", "far")
#: Splits whose points are scored against the ``id`` split for AUROC.
SHIFTED_SPLITS: tuple[str, ...] = ("near", "mid", "far")
#: The split and metric that drive hyperparameter selection (lowest mean over seeds wins).
SELECTION_SPLIT = "val"
SELECTION_METRIC = "nll"
#: Splits the results report, in display order (the selection split is not reported).
REPORTED_SPLITS: tuple[str, ...] = tuple(s for s in EVAL_SPLITS if s != SELECTION_SPLIT)
SPLIT_LABELS: dict[str, str] = {
    "val": "Val",
    "id": "ID",
    "near": "Near",
    "mid": "Mid",
    "far": "Far",
}
#: The frontier sample of the two-phase evaluation (config ``evaluation: two_phase``): every
#: configuration is also scored on a fixed, seeded sample of at most :data:`SAMPLE_ROWS` rows of the
#: splits the ID/OOD frontier figure reads, so that the figure shows every configuration without
#: each being scored on the whole test splits. ``{sample split: the split it is drawn from}``. Only
#: :data:`SPLIT_METRICS` are computed on them (no AUROC); the selected configurations' whole-split
#: metrics are the ``id``/``far`` rows.
SAMPLED_SPLITS: dict[str, str] = {"id_sample": "id", "far_sample": "far"}
#: The rows of each sample split (fewer where the split is smaller: then the whole split).
SAMPLE_ROWS = 1000
#: Every split a configuration can be scored on, in table order: the evaluation splits, then the
#: frontier sample's.
SCORED_SPLITS: tuple[str, ...] = (*EVAL_SPLITS, *SAMPLED_SPLITS)

# --------------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class MetricInfo:
    """What a metric measures and how it is shown.

    Attributes:
        id: the metric name in the tables.
        label: display name.
        higher_is_better: the preferred direction.
        shifted_only: computed on shifted splits only (against ``id``), not on every split.
        definition: one sentence defining the metric, as printed in table captions.
        bounds: the metric's range where it is bounded, else ``None``.
        reference: the no-skill value (chance-level AUROC, zero correlation), else ``None``.
    """

    id: str
    label: str
    higher_is_better: bool
    shifted_only: bool
    definition: str
    bounds: tuple[float, float] | None = None
    reference: float | None = None

    @property
    def arrow(self) -> str:
        """``↑`` where higher is better, else ``↓``."""
        return "↑" if self.higher_is_better else "↓"


#: Every metric of the results tables, in display order.
METRIC_INFO: dict[str, MetricInfo] = {
    m.id: m
    for m in (
        MetricInfo(
            "rmse",
            "RMSE",
            higher_is_better=False,
            shifted_only=False,
            definition="ID RMSE: root mean squared error of the predictive mean on the held-out "
            "ID evaluation split, in original target units.",
        ),
        MetricInfo(
            "rmse_std",
            "RMSE (std.)",
            higher_is_better=False,
            shifted_only=False,
            definition="RMSE (std.): root mean squared error of the predictive mean in "
            "standardised units (targets standardised with the training statistics).",
        ),
        MetricInfo(
            "nll",
            "NLL",
            higher_is_better=False,
            shifted_only=False,
            definition="NLL: Gaussian negative log-likelihood of the moment-matched predictive "
            "(mean of the member means; mean of the member variances plus variance of the member "
            "means), averaged over points and target dimensions, in original target units, with "
            "1e-6 added to the variance (as the authors' code).",
        ),
        MetricInfo(
            "nll_std",
            "NLL (std.)",
            higher_is_better=False,
            shifted_only=False,
            definition="NLL (std.): the NLL of the same predictive in standardised units "
            "(targets standardised with the training statistics), without a variance floor.",
        ),
        MetricInfo(
            "auroc",
            "AUROC",
            higher_is_better=True,
            shifted_only=True,
            definition="AUROC: ID evaluation points against the shifted split's points, scored by "
            "the total predictive variance averaged over target dimensions, original units "
            "(shifted = positive).",
            bounds=(0.0, 1.0),
            reference=0.5,
        ),
        MetricInfo(
            "auroc_epistemic",
            "AUROC (epist.)",
            higher_is_better=True,
            shifted_only=True,
            definition="AUROC (epist.): as AUROC, scored by the variance of the member means "
            "averaged over target dimensions.",
            bounds=(0.0, 1.0),
            reference=0.5,
        ),
        MetricInfo(
            "spearman",
            "Spearman",
            higher_is_better=True,
            shifted_only=False,
            definition="Spearman: per split, rank correlation between each point's total "
            "predictive variance and its squared error (both averaged over target dimensions, "
            "original units).",
            bounds=(-1.0, 1.0),
            reference=0.0,
        ),
    )
}
METRICS: tuple[str, ...] = tuple(METRIC_INFO)
#: Metrics computed on every split.
SPLIT_METRICS: tuple[str, ...] = tuple(m for m in METRICS if not METRIC_INFO[m].shifted_only)
#: Metrics computed on shifted splits only (ID vs the split).
SHIFT_METRICS: tuple[str, ...] = tuple(m for m in METRICS if METRIC_INFO[m].shifted_only)
#: Metrics with a bounded range (printed with three decimals, drawn with a reference line).
BOUNDED_METRICS: tuple[str, ...] = tuple(m for m in METRICS if METRIC_INFO[m].bounds is not None)
#: The four headline (split, metric) pairs of paper Table 1.
HEADLINE: tuple[tuple[str, str], ...] = (
    ("id", "rmse"),
    ("far", "nll"),
    ("far", "auroc"),
    ("far", "spearman"),
)

#: Names read from the registry when they are used (``results.METHODS``; a ``from ... import``
#: reads them once, at that import): name -> the function that gives them. ``DEEP_ENSEMBLE`` is
#: the id of the baseline the paper compares P&C's Far metrics with
#: (``pnc.methods.regression.DEEP_ENSEMBLE_ID``); ``SUBSPACE`` that of Subspace Inference, whose ID
#: RMSE rank a paper claim states (``pnc.methods.regression.SUBSPACE_ID``).
_FROM_REGISTRY: dict[str, Callable[[], Any]] = {
    "DEEP_ENSEMBLE": _deep_ensemble,
    "SUBSPACE": _subspace,
    "METHODS": method_ids,
    "RANKED_METHODS": ranked_methods,
    "ABLATION_METHODS": ablation_methods,
}


def __getattr__(name: str) -> Any:
    if name in _FROM_REGISTRY:
        return _FROM_REGISTRY[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_FROM_REGISTRY])

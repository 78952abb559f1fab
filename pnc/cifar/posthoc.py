"""Post-hoc construction, selection and OOD scoring of one method on one seed.

Selection (paper, Appendix D.2): per method, on the 5,000-image ID validation split only; every
configuration of an ensemble gets its own temperature ``T`` (:func:`pnc.conv.fit_temperature`,
golden-section search on ``[1e-2, 1e2]``) and is scored by the validation NLL of its mixture at
that temperature; the lowest wins. P&C is selected by coordinate descent in the order of the
paper's table: the block (with ``sigma`` and ``bf`` at the first values of their grids), then
``sigma`` at the chosen block, then ``bf``. Every tried configuration is kept (the sweep table).

Outputs of a method (``scores.npz``): for the ID test set and every OOD dataset a confidence per
image ``<set>_conf`` (larger = more ID; an ensemble's is minus the entropy of its
temperature-scaled mixture); for the test set the predicted class ``test_pred`` and the
predictive probabilities ``test_probs`` ``[N, K]`` after the method's temperature (the
calibration metrics); for the single-model scores also ``<set>_entropy_conf``, minus the entropy
of the base network's softmax (the authors' FPR95 convention for MSP, Energy and Mahalanobis);
plus the selection record.

The methods (:data:`POSTHOC_METHODS`, in Table 2's order): each is a :class:`PosthocMethod` naming
its table label, its section class and the function that builds and scores it. A method's config
section (``methods.<id>`` of ``config/cifar.yaml``) becomes a frozen dataclass, a
:class:`MethodSection` (``PnCSection``, ``SWAGSection``, ...; named apart from the MuJoCo methods'
configs, :mod:`pnc.methods`, which hold one configuration each) by :func:`method_config`: its
fixed settings are the fields, whose defaults are stated there once (the schema's defaults are
checked against them), and its ``grid`` lists the values swept in selection; an unknown key fails
naming the valid ones.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from pnc.cifar import baselines as B
from pnc.cifar.data import Prepared, train_val_split
from pnc.cifar.model import features_and_logits, normalize
from pnc.cifar.trained import TrainedNetwork, dropout_run, ensemble_runs
from pnc.conv import ConvPnCConfig, build_members, calibration_cache, predict_logits
from pnc.conv.classification import entropy, fit_temperature, mixture_nll, mixture_probabilities
from pnc.conv.resnet import ResNetConfig
from pnc.keys import derive_key
from pnc.labels import SHARED_LABELS

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

    @classmethod
    def from_prepared(cls, data: Prepared, config, seed: int, val_size: int, batch_size: int = 500):
        tr, va = train_val_split(data.train_x.shape[0], val_size, seed)
        return cls(
            config=config,
            seed=seed,
            train_x=data.train_x[tr],
            train_y=data.train_y[tr],
            val_x=data.train_x[va],
            val_y=data.train_y[va],
            test_x=data.test_x,
            test_y=data.test_y,
            ood=dict(data.ood),
            batch_size=batch_size,
        )

    def eval_sets(self) -> dict[str, np.ndarray]:
        return {"test": self.test_x, **self.ood}


def load_run(path: str | Path) -> TrainedNetwork:
    """A training run (its directory or ``run.msgpack``), checked against the SHA-256 its
    ``run.json`` records (:meth:`pnc.cifar.trained.TrainedNetwork.load`)."""
    return TrainedNetwork.load(path)


def _key(ctx: Context, method: str, *parts) -> jax.Array:
    return derive_key("cifar", ctx.seed, method, *parts)


# ----------------------------------------------------------------------------- ensembles


def _ensemble_outputs(logits_of: Callable, ctx: Context, temperature: float) -> dict:
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
    """Fit ``T`` and the validation NLL of every candidate; return the best with the sweep."""
    sweep, best = [], None
    for cfg, logits_of in candidates:
        rec = _validate(cfg, logits_of, ctx)
        sweep.append(rec)
        log.info("%s %s: T %.3f val NLL %.4f", method, cfg, rec["temperature"], rec["val_nll"])
        if best is None or rec["val_nll"] < best[0]["val_nll"]:
            best = (rec, logits_of)
    for rec in sweep:
        rec["selected"] = rec is best[0]
    return best[0], sweep, best[1], best[0]["temperature"]


def _validate(cfg: dict, logits_of: Callable, ctx: Context) -> dict:
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
        hints = typing.get_type_hints(cls)
        values = {k: _coerce(f"{where}.{k}", v, hints[k]) for k, v in section.items()}
        return cls(grid=types.MappingProxyType(grid), **values)

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


def _coerce(where: str, value: Any, annotation: Any) -> Any:
    """``value`` converted to the field type ``annotation`` (``int``, ``float``, ``str``, a tuple
    of one of them, or an optional one) as the settings were always read (``int(value)``, ...)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        if value is None:
            return None
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    try:
        if typing.get_origin(annotation) is tuple:
            return tuple(typing.get_args(annotation)[0](v) for v in value)
        return annotation(value)
    except (TypeError, ValueError):
        kind = getattr(annotation, "__name__", annotation)
        raise ValueError(f"{where} = {value!r}: not a valid {kind}") from None


@dataclasses.dataclass(frozen=True)
class SingleScoreSection(MethodSection):
    """MSP, Energy, Mahalanobis: no settings, no selection."""


@dataclasses.dataclass(frozen=True)
class ReActSection(MethodSection):
    """ReAct+Energy: the clip at the ``percentile``-th percentile of the training split's
    penultimate activations (ReAct: 90)."""

    percentile: float = 90.0


@dataclasses.dataclass(frozen=True)
class LLLASection(MethodSection):
    """Last-layer Laplace: ``n_samples`` sampled heads per prior precision (``grid``)."""

    grid_keys: ClassVar[tuple[str, ...]] = ("prior_precision",)
    n_samples: int = 50


@dataclasses.dataclass(frozen=True)
class MCDropoutSection(MethodSection):
    """MC Dropout: ``n_samples`` masks per dropout rate (``grid``; one training run per rate)."""

    grid_keys: ClassVar[tuple[str, ...]] = ("rate",)
    n_samples: int = 50


@dataclasses.dataclass(frozen=True)
class SWAGSection(MethodSection):
    """SWAG: ``n_samples`` weight samples from the moments collected from each start epoch
    (``grid``), ``rank`` deviation columns, BN statistics refreshed on ``bn_refresh`` training
    images in batches of ``bn_batch_size``."""

    grid_keys: ClassVar[tuple[str, ...]] = ("start_epoch",)
    n_samples: int = 50
    rank: int = 20
    bn_refresh: int = 2048
    bn_batch_size: int = 128

    def study_problems(self, study: SectionContext, method: str) -> list[str]:
        """A start epoch needs two more training epochs to collect."""
        late = [s for s in self.grid.get("start_epoch") or () if s > study.epochs - 2]
        if not late:
            return []
        return [
            f"methods.{method}.grid.start_epoch {late}: SWAG needs >= 2 epochs after its start,"
            f" and train.epochs = {study.epochs}"
        ]


@dataclasses.dataclass(frozen=True)
class EpinetSection(MethodSection):
    """Epinet: ``n_samples`` sampled indices per prior scale (``grid``); the network and its
    training (defaults: :class:`pnc.cifar.baselines.EpinetConfig`'s)."""

    grid_keys: ClassVar[tuple[str, ...]] = ("prior_scale",)
    n_samples: int = 50
    index_dim: int = B.EpinetConfig.index_dim
    hiddens: tuple[int, ...] = B.EpinetConfig.hiddens
    epochs: int = B.EpinetConfig.epochs
    lr: float = B.EpinetConfig.lr
    weight_decay: float = B.EpinetConfig.weight_decay
    batch_size: int = B.EpinetConfig.batch_size
    index_samples: int = B.EpinetConfig.index_samples

    def network(self, prior_scale: float) -> B.EpinetConfig:
        """The epinet of one configuration."""
        fields = [f.name for f in dataclasses.fields(B.EpinetConfig) if f.name != "prior_scale"]
        return B.EpinetConfig(prior_scale=prior_scale, **{k: getattr(self, k) for k in fields})


@dataclasses.dataclass(frozen=True)
class DeepEnsembleSection(MethodSection):
    """Deep Ensemble: ``n_models`` runs (the base run is member 0)."""

    n_models: int = 5


@dataclasses.dataclass(frozen=True)
class PnCSection(MethodSection):
    """P&C: the fixed settings of :class:`pnc.conv.ConvPnCConfig` and the calibration images
    drawn once per seed; ``grid``: block, sigma, bootstrap_frac (coordinate descent)."""

    grid_keys: ClassVar[tuple[str, ...]] = ("block", "sigma", "bootstrap_frac")
    n_members: int = 50
    rank: int = 20
    ridge: float = 1e-3
    calibration_size: int = 1024
    chunk_size: int = 64
    perturbation_norm: str = "radius"
    member_chunk: int | None = None

    def study_problems(self, study: SectionContext, method: str) -> list[str]:
        """Each block of the grid is in the network; the calibration images fit the tiny
        dataset's training split."""
        problems = []
        for stage, block in self.grid.get("block") or ():
            try:
                study.network.block_index(stage, block)
            except ValueError as err:
                problems.append(
                    f"methods.{method}.grid.block [{stage}, {block}]: {err}"
                    f" (model.blocks_per_stage = {list(study.network.blocks_per_stage)})"
                )
        if study.n_train is not None and self.calibration_size > study.n_train:
            problems.append(
                f"methods.{method}.calibration_size = {self.calibration_size} > the"
                f" {study.n_train} training images of the tiny dataset"
            )
        return problems


# ----------------------------------------------------------------------------- per method

#: Fixed labels of the seeded generators that draw the SWAG BN-refresh images and the P&C
#: calibration images from a seed's training split (stream labels, not sizes).
SWAG_BN_STREAM = 2048
PNC_CALIBRATION_STREAM = 1024


def _base_features(ctx: Context, variables, names=("train", "val", "eval")) -> dict:
    out = {}
    sets = {"train": ctx.train_x, "val": ctx.val_x, **ctx.eval_sets()}
    for name, x in sets.items():
        if name in names or (name not in ("train", "val") and "eval" in names):
            out[name] = features_and_logits(variables, x, ctx.config, ctx.batch_size)
    return out


def _single_score(ctx: Context, variables, score: Callable, logits_override=None) -> dict:
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


def _record(**kw) -> dict:
    return {"config": {}, "temperature": None, "val_nll": None, "sweep": [], **kw}


def _msp(config: SingleScoreSection, ctx: Context, runs: Runs):
    return _single_score(ctx, runs["base"].variables, lambda f, lg: B.msp(lg)), _record()


def _energy(config: SingleScoreSection, ctx: Context, runs: Runs):
    return _single_score(ctx, runs["base"].variables, lambda f, lg: B.energy(lg)), _record()


def _mahalanobis(config: SingleScoreSection, ctx: Context, runs: Runs):
    v = runs["base"].variables
    f_train, _ = features_and_logits(v, ctx.train_x, ctx.config, ctx.batch_size)
    maha = B.Mahalanobis.fit(f_train, ctx.train_y, ctx.config.num_classes)
    return _single_score(ctx, v, lambda f, lg: maha.confidence(f)), _record()


def _react_energy(config: ReActSection, ctx: Context, runs: Runs):
    v = runs["base"].variables
    pct = config.percentile
    f_train, _ = features_and_logits(v, ctx.train_x, ctx.config, ctx.batch_size)
    c = B.react_threshold(f_train, pct)
    clipped = lambda f: B.react_energy(v, f, c)[1]
    out = _single_score(ctx, v, lambda f, lg: B.react_energy(v, f, c)[0], clipped)
    return out, _record(config={"percentile": pct, "threshold": c})


def _ensemble_method(method, ctx, candidates):
    best, sweep, logits_of, t = select_ensemble(candidates, ctx, method)
    out = _ensemble_outputs(logits_of, ctx, t)
    rec = _record(config=best["config"], temperature=t, val_nll=best["val_nll"], sweep=sweep)
    return out, rec


def _llla(config: LLLASection, ctx: Context, runs: Runs):
    v = runs["base"].variables
    f_train, _ = features_and_logits(v, ctx.train_x, ctx.config, ctx.batch_size)
    laplace = B.LastLayerLaplace.fit(v, f_train)
    cache: dict[int, np.ndarray] = {}

    def feats(x):
        if id(x) not in cache:
            cache[id(x)] = features_and_logits(v, x, ctx.config, ctx.batch_size)[0]
        return cache[id(x)]

    candidates = []
    for prior in config.values("prior_precision"):
        heads = laplace.sample_heads(float(prior), config.n_samples, _key(ctx, "llla", prior))
        logits_of = lambda x, h=heads: B.laplace_logits(feats(x), h)
        candidates.append(({"prior_precision": prior}, logits_of))
    return _ensemble_method("llla", ctx, candidates)


def _mc_dropout(config: MCDropoutSection, ctx: Context, runs: Runs):
    n = config.n_samples
    candidates = []
    for rate in config.values("rate"):
        v = runs[dropout_run(rate)].variables

        def logits_of(x, v=v, rate=rate):
            f, _ = features_and_logits(v, x, ctx.config, ctx.batch_size)
            return B.dropout_logits(v, f, float(rate), n, _key(ctx, "mc_dropout", rate, x.shape[0]))

        candidates.append(({"rate": rate}, logits_of))
    return _ensemble_method("mc_dropout", ctx, candidates)


def _swag(config: SWAGSection, ctx: Context, runs: Runs):
    base = runs["base"]
    v = base.variables
    n_train = ctx.train_x.shape[0]
    rng = np.random.default_rng([ctx.seed, SWAG_BN_STREAM])
    bn_images = ctx.train_x[rng.choice(n_train, min(config.bn_refresh, n_train), replace=False)]
    bn_batch = min(config.bn_batch_size, bn_images.shape[0])
    candidates = []
    for start in config.values("start_epoch"):
        moments = base.swag.get(str(start))
        if moments is None:
            raise ValueError(f"swag: the base run collected no moments from epoch {start}")
        samples = []
        for s in range(config.n_samples):
            key = _key(ctx, "swag", start, s)
            params = B.swag_sample(moments, v["params"], key, config.rank)
            stats = B.refresh_batch_stats(
                params,
                v["batch_stats"],
                jnp.asarray(bn_images),
                config=ctx.config,
                batch_size=bn_batch,
            )
            samples.append({"params": params, "batch_stats": stats})

        def logits_of(x, samples=samples):
            return np.stack([B.network_logits(sv, x, ctx.config, ctx.batch_size) for sv in samples])

        candidates.append(({"start_epoch": start}, logits_of))
    return _ensemble_method("swag", ctx, candidates)


def _epinet(config: EpinetSection, ctx: Context, runs: Runs):
    v = runs["base"].variables
    n = config.n_samples
    f_train, lg_train = features_and_logits(v, ctx.train_x, ctx.config, ctx.batch_size)
    cache = {}

    def base_of(x):
        if id(x) not in cache:
            cache[id(x)] = features_and_logits(v, x, ctx.config, ctx.batch_size)
        return cache[id(x)]

    candidates = []
    for scale in config.values("prior_scale"):
        cfg = config.network(float(scale))
        key = _key(ctx, "epinet", scale)
        params, prior = B.train_epinet(f_train, lg_train, ctx.train_y, cfg, key)

        def logits_of(x, params=params, prior=prior, cfg=cfg):
            f, lg = base_of(x)
            return B.epinet_logits(params, prior, f, lg, cfg, n, _key(ctx, "epinet", "index"))

        candidates.append(({"prior_scale": scale}, logits_of))
    return _ensemble_method("epinet", ctx, candidates)


def _deep_ensemble(config: DeepEnsembleSection, ctx: Context, runs: Runs):
    members = [runs[r].variables for r in ensemble_runs(config.n_models)]

    def logits_of(x):
        return np.stack([B.network_logits(m, x, ctx.config, ctx.batch_size) for m in members])

    return _ensemble_method("deep_ensemble", ctx, [({"n_models": len(members)}, logits_of)])


def _pnc(config: PnCSection, ctx: Context, runs: Runs):
    v = runs["base"].variables
    n_cal = config.calibration_size
    if n_cal > ctx.train_x.shape[0]:
        raise ValueError(f"pnc: calibration_size {n_cal} > {ctx.train_x.shape[0]} training images")
    rng = np.random.default_rng([ctx.seed, PNC_CALIBRATION_STREAM])
    x_cal = normalize(ctx.train_x[rng.choice(ctx.train_x.shape[0], n_cal, replace=False)])
    fixed = dict(
        n_members=config.n_members,
        rank=config.rank,
        ridge=config.ridge,
        chunk_size=config.chunk_size,
        perturbation_norm=config.perturbation_norm,
    )
    member_chunk = config.member_chunk
    blocks = [tuple(b) for b in config.values("block")]
    for b in blocks:
        ctx.config.block_index(*b)  # a clear error for a block outside the network
    sigmas, fracs = config.values("sigma"), config.values("bootstrap_frac")
    caches: dict[tuple, dict] = {}
    tried: dict[tuple, tuple[dict, Callable]] = {}
    sweep: list[dict] = []

    def candidate(block, sigma, bf):
        point = (block, float(sigma), float(bf))
        if point in tried:
            return tried[point]
        cfg = ConvPnCConfig(sigma=float(sigma), bootstrap_frac=float(bf), blocks=(block,), **fixed)
        index = cfg.block_indices(ctx.config)
        if index not in caches:
            caches[index] = calibration_cache(v, x_cal, ctx.config, index)
        key = _key(ctx, "pnc", *point)
        members = build_members(
            v, ctx.config, x_cal, cfg, key=key, cache=caches[index], member_chunk=member_chunk
        )

        def logits_of(x):
            logits = predict_logits(
                v,
                members,
                normalize(x),
                ctx.config,
                member_chunk=member_chunk,
                batch_size=ctx.batch_size,
            )
            return np.asarray(logits)

        point_config = {"block": list(block), "sigma": sigma, "bootstrap_frac": bf}
        rec = _validate(point_config, logits_of, ctx)
        log.info("pnc %s: T %.3f val NLL %.4f", rec["config"], rec["temperature"], rec["val_nll"])
        sweep.append(rec)
        tried[point] = (rec, logits_of)
        return tried[point]

    point = coordinate_descent(
        {"block": blocks, "sigma": sigmas, "bf": fracs},
        lambda p: candidate(**p)[0]["val_nll"],
    )
    rec, logits_of = candidate(**point)
    for r in sweep:
        r["selected"] = r is rec
    out = _ensemble_outputs(logits_of, ctx, rec["temperature"])
    t, nll = rec["temperature"], rec["val_nll"]
    return out, _record(config=rec["config"], temperature=t, val_nll=nll, sweep=sweep)


def coordinate_descent(grids: Mapping[str, list], score: Callable[[dict], float]) -> dict:
    """The point chosen by one pass of coordinate descent: start at the first value of every
    grid, then, coordinate by coordinate in the order of ``grids``, take the value with the
    lowest ``score`` (the first on ties) with the others held. ``score`` may be called again on a
    point it has seen (the caller caches)."""
    point = {name: values[0] for name, values in grids.items()}
    for name, values in grids.items():
        scores = [score({**point, name: value}) for value in values]
        point[name] = values[int(np.argmin(scores))]
    return point


# ----------------------------------------------------------------------------- runs per method


def _base_run(config: MethodSection) -> list[str]:
    return ["base"]


# ----------------------------------------------------------------------------- the methods


@dataclasses.dataclass(frozen=True)
class PosthocMethod:
    """One method of the CIFAR study.

    Attributes:
        id: the method id (``methods.<id>`` in the config, ``--method`` of the post-hoc job).
        label: its name in the tables.
        config_cls: its config section's dataclass (:class:`MethodSection`).
        run: ``run(config, ctx, runs) -> (outputs, record)``: construction, selection and the
            confidences of every evaluation set from the training ``runs`` (run id -> run).
        runs_of: ``runs_of(config)``: the ids of the training runs it reads.
    """

    id: str
    label: str
    config_cls: type[MethodSection]
    run: Callable[[Any, Context, Runs], tuple[dict, dict]]
    runs_of: Callable[[Any], list[str]] = _base_run

    def config(self, section: Mapping | None) -> MethodSection:
        """Its config from its section (see :meth:`MethodSection.from_section`)."""
        return self.config_cls.from_section(section, self.id)


#: method id -> method, in Table 2's order (then the extra single-model scores).
POSTHOC_METHODS: dict[str, PosthocMethod] = {
    m.id: m
    for m in (
        PosthocMethod("mahalanobis", "Mahalanobis", SingleScoreSection, _mahalanobis),
        PosthocMethod("react_energy", "ReAct+Energy", ReActSection, _react_energy),
        PosthocMethod("llla", "LLLA", LLLASection, _llla),
        PosthocMethod("epinet", "Epinet", EpinetSection, _epinet),
        PosthocMethod("swag", SHARED_LABELS["swag"], SWAGSection, _swag),
        PosthocMethod("pnc", SHARED_LABELS["pnc"], PnCSection, _pnc),
        PosthocMethod(
            "deep_ensemble",
            SHARED_LABELS["deep_ensemble"],
            DeepEnsembleSection,
            _deep_ensemble,
            lambda config: ensemble_runs(config.n_models),
        ),
        PosthocMethod(
            "mc_dropout",
            SHARED_LABELS["mc_dropout"],
            MCDropoutSection,
            _mc_dropout,
            lambda config: [dropout_run(r) for r in config.values("rate")],
        ),
        PosthocMethod("msp", "MSP", SingleScoreSection, _msp),
        PosthocMethod("energy", "Energy", SingleScoreSection, _energy),
    )
}
#: method id -> label in the tables (read from :data:`POSTHOC_METHODS`).
METHOD_LABELS: dict[str, str] = {m.id: m.label for m in POSTHOC_METHODS.values()}
METHODS = tuple(POSTHOC_METHODS)


def posthoc_method(method: str) -> PosthocMethod:
    """The method ``method``.

    Raises:
        ValueError: an unknown id (the message lists the valid ones).
    """
    try:
        return POSTHOC_METHODS[method]
    except KeyError:
        raise ValueError(f"unknown method {method!r}; known: {', '.join(METHODS)}") from None


def method_config(method: str, section: Mapping | None) -> MethodSection:
    """The config of ``method`` from its section (defaults filled in; unknown keys raise)."""
    return posthoc_method(method).config(section)


def run_method(method: str, section: Mapping, ctx: Context, runs: Runs) -> tuple[dict, dict]:
    """``(outputs, record)`` of ``method`` on ``ctx`` from its training ``runs`` (run id -> run)."""
    spec = posthoc_method(method)
    return spec.run(spec.config(section), ctx, runs)


def runs_of(method: str, section: Mapping) -> list[str]:
    """The training runs (ids) ``method`` reads."""
    spec = posthoc_method(method)
    return spec.runs_of(spec.config(section))

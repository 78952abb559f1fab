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
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable, Mapping
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from pnc.cifar import baselines as B
from pnc.cifar.data import Prepared, train_val_split
from pnc.cifar.model import features_and_logits, normalize
from pnc.conv import ConvPnCConfig, build_members, calibration_cache, predict_logits
from pnc.conv.classification import entropy, fit_temperature, mixture_nll, mixture_probabilities
from pnc.conv.resnet import ResNetConfig
from pnc.io import load_pytree
from pnc.keys import derive_key

log = logging.getLogger(__name__)

#: method id -> label in the tables, in Table 2's order (then the extra single-model scores).
METHOD_LABELS = {
    "mahalanobis": "Mahalanobis",
    "react_energy": "ReAct+Energy",
    "llla": "LLLA",
    "epinet": "Epinet",
    "swag": "SWAG",
    "pnc": "P&C",
    "deep_ensemble": "Deep Ensemble",
    "mc_dropout": "MC Dropout",
    "msp": "MSP",
    "energy": "Energy",
}
METHODS = tuple(METHOD_LABELS)


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
            config, seed, data.train_x[tr], data.train_y[tr], data.train_x[va], data.train_y[va],
            data.test_x, data.test_y, dict(data.ood), batch_size,
        )  # fmt: skip

    def eval_sets(self) -> dict[str, np.ndarray]:
        return {"test": self.test_x, **self.ood}


def load_run(path: str | Path) -> dict:
    """``{"variables", "swag"}`` of a training run (``run.msgpack``)."""
    return load_pytree(path)


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
    acc = float(np.mean(np.asarray(jnp.argmax(mixture_probabilities(val_logits, t), -1)) == ctx.val_y))  # fmt: skip
    if not math.isfinite(nll):
        nll = float("inf")
    return {"config": cfg, "temperature": t, "val_nll": nll, "val_accuracy": acc}


def _grid(section: Mapping, name: str) -> list:
    values = (section.get("grid") or {}).get(name)
    if not values:
        raise ValueError(f"methods: grid.{name} must list at least one value")
    return list(values)


# ----------------------------------------------------------------------------- per method


def run_method(method: str, section: Mapping, ctx: Context, runs: Mapping[str, dict]) -> tuple[dict, dict]:  # fmt: skip
    """``(outputs, record)`` of ``method`` on ``ctx`` from its training ``runs`` (run id -> run)."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; known: {', '.join(METHODS)}")
    base = runs.get("base")
    fn = globals()[f"_{method}"]
    return fn(section, ctx, runs, base)


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


def _msp(section, ctx, runs, base):
    return _single_score(ctx, base["variables"], lambda f, lg: B.msp(lg)), _record()


def _energy(section, ctx, runs, base):
    return _single_score(ctx, base["variables"], lambda f, lg: B.energy(lg)), _record()


def _mahalanobis(section, ctx, runs, base):
    v = base["variables"]
    f_train, _ = features_and_logits(v, ctx.train_x, ctx.config, ctx.batch_size)
    maha = B.Mahalanobis.fit(f_train, ctx.train_y, ctx.config.num_classes)
    return _single_score(ctx, v, lambda f, lg: maha.confidence(f)), _record()


def _react_energy(section, ctx, runs, base):
    v = base["variables"]
    pct = float(section.get("percentile", 90.0))
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


def _llla(section, ctx, runs, base):
    v = base["variables"]
    f_train, _ = features_and_logits(v, ctx.train_x, ctx.config, ctx.batch_size)
    laplace = B.LastLayerLaplace.fit(v, f_train)
    n = int(section.get("n_samples", 50))
    cache: dict[int, np.ndarray] = {}

    def feats(x):
        if id(x) not in cache:
            cache[id(x)] = features_and_logits(v, x, ctx.config, ctx.batch_size)[0]
        return cache[id(x)]

    candidates = []
    for prior in _grid(section, "prior_precision"):
        heads = laplace.sample_heads(float(prior), n, _key(ctx, "llla", prior))
        candidates.append(({"prior_precision": prior}, lambda x, h=heads: B.laplace_logits(feats(x), h)))  # fmt: skip
    return _ensemble_method("llla", ctx, candidates)


def _mc_dropout(section, ctx, runs, base):
    n = int(section.get("n_samples", 50))
    candidates = []
    for rate in _grid(section, "rate"):
        v = runs[dropout_run(rate)]["variables"]

        def logits_of(x, v=v, rate=rate):
            f, _ = features_and_logits(v, x, ctx.config, ctx.batch_size)
            return B.dropout_logits(v, f, float(rate), n, _key(ctx, "mc_dropout", rate, x.shape[0]))

        candidates.append(({"rate": rate}, logits_of))
    return _ensemble_method("mc_dropout", ctx, candidates)


def _swag(section, ctx, runs, base):
    n = int(section.get("n_samples", 50))
    rank = int(section.get("rank", 20))
    n_bn = int(section.get("bn_refresh", 2048))
    bn_batch = int(section.get("bn_batch_size", 128))
    v = base["variables"]
    rng = np.random.default_rng([ctx.seed, 2048])
    bn_images = ctx.train_x[rng.choice(ctx.train_x.shape[0], min(n_bn, ctx.train_x.shape[0]), replace=False)]  # fmt: skip
    candidates = []
    for start in _grid(section, "start_epoch"):
        moments = base["swag"].get(str(start))
        if moments is None:
            raise ValueError(f"swag: the base run collected no moments from epoch {start}")
        samples = []
        for s in range(n):
            params = B.swag_sample(moments, v["params"], _key(ctx, "swag", start, s), rank)
            stats = B.refresh_batch_stats(
                params, v["batch_stats"], jnp.asarray(bn_images), config=ctx.config,
                batch_size=min(bn_batch, bn_images.shape[0]),
            )  # fmt: skip
            samples.append({"params": params, "batch_stats": stats})

        def logits_of(x, samples=samples):
            return np.stack([B.network_logits(sv, x, ctx.config, ctx.batch_size) for sv in samples])

        candidates.append(({"start_epoch": start}, logits_of))
    return _ensemble_method("swag", ctx, candidates)


def _epinet(section, ctx, runs, base):
    v = base["variables"]
    n = int(section.get("n_samples", 50))
    fixed = {k: section[k] for k in ("index_dim", "epochs", "lr", "weight_decay", "batch_size", "index_samples") if k in section}  # fmt: skip
    if "hiddens" in section:
        fixed["hiddens"] = tuple(section["hiddens"])
    f_train, lg_train = features_and_logits(v, ctx.train_x, ctx.config, ctx.batch_size)
    cache = {}

    def base_of(x):
        if id(x) not in cache:
            cache[id(x)] = features_and_logits(v, x, ctx.config, ctx.batch_size)
        return cache[id(x)]

    candidates = []
    for scale in _grid(section, "prior_scale"):
        cfg = B.EpinetConfig(prior_scale=float(scale), **fixed)
        params, prior = B.train_epinet(f_train, lg_train, ctx.train_y, cfg, _key(ctx, "epinet", scale))  # fmt: skip

        def logits_of(x, params=params, prior=prior, cfg=cfg):
            f, lg = base_of(x)
            return B.epinet_logits(params, prior, f, lg, cfg, n, _key(ctx, "epinet", "index"))

        candidates.append(({"prior_scale": scale}, logits_of))
    return _ensemble_method("epinet", ctx, candidates)


def _deep_ensemble(section, ctx, runs, base):
    members = [runs[r]["variables"] for r in ensemble_runs(int(section.get("n_models", 5)))]

    def logits_of(x):
        return np.stack([B.network_logits(m, x, ctx.config, ctx.batch_size) for m in members])

    return _ensemble_method("deep_ensemble", ctx, [({"n_models": len(members)}, logits_of)])


def _pnc(section, ctx, runs, base):
    v = base["variables"]
    n_cal = int(section.get("calibration_size", 1024))
    if n_cal > ctx.train_x.shape[0]:
        raise ValueError(f"pnc: calibration_size {n_cal} > {ctx.train_x.shape[0]} training images")
    rng = np.random.default_rng([ctx.seed, 1024])
    x_cal = normalize(ctx.train_x[rng.choice(ctx.train_x.shape[0], n_cal, replace=False)])
    fixed = dict(
        n_members=int(section.get("n_members", 50)), rank=int(section.get("rank", 20)),
        ridge=float(section.get("ridge", 1e-3)), chunk_size=int(section.get("chunk_size", 64)),
        perturbation_norm=str(section.get("perturbation_norm", "radius")),
    )  # fmt: skip
    member_chunk = section.get("member_chunk")
    blocks = [tuple(b) for b in _grid(section, "block")]
    for b in blocks:
        ctx.config.block_index(*b)  # a clear error for a block outside the network
    sigmas, fracs = _grid(section, "sigma"), _grid(section, "bootstrap_frac")
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
        members = build_members(
            v, ctx.config, x_cal, cfg, key=_key(ctx, "pnc", *point), cache=caches[index],
            member_chunk=member_chunk,
        )  # fmt: skip
        logits_of = lambda x: np.asarray(
            predict_logits(
                v,
                members,
                normalize(x),
                ctx.config,
                member_chunk=member_chunk,
                batch_size=ctx.batch_size,
            )  # fmt: skip
        )
        rec = _validate({"block": list(block), "sigma": sigma, "bootstrap_frac": bf}, logits_of, ctx)  # fmt: skip
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
    return out, _record(config=rec["config"], temperature=rec["temperature"], val_nll=rec["val_nll"], sweep=sweep)  # fmt: skip


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


def dropout_run(rate) -> str:
    return f"dropout{float(rate):g}"


def ensemble_runs(n_models: int) -> list[str]:
    """The Deep Ensemble's runs: the base run and ``n_models - 1`` further members."""
    if n_models < 1:
        raise ValueError(f"deep_ensemble.n_models must be >= 1, got {n_models}")
    return ["base"] + [f"member{k}" for k in range(1, n_models)]


def runs_of(method: str, section: Mapping) -> list[str]:
    """The training runs (ids) ``method`` reads."""
    if method == "mc_dropout":
        return [dropout_run(r) for r in _grid(section, "rate")]
    if method == "deep_ensemble":
        return ensemble_runs(int(section.get("n_models", 5)))
    return ["base"]

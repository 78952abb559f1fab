"""Convolutional P&C in the CIFAR study (:mod:`pnc.core.conv`): members built on the base run from
calibration images drawn once per seed; block, ``sigma`` and ``bootstrap_frac`` selected by
coordinate descent on validation (:func:`pnc.methods.ood.posthoc.coordinate_descent`)."""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable
from typing import ClassVar

import numpy as np

from pnc.core.classifier.model import normalize
from pnc.core.conv import ConvPnCConfig, build_members, calibration_cache, predict_logits
from pnc.methods.labels import SHARED_LABELS
from pnc.methods.ood.posthoc import (
    Context,
    MethodSection,
    PosthocMethod,
    Runs,
    SectionContext,
    coordinate_descent,
    sweep_nll,
    validate_candidate,
)

log = logging.getLogger(__name__)

#: Fixed label of the seeded generator that draws the calibration images from a seed's training
#: split (a stream label, not a size).
PNC_CALIBRATION_STREAM = 1024


@dataclasses.dataclass(frozen=True)
class PnCSection(MethodSection):
    """P&C: the fixed settings of :class:`pnc.core.conv.ConvPnCConfig` and the calibration images
    drawn once per seed; ``grid``: block, sigma, bootstrap_frac (coordinate descent)."""

    grid_keys: ClassVar[tuple[str, ...]] = ("block", "sigma", "bootstrap_frac")
    n_members: int = 50
    rank: int = 20
    ridge: float = 1e-3
    calibration_size: int = 1024
    chunk_size: int = 64
    perturbation_norm: str = "radius"
    member_chunk: int | None = None


class PnCDetector(PosthocMethod):
    """P&C on the base run."""

    id: ClassVar[str] = "pnc"
    label: ClassVar[str] = SHARED_LABELS["pnc"]
    config_cls: ClassVar[type[MethodSection]] = PnCSection

    def study_problems(self, config: PnCSection, study: SectionContext) -> list[str]:
        """Each block of the grid is in the network; the calibration images fit the tiny
        dataset's training split."""
        problems = []
        for stage, block in config.grid.get("block") or ():
            try:
                study.network.block_index(stage, block)
            except ValueError as err:
                problems.append(
                    f"methods.{self.id}.grid.block [{stage}, {block}]: {err}"
                    f" (model.blocks_per_stage = {list(study.network.blocks_per_stage)})"
                )
        if study.n_train is not None and config.calibration_size > study.n_train:
            problems.append(
                f"methods.{self.id}.calibration_size = {config.calibration_size} > the"
                f" {study.n_train} training images of the tiny dataset"
            )
        return problems

    def _space(self, config: PnCSection, ctx: Context, runs: Runs):
        """The grids (blocks, sigmas, bootstrap fractions) and ``build(block, sigma, bf)``, the
        ``logits_of`` of one point (members built from the calibration images drawn once per
        seed, the calibration statistics of a block computed once)."""
        v = runs["base"].variables
        n_cal = config.calibration_size
        if n_cal > ctx.train_x.shape[0]:
            raise ValueError(
                f"{self.id}: calibration_size {n_cal} > {ctx.train_x.shape[0]} training images"
            )
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
        caches: dict[tuple, dict] = {}

        def build(block, sigma, bf) -> Callable:
            cfg = ConvPnCConfig(
                sigma=float(sigma), bootstrap_frac=float(bf), blocks=(block,), **fixed
            )
            index = cfg.block_indices(ctx.config)
            if index not in caches:
                caches[index] = calibration_cache(v, x_cal, ctx.config, index)
            members = build_members(
                v,
                ctx.config,
                x_cal,
                cfg,
                key=self.key(ctx, block, float(sigma), float(bf)),
                cache=caches[index],
                member_chunk=member_chunk,
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

            return logits_of

        return blocks, config.values("sigma"), config.values("bootstrap_frac"), build

    @staticmethod
    def _name(block, sigma, bf) -> dict:
        return {"block": list(block), "sigma": sigma, "bootstrap_frac": bf}

    def candidates(self, config: PnCSection, ctx: Context, runs: Runs) -> list:
        """Every point of the grid (selection visits those of its coordinate descent only)."""
        blocks, sigmas, fracs, build = self._space(config, ctx, runs)
        return [
            (self._name(b, s, f), functools.partial(build, b, s, f))
            for b in blocks
            for s in sigmas
            for f in fracs
        ]

    def validate(self, config: PnCSection, ctx: Context, runs: Runs) -> list[dict]:
        """The points coordinate descent visits (:func:`coordinate_descent`: the block, then
        ``sigma``, then ``bootstrap_frac``), each scored once, in the order visited."""
        blocks, sigmas, fracs, build = self._space(config, ctx, runs)
        tried: dict[tuple, dict] = {}
        sweep: list[dict] = []

        def nll(p) -> float:
            point = (p["block"], float(p["sigma"]), float(p["bootstrap_frac"]))
            if point not in tried:
                name = self._name(p["block"], p["sigma"], p["bootstrap_frac"])
                rec = validate_candidate(name, build(*point), ctx)
                log.info(
                    "%s %s: T %.3f val NLL %.4f",
                    self.id,
                    rec["config"],
                    rec["temperature"],
                    rec["val_nll"],
                )
                sweep.append(rec)
                tried[point] = rec
            return tried[point]["val_nll"]

        coordinate_descent({"block": blocks, "sigma": sigmas, "bootstrap_frac": fracs}, nll)
        return sweep

    def choose(self, config: PnCSection, sweep: list[dict]) -> int | None:
        """The point coordinate descent ends at, read off the sweep :meth:`validate` gave."""
        index = {
            (tuple(r["config"]["block"]), float(r["config"]["sigma"]), float(r["config"]["bootstrap_frac"])): i
            for i, r in enumerate(sweep)
        }  # fmt: skip
        grids = {
            "block": [tuple(b) for b in config.values("block")],
            "sigma": config.values("sigma"),
            "bootstrap_frac": config.values("bootstrap_frac"),
        }

        def at(p) -> int:
            point = (p["block"], float(p["sigma"]), float(p["bootstrap_frac"]))
            if point not in index:
                raise ValueError(f"{self.id}: the sweep has no configuration {point}")
            return index[point]

        return at(coordinate_descent(grids, lambda p: sweep_nll(sweep[at(p)])))

"""The Deep Ensemble in the CIFAR study: ``n_models`` independently trained networks (the base
run is member 0), their mixture at the temperature fitted on validation."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from pnc.core.classifier import baselines as B
from pnc.core.classifier.trained import ensemble_runs
from pnc.core.labels import SHARED_LABELS
from pnc.methods.ood.posthoc import Context, MethodSection, PosthocMethod, Runs


@dataclasses.dataclass(frozen=True)
class DeepEnsembleSection(MethodSection):
    """Deep Ensemble: ``n_models`` runs (the base run is member 0)."""

    n_models: int = 5


class DeepEnsembleDetector(PosthocMethod):
    """The mixture of the base run and ``n_models - 1`` further members."""

    id: ClassVar[str] = "deep_ensemble"
    label: ClassVar[str] = SHARED_LABELS["deep_ensemble"]
    config_cls: ClassVar[type[MethodSection]] = DeepEnsembleSection

    def runs_of(self, config: DeepEnsembleSection) -> list[str]:
        return ensemble_runs(config.n_models)

    def candidates(self, config: DeepEnsembleSection, ctx: Context, runs: Runs) -> list:
        def build():
            members = [runs[r].variables for r in ensemble_runs(config.n_models)]

            def logits_of(x):
                return np.stack(
                    [B.network_logits(m, x, ctx.config, ctx.batch_size) for m in members]
                )

            return logits_of

        return [({"n_models": config.n_models}, build)]

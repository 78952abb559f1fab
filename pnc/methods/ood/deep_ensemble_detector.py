"""The Deep Ensemble in the CIFAR study: ``n_models`` independently trained networks (the base
run is member 0), their mixture at the temperature fitted on validation."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from pnc.core.classifier.model import network_logits
from pnc.methods.labels import SHARED_LABELS
from pnc.methods.ood.posthoc import Context, MethodSection, PosthocMethod, Runs
from pnc.methods.ood.training_runs import BASE_RUN, RunKind


def _member_problem(k: int) -> str | None:
    return None if k >= 1 else f"a further member's index must be >= 1, got {k!r}"


#: A further Deep Ensemble member ``member<k>``, ``k >= 1`` (the base run is member 0): the recipe
#: as it is, its own seed stream (the run id enters the training key).
MEMBER_RUN = RunKind("member", int, lambda k: {}, _member_problem)


def ensemble_runs(n_models: int) -> list[str]:
    """The Deep Ensemble's runs: the base run and ``n_models - 1`` further members."""
    if n_models < 1:
        raise ValueError(f"deep_ensemble.n_models must be >= 1, got {n_models}")
    return [BASE_RUN, *(MEMBER_RUN.run_id(k) for k in range(1, n_models))]


@dataclasses.dataclass(frozen=True)
class DeepEnsembleSection(MethodSection):
    """Deep Ensemble: ``n_models`` runs (the base run is member 0)."""

    n_models: int = 5


class DeepEnsembleDetector(PosthocMethod):
    """The mixture of the base run and ``n_models - 1`` further members."""

    id: ClassVar[str] = "deep_ensemble"
    label: ClassVar[str] = SHARED_LABELS["deep_ensemble"]
    config_cls: ClassVar[type[MethodSection]] = DeepEnsembleSection
    run_kinds: ClassVar[tuple[RunKind, ...]] = (MEMBER_RUN,)

    def runs_of(self, config: DeepEnsembleSection) -> list[str]:
        return ensemble_runs(config.n_models)

    def candidates(self, config: DeepEnsembleSection, ctx: Context, runs: Runs) -> list:
        def build():
            members = [runs[r].variables for r in ensemble_runs(config.n_models)]

            def logits_of(x):
                return np.stack([network_logits(m, x, ctx.config, ctx.batch_size) for m in members])

            return logits_of

        return [({"n_models": config.n_models}, build)]

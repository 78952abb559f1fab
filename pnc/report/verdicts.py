"""The verdicts of the paper's claims and how their numbers are written.

A :class:`Claim` holds the paper's wording (shortened), ``measured`` (the numbers behind the
verdict), the ``verdict`` and the ``rule`` it follows. Verdicts: :data:`HOLDS`,
:data:`DOES_NOT_HOLD`, ``"partly: k of n (...)"`` for a per-environment claim that holds in some
environments (:func:`environment_verdict`, naming the shorter list), :data:`DRAWS_ONLY` /
:data:`MIXTURE_ONLY` for a ranking claim that holds in one reading of the Deep Ensemble only
(:func:`reading_verdict`), :data:`CANNOT_BE_COMPARED` when an optional input is missing. Numbers:
mean ranks with 2 decimals, every other number with 3 significant digits (:func:`number`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pnc.report.table1 import Cell
from pnc.runtime.render import decimals_for, fmt
from pnc.studies.mujoco.results import (
    METHOD_INFO,
    REFERENCE,
)

#: The verdicts (module docstring; ``"partly: k of n (...)"``: :func:`environment_verdict`).
HOLDS = "holds"
DOES_NOT_HOLD = "does not hold"
#: The prefix of every verdict that holds in some environments or readings but not all.
PARTLY = "partly"
DRAWS_ONLY = f"{PARTLY}: with the draws, not the mixture"
MIXTURE_ONLY = f"{PARTLY}: with the mixture, not the draws"
CANNOT_BE_COMPARED = "cannot be compared"


@dataclass(frozen=True)
class Claim:
    """One of the paper's claims, what this folder measures, and the verdict."""

    claim: str
    measured: str
    verdict: str
    #: The rule the verdict follows, in one line, with its count per environment.
    rule: str = ""


# --------------------------------------------------------------------------------------------
# Verdicts and numbers
# --------------------------------------------------------------------------------------------


def reading_verdict(draws: bool, mixture: bool | None) -> str:
    """The verdict of a ranking claim from its result in each reading (``None``: no mixture)."""
    if mixture is None or draws == mixture:
        return HOLDS if draws else DOES_NOT_HOLD
    return DRAWS_ONLY if draws else MIXTURE_ONLY


def environment_verdict(passing: Sequence[str], failing: Sequence[str]) -> str:
    """The verdict of a per-environment claim whose rule holds in the ``passing`` environments and
    fails in the ``failing`` ones: :data:`HOLDS`, :data:`DOES_NOT_HOLD` or ``"partly: k of n"``
    with the shorter list named (``"partly: 9 of 11 (not Ant, HumanoidStandup)"``).

    Raises:
        ValueError: no environment, or one in both lists.
    """
    if not passing and not failing:
        raise ValueError("cannot judge a claim on no environment")
    both = sorted(set(passing) & set(failing))
    if both:
        raise ValueError(f"cannot judge: env(s) {both} both pass and fail")
    if not failing:
        return HOLDS
    if not passing:
        return DOES_NOT_HOLD
    n = len(passing) + len(failing)
    return f"{PARTLY}: {len(passing)} of {n}{shorter_list(passing, failing)}"


def number(value: float, *, signed: bool = False) -> str:
    """``value`` with 3 significant digits (a leading ``+`` when ``signed`` and positive)."""
    text = fmt(value, decimals_for(value, 3, lo=0, hi=6))
    return f"+{text}" if signed and value > 0 else text


def span(values: Sequence[float]) -> str:
    """``"lo to hi"`` of ``values`` (3 significant digits)."""
    return f"{number(min(values))} to {number(max(values))}"


def names(methods: Sequence[str]) -> str:
    """Method labels joined: ``"MC Dropout, SWAG and Subspace"``."""
    labels = [METHOD_INFO[m].label for m in methods]
    if not labels:
        return "none"
    return labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]


def shorter_list(passing: Sequence[str], failing: Sequence[str]) -> str:
    """The shorter of the two environment lists, in parentheses (empty when all or none pass)."""
    if not failing or not passing:
        return ""
    if len(passing) <= len(failing):
        return f" ({', '.join(passing)})"
    return f" (not {', '.join(failing)})"


def better_counts(cells: dict[str, Cell], baselines: Sequence[str]) -> str:
    """Per environment, how often P&C's seed mean is better than each baseline's
    (:attr:`Cell.better`): ``"P&C better than Deep Ensemble in 2 of 11 environments, SWAG 11"``;
    empty when no count is known."""
    counted = [m for m in baselines if cells[m].better is not None]
    if not counted:
        return ""
    n = cells[REFERENCE].n_envs
    first, *rest = counted
    text = (
        f"P&C better than {METHOD_INFO[first].label} in {cells[first].better} of {n} environments"
    )
    return text + "".join(f", {METHOD_INFO[m].label} {cells[m].better}" for m in rest)


def ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ..."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"

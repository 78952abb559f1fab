"""The vocabulary of the mechanism stage's files (paper Figures 1 B/C and 3;
``results/mechanism/{env}/seed{seed}.parquet``): their columns, splits, methods and quantities.
"""

from __future__ import annotations

from typing import Any

#: Columns of a mechanism file: one row per value. Per-point rows carry the point's row in its
#: split (``point``) and ``member = -1``; per-member rows (``dh``/``dy`` averaged over the split's
#: points) carry ``point = -1``.
MECHANISM_COLUMNS: tuple[str, ...] = (
    "env",
    "seed",
    "split",
    "point",
    "method",
    "member",
    "quantity",
    "value",
)
#: The splits the mechanism stage measures (``mid`` where the environment has it).
MECHANISM_SPLITS: tuple[str, ...] = ("id", "near", "mid", "far")


def mechanism_methods() -> tuple[str, ...]:
    """The methods whose members or samples the mechanism stage compares (Figure 1 B/C): every
    registered method that gives weight samples (``has_parameter_samples``), P&C and its ablation
    first, then the others in the tables' row order (:data:`MECHANISM_METHODS`)."""
    from pnc.methods.regression import registered
    from pnc.methods.regression.pnc_method import PerturbAndCorrect

    with_samples = [m for m in registered() if m.has_parameter_samples]
    first = [m for m in with_samples if isinstance(m, PerturbAndCorrect)]
    return tuple(m.id for m in sorted(first, key=lambda m: m.table_order)) + tuple(
        m.id for m in sorted(with_samples, key=lambda m: m.table_order) if m not in first
    )


#: The per-point quantity of Figure 3B: the Mahalanobis distance of a point's hidden activation to
#: the training rows' (a distance, not the CIFAR study's detector of that name).
DISTANCE_QUANTITY = "mahalanobis"
#: Per-point quantities of the selected P&C ensemble, with their definitions (captions).
MECHANISM_QUANTITIES: dict[str, str] = {
    "disagreement": "D(x): variance of the P&C members' predicted means across members, summed "
    "over target dimensions (the network's output units: standardised with the training "
    "statistics when train.standardize is true, raw otherwise)",
    "score_aleatoric": "aleatoric part of the evaluation's OOD score (the total predictive "
    "variance): the P&C members' mean predicted variance, in original target units, averaged over "
    "target dimensions",
    "score_epistemic": "epistemic part of that score: the variance of the members' predicted means "
    "in original target units, averaged over target dimensions (score_aleatoric + "
    "score_epistemic = the total score whose ID/Far AUROC the evaluation reports)",
    "input_distance": "Euclidean distance of the point's input to the nearest ID train row's, "
    "both standardised by the train rows' mean and standard deviation (whatever "
    "train.standardize is)",
    DISTANCE_QUANTITY: "Mahalanobis distance of the base network's second hidden layer activation to "
    "those of all ID train rows (their mean and covariance, covariance ridge 1e-4 x mean "
    "diagonal)",
    "sketch_probe": "sigma^2 s(x), s(x) = (1/(J eps^2)) sum_j ||mu(x; eps u_j) - mu(x; 0)||^2 over "
    "J random probes u_j of radius eps of the P&C map corrected on the calibration set",
    "sketch_analytic": "E||A(x) v||^2 for the ensemble's perturbation law: sigma^2 ||A(x)||_F^2 "
    "(gaussian; Theorem 2), sigma^2 ||A(x)||_F^2 / K (radius), A(x) the corrected sensitivity of "
    "the predicted mean by autodiff",
    "a_fro2": "||A(x)||_F^2, the squared Frobenius norm of the corrected sensitivity",
    "dh": "||dh||: L2 distance of a member's first hidden layer post-activation to the "
    "reference network's (P&C, Laplace: the trained network; SWAG, Subspace: the SWA mean)",
    "dy": "||dy||: L2 distance of a member's predicted mean to the reference network's "
    "(the network's output units, as for disagreement)",
    "rank_mixture": "Theorem 3: r_eff(C_bar) = tr(C_bar)^2 / ||C_bar||_F^2 of the mixture C_bar = "
    "mean_m C_m, C_m = A_m A_m^T with A_m the output-level corrected sensitivity of member m "
    "corrected on its own bootstrap subset (the first mechanism.bootstrap_members members)",
    "rank_shared": "Theorem 3: r_eff(C_1), one subset (the first member's) shared by all members",
    "rank_single_mean": "Theorem 3: mean over members of r_eff(C_m)",
    "alignment": "Theorem 3: alpha_bar, mean over m != m' of <C_m, C_m'>_F / (||C_m||_F ||C_m'||_F)",
    "rank_predicted": "Theorem 3's right-hand side (tau/nu)^2 M / (1 + (M - 1) alpha_bar), tau and "
    "nu the mean trace and Frobenius norm of the C_m",
    "trace_cv": "coefficient of variation of tr(C_m) over members (0 under Theorem 3's condition)",
    "norm_cv": "coefficient of variation of ||C_m||_F over members (0 under Theorem 3's condition)",
}
#: Per-point ridge leverage of the layer after perturbed hidden layer ``l``: ``leverage_l{l}``.
MECHANISM_LEVERAGE_PREFIX = "leverage_l"


def __getattr__(name: str) -> Any:
    if name == "MECHANISM_METHODS":  # read from the registry when used
        return mechanism_methods()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), "MECHANISM_METHODS"])

"""Convolutional Perturb-and-Correct (paper, Appendix B) on a PreAct ResNet.

Read in order: :mod:`~pnc.core.conv.patches` (a convolution as a patchwise linear map),
:mod:`~pnc.core.conv.correction` (the patchwise ridge correction, chunked normal equations),
:mod:`~pnc.core.conv.resnet` (the PreAct ResNet and its functional forward),
:mod:`~pnc.core.conv.block_pnc` (single- and multi-block P&C), :mod:`~pnc.core.conv.inference` (member
logits with a shared prefix) and :mod:`~pnc.core.conv.classification` (mixture predictive, OOD scores).
"""

from pnc.core.conv.block_pnc import (
    ConvPnCConfig,
    build_members,
    calibration_cache,
    member,
    n_members,
    substitute,
)
from pnc.core.conv.classification import (
    entropy,
    fit_temperature,
    member_probabilities,
    mixture_nll,
    mixture_probabilities,
    ood_scores,
)
from pnc.core.conv.correction import (
    accumulate_normal_equations,
    chunk_normal_equations,
    conv_ridge_correction,
    dual_ridge_solution,
    ridge_solution,
    stack_chunks,
)
from pnc.core.conv.inference import predict_logits
from pnc.core.conv.patches import conv, conv_as_matmul, kernel_from_matrix, kernel_matrix, unfold
from pnc.core.conv.resnet import PreActBlock, PreActResNet, ResNetConfig, forward, init_variables

__all__ = [
    "ConvPnCConfig",
    "PreActBlock",
    "PreActResNet",
    "ResNetConfig",
    "accumulate_normal_equations",
    "build_members",
    "calibration_cache",
    "chunk_normal_equations",
    "conv",
    "conv_as_matmul",
    "conv_ridge_correction",
    "dual_ridge_solution",
    "entropy",
    "fit_temperature",
    "forward",
    "init_variables",
    "kernel_from_matrix",
    "kernel_matrix",
    "member",
    "member_probabilities",
    "mixture_nll",
    "mixture_probabilities",
    "n_members",
    "ood_scores",
    "predict_logits",
    "ridge_solution",
    "stack_chunks",
    "substitute",
    "unfold",
]

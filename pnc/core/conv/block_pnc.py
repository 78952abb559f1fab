"""Single- and multi-block Perturb-and-Correct for a PreAct ResNet (paper, Appendix B.3, B.5, B.6).

For every selected block ``b`` (the paper's CIFAR choice: stage 3, block 0) and member ``m``:

1. ``U_b``: one random orthonormal basis of ``K`` directions in the flat space of ``Conv_1``'s
   kernel, shared by all members (:func:`pnc.core.perturb_correct.perturbation_basis`; Appendix B.5).
2. ``W_1 <- W_1 + sigma reshape(U_b z)``, ``z ~ N(0, I_K)`` (``perturbation_norm="gaussian"``, the
   paper's formula), or ``sigma reshape(U_b z / ||z||)`` (``"radius"``: ``||dW_1||_F = sigma``, the
   convention of the authors' code for the MLP).
3. ``S_m^(b)``: a bootstrap sample of the calibration images, drawn per member and per block.
4. ``(W_2, b_2)`` refit by the convolutional ridge correction (:mod:`pnc.core.conv.correction`) so that
   ``Conv_2`` on the perturbed ``U = ReLU(BN_2(Conv_1(ReLU(BN_1(x)); W_1 + dW_1)))`` reproduces the
   base model's ``Conv_2`` outputs on ``S_m^(b)``. ``BN_2`` keeps the base running statistics; the
   shortcut is not touched (it does not depend on ``W_1``); targets are ``Conv_2`` outputs.

Multi-block P&C (B.6) processes the blocks in network order; every block's design comes from the
*unperturbed* upstream activations and its targets from the base model, both computed once in one
base forward pass over the calibration images and reused by every member.

Members are a pytree ``{block name: {"conv1": {"kernel"}, "conv2": {"kernel", "bias"}}}`` whose
leaves have a leading member axis ``[M, ...]``; :func:`substitute` puts one member into the base
variables, :mod:`pnc.core.conv.inference` evaluates them all.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from pnc.core.conv import resnet
from pnc.core.conv.correction import (
    SYSTEMS,
    accumulate_normal_equations,
    design_rows,
    dual_ridge_solution,
    ridge_solution,
    stack_chunks,
    use_dual,
)
from pnc.core.conv.patches import kernel_matrix
from pnc.core.perturb_correct import (
    bootstrap_rows,
    check_ensemble_fields,
    check_member_chunk,
    correction_subset_size,
    ensemble_keys,
    layer_bases,
    map_members,
    perturb_and_correct,
)

Array = jax.Array
Members = dict


@dataclasses.dataclass(frozen=True)
class ConvPnCConfig:
    """Hyperparameters of convolutional P&C (paper, Appendix B and Table cifar10-sweep-grid).

    Defaults are the paper's selected CIFAR-10 values (``sigma = 25``, ``bf = 0.05``,
    ``lambda = 1e-3``, ``K = 20``, ``M = 50``, block ``(3, 0)``, chunks of 64 images), with the
    radius convention in which the authors' code applied ``sigma`` (its ``PnCEnsemble`` rescales
    each member's coefficients to norm ``perturbation_size``, so ``||dW_1||_F = sigma``).

    Attributes:
        n_members: ensemble size ``M``.
        rank: perturbation rank ``K``.
        sigma: perturbation scale (see ``perturbation_norm``).
        bootstrap_frac: each member corrects each block on ``max(min_subset, floor(bf * N_cal))``
            calibration images drawn with replacement; ``None``: on all of them.
        ridge: ``lambda >= 0`` (traced in the compiled build).
        blocks: the perturbed blocks as the paper's ``(stage, block)`` pairs (0-based).
        correct: ``False``: the same perturbations without correction (ablation; ``Conv_2`` keeps
            ``W_2`` and a zero bias).
        perturbation_norm: ``"radius"`` (``dW_1 = sigma reshape(U z / ||z||)``) or ``"gaussian"``
            (``sigma reshape(U z)``, the paper's formula), as :class:`pnc.PnCConfig`.
        min_subset: lower bound on the subset size.
        chunk_size: images per chunk of the normal-equation accumulation (memory only).
        system: ``"auto"``, ``"primal"`` or ``"dual"`` (:data:`pnc.core.conv.correction.SYSTEMS`).
    """

    n_members: int = 50
    rank: int = 20
    sigma: float = 25.0
    bootstrap_frac: float | None = 0.05
    ridge: float = 1e-3
    blocks: tuple[tuple[int, int], ...] = ((3, 0),)
    correct: bool = True
    perturbation_norm: str = "radius"
    min_subset: int = 8
    chunk_size: int = 64
    system: str = "auto"

    def __post_init__(self) -> None:
        check_ensemble_fields(self)
        if int(self.chunk_size) < 1:
            raise ValueError(f"chunk_size must be >= 1, got {self.chunk_size}")
        blocks = tuple((int(s), int(b)) for s, b in self.blocks)
        if not blocks or len(set(blocks)) != len(blocks):
            raise ValueError(f"blocks must be distinct (stage, block) pairs, got {self.blocks}")
        if self.system not in SYSTEMS:
            raise ValueError(f"system must be one of {SYSTEMS}, got {self.system!r}")
        for name in ("n_members", "rank", "min_subset", "chunk_size"):
            object.__setattr__(self, name, int(getattr(self, name)))
        object.__setattr__(self, "blocks", tuple(sorted(blocks)))

    def subset_size(self, n_cal: int) -> int:
        """``|S_m^(b)|`` for ``n_cal`` calibration images (the MLP's rule)."""
        return correction_subset_size(n_cal, self.bootstrap_frac, self.min_subset)

    def block_indices(self, resnet_config: resnet.ResNetConfig) -> tuple[int, ...]:
        """Flat indices of :attr:`blocks` in network order."""
        return tuple(sorted(resnet_config.block_index(s, b) for s, b in self.blocks))


def calibration_cache(variables, x_cal: Array, resnet_config, indices, *, batch_size: int = 128):
    """The base model's quantities every member reuses, from one forward pass over ``x_cal``.

    For every block ``i`` in ``indices``: ``(a_i, T_i)`` with ``a_i = ReLU(BN_1(x_i))`` the
    pre-activated, unperturbed block input ``[N, H, W, C_in]`` (``Conv_1``'s input: the design of
    any member is a function of it) and ``T_i`` the base ``Conv_2`` output ``[N, H', W', C_out]``.
    Images are processed ``batch_size`` at a time.
    """
    return _calibration_cache(
        variables, jnp.asarray(x_cal, jnp.float32), resnet_config=resnet_config,
        indices=tuple(indices), batch_size=int(batch_size),
    )  # fmt: skip


@functools.partial(jax.jit, static_argnames=("resnet_config", "indices", "batch_size"))
def _calibration_cache(variables, x_cal, *, resnet_config, indices, batch_size):
    specs = resnet_config.block_specs()

    def one(image):
        inputs = resnet.block_inputs(variables, image[None], resnet_config, indices)
        out = {}
        for i in indices:
            params, stats = resnet.block_parts(variables, specs[i].name)
            a = resnet.pre_activation(params, stats, inputs[i])
            t = resnet.conv2_output(params, resnet.conv2_input(params, stats, a, specs[i]))
            out[i] = (a[0], t[0])
        return out

    return jax.lax.map(one, x_cal, batch_size=min(batch_size, x_cal.shape[0]))


def build_members(
    variables,
    resnet_config: resnet.ResNetConfig,
    x_cal: Array,
    config: ConvPnCConfig,
    *,
    key: Array,
    member_chunk: int | None = None,
    cache: Mapping | None = None,
) -> Members:
    """Build the convolutional P&C ensemble (single- or multi-block).

    Key use: ``key`` splits into a basis key (``U_b`` from ``fold_in(., b)``) and ``M`` member keys;
    a member key splits into a subset key (``S_m^(b)`` from ``fold_in(., b)``) and a coefficient
    key (``z`` from ``fold_in(., b)``), so ``correct=True`` and ``correct=False`` perturb alike.
    With ``sigma = 0`` every member is the base network exactly (``W_2`` kept, zero bias).

    Args:
        variables: the trained ``{"params", "batch_stats"}`` of :class:`pnc.core.conv.PreActResNet`.
        resnet_config: its architecture.
        x_cal: calibration images ``[N, H, W, C]`` (the paper: 1,024 training images).
        config: P&C hyperparameters.
        key: PRNG key.
        member_chunk: members built at once (``vmap`` inside a ``lax.map``); ``None``: all at once.
            The primal system holds a ``(1 + 9 C)^2`` Gram per member being built.
        cache: :func:`calibration_cache` of ``x_cal`` if already computed (it does not depend on
            ``config`` beyond the blocks, so it can be shared across sigmas and ridges).

    Returns:
        Members ``{block name: {"conv1": {"kernel": [M, 3, 3, C_in, C]}, "conv2": {"kernel":
        [M, 3, 3, C, C], "bias": [M, C]}}}``.
    """
    indices = config.block_indices(resnet_config)
    check_member_chunk(member_chunk)
    if cache is None:
        x_cal = jnp.asarray(x_cal, jnp.float32)
        if x_cal.ndim != 4 or x_cal.shape[0] < 1:
            raise ValueError(f"x_cal must be [N, H, W, C] with N >= 1, got {x_cal.shape}")
        cache = calibration_cache(variables, x_cal, resnet_config, indices)
    specs = resnet_config.block_specs()
    parts = {i: resnet.block_parts(variables, specs[i].name) for i in indices}
    k_basis, member_keys = ensemble_keys(key, config.n_members)
    bases = layer_bases(k_basis, _conv1_shapes(parts), config.rank)
    return _build(
        parts, bases, {i: cache[i] for i in indices}, member_keys, np.float32(config.ridge),
        resnet_config=resnet_config, config=dataclasses.replace(config, ridge=0.0),
        indices=indices, member_chunk=member_chunk,
    )  # fmt: skip


@functools.partial(jax.jit, static_argnames=("resnet_config", "config", "indices", "member_chunk"))
def _build(
    parts, bases, cache, member_keys, ridge, *, resnet_config, config, indices, member_chunk
):
    specs = resnet_config.block_specs()

    def corrected(i, params, stats, k_sub):
        """``(W_2, b_2)`` refit on the member's subset for block ``i`` with perturbed ``params``."""
        spec, (a, t) = specs[i], cache[i]
        w2 = params["conv2"]["kernel"]
        n_cal = a.shape[0]
        n_sub = config.subset_size(n_cal)
        if config.bootstrap_frac is None:
            rows = jnp.arange(n_sub)
        else:
            rows = bootstrap_rows(k_sub, i, n_cal, n_sub, per_stream=True)
        index, mask = stack_chunks(n_sub, config.chunk_size)
        select = rows[index]  # [C, b] calibration images of each chunk
        design = lambda s: resnet.conv2_input(params, stats, a[s], spec)
        n_rows = n_sub * t.shape[1] * t.shape[2]
        if use_dual(config.system, n_rows, w2.shape):
            u = jax.lax.map(design, select)  # [C, b, H', W', C]
            y = design_rows(u.reshape((-1,) + u.shape[2:]), w2, 1, resnet.PAD_3X3)
            residual = t[select.reshape(-1)].reshape(y.shape[0], -1) - y @ kernel_matrix(w2)
            row_mask = jnp.repeat(mask.reshape(-1), t.shape[1] * t.shape[2])
            return dual_ridge_solution(y, residual, row_mask, w2, ridge)
        gram, beta = accumulate_normal_equations(
            design, select, t[select], mask, w2, 1, resnet.PAD_3X3
        )
        return ridge_solution(gram, beta, w2, ridge)

    def uncorrected(dws):
        """``W_1 + dW_1`` (the base ``W_1`` for ``dws = {}``), ``W_2`` kept with a zero bias."""
        out = {}
        for i in indices:
            w1, w2 = parts[i][0]["conv1"]["kernel"], parts[i][0]["conv2"]["kernel"]
            w1 = w1 + dws[i] if dws else w1
            out[specs[i].name] = _block_members(w1, w2, jnp.zeros(w2.shape[3], w2.dtype))
        return out

    def blocks_corrected(k_sub, dws):
        out = {}
        for i in indices:
            params, stats = parts[i]
            w1 = params["conv1"]["kernel"] + dws[i]
            perturbed = dict(params, conv1={"kernel": w1})
            out[specs[i].name] = _block_members(w1, *corrected(i, perturbed, stats, k_sub))
        return out

    member = functools.partial(
        perturb_and_correct, config=config, bases=bases, shapes=_conv1_shapes(parts),
        unperturbed=lambda: uncorrected({}), uncorrected=uncorrected, corrected=blocks_corrected,
    )  # fmt: skip
    return map_members(member, member_keys, member_chunk)


def _conv1_shapes(parts) -> dict[int, tuple[int, ...]]:
    return {i: parts[i][0]["conv1"]["kernel"].shape for i in sorted(parts)}


def _block_members(w1, w2, b2) -> dict:
    return {"conv1": {"kernel": w1}, "conv2": {"kernel": w2, "bias": b2}}


def n_members(members: Members) -> int:
    """``M``, the leading axis of every leaf."""
    return int(jax.tree.leaves(members)[0].shape[0])


def member(members: Members, m: int) -> Members:
    """Member ``m``'s block parameters (no member axis)."""
    return jax.tree.map(lambda leaf: leaf[m], members)


def substitute(variables, member_blocks: Mapping) -> dict:
    """The base ``variables`` with one member's blocks in place (``Conv_2`` gains its bias)."""
    params = dict(variables["params"])
    for name, block in member_blocks.items():
        params[name] = dict(params[name], conv1=dict(block["conv1"]), conv2=dict(block["conv2"]))
    return dict(variables, params=params)

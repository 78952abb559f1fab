"""Perturb-and-Correct for any Flax model: name the layers to perturb and to correct.

``pnc.ensemble(model, x_cal, perturb=..., correct=..., config=..., key=...)`` turns a trained
``flax.nnx`` module, or a ``flax.linen`` module with its ``variables``, into an ensemble of
``M`` members (paper, Section 3; Appendix B for convolutions):

1. For every pair ``(perturb[i], correct[i])``, in order, the kernel of layer ``perturb[i]``
   (``Dense``/``Linear`` or ``Conv``) receives ``sigma * reshape(U_i z)`` with ``U_i`` a random
   orthonormal basis of ``K`` directions shared by all members and ``z ~ N(0, I_K)`` per member
   (``perturbation_norm="radius"``: ``z / ||z||``).
2. Layer ``correct[i]`` is refit by ridge regression so that, on the member's correction subset
   ``S_m`` (a bootstrap sample of the calibration rows), its output under the network *as modified
   so far* reproduces its output under the base network: Lemma 1 on the layer's input rows for a
   dense layer (every leading axis, e.g. tokens, is a row), Appendix B's patchwise form for a
   convolution (every output position is a row). Both are one call of
   :func:`pnc.core.perturb_correct.ridge_correction`, shrinking towards ``config.ridge_center``.
3. ``correct=None`` (or ``config.correct=False``) applies the same perturbations with no refit.

Prediction substitutes each member's layers into the base variables and ``vmap``s the model over
the members' layers only: every operation that does not depend on a substituted layer, in
particular everything before the first perturbed layer, is unbatched and runs once per batch.

Keys: ``key`` splits into a basis key (``U_i`` from ``fold_in(., stream_ids[i])``) and ``M``
member keys; a member key splits into a subset key and a coefficient key (``z`` for pair ``i``
from ``fold_in(., stream_ids[i])``), exactly as :func:`pnc.build_members` with layer indices as
stream ids, so the MLP path is reproduced member for member and the ablation shares the
perturbations of P&C. ``stream_ids`` defaults to ``0, 1, ...``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from pnc.core.conv.patches import kernel_from_matrix, kernel_matrix, unfold
from pnc.core.perturb_correct import (
    PnCConfig,
    bootstrap_rows,
    calibration_indices,
    check_member_chunk,
    ensemble_keys,
    layer_bases,
    map_members,
    perturb_and_correct,
    ridge_correction,
)

if TYPE_CHECKING:  # imported on use: flax.nnx adds ~0.16 s to every process importing pnc
    from flax import nnx

Array = jax.Array

__all__ = ["Ensemble", "LayerInfo", "ensemble"]


@dataclasses.dataclass(frozen=True)
class LayerInfo:
    """What the ensemble needs to know of one named layer.

    Attributes:
        path: the ``"/"``-separated name given by the user.
        kind: ``"dense"`` or ``"conv"``.
        keys: location of the layer's ``{"kernel", "bias"}`` in the variable tree.
        kernel_shape: ``[d_in, d_out]`` (dense) or HWIO ``[k_h, k_w, C_in, C_out]`` (conv).
        has_bias: whether the layer has a bias.
        strides: the convolution's strides (``None`` for dense).
        padding: the convolution's padding as ``"SAME"``/``"VALID"`` or ``((lo, hi), (lo, hi))``.
    """

    path: str
    kind: str
    keys: tuple
    kernel_shape: tuple[int, ...]
    has_bias: bool
    strides: tuple[int, ...] | None = None
    padding: Any = None


# ----------------------------------------------------------------------------- model adapters


def _get(tree, keys):
    for k in keys:
        tree = tree[k]
    return tree


def _set(tree, keys, value):
    """A copy of the nested dict ``tree`` with ``value`` at ``keys`` (copies along the path)."""
    if not keys:
        return value
    out = dict(tree)
    out[keys[0]] = _set(tree[keys[0]], keys[1:], value)
    return out


def _normalise_padding(path: str, padding) -> Any:
    if isinstance(padding, str):
        if padding.upper() in ("SAME", "VALID"):
            return padding.upper()
        raise ValueError(
            f"layer {path!r}: padding {padding!r} is not supported by the patchwise correction "
            "(expected 'SAME', 'VALID', an int or (low, high) pairs)"
        )
    if isinstance(padding, int):
        return ((padding, padding), (padding, padding))
    pairs = []
    for p in padding:
        pairs.append((int(p), int(p)) if isinstance(p, int) else (int(p[0]), int(p[1])))
    if len(pairs) != 2:
        raise ValueError(f"layer {path!r}: expected a 2-D convolution, got padding {padding!r}")
    return tuple(pairs)


def _pair(value, n: int = 2) -> tuple[int, ...]:
    if value is None:
        return (1,) * n
    if isinstance(value, int):
        return (int(value),) * n
    return tuple(int(v) for v in value)


def _describe(path: str, module, keys: tuple, kind: str, kernel_shape) -> LayerInfo:
    """Validate a Dense/Linear or Conv module's attributes and describe it."""
    if kind == "dense":
        if len(kernel_shape) != 2:
            raise ValueError(f"layer {path!r}: expected a [d_in, d_out] kernel, got {kernel_shape}")
        return LayerInfo(path, "dense", keys, tuple(kernel_shape), bool(module.use_bias))
    if len(kernel_shape) != 4:
        raise ValueError(
            f"layer {path!r}: only 2-D convolutions are supported, got kernel {kernel_shape}"
        )
    groups = int(getattr(module, "feature_group_count", 1))
    if groups != 1:
        raise ValueError(
            f"layer {path!r}: feature_group_count={groups}; the patchwise correction covers "
            "ungrouped convolutions only (expected 1)"
        )
    for name in ("input_dilation", "kernel_dilation"):
        if _pair(getattr(module, name, None)) != (1, 1):
            raise ValueError(
                f"layer {path!r}: {name}={getattr(module, name)}; the patchwise correction "
                "covers undilated convolutions only (expected 1)"
            )
    if getattr(module, "mask", None) is not None:
        raise ValueError(f"layer {path!r}: masked convolutions are not supported")
    return LayerInfo(
        path, "conv", keys, tuple(kernel_shape), bool(module.use_bias),
        strides=_pair(module.strides), padding=_normalise_padding(path, module.padding),
    )  # fmt: skip


class _Adapter:
    """A model seen as ``apply(tree, x, record) -> (output, {path: layer input})``."""

    tree: Any
    _key: Any = None

    def __hash__(self) -> int:
        return hash(self._key) if self._key is not None else id(self)

    def __eq__(self, other) -> bool:
        if self._key is None or not isinstance(other, _Adapter) or other._key is None:
            return self is other
        return type(self) is type(other) and self._key == other._key

    def apply(self, tree, x, record: frozenset, offsets=None) -> tuple[Any, dict]:
        """Run the model; ``offsets[path]`` is added to that layer's output (a bias given to a
        corrected layer that has none)."""
        raise NotImplementedError

    def layer_info(self, path: str) -> LayerInfo:
        raise NotImplementedError

    def calls(self, x, paths: Sequence[str]) -> dict[str, int]:
        """How often each layer in ``paths`` is called on ``x`` (shape evaluation only)."""
        raise NotImplementedError


class _LinenAdapter(_Adapter):
    def __init__(self, model: nn.Module, variables):
        if variables is None or "params" not in variables:
            raise ValueError("a flax.linen model needs its variables, with a 'params' collection")
        self.model = model
        self.tree = jax.tree.map(jnp.asarray, dict(variables))
        self._modules: dict[str, nn.Module] = {}
        try:  # compiled builds and predictions are reused across calls for an equal model
            hash(model)
            self._key = model
        except TypeError:
            self._key = None

    def _run(self, tree, x, record, on_call=None, offsets=None):
        captured: dict[str, Array] = {}
        offsets = offsets or {}

        def interceptor(next_fun, args, kwargs, context):
            if context.method_name == "__call__":
                path = "/".join(context.module.path)
                if on_call is not None:
                    on_call(path, context.module, args)
                if path in record:
                    captured[path] = args[0]
                if path in offsets:
                    return next_fun(*args, **kwargs) + offsets[path]
            return next_fun(*args, **kwargs)

        with nn.intercept_methods(interceptor):
            out = self.model.apply(tree, x)
        return out, captured

    def apply(self, tree, x, record, offsets=None):
        return self._run(tree, x, record, offsets=offsets)

    def scan(self, x):
        """Record every called submodule (path -> module) and its number of calls."""
        counts: dict[str, int] = {}

        def on_call(path, module, args):
            counts[path] = counts.get(path, 0) + 1
            self._modules.setdefault(path, module.clone(parent=None))

        jax.eval_shape(lambda t, xx: self._run(t, xx, frozenset(), on_call)[0], self.tree, x)
        return counts

    def layer_info(self, path):
        if path not in self._modules:
            raise ValueError(
                f"layer {path!r} does not exist or is never called (called submodules: "
                f"{', '.join(sorted(p for p in self._modules if p)) or 'none'})"
            )
        module = self._modules[path]
        keys = ("params",) + tuple(path.split("/"))
        if isinstance(module, nn.Dense):
            kind = "dense"
        elif isinstance(module, nn.Conv):
            kind = "conv"
        else:
            raise ValueError(
                f"layer {path!r} is a {type(module).__name__}; expected flax.linen.Dense or "
                "flax.linen.Conv"
            )
        try:
            kernel = _get(self.tree, keys + ("kernel",))
        except (KeyError, TypeError) as err:
            raise ValueError(f"layer {path!r} has no kernel in variables['params']") from err
        return _describe(path, module, keys, kind, kernel.shape)


def _iter_modules(module: Any) -> Any:
    """``(path, submodule)`` pairs of an NNX module: ``nnx.iter_modules`` where Flax has it
    (0.12.2 on), else the method it replaced (Flax 0.11)."""
    from flax import nnx

    iterate = getattr(nnx, "iter_modules", None)
    return iterate(module) if iterate is not None else module.iter_modules()


class _NNXAdapter(_Adapter):
    def __init__(self, model: nnx.Module):
        from flax import nnx

        self.graphdef, state = nnx.split(model)
        self._state = state
        self.tree = jax.tree.map(jnp.asarray, nnx.to_pure_dict(state))
        self._key = self.graphdef  # hashable: compiled code is reused for an equal structure
        self._paths = {
            "/".join(str(k) for k in path): (tuple(path), module)
            for path, module in _iter_modules(model)
        }

    def _merged(self, tree):
        from flax import nnx

        state = jax.tree.map(lambda a: a, self._state)
        nnx.replace_by_pure_dict(state, tree)
        module = nnx.merge(self.graphdef, state)
        module.eval()  # inference mode: Dropout off, BatchNorm on its running statistics
        return module

    def _run(self, tree, x, record, on_call=None, offsets=None):
        module = self._merged(tree)
        offsets = offsets or {}
        targets = {}
        for path, sub in _iter_modules(module):
            name = "/".join(str(k) for k in path)
            if name in record or name in offsets or on_call is not None and name in on_call[0]:
                targets[id(sub)] = (name, sub)
        captured: dict[str, Array] = {}
        patched = []
        for cls in {type(sub) for _, sub in targets.values()}:
            original = cls.__call__
            own = "__call__" in cls.__dict__

            def wrapped(self, *args, _original=original, **kwargs):
                hit = targets.get(id(self))
                if hit is not None:
                    if hit[0] in record:
                        captured[hit[0]] = args[0]
                    if on_call is not None:
                        on_call[1](hit[0])
                    if hit[0] in offsets:
                        return _original(self, *args, **kwargs) + offsets[hit[0]]
                return _original(self, *args, **kwargs)

            cls.__call__ = wrapped
            patched.append((cls, original, own))
        try:
            out = module(x)
        finally:
            for cls, original, own in reversed(patched):
                if own:
                    cls.__call__ = original
                else:
                    del cls.__call__
        return out, captured

    def apply(self, tree, x, record, offsets=None):
        return self._run(tree, x, record, offsets=offsets)

    def calls(self, x, paths):
        counts = {p: 0 for p in paths}

        def hit(name):
            counts[name] += 1

        run = lambda t, xx: self._run(t, xx, frozenset(), (set(paths), hit))[0]
        jax.eval_shape(run, self.tree, x)
        return counts

    def layer_info(self, path):
        from flax import nnx

        if path not in self._paths or not path:
            raise ValueError(
                f"layer {path!r} does not exist (submodules: "
                f"{', '.join(sorted(p for p in self._paths if p)) or 'none'})"
            )
        keys, module = self._paths[path]
        if isinstance(module, nnx.Linear):
            kind = "dense"
        elif isinstance(module, nnx.Conv):
            kind = "conv"
        else:
            raise ValueError(
                f"layer {path!r} is a {type(module).__name__}; expected flax.nnx.Linear or "
                "flax.nnx.Conv"
            )
        return _describe(path, module, keys, kind, _get(self.tree, keys + ("kernel",)).shape)


# ----------------------------------------------------------------------------- the ensemble


def _layer(tree, info: LayerInfo, offsets: dict | None = None) -> dict:
    """A layer's ``{"kernel", "bias"}``; a bias-free layer has ``{"kernel"}`` only, or, when
    ``offsets`` is given (the layer is corrected), its output offset as ``"bias"`` (zero before
    the correction)."""
    layer = _get(tree, info.keys)
    if info.has_bias:
        return {"kernel": layer["kernel"], "bias": layer["bias"]}
    if offsets is None:
        return {"kernel": layer["kernel"]}
    bias = offsets.get(info.path)
    if bias is None:
        bias = jnp.zeros(info.kernel_shape[-1], layer["kernel"].dtype)
    return {"kernel": layer["kernel"], "bias": bias}


def _substitute(tree, infos: Sequence[LayerInfo], layers: dict):
    """``(tree, offsets)``: the layers put into ``tree``; the biases of bias-free layers are
    returned as output offsets."""
    offsets = {}
    for info in infos:
        layer = dict(layers[info.path])
        if not info.has_bias and "bias" in layer:
            offsets[info.path] = layer.pop("bias")
        tree = _set(tree, info.keys, dict(_get(tree, info.keys), **layer))
    return tree, offsets


def _rows(info: LayerInfo, inputs: Array) -> Array:
    """The layer's design rows: ``[R, d_in]`` (dense) or the patches ``[R, C_in k^2]`` (conv)."""
    if info.kind == "dense":
        return inputs.reshape(-1, info.kernel_shape[0])
    patches = unfold(inputs, info.kernel_shape[:2], info.strides, info.padding)
    return patches.reshape(-1, patches.shape[-1])


def _refit(info: LayerInfo, layer: dict, base_in, pert_in, ridge, center) -> dict:
    """The ridge correction of one layer (Lemma 1; patchwise for a convolution)."""
    kernel = layer["kernel"]
    matrix = kernel if info.kind == "dense" else kernel_matrix(kernel)
    k_new, b_new = ridge_correction(
        _rows(info, base_in), _rows(info, pert_in), matrix, layer["bias"], ridge, center=center
    )
    if info.kind == "conv":
        k_new = kernel_from_matrix(k_new, info.kernel_shape)
    return {"kernel": k_new, "bias": b_new}


@dataclasses.dataclass(frozen=True)
class _Plan:
    """The static part of a build and of prediction (hashable: the model's structure, layers)."""

    adapter: _Adapter
    perturb: tuple[LayerInfo, ...]
    correct: tuple[LayerInfo, ...] | None
    member_chunk: int | None

    @property
    def infos(self) -> tuple[LayerInfo, ...]:
        seen, out = set(), []
        for info in self.perturb + (self.correct or ()):
            if info.path not in seen:
                seen.add(info.path)
                out.append(info)
        return tuple(out)


@jax.tree_util.register_pytree_node_class
class Ensemble:
    """P&C members of a Flax model; call it on a batch to get member outputs ``[M, ...]``.

    Attributes:
        members: ``{layer path: {"kernel": [M, ...], "bias": [M, ...]}}`` for every perturbed or
            corrected layer (the other layers are the base model's).
        base: the base variable tree (linen ``variables``, or the NNX state as a pure dict).
        n_members: ``M``.
        perturb, correct: the layer paths (``correct`` is ``None`` for the ablation).
    """

    def __init__(self, members: dict, base, plan: _Plan):
        self.members = members
        self.base = base
        self._plan = plan

    def tree_flatten(self):
        return (self.members, self.base), self._plan

    @classmethod
    def tree_unflatten(cls, plan, children):
        return cls(children[0], children[1], plan)

    @property
    def n_members(self) -> int:
        return int(jax.tree.leaves(self.members)[0].shape[0])

    @property
    def perturb(self) -> tuple[str, ...]:
        return tuple(i.path for i in self._plan.perturb)

    @property
    def correct(self) -> tuple[str, ...] | None:
        return None if self._plan.correct is None else tuple(i.path for i in self._plan.correct)

    def member_variables(self, m: int):
        """The base variable tree with member ``m``'s layers substituted (a corrected layer
        without a bias keeps its kernel here; its new bias is in ``members[path]["bias"]``)."""
        return _substitute(self.base, self._plan.infos, jax.tree.map(lambda a: a[m], self.members))[
            0
        ]

    def __call__(self, x) -> Any:
        """Member outputs for a batch ``x``: the model's output pytree with a leading ``[M]``.

        The members' layers are the only batched values, so everything that does not depend on
        them (everything before the first perturbed layer included) is computed once. With
        ``member_chunk`` the members run in chunks, in one compiled program.
        """
        return _predict(self.members, self.base, x, plan=self._plan)

    def full_passes(self, x) -> Any:
        """The same outputs from ``M`` independent full forward passes (no shared prefix):
        every leaf of the variable tree is given the member axis. For cost comparisons."""
        return _predict_full(self.members, self.base, x, plan=self._plan)


@functools.partial(jax.jit, static_argnames=("plan",))
def _predict(members, base, x, *, plan: _Plan):
    def one(layers):
        tree, offsets = _substitute(base, plan.infos, layers)
        return plan.adapter.apply(tree, x, frozenset(), offsets)[0]

    m = jax.tree.leaves(members)[0].shape[0]
    chunk = plan.member_chunk
    if chunk is None or chunk >= m:
        return jax.vmap(one)(members)
    parts = [
        jax.vmap(one)(jax.tree.map(lambda a, s=s: a[s : s + chunk], members))
        for s in range(0, m, chunk)
    ]
    return jax.tree.map(lambda *a: jnp.concatenate(a, axis=0), *parts)


@functools.partial(jax.jit, static_argnames=("plan",))
def _predict_full(members, base, x, *, plan: _Plan):
    m = jax.tree.leaves(members)[0].shape[0]
    trees = jax.tree.map(lambda a: jnp.broadcast_to(a, (m,) + a.shape), base)
    trees, offsets = _substitute(trees, plan.infos, members)
    return jax.vmap(lambda t, o: plan.adapter.apply(t, x, frozenset(), o)[0])(trees, offsets)


def _depends(fn: Callable, arg) -> bool:
    """Whether the output of ``fn(arg)`` depends on ``arg`` (data flow in its jaxpr)."""
    closed = jax.make_jaxpr(fn)(arg)
    dependent = set(closed.jaxpr.invars)

    def hits(vs):
        return any(not hasattr(v, "val") and v in dependent for v in vs)

    for eqn in closed.jaxpr.eqns:
        if hits(eqn.invars):
            dependent.update(eqn.outvars)
    return hits(closed.jaxpr.outvars)


def ensemble(
    model,
    x_cal,
    *,
    perturb: Sequence[str],
    correct: Sequence[str] | None,
    config: PnCConfig,
    key: Array,
    variables=None,
    member_chunk: int | None = None,
    stream_ids: Sequence[int] | None = None,
) -> Ensemble:
    """Build a P&C ensemble of a trained Flax model (see the module docstring).

    Args:
        model: a ``flax.nnx.Module`` mapping a batch to outputs (``variables`` must be ``None``;
            it is evaluated in ``eval()`` mode on a copy), or a ``flax.linen.Module`` whose
            ``apply(variables, x)`` is its inference-mode prediction.
        x_cal: calibration inputs ``[N, ...]`` (finite), the rows of ``D_cal`` (or the pool it is
            drawn from when ``config.calibration_size`` is set).
        perturb: layer paths ``"a/b"`` of ``Dense``/``Linear`` or ``Conv`` layers to perturb.
        correct: ``correct[i]`` is refit after ``perturb[i]`` and must consume its output;
            ``None`` gives the uncorrected ablation.
        config: :class:`pnc.PnCConfig` (``config.layers`` must be ``None``: the paths choose the
            layers; ``config.correct=False`` also gives the ablation).
        key: PRNG key.
        variables: the linen model's variables (``params`` and e.g. ``batch_stats``).
        member_chunk: members built and evaluated at once; ``None``: all at once.
        stream_ids: integers folded into the key for each pair (default ``0, 1, ...``).

    Returns:
        :class:`Ensemble`.

    Raises:
        ValueError: naming the path and what was expected, before any solve, for a missing or
            unsupported layer, a ``correct`` layer not downstream of its ``perturb`` layer,
            mismatched lengths, a grouped or dilated convolution, a layer called more than once,
            or non-finite calibration inputs.
    """
    if not isinstance(config, PnCConfig):
        raise TypeError(f"config must be a pnc.PnCConfig, got {type(config).__name__}")
    if config.layers is not None:
        raise ValueError(
            f"config.layers={config.layers} selects MLP layers; pnc.ensemble takes the layers "
            "from perturb (expected config.layers=None)"
        )
    # an nnx model's class comes from flax.nnx, so a process that never imported it has none
    nnx = sys.modules.get("flax.nnx")
    if nnx is not None and isinstance(model, nnx.Module):
        if variables is not None:
            raise ValueError("variables must be None for a flax.nnx model (its state is inside)")
        adapter: _Adapter = _NNXAdapter(model)
    elif isinstance(model, nn.Module):
        adapter = _LinenAdapter(model, variables)
    else:
        raise TypeError(f"model must be a flax.nnx.Module or flax.linen.Module, got {type(model)}")
    perturb = [str(p) for p in perturb]
    if not perturb:
        raise ValueError("perturb must name at least one layer")
    if len(set(perturb)) != len(perturb):
        raise ValueError(f"perturb names a layer twice: {perturb}")
    if correct is not None:
        correct = [str(c) for c in correct]
        if len(correct) != len(perturb):
            raise ValueError(
                f"perturb and correct must have the same length, got {len(perturb)} and "
                f"{len(correct)}"
            )
        if len(set(correct)) != len(correct):
            raise ValueError(f"correct names a layer twice: {correct}")
    if stream_ids is None:
        stream_ids = tuple(range(len(perturb)))
    stream_ids = tuple(int(s) for s in stream_ids)
    if len(stream_ids) != len(perturb) or len(set(stream_ids)) != len(stream_ids):
        raise ValueError(f"stream_ids must be {len(perturb)} distinct integers, got {stream_ids}")
    check_member_chunk(member_chunk)

    x_np = np.asarray(x_cal)
    if x_np.ndim < 1 or x_np.shape[0] < 1:
        raise ValueError(f"x_cal must be [N, ...] with N >= 1, got shape {x_np.shape}")
    if not np.all(np.isfinite(x_np)):
        bad = int(np.sum(~np.isfinite(x_np).reshape(x_np.shape[0], -1).all(axis=1)))
        raise ValueError(f"x_cal holds non-finite values in {bad} of its {x_np.shape[0]} rows")
    x_cal = jnp.asarray(x_np, jnp.float32 if np.issubdtype(x_np.dtype, np.floating) else None)
    probe = x_cal[:1]

    # the layers exist, are supported, and are called once
    if isinstance(adapter, _LinenAdapter):
        counts = adapter.scan(probe)
    else:
        counts = adapter.calls(probe, perturb + (correct or []))
    p_infos = tuple(adapter.layer_info(p) for p in perturb)
    c_infos = None if correct is None else tuple(adapter.layer_info(c) for c in correct)
    for info in p_infos + (c_infos or ()):
        if counts.get(info.path, 0) != 1:
            raise ValueError(
                f"layer {info.path!r} is called {counts.get(info.path, 0)} times per forward "
                "pass; expected exactly once"
            )
    if c_infos is not None:
        for p_info, c_info in zip(p_infos, c_infos, strict=True):
            if c_info.path == p_info.path:
                raise ValueError(f"layer {c_info.path!r} cannot correct itself")

            def correct_input(kernel, p_info=p_info, c_info=c_info):
                tree = _set(adapter.tree, p_info.keys + ("kernel",), kernel)
                return adapter.apply(tree, probe, frozenset([c_info.path]))[1][c_info.path]

            if not _depends(correct_input, _get(adapter.tree, p_info.keys + ("kernel",))):
                raise ValueError(
                    f"correct layer {c_info.path!r} does not consume the output of perturb "
                    f"layer {p_info.path!r} (expected a layer downstream of it)"
                )
    if config.correct is False:
        c_infos = None
    for info in p_infos:
        if config.rank > math.prod(info.kernel_shape):
            raise ValueError(
                f"layer {info.path!r}: rank {config.rank} exceeds its "
                f"{math.prod(info.kernel_shape)} kernel entries"
            )

    plan = _Plan(adapter, p_infos, c_infos, member_chunk)
    rows = calibration_indices(key, x_cal.shape[0], config)
    if rows is not None:
        x_cal = x_cal[rows]
    k_basis, member_keys = ensemble_keys(key, config.n_members)
    shapes = {s: info.kernel_shape for s, info in zip(stream_ids, p_infos, strict=True)}
    bases = layer_bases(k_basis, shapes, config.rank)
    static = dataclasses.replace(config, ridge=0.0, calibration_size=None)
    members = _build(
        adapter.tree, bases, x_cal, member_keys, np.float32(config.ridge), plan=plan,
        config=static, stream_ids=stream_ids,
    )  # fmt: skip
    return Ensemble(members, adapter.tree, plan)


@functools.partial(jax.jit, static_argnames=("plan", "config", "stream_ids"))
def _build(tree, bases, x_cal, member_keys, ridge, *, plan: _Plan, config, stream_ids):
    adapter = plan.adapter
    n_cal = x_cal.shape[0]
    n_sub = config.subset_size(n_cal)
    bootstrap = config.bootstrap_frac is not None
    per_layer = bootstrap and config.subset_per_layer
    infos = plan.infos

    def subset(k_sub, s):
        if not bootstrap:
            return x_cal
        return x_cal[bootstrap_rows(k_sub, s, n_cal, n_sub, per_stream=per_layer)]

    refit_paths = frozenset(c.path for c in plan.correct or ())

    def layers_of(current, offsets):
        return {
            info.path: _layer(current, info, offsets if info.path in refit_paths else None)
            for info in infos
        }

    def uncorrected(dws):
        current = tree
        for s, info in zip(stream_ids, plan.perturb, strict=True):
            keys = info.keys + ("kernel",)
            current = _set(current, keys, _get(current, keys) + dws[s])
        return layers_of(current, {})

    def corrected(k_sub, dws):
        if plan.correct is None:
            return uncorrected(dws)
        current = tree
        targets = frozenset(c.path for c in plan.correct)
        offsets = {}
        xs = {}
        base_inputs = {}
        for i, s in enumerate(stream_ids):
            if per_layer or i == 0:
                x = subset(k_sub, s)
                base = adapter.apply(tree, x, targets)[1]
            xs[i], base_inputs[i] = x, base[plan.correct[i].path]
        for i, (p_info, c_info) in enumerate(zip(plan.perturb, plan.correct, strict=True)):
            keys = p_info.keys + ("kernel",)
            current = _set(current, keys, _get(current, keys) + dws[stream_ids[i]])
            record = frozenset([c_info.path])
            pert_in = adapter.apply(current, xs[i], record, offsets)[1][c_info.path]
            refit = _refit(
                c_info, _layer(current, c_info, offsets), base_inputs[i], pert_in, ridge,
                config.ridge_center,
            )  # fmt: skip
            if not c_info.has_bias:
                offsets[c_info.path] = refit.pop("bias")
            current = _set(current, c_info.keys, dict(_get(current, c_info.keys), **refit))
        return layers_of(current, offsets)

    shapes = {s: info.kernel_shape for s, info in zip(stream_ids, plan.perturb, strict=True)}
    member = functools.partial(
        perturb_and_correct, config=config, bases=bases, shapes=shapes,
        unperturbed=lambda: layers_of(tree, {}), uncorrected=uncorrected, corrected=corrected,
    )  # fmt: skip
    return map_members(member, member_keys, plan.member_chunk)

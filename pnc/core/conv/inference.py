"""Member logits with a shared prefix: the base network up to the first perturbed block runs once.

Every member of convolutional P&C equals the base network before its first perturbed block
``b_1``. :func:`predict_logits` therefore computes the stem and blocks ``0 .. b_1 - 1`` once per
input batch and runs only blocks ``b_1 ..`` and the head per member (members ``vmap``-ed, or in
chunks of ``member_chunk``). ``share_prefix=False`` instead runs the whole network once per member,
as the authors' code did; both give the same logits (up to float rounding).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from pnc.core.conv import resnet
from pnc.core.conv.block_pnc import Members, member, n_members, substitute

Array = jax.Array


def first_block(members: Members, resnet_config: resnet.ResNetConfig) -> int:
    """Index of the first block the members replace."""
    index = {spec.name: i for i, spec in enumerate(resnet_config.block_specs())}
    return min(index[name] for name in members)


def predict_logits(
    variables,
    members: Members,
    x: Array,
    resnet_config: resnet.ResNetConfig,
    *,
    share_prefix: bool = True,
    member_chunk: int | None = None,
    batch_size: int = 128,
) -> Array:
    """Logits of every member on images ``x``.

    Args:
        variables: base ``{"params", "batch_stats"}``.
        members: from :func:`pnc.core.conv.build_members` (leading ``[M]`` axis).
        x: images ``[N, H, W, C]``.
        resnet_config: the architecture.
        share_prefix: compute the stem and the blocks before the first perturbed block once per
            batch (default); ``False`` recomputes the whole network for each member.
        member_chunk: with ``share_prefix``, members evaluated at once (``None``: all, ``vmap``).
        batch_size: images per compiled call (the last batch is padded).

    Returns:
        ``[M, N, num_classes]`` (float32).
    """
    x = jnp.asarray(x, jnp.float32)
    if x.ndim != 4:
        raise ValueError(f"x must be [N, H, W, C], got shape {x.shape}")
    n = x.shape[0]
    b = max(1, min(int(batch_size), n))
    pad = -n % b
    xs = jnp.pad(x, ((0, pad), (0, 0), (0, 0), (0, 0))) if pad else x
    first = first_block(members, resnet_config)
    outs = []
    for start in range(0, n + pad, b):
        xb = xs[start : start + b]
        if share_prefix:
            outs.append(
                shared_prefix_logits(
                    variables,
                    members,
                    xb,
                    resnet_config=resnet_config,
                    first=first,
                    member_chunk=member_chunk,
                )
            )
        else:
            outs.append(
                jnp.stack(
                    [
                        _full(substitute(variables, member(members, m)), xb, resnet_config)
                        for m in range(n_members(members))
                    ]
                )
            )
    return jnp.concatenate(outs, axis=1)[:, :n]


@functools.partial(jax.jit, static_argnames=("resnet_config",))
def _full(variables, x, resnet_config):
    return resnet.forward(variables, x, resnet_config)


@functools.partial(jax.jit, static_argnames=("resnet_config", "first", "member_chunk"))
def shared_prefix_logits(variables, members, x, *, resnet_config, first, member_chunk):
    """Logits ``[M, B, num_classes]`` of every member on one batch ``x [B, H, W, C]``, the stem and
    blocks ``0 .. first - 1`` computed once (jitted; :func:`predict_logits` calls it per batch).

    Args:
        variables: base ``{"params", "batch_stats"}``.
        members: the members' replaced blocks (leading ``[M]`` axis).
        x: one batch of images.
        resnet_config: the architecture (static).
        first: index of the first block the members replace (:func:`first_block`; static).
        member_chunk: members evaluated at once (``None``: all, ``vmap``; static).
    """
    h = resnet.blocks(variables, resnet.stem(variables, x), resnet_config, 0, first)
    n_blocks = len(resnet_config.block_specs())

    def rest(member_blocks):
        v = substitute(variables, member_blocks)
        return resnet.head(v, resnet.blocks(v, h, resnet_config, first, n_blocks))

    if member_chunk is None or member_chunk >= n_members(members):
        return jax.vmap(rest)(members)
    return jax.lax.map(rest, members, batch_size=member_chunk)

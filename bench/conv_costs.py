"""Cost of convolutional P&C on a full-width PreAct ResNet-18 at 32x32: ``python -m bench.conv_costs``.

The paper's CIFAR-10 setting (Section 5.4, Appendix D): single-block P&C on block ``(3, 0)``
with 1,024 calibration images, ``bootstrap_frac = 0.05`` (51 images per member), ``K = 20``,
``sigma = 25``, ``lambda = 1e-3``, chunks of 64 images. Weights and images are random (only the
sizes matter). Each part runs in its own process so that its peak resident memory (``ru_maxrss``)
is its own; times are wall clock after a warm-up call that compiles (compile times separately).

Reported (JSON on stdout):

- ``build``: the calibration cache (one base forward pass over the 1,024 images, shared by all
  members), then the members for ``--members-small`` and ``--members-large`` members (built one
  at a time, ``member_chunk = 1``), each with its process's peak memory; the per-member time is
  the difference quotient of the two, and the time and memory for 50 members are extrapolated
  linearly (``extrapolated: true``) unless ``--members-large 50`` was measured directly.
- ``predict``: logits per image for ``--pred-images`` images with the shared prefix (stem and
  blocks 0-5 once, the members only through blocks 6-7 and the head) and with the whole network
  recomputed for each member (the authors' evaluation), measured for ``--pred-members``
  members, with the prefix timed alone, and extrapolated linearly to 50 members; the
  ``full_over_shared`` ratios are the point. Prediction members are built without correction
  (same shapes and cost as corrected ones; ``Conv_2`` with its zero bias).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import jax
import jax.numpy as jnp

from bench.__main__ import environment
from bench.command_line import bench_parser, emit
from pnc.core.conv import (
    ConvPnCConfig,
    ResNetConfig,
    build_members,
    calibration_cache,
    init_variables,
    resnet,
)
from pnc.core.conv.inference import predict_logits

REPEATS = 2
"""Timed calls after the compiling one; the fastest is reported (the machine is shared)."""
PAPER_BLOCK = (3, 0)
CIFAR_CONFIG = ConvPnCConfig(
    rank=20, sigma=25.0, bootstrap_frac=0.05, ridge=1e-3, blocks=(PAPER_BLOCK,), chunk_size=64
)


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def _timed(fn):
    start = time.perf_counter()
    out = jax.block_until_ready(fn())
    return time.perf_counter() - start, out


def _best(fn, repeats: int):
    """``(first call s, fastest of `repeats` further calls s, output)``: the first call compiles."""
    first, out = _timed(fn)
    times = [_timed(fn)[0] for _ in range(repeats)]
    return first, min(times), out


def _setup(n_images: int, seed: int = 0):
    config = ResNetConfig()
    variables = init_variables(config, jax.random.key(seed), (32, 32, 3))
    x = jax.random.normal(jax.random.key(seed + 1), (n_images, 32, 32, 3), jnp.float32)
    return config, variables, x


def part_build(members: int, cal_images: int) -> dict:
    """Time the cache and a build of ``members`` members in this process."""
    config, variables, x = _setup(cal_images)
    pnc_config = ConvPnCConfig(**{**CIFAR_CONFIG.__dict__, "n_members": members})
    indices = pnc_config.block_indices(config)
    first_cache, cache_s, cache = _best(
        lambda: calibration_cache(variables, x, config, indices), REPEATS
    )
    build = lambda: build_members(
        variables, config, x, pnc_config, key=jax.random.key(1), member_chunk=1, cache=cache
    )
    first_build, build_s, out = _best(build, REPEATS)
    if not all(bool(jnp.all(jnp.isfinite(leaf))) for leaf in jax.tree.leaves(out)):
        raise RuntimeError("non-finite members in the benchmark")
    member_bytes = sum(leaf[0].nbytes for leaf in jax.tree.leaves(out))
    return {
        "members": members,
        "cache_s": cache_s,
        "cache_compile_s": max(first_cache - cache_s, 0.0),
        "build_s": build_s,
        "build_compile_s": max(first_build - build_s, 0.0),
        "member_mib": member_bytes / 2**20,
        "peak_rss_mib": _peak_mib(),
    }


def part_predict(members: int, images: int, cal_images: int) -> dict:
    """Time shared-prefix and full prediction for ``members`` members on ``images`` images."""
    config, variables, x = _setup(cal_images)
    pnc_config = ConvPnCConfig(**{**CIFAR_CONFIG.__dict__, "n_members": members, "correct": False})
    ens = build_members(variables, config, x, pnc_config, key=jax.random.key(3))
    x_test = x[:images]
    first = pnc_config.block_indices(config)[0]
    prefix = jax.jit(lambda v, xb: resnet.blocks(v, resnet.stem(v, xb), config, 0, first))
    out = {"members": members, "images": images}
    compile_s, out["prefix_s"], _ = _best(lambda: prefix(variables, x_test), REPEATS)
    out["prefix_compile_s"] = max(compile_s - out["prefix_s"], 0.0)
    for name, share in (("shared", True), ("full", False)):
        run = lambda share=share: predict_logits(
            variables, ens, x_test, config, share_prefix=share, member_chunk=1, batch_size=images
        )
        first_s, seconds, _ = _best(run, REPEATS)
        out[f"{name}_s"] = seconds
        out[f"{name}_compile_s"] = max(first_s - seconds, 0.0)
    return out


def _run_part(args: list[str]) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.conv_costs", "--part", *args],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> dict:
    parser = bench_parser(
        __doc__,
        cal_images=1024,
        members_small=1,
        members_large=4,
        pred_images=32,
        pred_members=4,
        target_members=50,
    )
    parser.add_argument("--part", nargs="+", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.part:  # a child process: one measurement, one JSON line
        kind, *nums = args.part
        nums = [int(n) for n in nums]
        result = part_build(*nums) if kind == "build" else part_predict(*nums)
        print(json.dumps(result))
        return result

    m_target = args.target_members
    small = _run_part(["build", str(args.members_small), str(args.cal_images)])
    large = _run_part(["build", str(args.members_large), str(args.cal_images)])
    # conservative: the larger build's time per member, fixed costs included
    per_member = large["build_s"] / large["members"]
    # marginal: the difference quotient of the two builds (noisy on a loaded machine)
    marginal = (large["build_s"] - small["build_s"]) / (large["members"] - small["members"])
    measured_target = large["members"] == m_target
    build = {
        "settings": {
            **{k: v for k, v in CIFAR_CONFIG.__dict__.items() if k != "n_members"},
            "blocks": [list(b) for b in CIFAR_CONFIG.blocks],
            "calibration_images": args.cal_images,
            "images_per_member": CIFAR_CONFIG.subset_size(args.cal_images),
            "member_chunk": 1,
            "network": "PreAct ResNet-18, widths 64/128/256/512, 32x32x3 inputs",
        },
        "small": small,
        "large": large,
        "cache_s": large["cache_s"],
        "per_member_s": per_member,
        "per_member_marginal_s": marginal,
        f"build_s_{m_target}_members_marginal": small["build_s"]
        + (m_target - small["members"]) * marginal,
        f"build_s_{m_target}_members": large["build_s"]
        if measured_target
        else m_target * per_member,
        f"total_s_{m_target}_members_with_cache": large["cache_s"]
        + (large["build_s"] if measured_target else m_target * per_member),
        f"peak_rss_mib_{m_target}_members": large["peak_rss_mib"]
        if measured_target
        else large["peak_rss_mib"] + (m_target - large["members"]) * large["member_mib"],
        "extrapolated": not measured_target,
        "extrapolation": "time: members x (build time of the larger run / its members); memory: its "
        "peak + the further members' parameters (member_mib each)",
    }
    pm = _run_part(["predict", str(args.pred_members), str(args.pred_images), str(args.cal_images)])
    n_img, m = args.pred_images, pm["members"]
    suffix = max(pm["shared_s"] - pm["prefix_s"], 0.0) / m  # per member: blocks 6-7 and the head
    full = pm["full_s"] / m  # per member: the whole network
    shared_target = pm["prefix_s"] + m_target * suffix
    predict = {
        "images": n_img,
        "measured_members": m,
        "measured": pm,
        f"shared_per_image_s_{m}_members": pm["shared_s"] / n_img,
        f"full_per_image_s_{m}_members": pm["full_s"] / n_img,
        f"full_over_shared_{m}_members": pm["full_s"] / pm["shared_s"],
        "prefix_per_image_s": pm["prefix_s"] / n_img,
        "suffix_per_member_per_image_s": suffix / n_img,
        "full_per_member_per_image_s": full / n_img,
        f"shared_per_image_s_{m_target}_members_extrapolated": shared_target / n_img,
        f"full_per_image_s_{m_target}_members_extrapolated": m_target * full / n_img,
        f"full_over_shared_{m_target}_members_extrapolated": m_target * full / shared_target,
        "extrapolation": "shared: prefix + members x (shared - prefix) / measured members; "
        "full: members x full / measured members",
    }
    result = {"environment": environment(), "build": build, "predict": predict}
    return emit(result, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1:])

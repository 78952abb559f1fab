"""P&C builds never stall the XLA CPU thread pool.

jaxlib 0.10 runs every *batched* LAPACK call (Cholesky, triangular solve, ...) by splitting the
batch over XLA's intra-op thread pool and blocking until the pieces finish. When as many such calls
run at once as the pool has threads, all of them wait on work that no free thread can pick up, and
the program hangs. ``build_members`` vmaps its ridge solves over members, so they use no LAPACK call
at all (``pnc.core._linalg``). On a two-thread pool the earlier solve (independent batched triangular
solves) hung in roughly one README example run out of five; repeating the build many times in a
subprocess with a deadline turns such a hang into a test failure instead of a stalled test run.
"""

import os
import re
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest

from pnc import MLPConfig, init_params
from pnc.core.perturb_correct import PnCConfig, _build

SCRIPT = textwrap.dedent(
    """
    import jax, numpy as np
    from pnc import MLPConfig, init_params
    from pnc.core.perturb_correct import PnCConfig, build_members

    cfg = MLPConfig(out_dim=2, hidden=(64, 64, 64))
    params = init_params(cfg, 3, jax.random.key(0))
    x_cal = np.random.default_rng(0).normal(size=(1500, 3)).astype(np.float32)
    pnc_cfg = PnCConfig(n_members=50, rank=20, sigma=4.0, bootstrap_frac=0.5)
    for i in range(REPEATS):
        members = build_members(params, cfg, x_cal, pnc_cfg, key=jax.random.key(i))
        jax.block_until_ready(members)
    print("done", REPEATS)
    """
)


@pytest.mark.slow
def test_repeated_member_builds_complete_on_a_two_thread_pool(tmp_path):
    repeats = 40
    script = tmp_path / "builds.py"
    script.write_text(SCRIPT.replace("REPEATS", str(repeats)))
    env = dict(os.environ, XLA_FLAGS="")
    try:
        cpus = sorted(os.sched_getaffinity(0))[:2]
    except AttributeError:  # pragma: no cover - not Linux
        cpus = []
    preexec = (lambda: os.sched_setaffinity(0, cpus)) if len(cpus) == 2 else None
    try:
        done = subprocess.run(
            [sys.executable, str(script)],
            capture_output=True,
            text=True,
            timeout=240,
            env=env,
            preexec_fn=preexec,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{repeats} P&C builds did not finish within 240 s: the XLA CPU pool stalled")
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"done {repeats}" in done.stdout


@pytest.mark.parametrize(
    "ridges,options",
    [
        (np.float32(1e-4), {}),  # build_members: one ridge value
        (  # build_members_ridge_path: three, with the authors' protocol options
            np.array([1e-4, 1e-2, 1.0], np.float32),
            {"perturbation_norm": "radius", "ridge_center": "zero", "subset_per_layer": True},
        ),
    ],
)
def test_member_build_issues_no_lapack_custom_call(ridges, options):
    """The member-vmapped ridge solves lower to plain XLA operations, no LAPACK custom call."""
    cfg = MLPConfig(out_dim=2, hidden=(40, 40))
    params = init_params(cfg, 3, jax.random.key(0))
    pnc_cfg = PnCConfig(n_members=4, rank=5, sigma=1.0, bootstrap_frac=0.5, **options)
    layers = pnc_cfg.perturbed_layers(cfg.n_hidden)
    bases = {i: jax.numpy.zeros((params[f"hidden_{i}"]["kernel"].size, 5)) for i in layers}
    hlo = (
        _build.lower(
            params,
            bases,
            jax.numpy.zeros((100, 3)),
            jax.random.split(jax.random.key(1), 4),
            ridges,
            np.float32(1.0),  # sigma
            mlp_config=cfg,
            config=pnc_cfg,
            layers=layers,
            member_chunk=None,
        )
        .compile()
        .as_text()
    )
    assert _lapack_calls(hlo) == []
    # control: the same check sees the LAPACK call of a vmapped jnp.linalg.cholesky
    spd = jax.numpy.broadcast_to(jax.numpy.eye(8), (3, 8, 8))
    control = jax.jit(jax.vmap(jax.numpy.linalg.cholesky)).lower(spd).compile().as_text()
    assert _lapack_calls(control) != []


def _lapack_calls(hlo_text: str) -> list[str]:
    targets = re.findall(r'custom_call_target="([^"]+)"', hlo_text)
    return [t for t in targets if "lapack" in t.lower()]

"""Checks of stored behaviour-policy files against their environment, made before any rollout.

:func:`pnc.studies.mujoco.data.policy_store.load_policies` already refuses a file whose SHA-256 differs from the
one in ``policies.json``; :func:`load_checked_policies` also refuses a policy whose observation or
action size is not that of the environment (a Humanoid file stored under HumanoidStandup's name
holds the right shapes but the wrong hash; an Ant file under Humanoid's has the wrong shapes),
naming the file.
"""

from __future__ import annotations

from pathlib import Path

from pnc.studies.mujoco.data.envs import env_spec
from pnc.studies.mujoco.data.policy_store import POLICY_DIR, load_policies


class PolicyMismatchError(ValueError):
    """A stored policy file does not fit the environment it is stored for."""


def check_policy_dims(name: str, policy, path: str | Path) -> None:
    """Refuse ``policy`` (read from ``path``) when its matrix is not ``[act_dim, obs_dim]`` of
    ``name``'s ``-v5`` environment. Policies without a matrix (scripted controllers) read the
    observation by name and pass.

    Raises:
        PolicyMismatchError: the sizes differ; the message names ``path``.
    """
    spec = env_spec(name)
    matrix = getattr(policy, "matrix", None)
    if matrix is None:
        return
    want = (spec.act_dim, spec.obs_dim)
    sizes = {"matrix": tuple(matrix.shape)}
    for field in ("obs_mean", "obs_std"):
        if hasattr(policy, field):
            sizes[field] = tuple(getattr(policy, field).shape)
    if sizes["matrix"] != want or any(
        s != (spec.obs_dim,) for k, s in sizes.items() if k != "matrix"
    ):
        raise PolicyMismatchError(
            f"{path} holds a policy of sizes {sizes}, but {spec.name} has observations of size "
            f"{spec.obs_dim} and actions of size {spec.act_dim} (matrix {want}); it was made for "
            "another environment"
        )


def load_checked_policies(name: str, policies: str | Path | None = None) -> tuple[dict, dict]:
    """:func:`pnc.studies.mujoco.data.policy_store.load_policies` plus :func:`check_policy_dims` on every level.

    Raises:
        ValueError: a file does not match its SHA-256 (from ``load_policies``).
        PolicyMismatchError: a policy's sizes do not match the environment.
    """
    spec = env_spec(name)
    loaded, record = load_policies(spec.name, policies)
    directory = Path(policies if policies is not None else POLICY_DIR) / spec.name
    for level, policy in loaded.items():
        check_policy_dims(spec.name, policy, directory / record["levels"][level]["file"])
    return loaded, record

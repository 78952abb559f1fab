"""The store of behaviour policies: where they live, their ``policies.json`` records, loading them.

The repository's policies live in :data:`POLICY_DIR` as ``{Env}/{level}.npz``,
``{Env}/checkpoints.npz`` (ARS only) and ``{Env}/policies.json`` (the record of how they were made:
the policy ``kind`` of :data:`pnc.studies.mujoco.data.policy.POLICY_KINDS` and the SHA-256 of every file;
:func:`load_policies` checks them). Any other directory laid out the same way is a store too
(``--out`` of ``python -m pnc.studies.mujoco.data.behaviour``). Long ARS runs keep their resumable training state
beside it, in :data:`STATE_DIR`.

The levels are made by :mod:`pnc.studies.mujoco.data.ars_levels` (ARS) and :mod:`pnc.studies.mujoco.data.controller_levels`
(scripted controllers), and, for the two Humanoid environments, :mod:`pnc.studies.mujoco.data.long_runs`.
"""

from __future__ import annotations

import json
from pathlib import Path

from pnc.studies.mujoco.data.ars import LinearPolicy
from pnc.studies.mujoco.data.envs import env_spec
from pnc.studies.mujoco.data.errors import CacheConflictError
from pnc.studies.mujoco.data.minari_io import file_sha256
from pnc.studies.mujoco.data.policy import load_policy

#: Where the repository's trained policies live (``{Env}/{level}.npz`` + ``{Env}/policies.json``).
POLICY_DIR = Path(__file__).parent / "policies"

#: Where long ARS runs keep their resumable training state (``{Env}/state.npz``, a few hundred KB
#: at most), committed so that a run can continue in a later piece.
STATE_DIR = Path(__file__).parent / "ars_runs"


def write_record(record_path: Path, record: dict) -> None:
    """Write ``record`` as ``policies.json`` (sorted keys, indented, one final newline)."""
    record_path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")


def reuse_record(record_path: Path, request: dict, force: bool) -> dict | None:
    """The stored record (``status="reused"``) when ``record_path`` was made by ``request``;
    ``None`` when there is none or ``force`` lets it be replaced.

    Raises:
        CacheConflictError: the record was made with other settings and ``force`` is false.
    """
    if not record_path.exists():
        return None
    old = json.loads(record_path.read_text())
    if old.get("request") == request:
        return dict(old, status="reused")
    if not force:
        raise CacheConflictError(
            f"{record_path} holds policies made with different settings; "
            "pass --force to replace them"
        )
    return None


def load_policies(
    name: str, policies: str | Path | None = None
) -> tuple[dict[str, LinearPolicy], dict]:
    """Load the stored behaviour policies of ``name`` (default: the repository's copies).

    Returns:
        ``({level: policy}, record)`` for the levels ``name`` has (:attr:`EnvSpec.levels`), each
        policy of the ``kind`` named in ``policies.json`` (``"linear"`` where it names none), and
        ``record``, the parsed ``policies.json``; every file is checked against the SHA-256
        recorded there.

    Raises:
        FileNotFoundError: no record, or a level missing from it.
        ValueError: a file does not match its SHA-256, or holds a policy of another kind.
    """
    spec = env_spec(name)
    directory = Path(policies if policies is not None else POLICY_DIR) / spec.name
    record_path = directory / "policies.json"
    if not record_path.exists():
        raise FileNotFoundError(
            f"no behaviour policies for {spec.name} in {directory}; train them with "
            f"`python -m pnc.studies.mujoco.data.behaviour {spec.name} --out {directory.parent}`"
        )
    record = json.loads(record_path.read_text())
    out = {}
    for level in spec.levels:
        info = record["levels"].get(level)
        if info is None:
            raise FileNotFoundError(f"{record_path} has no {level!r} policy")
        path = directory / info["file"]
        if file_sha256(path) != info["sha256"]:
            raise ValueError(f"{path} does not match the SHA-256 recorded in {record_path}")
        out[level] = load_policy(path, record.get("kind", "linear"))
    return out, record

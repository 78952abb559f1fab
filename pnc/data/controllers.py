"""Scripted behaviour controllers: operational-space control of an arm's end effector.

Linear ARS does not learn Reacher here (see :mod:`pnc.data.behaviour`), but the task has a
classical expert: drive the fingertip to the target through the arm's Jacobian,

    tau = J^T (k_p (x_goal - x) - k_d J qdot) - k_q qdot + k_e (q_e* - q_e) e_elbow,
    a = tau / gear,

with ``x`` the fingertip position and ``J = dx/dq`` its translational Jacobian
(``mujoco.mj_jac``), evaluated on a private copy of the environment's MuJoCo model whose joint
positions are set from the observation, so an action is a pure function of the observation. The
elbow term adds the elbow angle ``q_e*`` that puts the fingertip at the goal's distance from the
base (law of cosines), bent the way the elbow is bent now: the Jacobian-transpose law alone stalls
with a straight arm, where the radial direction is singular. ``x_goal`` is the target plus the
level's aim error ``(aim_x, aim_y)``.

Weaker behaviour levels degrade the expert: smaller gains (slower, sloppier reaching), an aim error
and the controller's own Gaussian action noise ``action_noise`` (a fraction of half the action
range), which every rollout adds in quadrature to the data's action noise
(:func:`pnc.data.policy.total_action_noise`).

Pusher has no controller here: a Jacobian-transpose and a resolved-rate (damped least squares)
version of "approach behind the object, then push toward the goal" reached mean returns of only
-45 to -47 under the data's action noise (the untrained policy: -56; linear ARS: about -43): the
approach sweeps the arm through the light object and knocks it away from the goal.

A controller is stored as ``.npz`` (``kind``, ``env``, parameter names and values, action noise)
and read back by :meth:`ScriptedController.load`; :mod:`pnc.data.policy` dispatches on ``kind``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

#: Parameters of each environment's controller, in the order they are stored.
PARAMETERS: dict[str, tuple[str, ...]] = {
    "Reacher": ("kp", "kd", "kq", "ke", "aim_x", "aim_y"),
}

#: The MuJoCo model file of each environment (Gymnasium's asset) and its end-effector body.
_MODEL: dict[str, tuple[str, str]] = {"Reacher": ("reacher.xml", "fingertip")}


@dataclasses.dataclass
class _Kinematics:
    """A private MuJoCo model + data for the forward kinematics and Jacobian of one arm."""

    model: object
    data: object
    body: int
    n_arm: int
    gear: np.ndarray
    links: tuple[float, float]

    @classmethod
    def for_env(cls, env: str) -> _Kinematics:
        import gymnasium
        import mujoco

        xml, body = _MODEL[env]
        path = Path(gymnasium.__file__).parent / "envs" / "mujoco" / "assets" / xml
        model = mujoco.MjModel.from_xml_path(str(path))
        tip = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, body)
        elbow = model.body_parentid[tip]
        return cls(
            model,
            mujoco.MjData(model),
            tip,
            model.nu,
            model.actuator_gear[:, 0].copy(),
            # upper-arm and forearm lengths: offsets of the elbow and fingertip bodies
            (
                float(np.linalg.norm(model.body_pos[elbow])),
                float(np.linalg.norm(model.body_pos[tip])),
            ),
        )

    def jacobian(self, q_arm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """End-effector position ``[3]`` and translational Jacobian ``[3, n_arm]`` at ``q_arm``."""
        import mujoco

        self.data.qpos[:] = 0.0
        self.data.qpos[: self.n_arm] = q_arm
        mujoco.mj_kinematics(self.model, self.data)
        mujoco.mj_comPos(self.model, self.data)
        jacp = np.zeros((3, self.model.nv))
        point = self.data.xpos[self.body].copy()  # the body frame's origin, as the env reports
        mujoco.mj_jac(self.model, self.data, jacp, None, point, self.body)
        return point, jacp[:, : self.n_arm]


@dataclasses.dataclass(frozen=True)
class ScriptedController:
    """An operational-space controller for ``env`` (one of :data:`PARAMETERS`).

    Attributes:
        env: environment name.
        params: the values of ``PARAMETERS[env]``, in that order.
        action_noise: the controller's own Gaussian action noise (fraction of half the range).
    """

    env: str
    params: tuple[float, ...]
    action_noise: float = 0.0
    _kin: list = dataclasses.field(default_factory=list, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.env not in PARAMETERS:
            raise ValueError(
                f"no scripted controller for {self.env!r}; have {', '.join(PARAMETERS)}"
            )
        if len(self.params) != len(PARAMETERS[self.env]):
            raise ValueError(
                f"the {self.env} controller needs {len(PARAMETERS[self.env])} parameters "
                f"{PARAMETERS[self.env]}, got {len(self.params)}"
            )
        if not np.all(np.isfinite(self.params)) or not self.action_noise >= 0:
            raise ValueError(
                f"parameters must be finite and action_noise >= 0, got {self.params}, "
                f"{self.action_noise}"
            )

    @classmethod
    def from_dict(
        cls, env: str, values: dict[str, float], action_noise: float = 0.0
    ) -> ScriptedController:
        names = PARAMETERS.get(env, ())
        missing, extra = set(names) - set(values), set(values) - set(names)
        if not names or missing or extra:
            raise ValueError(
                f"{env} controller parameters: missing {sorted(missing)}, unknown {sorted(extra)}"
            )
        return cls(env, tuple(float(values[k]) for k in names), float(action_noise))

    def as_dict(self) -> dict[str, float]:
        return dict(zip(PARAMETERS[self.env], self.params, strict=True))

    @property
    def kinematics(self) -> _Kinematics:
        if not self._kin:
            self._kin.append(_Kinematics.for_env(self.env))
        return self._kin[0]

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """Joint command ``[act]`` (before clipping) for one Reacher observation: ``cos q``,
        ``sin q``, target ``xy``, ``qdot``, fingertip minus target ``xy``."""
        obs = np.asarray(obs, np.float64)
        p = self.as_dict()
        kin = self.kinematics
        q = np.arctan2(obs[2:4], obs[0:2])
        qdot = obs[6:8]
        x_goal = obs[4:6] + np.array([p["aim_x"], p["aim_y"]])
        tip, jac = kin.jacobian(q)
        tip, jac = tip[:2], jac[:2]
        force = p["kp"] * (x_goal - tip) - p["kd"] * (jac @ qdot)
        tau = jac.T @ force - p["kq"] * qdot
        tau[1] += p["ke"] * (self._elbow_angle(x_goal, q[1]) - q[1])
        return tau / kin.gear

    def _elbow_angle(self, x_goal: np.ndarray, elbow: float) -> float:
        """The elbow angle that puts the fingertip at ``|x_goal|`` from the base."""
        l1, l2 = self.kinematics.links
        c = (x_goal @ x_goal - l1**2 - l2**2) / (2 * l1 * l2)
        return float(np.copysign(np.arccos(np.clip(c, -1.0, 1.0)), elbow if elbow != 0 else 1.0))

    def save(self, path: str | Path) -> None:
        """Write a compressed ``.npz`` (never pickled)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as f:
            np.savez_compressed(
                f,
                kind=np.array("controller"),
                env=np.array(self.env),
                names=np.array(PARAMETERS[self.env]),
                params=np.array(self.params, np.float64),
                action_noise=np.array(self.action_noise, np.float64),
            )

    @classmethod
    def load(cls, path: str | Path) -> ScriptedController:
        """Read a controller written by :meth:`save`.

        Raises:
            ValueError: the file is not a controller, or its parameters are not the ones the
                environment's controller has.
        """
        with np.load(path, allow_pickle=False) as z:
            if "kind" not in z.files or str(z["kind"]) != "controller":
                raise ValueError(f"{path} is not a scripted controller")
            env = str(z["env"])
            names = tuple(str(n) for n in z["names"])
            if names != PARAMETERS.get(env):
                raise ValueError(
                    f"{path}: parameters {names} are not those of the {env} controller "
                    f"{PARAMETERS.get(env)}"
                )
            return cls(env, tuple(float(v) for v in z["params"]), float(z["action_noise"]))

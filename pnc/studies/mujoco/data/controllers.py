"""Scripted behaviour controllers: operational-space control of an arm's end effector.

Linear ARS does not learn Reacher here (see :mod:`pnc.studies.mujoco.data.behaviour_settings`), but the task has a
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

Weaker behaviour levels degrade the expert: smaller gains (slower, sloppier reaching or
approach), an aim error and the controller's own Gaussian action noise ``action_noise`` (a
fraction of half the action range), which every rollout adds in quadrature to the data's action
noise (:func:`pnc.studies.mujoco.data.policy.total_action_noise`).

Pusher's controller (a 7-joint arm pushing a light cylinder to a goal) chooses its fingertip
target from the geometry alone (:func:`_pusher_target`): with ``d`` the horizontal direction from
the object to the goal, the fingertip heads for a pre-push point ``contact + margin`` behind the
object's centre on the goal line (at the object's height; raised by ``lift`` while it is far from
that point), and once it is behind the object, on that line and low enough it pushes: its target
is ``push`` beyond the contact point ``contact`` behind the object's centre, recomputed from the
object's position every step, so lateral drift is corrected. The target is tracked through a
waypoint at most ``step`` away: damped-least-squares inverse kinematics on the MuJoCo Jacobians
(``mujoco.mj_jac``, translational and rotational) finds joint angles ``q*`` near the current ones
that put the fingertip there with the hand's crossbar level and across ``d`` (weight ``w_orient``,
cut to a tenth while the fingertip is 23 cm or more from the pre-push point), and

    tau = M(q) (omega^2 (q* - q) - 2 zeta omega qdot),   scaled down to norm <= tau_max,

with ``M(q)`` the arm's joint-space inertia, a computed-torque law in joint space. The object is
so light that its soft contact with the hand passes only a small force (measured on the model,
with the hand's joints driven along a straight 20 cm sweep through the object's place: at 0.05
m/s the object moved 9.6 cm, at 0.1 m/s 2.4 cm, at 0.2 and 0.4 m/s under 1 cm, the hand passing
through it): pushes are slow, and a hand that crosses the object quickly hardly disturbs it. The
tuned expert therefore goes straight for the pre-push point (its ``lift`` is 0) and pushes with
the fingertip near the object's centre. Earlier attempts with a Jacobian-transpose and a
resolved-rate version of "approach behind the object, then push toward the goal" reached mean
returns of only -45 to -47 under the data's action noise (the untrained policy: -56; linear ARS:
about -43).

A controller is stored as ``.npz`` (``kind``, ``env``, parameter names and values, action noise)
and read back by :meth:`ScriptedController.load`; :mod:`pnc.studies.mujoco.data.policy` dispatches on ``kind``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

#: Parameters of each environment's controller, in the order they are stored.
PARAMETERS: dict[str, tuple[str, ...]] = {
    "Reacher": ("kp", "kd", "kq", "ke", "aim_x", "aim_y"),
    "Pusher": (
        "omega",
        "zeta",
        "tau_max",
        "step",
        "contact",
        "margin",
        "lift",
        "push",
        "window",
        "lateral_tol",
        "w_orient",
        "aim",
    ),
}

#: The MuJoCo model file of each environment (Gymnasium's asset) and its end-effector body.
_MODEL: dict[str, tuple[str, str]] = {
    "Reacher": ("reacher.xml", "fingertip"),
    "Pusher": ("pusher_v5.xml", "tips_arm"),
}

#: Pusher: horizontal distance (m) from the pre-push point below which the fingertip descends
#: (fully at this distance, not at all at twice it).
_PUSHER_NEAR = 0.03
#: Pusher: horizontal distance (m) over which the hand-orientation weight fades in, and the
#: fraction of it dropped while the fingertip is farther than that.
_PUSHER_ORIENT_FADE = (0.2, 0.9)
#: Pusher: wanted upward tilt of the hand (the z component of its prongs' direction) and that
#: term's weight relative to ``w_orient``.
_PUSHER_TILT = (0.3, 0.4)
#: Pusher: inverse-kinematics iterations per step, damping, and the position residual (m) above
#: which the orientation terms are relaxed tenfold (targets the oriented hand cannot reach).
_PUSHER_IK = (20, 0.05, 0.01)


@dataclasses.dataclass
class _Kinematics:
    """A private MuJoCo model + data for the forward kinematics and Jacobian of one arm."""

    model: object
    data: object
    body: int
    n_arm: int
    gear: np.ndarray
    links: tuple[float, float]
    limits: np.ndarray

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
            # upper-arm and forearm lengths: offsets of the elbow and fingertip bodies (Reacher)
            (
                float(np.linalg.norm(model.body_pos[elbow])),
                float(np.linalg.norm(model.body_pos[tip])),
            ),
            # joint ranges of the arm [n_arm, 2]
            model.jnt_range[: model.nu].copy(),
        )

    def jacobian(self, q_arm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """End-effector position ``[3]`` and translational Jacobian ``[3, n_arm]`` at ``q_arm``."""
        import mujoco

        self._set(q_arm)
        jacp = np.zeros((3, self.model.nv))
        point = self.data.xpos[self.body].copy()  # the body frame's origin, as the env reports
        mujoco.mj_jac(self.model, self.data, jacp, None, point, self.body)
        return point, jacp[:, : self.n_arm]

    def frame(self, q_arm: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """End-effector position ``[3]``, orientation ``[3, 3]`` (columns: the body's axes in
        the world frame) and translational and rotational Jacobians ``[3, n_arm]`` at ``q_arm``."""
        import mujoco

        self._set(q_arm)
        jacp = np.zeros((3, self.model.nv))
        jacr = np.zeros((3, self.model.nv))
        point = self.data.xpos[self.body].copy()
        mujoco.mj_jac(self.model, self.data, jacp, jacr, point, self.body)
        rot = self.data.xmat[self.body].reshape(3, 3).copy()
        return point, rot, jacp[:, : self.n_arm], jacr[:, : self.n_arm]

    def inertia(self, q_arm: np.ndarray) -> np.ndarray:
        """The arm's joint-space inertia matrix ``[n_arm, n_arm]`` at ``q_arm``."""
        import mujoco

        self._set(q_arm)
        mujoco.mj_crb(self.model, self.data)
        full = np.zeros((self.model.nv, self.model.nv))
        mujoco.mj_fullM(self.model, self.data, full)
        return full[: self.n_arm, : self.n_arm]

    def _set(self, q_arm: np.ndarray) -> None:
        import mujoco

        self.data.qpos[:] = 0.0
        self.data.qpos[: self.n_arm] = q_arm
        mujoco.mj_kinematics(self.model, self.data)
        mujoco.mj_comPos(self.model, self.data)


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
        """Joint command ``[act]`` (before clipping) for one observation of ``env``."""
        obs = np.asarray(obs, np.float64)
        if self.env == "Pusher":
            return self._pusher(obs)
        return self._reacher(obs)

    def _reacher(self, obs: np.ndarray) -> np.ndarray:
        """Reacher's observation: ``cos q``, ``sin q``, target ``xy``, ``qdot``, fingertip minus
        target ``xy``."""
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

    def _pusher(self, obs: np.ndarray) -> np.ndarray:
        """Pusher's observation: arm ``q`` [7], ``qdot`` [7], fingertip, object and goal ``xyz``."""
        p = self.as_dict()
        kin = self.kinematics
        q, qdot = obs[:7], obs[7:14]
        tip, obj, goal = obs[14:17], obs[17:20], obs[20:23]
        target, push_dir, far = _pusher_target(tip, obj, goal, p)
        # a point at most ``step`` from the fingertip on the way to the target ...
        error = target - tip
        length = float(np.linalg.norm(error))
        waypoint = tip + error * min(1.0, p["step"] / max(length, 1e-9))
        # ... the joint angles that put the hand there, oriented for the push ...
        fade, drop = _PUSHER_ORIENT_FADE
        w_orient = p["w_orient"] * (1.0 - drop * min(1.0, max(far, 0.0) / fade))
        iters, damping, residual = _PUSHER_IK
        q_star = _pusher_ik(kin, q, waypoint, push_dir, w_orient, iters, damping)
        if np.linalg.norm(kin.frame(q_star)[0] - waypoint) > residual:
            q_star = _pusher_ik(kin, q, waypoint, push_dir, 0.1 * w_orient, iters, damping)
        # ... and joint-space tracking of them through the arm's inertia, norm-limited
        omega = p["omega"]
        tau = kin.inertia(q) @ (omega**2 * (q_star - q) - 2.0 * p["zeta"] * omega * qdot)
        norm = float(np.linalg.norm(tau))
        tau = tau * min(1.0, p["tau_max"] / max(norm, 1e-12))
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


def _pusher_target(
    tip: np.ndarray, obj: np.ndarray, goal: np.ndarray, p: dict[str, float]
) -> tuple[np.ndarray, np.ndarray, float]:
    """The fingertip target of the Pusher controller, the push direction ``[3]`` and the
    horizontal distance of the fingertip from the pre-push point (0 while pushing).

    With ``d`` the horizontal unit vector from the object to the goal and ``n`` its normal, the
    pre-push point lies ``contact + margin`` behind the object's centre on the goal line (plus the
    lateral ``aim``). The fingertip is *pushing* when it is behind the object (between
    ``contact + margin + 0.04`` behind and ``window`` in front of the contact point), within
    ``lateral_tol`` of that line and below the object's centre plus 3 cm; it then aims ``push``
    beyond the contact point (re-aimed every step, so lateral drift is corrected), holding still
    within 2 cm of the goal. Otherwise it heads for the pre-push point, raised by ``lift`` until it
    is within twice :data:`_PUSHER_NEAR` of it horizontally.
    """
    to_goal = goal[:2] - obj[:2]
    dist = float(np.linalg.norm(to_goal))
    d = to_goal / max(dist, 1e-9)
    n = np.array([-d[1], d[0]])
    rel = tip[:2] - obj[:2]
    along, across = float(rel @ d), float(rel @ n)
    contact = obj[:2] - d * p["contact"] + n * p["aim"]
    pre = contact - d * p["margin"]
    z = obj[2]
    behind = -p["contact"] - p["margin"] - 0.04 < along < -p["contact"] + p["window"]
    if behind and abs(across - p["aim"]) < p["lateral_tol"] and tip[2] < z + 0.03:
        if dist < 0.02:
            return np.r_[tip[:2], z], np.r_[d, 0.0], 0.0
        return np.r_[contact + d * min(p["push"], dist), z], np.r_[d, 0.0], 0.0
    away = float(np.linalg.norm(tip[:2] - pre))
    raise_by = float(np.clip((away - _PUSHER_NEAR) / _PUSHER_NEAR, 0.0, 1.0))
    return np.r_[pre, z + raise_by * p["lift"]], np.r_[d, 0.0], away - _PUSHER_NEAR


def _pusher_ik(
    kin: _Kinematics,
    q: np.ndarray,
    point: np.ndarray,
    push_dir: np.ndarray,
    w_orient: float,
    iters: int,
    damping: float,
) -> np.ndarray:
    """Joint angles (within the joint ranges) near ``q`` that put the fingertip at ``point`` with
    the hand's crossbar (its y axis) horizontal and across ``push_dir`` and its prongs (x axis)
    tilted up as :data:`_PUSHER_TILT` asks: damped least squares, position first."""
    tilt, w_tilt = _PUSHER_TILT
    w_tilt = w_tilt * w_orient
    lo, hi = kin.limits[:, 0], kin.limits[:, 1]
    q = np.array(q, np.float64)
    err = np.empty(6)
    jac = np.empty((6, len(q)))
    ridge = damping**2 * np.eye(6)
    for _ in range(iters):
        x, rot, jacp, jacr = kin.frame(q)
        bar, prongs = rot[:, 1], rot[:, 0]
        err[:3] = point - x
        err[3] = -w_orient * (bar @ push_dir)
        err[4] = -w_orient * bar[2]
        err[5] = w_tilt * (tilt - prongs[2])
        jac[:3] = jacp
        # rows: d(bar . push_dir) = (bar x push_dir) . omega, and likewise with the vertical
        jac[3] = w_orient * (_cross(bar, push_dir) @ jacr)
        jac[4] = w_orient * (np.array([bar[1], -bar[0], 0.0]) @ jacr)
        jac[5] = w_tilt * (np.array([prongs[1], -prongs[0], 0.0]) @ jacr)
        step = jac.T @ np.linalg.solve(jac @ jac.T + ridge, err)
        q = np.clip(q + step, lo, hi)
    return q


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a x b`` for 3-vectors (``np.cross`` costs more than the rest of an IK iteration)."""
    return np.array(
        [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
    )

"""The paper's two studies, each its data, per-job stages, selection and tables:
:mod:`pnc.studies.mujoco` (regression under behavioural shift) and :mod:`pnc.studies.cifar`
(CIFAR-10 OOD detection).
"""

from pnc.runtime.extras import require

require("workflow", ("pandas", "yaml"), "the studies (pnc.studies)")

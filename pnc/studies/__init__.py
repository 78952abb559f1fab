"""The paper's two studies, each its data, per-job stages, selection and tables:
:mod:`pnc.studies.mujoco` (regression under behavioural shift) and :mod:`pnc.studies.cifar`
(CIFAR-10 OOD detection).
"""

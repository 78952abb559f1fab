"""Uncertainty methods behind one interface, looked up by id (see :mod:`pnc.methods.base`)."""

from pnc.methods.base import Method, TrainingRun, TrainingSpec

__all__ = ["Method", "TrainingRun", "TrainingSpec"]

"""Errors raised by the data layer; each message says what went wrong and how to fix it."""

from __future__ import annotations


class UnknownEnvironmentError(ValueError):
    """An environment name that is not one of :data:`pnc.studies.mujoco.data.ENVS`."""


class DatasetMissingError(FileNotFoundError):
    """A dataset is not present locally and downloading was not allowed."""


class DimensionMismatchError(ValueError):
    """Datasets that should describe the same environment disagree on observation/action sizes."""


class NonFiniteDataError(ValueError):
    """NaN or infinite values in observations or actions."""


class CacheConflictError(FileExistsError):
    """An existing artifact would be overwritten with different content (pass ``--force``)."""

"""The methods of both studies behind one contract.

- :mod:`pnc.methods.base`: :class:`BaseMethod`, what every method declares (``id``, ``label``,
  ``config_cls``) and inherits (strict :meth:`~BaseMethod.make_config`,
  :meth:`~BaseMethod.config_id`);
- :mod:`pnc.methods.registry`: :class:`Registry`, the one registry class both families
  instantiate, and :class:`UnknownMethodError`, what an unknown id raises in either study;
- :mod:`pnc.methods.coerce`: :func:`coerce`, the one strict conversion of a config value;
- :mod:`pnc.methods.configs`: making and naming configurations;
- :mod:`pnc.methods.checks`: :func:`check_method`, the one check suite (common checks on every
  method, family checks chosen by the family);
- :mod:`pnc.methods.selection_rule`: :func:`~pnc.methods.selection_rule.lowest`, the one rule
  that picks a configuration by its validation score (NaN-safe on its own);
- :mod:`pnc.methods.regression`: the MuJoCo study's family (Gaussian predictive samples;
  ``pnc.methods.regression.get("swag")``);
- :mod:`pnc.methods.ood`: the CIFAR study's family (post-hoc OOD scores;
  ``pnc.methods.ood.get("swag")``).

Importing this package imports neither family; import the one you use.
"""

from __future__ import annotations

from pnc.methods.base import BaseMethod
from pnc.methods.coerce import coerce
from pnc.methods.registry import Registry, UnknownMethodError

__all__ = ["BaseMethod", "Registry", "UnknownMethodError", "coerce"]

"""A variant of a stored study run at the cost of what it changes.

A *variant* is a study config that differs from a reference config (whose pieces are stored,
:mod:`pnc.report.pieces`) in some methods' entries only: ``config/offline_authors.yaml`` is
``config/offline.yaml`` with P&C's base network trained 2,000 steps and its calibration rows drawn
from the whole ID pool (:mod:`pnc.studies.mujoco.grid`), which only ``pnc`` and ``pnc_nocorr`` read. Every
evaluation job depends on its method's entry, its run and the (env, seed)'s data alone, and the
selection is per method, so the other methods' metric tables, validation rows, selection and test
rows are the reference's, bit for bit. The variant therefore runs:

1. :func:`study_config`: the variant config restricted to the changed methods (the jobs the
   variant's pieces hold), with the reference store's evaluation layout (:func:`store_evaluation`;
   the stored reference is ``full``) and without the mechanism stage (it reads the unchanged
   methods' runs too); ``scripts/reference_runs.sh --reuse STORE`` runs and stores those pieces;
2. ``scripts/reference_tables.sh --reuse STORE``: the variant's pieces plus the reference pieces'
   files of the unchanged methods (:func:`pnc.report.pieces.restore_pieces` with ``skip``)
   restored into one study directory, then the selection and tables of the whole variant config.

Nothing else may differ: a change of the data, the network, the training recipe or the
calibration variants moves every method, and :func:`changed_methods` refuses it.

Command line::

    python -m pnc.report variant-config config/offline_authors.yaml \
        --reference config/offline.yaml --reuse docs/results/offline/pieces --out FILE
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from pnc.report.pieces import MANIFESTS, method_of, read_manifest, table_layout  # noqa: F401

#: Keys a variant may set differently from its reference without changing any stored job: which
#: environments and seeds it runs, and how jobs are run (threads, resources, compile cache).
FREE_KEYS: frozenset[str] = frozenset(
    {"envs", "seeds", "threads", "resources", "compile_cache", "evaluation", "mechanism"}
)


def _defaults_of(path: Path) -> Path | None:
    """The workflow's config.yaml (beside its Snakefile) in ``path``'s directory or above it."""
    for folder in path.resolve().parents:
        if (folder / "config.yaml").is_file() and (folder / "Snakefile").is_file():
            return folder / "config.yaml"
    return None


def read_config(path: str | Path) -> dict[str, Any]:
    """A study config file (YAML) as the workflow reads it: merged into the workflow's
    config.yaml (:func:`pnc.studies.mujoco.config_check.overlay`, as ``--configfile`` is), ``methods``
    holding the methods that run (``run_methods``)."""
    from pnc.studies.mujoco.config_check import overlay, run_methods

    path = Path(path)
    config = yaml.safe_load(path.read_text())
    defaults = _defaults_of(path)
    if isinstance(config, dict) and defaults is not None and defaults != path.resolve():
        config = overlay(yaml.safe_load(defaults.read_text()), config)
    if not isinstance(config, dict) or "methods" not in config:
        raise ValueError(f"{path} is not a study config (no `methods`)")
    config["methods"] = run_methods(config)
    config.pop("run_methods", None)
    return config


def changed_methods(variant: Mapping[str, Any], reference: Mapping[str, Any]) -> list[str]:
    """The methods whose entries differ between ``variant`` and ``reference``, in the variant's
    order.

    Raises:
        ValueError: a key outside :data:`FREE_KEYS` and ``methods`` differs (named: it changes
            every method's jobs), the two configs do not hold the same methods, the variant has an
            environment or seed the reference lacks, or no method changed.
    """
    keys = (set(variant) | set(reference)) - FREE_KEYS - {"methods"}
    moved = sorted(k for k in keys if variant.get(k) != reference.get(k))
    if moved:
        raise ValueError(
            f"the variant changes {', '.join(moved)}: every method's jobs depend on "
            f"{'them' if len(moved) > 1 else 'it'}, so none of the reference's can be reused; run "
            "the variant whole"
        )
    ours, theirs = dict(variant["methods"]), dict(reference["methods"])
    if set(ours) != set(theirs):
        raise ValueError(
            f"the variant's methods {sorted(ours)} are not the reference's {sorted(theirs)}"
        )
    for key in ("envs", "seeds"):
        extra = sorted(set(variant.get(key, [])) - set(reference.get(key, [])), key=str)
        if extra:
            raise ValueError(f"the variant's {key} {extra} are not in the reference's")
    changed = [m for m in ours if ours[m] != theirs[m]]
    if not changed:
        raise ValueError("the variant's methods are the reference's: nothing to run")
    return changed


def store_evaluation(store: str | Path) -> str:
    """The evaluation layout of a store's pieces: ``full`` (``results/metrics/``) or
    ``two_phase`` (``results/validation/`` and ``results/test/``).

    Raises:
        ValueError: the store holds no piece, or pieces of both layouts.
    """
    layouts = set()
    for path in sorted((Path(store) / MANIFESTS).glob("*/seed*.json")):
        for name in read_manifest(path)["files"]:
            layout = table_layout(name)
            if layout is not None:
                layouts.add("full" if layout == "metrics" else "two_phase")
    if len(layouts) != 1:
        found = "no piece" if not layouts else "pieces of both evaluations"
        raise ValueError(f"{store}: {found}; cannot tell its evaluation")
    return layouts.pop()


def study_config(
    variant: Mapping[str, Any], reference: Mapping[str, Any], evaluation: str
) -> dict[str, Any]:
    """The config the variant's pieces are run with: ``variant`` running only its
    :func:`changed_methods` (``run_methods``), the reference store's ``evaluation`` and no
    mechanism stage."""
    changed = changed_methods(variant, reference)
    config = copy.deepcopy(dict(variant))
    config["methods"] = {m: config["methods"][m] for m in changed}
    config["run_methods"] = changed
    config["evaluation"] = evaluation
    config["mechanism"] = {**(config.get("mechanism") or {}), "enabled": False}
    return config


def write_study_config(
    variant_path: str | Path, reference_path: str | Path, store: str | Path, out: str | Path
) -> list[str]:
    """Write :func:`study_config` of two config files and a reference store to ``out``; returns the
    changed methods."""
    variant, reference = read_config(variant_path), read_config(reference_path)
    config = study_config(variant, reference, store_evaluation(store))
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(
        f"# {variant_path}, restricted to the methods it changes against {reference_path} "
        f"(written by python -m pnc.report variant-config)\n"
        + yaml.safe_dump(config, sort_keys=False)
    )
    return list(config["methods"])

"""A shipped config as a run of the MuJoCo study sees it: config.yaml with the config merged in
key by key (what Snakemake does with ``--configfile``: ``snakemake.utils.update_config``), the
schema's defaults filled in, and only the methods that run (``run_methods``)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

import yaml
from snakemake.utils import update_config, validate

from pnc.studies.mujoco.config_check import ordered_like, run_methods

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def study_config(
    overlay: str | Path | None = None, root: Path = ROOT, change: Callable | None = None
) -> dict:
    """The study config of ``overlay`` (relative to ``root``, or absolute; ``None``: config.yaml);
    ``change(config)`` edits the merged config before the schema's defaults are filled in."""
    defaults = yaml.safe_load((root / "config.yaml").read_text())
    config = copy.deepcopy(defaults)
    if overlay is not None and Path(overlay) != Path("config.yaml"):
        # as Snakemake does: the config starts from the --configfile overlay, the Snakefile's
        # configfile (config.yaml) is merged into it, then the overlay again; common.smk then puts
        # every mapping in config.yaml's key order
        changes = yaml.safe_load((root / overlay).read_text())
        config = copy.deepcopy(changes)
        update_config(config, defaults)
        update_config(config, changes)
        config = ordered_like(config, defaults)
    if change is not None:
        change(config)
    validate(config, str(SCHEMA))
    config["methods"] = run_methods(config)
    return config

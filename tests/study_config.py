"""A shipped config as a run of the MuJoCo study sees it: config.yaml with the config merged in
key by key (what Snakemake does with ``--configfile``: ``snakemake.utils.update_config``), the
schema's defaults filled in, and only the methods that run (``run_methods``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import yaml
from snakemake.utils import update_config, validate

from pnc.mujoco.config_check import run_methods

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def study_config(
    overlay: str | Path | None = None, root: Path = ROOT, change: Callable | None = None
) -> dict:
    """The study config of ``overlay`` (relative to ``root``, or absolute; ``None``: config.yaml);
    ``change(config)`` edits the merged config before the schema's defaults are filled in."""
    config = yaml.safe_load((root / "config.yaml").read_text())
    if overlay is not None and Path(overlay) != Path("config.yaml"):
        update_config(config, yaml.safe_load((root / overlay).read_text()))
    if change is not None:
        change(config)
    validate(config, str(SCHEMA))
    config["methods"] = run_methods(config)
    return config

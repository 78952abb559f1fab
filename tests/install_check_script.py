"""``scripts/install_check.py`` loaded as a module, for the tests that check the same claims in
the project's environment (the README's examples, docs/library.md's, the any_model examples)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_PATH = Path(__file__).resolve().parents[1] / "scripts" / "install_check.py"
_spec = importlib.util.spec_from_file_location("install_check", _PATH)
install_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(install_check)

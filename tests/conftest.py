"""Suite-wide collection order: files holding the most ``slow`` tests (the end-to-end workflow runs) first.

``scripts/test.sh`` runs the suite on parallel workers with whole files per worker
(``--dist loadfile``), handing out files in collection order. The workflow runs take minutes each;
started first, they overlap with the many short files instead of running alone at the end.
"""

from __future__ import annotations

from collections import Counter

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    slow_tests = Counter(item.path for item in items if item.get_closest_marker("slow") is not None)
    # the file with the most slow tests first; a stable sort keeps every other order
    items.sort(key=lambda item: -slow_tests[item.path])

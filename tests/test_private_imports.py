"""No module of the package imports another module's private name (``from pnc.x import _name``):
what one module shares with another is part of its public interface, named without an underscore.

Relative imports are resolved against the importing module; a module may import its own names.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "pnc"



def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported_module(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = importer.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def private_imports(path: Path) -> list[tuple[str, str, str]]:
    """``(importer, module, name)`` for every private name ``path`` imports from another pnc
    module (dunder names such as ``__version__`` are not private)."""
    importer = _module_name(path)
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom):
            continue
        module = _imported_module(node, importer, path.name == "__init__.py")
        if module != "pnc" and not module.startswith("pnc.") or module == importer:
            continue
        for alias in node.names:
            name = alias.name
            if name.startswith("_") and not name.endswith("__"):
                found.append((importer, module, name))
    return found


def test_the_check_sees_absolute_and_relative_private_imports(tmp_path, monkeypatch):
    package = tmp_path / "pnc" / "sub"
    package.mkdir(parents=True)
    source = package / "mod.py"
    source.write_text(
        "from pnc.other import _hidden, public\nfrom .sibling import _near\n"
        "from pnc.sub.mod import _own\nfrom pnc import __version__\nfrom numpy import _x\n"
    )
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path / "pnc")
    assert private_imports(source) == [
        ("pnc.sub.mod", "pnc.other", "_hidden"),
        ("pnc.sub.mod", "pnc.sub.sibling", "_near"),
    ]


def test_no_module_imports_a_private_name_of_another():
    found = {hit for path in sorted(ROOT.rglob("*.py")) for hit in private_imports(path)}
    assert not found, sorted(found)

"""No method id is written out as a string outside ``pnc/methods``: the library, the rules and the
scripts read the ids from the registry. The exceptions are listed below, each with its reason:
code whose subject is P&C itself (its members, its ablation, the reference of every test), the
CIFAR study's own method table, and the project's name where it is not a method. And no class
name is defined twice in the package (one name per concept: the CIFAR study's method sections
are not the MuJoCo methods' configs)."""

from __future__ import annotations

import ast
import tokenize
from pathlib import Path

import pnc.methods.ood as ood_methods
import pnc.methods.regression as methods

ROOT = Path(__file__).resolve().parents[1]
PNC = {"pnc", "pnc_nocorr"}  # P&C and its ablation

#: Files whose subject is P&C itself: they may name P&C and its ablation, and no baseline.
PNC_FILES: dict[str, str] = {
    "bench/__main__.py": "P&C's own benchmark (its member count)",
    "pnc/studies/mujoco/results.py": "REFERENCE: P&C, which every baseline is tested against",
    "pnc/studies/mujoco/mechanism.py": "the mechanism stage: P&C's members and its ablation",
    "pnc/studies/mujoco/pnc_members.py": "the selected P&C members, stored for the mechanism stage",
    "pnc/studies/mujoco/per_sigma.py": "P&C and its ablation compared at equal sigma (Figure 3A)",
    "pnc/report/stats.py": "the Wilcoxon verdict: a test favours P&C or the baseline",
    "pnc/report/mechanism_claims.py": "the mechanism claims about P&C and its ablation",
    "pnc/report/mechanism_table.py": "the mechanism statistics of P&C and its ablation",
    "pnc/report/mechanism_figures.py": "the mechanism figures of P&C and its ablation",
    "workflow/rules/common.smk": "the mechanism stage runs where P&C is configured",
    "workflow/rules/mechanism.smk": "the mechanism stage stores P&C's members",
}
#: Other files (or folders) -> (the ids they may name, why).
OTHER_FILES: dict[str, tuple[set[str], str]] = {
    "pnc/core/conv/classification.py": (
        {"msp"},
        "an ensemble's maximum softmax probability, a score's name (not the MSP detector)",
    ),
    "pnc/studies/mujoco/mechanism_columns.py": (
        {"mahalanobis"},
        "the mechanism stage's distance of Figure 3B, a quantity's name (not the detector)",
    ),
    "pnc/core/classifier": (
        {"swag"},
        "the image classifier's training recipe collects SWAG's moments, and its runs say so",
    ),
    "bench/cifar_costs.py": ({"pnc", "swag"}, "the CIFAR study's cost model, per method"),
    "bench/peers.py": (
        {"pnc", "deep_ensemble", "mc_dropout"},
        "the peers benchmark's own method table, on models of its own (docs/peers.md)",
    ),
    "bench/peers_report.py": (
        {"pnc", "deep_ensemble", "mc_dropout"},
        "the peers benchmark's tables, keyed by its own method table",
    ),
    "workflow/rules/cifar/common.smk": ({"swag"}, "the CIFAR study's SWAG start epochs"),
    "pnc/studies/mujoco/data/envs.py": (
        {"pnc"},
        "the project's name: the Minari namespace of the Far data",
    ),
    "pnc/studies/mujoco/data/minari_io.py": (
        {"pnc"},
        "the project's name: the author of the stored datasets",
    ),
}
ALLOWED: dict[str, set[str]] = {
    **{path: PNC for path in PNC_FILES},
    **{path: ids for path, (ids, _) in OTHER_FILES.items()},
}


def _sources() -> list[Path]:
    files = [*ROOT.joinpath("pnc").rglob("*.py"), *ROOT.joinpath("examples").rglob("*.py")]
    files += [*ROOT.joinpath("bench").rglob("*.py")]
    files += [*ROOT.joinpath("scripts").rglob("*.py"), *ROOT.joinpath("workflow").rglob("*.smk")]
    files += [ROOT / "Snakefile", ROOT / "cifar.smk"]
    methods_dir = ROOT / "pnc" / "methods"
    return sorted(p for p in files if methods_dir not in p.parents)


def _string_constants(path: Path) -> list[tuple[int, str]]:
    """Every string constant of a Python file, or of each string token of a Snakemake file (its
    rule syntax is not Python, its tokens are), with its line; f-strings give their parts."""
    if path.suffix == ".py":
        trees = [(0, ast.parse(path.read_text()))]
    else:
        with path.open("rb") as f:
            tokens = [t for t in tokenize.tokenize(f.readline) if t.type == tokenize.STRING]
        trees = [(t.start[0] - 1, ast.parse(t.string.strip(), mode="eval")) for t in tokens]
    return [
        (offset + node.lineno, node.value)
        for offset, tree in trees
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


def _allowed(relative: str) -> set[str]:
    for key, ids in ALLOWED.items():
        if relative == key or relative.startswith(key + "/"):
            return ids
    return set()


#: Method ids of either study's registry.
IDS = set(methods.METHOD_IDS) | set(ood_methods.METHOD_IDS)


def test_no_method_id_literal_outside_the_methods_package():
    ids = IDS
    found: dict[str, set[str]] = {}
    wrong = []
    for path in _sources():
        relative = path.relative_to(ROOT).as_posix()
        allowed = _allowed(relative)
        for line, value in _string_constants(path):
            if value in ids:
                found.setdefault(relative, set()).add(value)
                if value not in allowed:
                    wrong.append(f"{relative}:{line}: {value!r}")
    assert not wrong, "method ids written out (read them from pnc.methods):\n" + "\n".join(wrong)
    # every exception is still needed: a stale entry would hide a new literal
    for key in ALLOWED:
        assert any(f == key or f.startswith(key + "/") for f in found), f"stale entry {key}"


def test_at_most_five_baseline_ids_are_written_in_the_library_and_rules():
    """Outside ``pnc/methods`` the library and the rules write a baseline's id (not P&C's) at most
    five times, each an exception listed above with its reason (benchmarks aside)."""
    baselines = IDS - PNC
    found = []
    for path in _sources():
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith(("pnc/methods/", "bench/", "examples/", "scripts/")):
            continue
        found += [
            f"{relative}:{line}" for line, value in _string_constants(path) if value in baselines
        ]
    assert 0 < len(found) <= 5, found


def test_the_scan_sees_literals_in_python_and_snakemake_files(tmp_path):
    py = tmp_path / "a.py"
    py.write_text('X = {"swag": 1}\n\ndef f(m):\n    return f"{m}" + "laplace"\n')
    assert {v for _, v in _string_constants(py)} >= {"swag", "laplace"}
    smk = tmp_path / "b.smk"
    smk.write_text('rule r:\n    input:\n        "a",\n    params:\n        m="subspace",\n')
    assert (5, "subspace") in _string_constants(smk)


def test_every_class_name_is_defined_once_in_the_package():
    where: dict[str, list[str]] = {}
    for path in sorted(ROOT.joinpath("pnc").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(path.relative_to(ROOT).as_posix())
    twice = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert not twice
    assert {"PnCConfig", "PnCSection", "SWAGConfig", "SWAGSection"} <= set(where)

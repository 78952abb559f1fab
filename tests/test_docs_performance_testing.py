"""docs/performance.md and docs/testing.md claim what they can be checked on, and are checked on
it, never on their wording: every command they give runs a module that exists with options it
accepts, every script, config, test file, test and environment variable they name exists, every
link resolves, and the figures they quote from the committed data files are those files' numbers."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import json
import re
import runpy
import shlex
import sys
import tomllib
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [DOCS / "performance.md", DOCS / "testing.md"]
DATA = DOCS / "performance"

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
SPAN = re.compile(r"`([^`]+)`")
FENCE = re.compile(r"```[a-z]*\n(.*?)```", re.S)
NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")
PATH_PREFIXES = ("docs/", "tests/", "scripts/", "config/", "pnc/", "bench/", "workflow/", ".ci/")
SUFFIXES = {".py", ".sh", ".md", ".json", ".yaml", ".yml", ".toml", ".smk", ".txt", ".csv"}
TOP_FILES = {"Snakefile", "cifar.smk", "pyproject.toml", "CHANGELOG.md", "README.md"}


def _text(page: Path) -> str:
    return page.read_text()


def _spans(page: Path) -> list[str]:
    """Inline code spans (one line each, a span may wrap in the source), then the code blocks'
    commands (continuation lines joined, comments dropped)."""
    text = _text(page)
    blocks = FENCE.findall(text)
    prose = FENCE.sub("", text)
    spans = [" ".join(s.split()) for s in SPAN.findall(prose)]
    for block in blocks:
        for command in block.replace("\\\n", " ").splitlines():
            command = command.split("  #")[0].strip()
            if command and not command.startswith("#"):
                spans.append(" ".join(command.split()))
    return spans


def _commands(page: Path, program: str) -> list[list[str]]:
    """Each `... python -m MODULE ARGS` (or `bash SCRIPT ARGS`) on the page, from MODULE on."""
    found = []
    for span in _spans(page):
        words = span.replace("[", " ").replace("]", " ").split()
        for i, word in enumerate(words[:-1]):
            if (
                program == "python -m"
                and word == "python"
                and words[i + 1] == "-m"
                and i + 2 < len(words)
            ):
                found.append(words[i + 2 :])
            elif program == "bash" and word == "bash":
                found.append(words[i + 1 :])
    return found


def _help(module: str, args: list[str]) -> str:
    """What `python -m MODULE ARGS --help` prints (stdout and stderr), run in this process."""
    out = io.StringIO()
    argv = sys.argv
    sys.argv = [module, *args, "--help"]
    try:
        with (
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(out),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore", RuntimeWarning)  # runpy: a submodule already imported
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit:
        pass
    finally:
        sys.argv = argv
    return out.getvalue()


def _options_in_prose(page: Path) -> list[tuple[str, list[str]]]:
    """Each inline span that gives options alone (`--pnc-regime paper`), with the module of the
    last `python -m` span before it in the page's prose."""
    module, found = None, []
    for span in SPAN.findall(FENCE.sub("", _text(page))):
        words = span.replace("[", " ").replace("]", " ").split()
        if words[:2] == ["python", "-m"] and len(words) > 2:
            module = words[2]
        elif words and words[0].startswith("--") and module:
            found.append((module, words))
    return found


def _flags(words: list[str]) -> list[str]:
    flags = []
    for word in words:
        if word == "--":
            break
        if word.startswith("--") and len(word) > 2:
            flags.append(word.split("=")[0].rstrip(".,;:)"))
    return flags


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_python_module_the_page_runs_exists_and_takes_the_options_given(page):
    commands = _commands(page, "python -m")
    assert commands, f"{page.name} gives no python -m command"
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))  # bench/ runs from the checkout's root
    bad = []
    for words in commands:
        module, args = words[0], words[1:]
        if importlib.util.find_spec(module) is None:
            bad.append(f"python -m {module}: no such module")
            continue
        if module == "pytest":  # its options are pytest's own; -n and --dist are pytest-xdist's
            if "-n" in args and importlib.util.find_spec("xdist") is None:
                bad.append("python -m pytest -n: pytest-xdist is not installed")
            continue
        subcommand = args[:1] if args and re.fullmatch(r"[a-z][a-z_-]*", args[0]) else []
        usage = set(re.findall(r"--[\w-]+", _help(module, subcommand)))
        bad += [
            f"python -m {module} {' '.join(subcommand)}: no {f}"
            for f in _flags(args)
            if f not in usage
        ]
        if module == "bench.breakdown" and "--" in args:
            from pnc.workflow.commands import STAGES

            stage = args[args.index("--") + 1]
            if stage not in STAGES:
                bad.append(f"bench.breakdown: no workflow stage {stage}")
    for module, words in _options_in_prose(page):
        if module != "pytest":
            usage = set(re.findall(r"--[\w-]+", _help(module, [])))
            bad += [f"python -m {module}: no {f}" for f in _flags(words) if f not in usage]
    assert not bad, bad


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_path_the_page_names_exists(page):
    missing = []
    for span in _spans(page):
        for word in shlex.split(span.replace("'", " ").replace('"', " ")):
            word = word.rstrip(".,;:)")
            if word in TOP_FILES or (
                word.startswith(PATH_PREFIXES) and not set(word) & set("<>{}*$")
            ):
                path = word.split("::")[0]
                module, _, attr = path.rpartition(".")
                if Path(path).suffix in SUFFIXES or path.endswith("/") or path in TOP_FILES:
                    if not (ROOT / path).exists():
                        missing.append(path)
                elif module and "/" in module:  # a function of a module, `tests/module.function`
                    source = ROOT / f"{module}.py"
                    if not (source.is_file() and f"def {attr}(" in source.read_text()):
                        missing.append(path)
    assert not missing, f"{page.name} names paths that do not exist: {missing}"


def test_the_scripts_the_pages_run_exist():
    scripts = {c[0] for page in PAGES for c in _commands(page, "bash")}
    assert "scripts/test.sh" in scripts and "scripts/quick.sh" in scripts
    assert all((ROOT / s).is_file() for s in scripts), scripts
    for line in _spans(DOCS / "testing.md"):
        if line.startswith("scripts/mutation.sh "):
            module, *tests = line.split(" -- ")[0].split()[1:]
            if module != "MODULE.py":
                assert (ROOT / module).is_file(), module
                assert all((ROOT / t).is_file() for t in tests), tests


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_dotted_name_of_the_library_resolves(page):
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    names = {s.split()[0].rstrip(".,") for s in _spans(page)}
    names = {n for n in names if re.fullmatch(r"(pnc|bench)(\.\w+)+", n)}
    assert names
    unresolved = []
    for name in sorted(names):
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            try:
                for attr in parts[cut:]:
                    obj = getattr(obj, attr)
            except AttributeError:
                unresolved.append(name)
            break
        else:
            unresolved.append(name)
    assert not unresolved, f"{page.name}: {unresolved}"


def test_the_tests_and_markers_testing_md_names_exist():
    spans = _spans(DOCS / "testing.md")
    sources = "\n".join(p.read_text() for p in (ROOT / "tests").glob("*.py"))
    named = {w for s in spans for w in re.findall(r"(?<![\w/])test_\w+(?![\w.])", s)}
    assert named, "testing.md names no test"
    assert not {t for t in named if f"def {t}(" not in sources}, "named tests missing"
    declared = {
        m.split(":")[0]
        for m in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"][
            "ini_options"
        ]["markers"]
    }
    expressions = [e for s in spans for e in re.findall(r'-m "([^"]+)"', s)]
    assert expressions
    for expression in expressions:
        assert (
            set(expression.replace("(", " ").replace(")", " ").split()) - {"and", "or", "not"}
            <= declared
        )


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_environment_variable_the_page_names_is_read_by_the_code(page):
    code = "\n".join(
        p.read_text(errors="ignore")
        for folder in ("pnc", "bench", "scripts", "tests", "workflow")
        for p in (ROOT / folder).rglob("*")
        if p.is_file() and p.suffix in {".py", ".sh", ".smk", ""} and p != Path(__file__)
    )
    names = set(re.findall(r"\b(PNC_[A-Z_]+|MUTATION_[A-Z_]+)\b", _text(page)))
    assert names
    assert not {n for n in names if n not in code}, f"{page.name} names unknown variables"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_link_resolves(page):
    text = _text(page)
    broken = []
    for target in LINK.findall(text):
        if target.startswith(("http://", "https://")):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(target)
        elif anchor and resolved.suffix == ".md":
            slugs = {
                re.sub(r"[^\w\- ]", "", h.strip("# ").lower()).replace(" ", "-")
                for h in resolved.read_text().splitlines()
                if h.startswith("#")
            }
            broken += [target] if anchor not in slugs else []
    assert not broken, f"{page.name}: {broken}"


# ----- the figures against the data files they come from -------------------------------------


def _numbers(text: str) -> list[float]:
    return [float(n.replace(",", "")) for n in NUMBER.findall(text)]


def _where_linked(page: Path, data: Path) -> str:
    """The table row, or else the paragraph, that links to ``data`` (by its path from the page)."""
    target = data.relative_to(page.parent).as_posix()
    text = _text(page)
    rows = [line for line in text.splitlines() if line.startswith("|") and target in line]
    paragraphs = [p for p in text.split("\n\n") if target in p]
    found = rows or paragraphs
    assert found, f"{page.name} does not link to {target}"
    return found[0]


def _has_in_order(numbers: list[float], expected: list[float]) -> bool:
    it = iter(numbers)
    return all(any(n == e for n in it) for e in expected)


def _per_env_means(summary: dict) -> dict[str, float]:
    sums: dict[str, list[float]] = {}
    for key, pair in summary["per_env_seed"].items():
        sums.setdefault(key.split("/")[0], []).append(pair["cpu_s"])
    return {env: sum(v) / len(v) for env, v in sums.items()}


ENVS = ("InvertedPendulum", "HalfCheetah", "Ant")


def test_the_protocols_idle_figures_are_those_of_their_data_file():
    data = DATA / "two_phase" / "costs_idle_1c9ebd9.json"
    summary = json.loads(data.read_text())
    means = _per_env_means(summary)
    expected = [round(means[e]) for e in ENVS] + [round(summary["mean_cpu_s_per_env_seed"])]
    expected.append(round(summary["by_env_mean"]["core_hours"], 1))
    row = _where_linked(DOCS / "performance.md", data)
    assert _has_in_order(_numbers(row), expected), (expected, row)
    # the per-rule table's totals are the same pairs
    rows = [_numbers(r) for r in _text(DOCS / "performance.md").splitlines() if r.startswith("|")]
    assert [float(x) for x in expected[:3]] in rows


def test_the_protocols_latest_figures_are_those_of_their_data_files():
    page = DOCS / "performance.md"
    data = DATA / "two_phase" / "test_phase_one_job_448a02d.json"
    mean = json.loads(data.read_text())["mean"]
    expected = [round(mean["pair_cpu_s"][e]) for e in (*ENVS, "all")]
    expected += [round(mean["test_phase_one_job_cpu_s"][e]) for e in (*ENVS, "all")]
    costs = json.loads((DATA / "costs.json").read_text())
    # the pairs' own jobs and the environments' data jobs
    expected.append(
        round(costs["by_env_mean"]["stored_cpu_s"] + costs["by_env_mean"]["data_cpu_s"])
    )
    row = _where_linked(page, data)
    assert row == _where_linked(page, DATA / "costs.json")
    assert round(costs["mean_cpu_s_per_env_seed"]) == expected[3]
    assert _has_in_order(_numbers(row), expected), (expected, row)


def test_humanoids_figure_is_that_of_its_data_file_and_of_the_reference_runs():
    page = DOCS / "performance.md"
    data = DATA / "two_phase" / "costs_humanoid_seed0.json"
    two_phase = json.loads(data.read_text())["per_env_seed"]["Humanoid/seed0"]["cpu_s"]
    reference = json.loads((DATA / "reference_costs.json").read_text())
    full = reference["per_env_seed"]["Humanoid/seed0"]["cpu_s"]
    row = _where_linked(page, data)
    assert _has_in_order(_numbers(row), [round(two_phase), round(full)]), row


def test_p_and_cs_cost_against_the_deep_ensemble_is_that_of_the_stored_runs():
    page = DOCS / "performance.md"
    rows = [_numbers(r) for r in _text(page).splitlines() if r.lstrip().startswith("|")]
    numbers = set(_numbers(_text(page)))
    for name in ("pnc_paper_regime", "pnc_defaults"):
        run = json.loads((DATA / "method_costs" / f"{name}.json").read_text())
        for method in ("pnc", "deep_ensemble"):
            m = run["methods"][method]
            first = [m["train_s"], m["posthoc_s"], m["predict_s"]]
            warm = [m["train_warm_s"], m["posthoc_warm_s"], m["predict_warm_s"]]
            pairs = zip([*first, sum(first)], [*warm, sum(warm)], strict=True)
            cells = [x for pair in pairs for x in pair]
            assert [round(x, 2) for x in cells] in [r[-8:] for r in rows], (name, method)
        parts = run["pnc_over_deep_ensemble_parts"]
        quoted = [run["pnc_over_deep_ensemble_warm"], run["pnc_over_deep_ensemble"]]
        quoted += [parts["base_train"], parts["pnc_build"], parts["pnc_predict"]]
        quoted.append(run["methods"]["pnc"]["posthoc_s"] - run["methods"]["pnc"]["posthoc_warm_s"])
        assert {round(q, 3) for q in quoted[:-1]} <= numbers, name
        assert round(quoted[-1], 1) in numbers, name
        assert round(parts["deep_ensemble_train_over_base_train"], 1) in numbers, name


def test_the_cifar_hours_are_those_of_the_h200_measurement():
    page = DOCS / "performance.md"
    data = DATA / "cifar_costs_h200.json"
    per_seed = json.loads(data.read_text())["projection_at_measured_rates"]["hours"][
        "total_per_seed"
    ]
    paragraph = _where_linked(page, data)
    assert {round(5 * per_seed, 1), round(per_seed, 1)} <= set(_numbers(paragraph)), paragraph


def test_the_kill_rates_add_up():
    rows = [
        r for r in _text(DOCS / "testing.md").splitlines() if re.match(r"\| `pnc/.*\.py` \|", r)
    ]
    assert len(rows) >= 5
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        module, counts, rate, left = cells[0].strip("`"), cells[-3], cells[-2], cells[-1]
        assert (ROOT / module).is_file(), module
        killed, *timeouts, total = _numbers(counts)
        detected = killed + sum(timeouts)
        assert round(100 * detected / total, 1) == _numbers(rate)[0], row
        assert total - detected == _numbers(left)[0], row

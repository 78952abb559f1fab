"""What the README claims: its example runs and does what its comments say, its results table is
the committed Table 1, its cost figures are the measured ones, its picture's script shows what
the picture shows, the commands and files it names exist, and every page it points to (and every
link and image in those pages) resolves."""

import importlib.util
import json
import re
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml
from install_check_script import install_check

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _local_links(path: Path) -> list[str]:
    return [t for t in LINK.findall(path.read_text()) if not t.startswith(("http://", "https://"))]


def test_readme_is_a_front_page_of_at_most_150_lines():
    assert len(README.read_text().splitlines()) <= 150


def test_every_page_the_readme_points_to_exists_and_its_links_resolve():
    seen, todo, broken = set(), [README], []
    while todo:
        page = todo.pop()
        if page in seen:
            continue
        seen.add(page)
        for target in _local_links(page):
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            if not resolved.exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
            elif anchor and resolved.suffix == ".md":
                slugs = {
                    re.sub(r"[^\w\- ]", "", h.strip("# ").lower()).replace(" ", "-")
                    for h in resolved.read_text().splitlines()
                    if h.startswith("#")
                }
                if anchor not in slugs:
                    broken.append(f"{page.relative_to(ROOT)} -> {target} (no such heading)")
            elif resolved.suffix == ".md" and ROOT in resolved.parents:
                todo.append(resolved)
    assert not broken, f"broken links: {broken}"
    assert len(seen) > 5


@pytest.mark.slow
def test_readme_example_runs_and_its_members_fan_out_off_the_data():
    """Every python block of the README runs as shown; the library example's ensemble spreads ten
    times more away from the data than on them, as its comment says (the same check runs in the
    installed wheel alone, scripts/install_check.py)."""
    assert install_check.run_readme() >= 1


@pytest.mark.slow
def test_library_page_example_runs_and_does_what_its_comments_say():
    """docs/library.md's first example: members ``[50, 200, 1]``, epistemic variance small on the
    data and large outside (the installed wheel runs the same check, scripts/install_check.py)."""
    install_check.run_library_example()


def _readme_table() -> dict[str, list[str]]:
    """The README's results excerpt: method label -> its cells, by the header's columns."""
    lines = [ln for ln in README.read_text().splitlines() if ln.startswith("| ")]
    header = next(ln for ln in lines if ln.startswith("| Method |"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    start = lines.index(header)
    rows = {}
    for line in lines[start + 1 :]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) != len(columns):
            break
        rows[cells[0]] = dict(zip(columns, cells, strict=True))
    return rows


#: The README excerpt's columns -> (metric column prefix in cross_env.csv, what the cell shows).
EXCERPT = {
    "ID RMSE mean rank": ("id_rmse", "mean_rank"),
    "Far NLL mean rank": ("far_nll", "mean_rank"),
    "Far NLL wins": ("far_nll", "wins"),
    "Far AUROC mean rank": ("far_auroc", "mean_rank"),
    "Far AUROC wins": ("far_auroc", "wins"),
}


def test_readme_results_are_the_committed_table_1():
    """Each cell of the README's excerpt is the reference results' cross-environment table
    (docs/results/offline/tables/cross_env.csv): mean ranks to two decimals, the best in bold,
    wins out of the environments; every ranked method is there."""
    table = pd.read_csv(ROOT / "docs" / "results" / "offline" / "tables" / "cross_env.csv")
    rows = _readme_table()
    assert set(rows) == set(table["label"]) and len(rows) == len(table)
    for _, row in table.iterrows():
        cells = rows[row["label"]]
        for column, (metric, kind) in EXCERPT.items():
            if kind == "mean_rank":
                want = f"{row[f'{metric}_mean_rank']:.2f}"
                if bool(row[f"{metric}_best"]):
                    want = f"**{want}**"
            else:
                want = f"{row[f'{metric}_wins']} / {row[f'{metric}_n_envs']}"
            assert cells[column] == want, (row["label"], column, cells[column], want)


def test_readme_cost_figures_come_from_the_measurements():
    """The protocol's cost is the reference runs' measured core-hours (docs/performance/
    reference_costs.json, as docs/results/offline/README.md reads it); the CIFAR cost per seed is
    the upper bound docs/cifar_results.md derives; the quick default's time is docs/performance.md's."""
    text = README.read_text()
    ref = json.loads((ROOT / "docs" / "performance" / "reference_costs.json").read_text())
    assert f"{ref['by_env_mean']['core_hours']:.1f} core-hours" in text
    per_seed = re.search(r"at most ([\d.]+) h per seed", text).group(1)
    cifar = (ROOT / "docs" / "cifar_results.md").read_text()
    bound = next(ln for ln in cifar.splitlines() if ln.startswith("| at most") and " h |" in ln)
    assert f"| {per_seed} h |" in bound
    minutes = int(re.search(r"in under (\d+) minutes from a fresh\s+clone", text).group(1))
    perf = (ROOT / "docs" / "performance.md").read_text()
    first = re.search(r"\| first run \| \*\*(\d+) min ([\d.]+) s\*\*", perf)
    assert 60 * int(first.group(1)) + float(first.group(2)) < 60 * minutes


def test_readme_commands_name_what_exists():
    """The scripts, config files, Snakefiles, profiles and example scripts the README names exist."""
    text = README.read_text()
    named = set(re.findall(r"(?:scripts|config|profiles|examples)/[\w./-]+\w", text))
    named |= {"Snakefile", "cifar.smk"} & set(re.findall(r"[\w.]+", text))
    assert {"scripts/quick.sh", "scripts/test.sh", "config/offline.yaml"} <= named
    missing = sorted(n for n in named if not (ROOT / n).exists())
    assert not missing, missing
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash scripts/test.sh" in ci.splitlines()[-1]


@pytest.mark.slow
def test_the_picture_shows_what_the_readme_says(tmp_path):
    """examples/one_d.py, which draws the README's picture: corrected, the members agree on the
    data and fan out away from them; perturbed only, they disagree on the data too."""
    spec = importlib.util.spec_from_file_location("one_d", ROOT / "examples" / "one_d.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "one_d.png"
    got = module.main(["--out", str(out), "--steps", "1500"])
    assert out.stat().st_size > 10_000
    assert got["corrected_spread_off_data"] > 10 * got["corrected_spread_on_data"]
    assert got["perturbed_spread_on_data"] > 10 * got["corrected_spread_on_data"]


def test_no_tracked_text_file_holds_merge_conflict_markers():
    root = Path(__file__).resolve().parents[1]
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.split()
    markers = re.compile(r"^(<{7} |={7}$|>{7} )", re.MULTILINE)
    bad = []
    for name in tracked:
        if Path(name).suffix not in {".md", ".py", ".smk", ".yaml", ".yml", ".toml", ".rst", ""}:
            continue
        path = root / name
        if path.is_file() and markers.search(path.read_text(errors="ignore")):
            bad.append(name)
    assert not bad, f"merge-conflict markers left in {bad}"


def test_config_readme_describes_every_config_file_and_the_catalog_names_both_workflows():
    text = (ROOT / "config" / "README.md").read_text()
    files = [ROOT / "config.yaml", ROOT / ".test" / "config.yaml"]
    files += sorted((ROOT / "config").glob("*.yaml"))
    for path in files:
        name = path.relative_to(ROOT).as_posix()
        assert f"| `{name}`" in text, f"config/README.md does not describe {name}"
    catalog = yaml.safe_load((ROOT / ".snakemake-workflow-catalog.yml").read_text())["usage"]
    assert "cifar.smk" in catalog["mandatory-flags"]["flags"]
    assert catalog["report"] is True
    assert set(catalog["software-stack-deployment"]) == {
        "conda",
        "singularity",
        "singularity+conda",
    }

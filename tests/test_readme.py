"""The README is the front door: its library example runs as shown and does what its comments say,
it stays short, and every page it points to (and every link in those pages) exists."""

import re
import subprocess
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _local_links(path: Path) -> list[str]:
    return [t for t in LINK.findall(path.read_text()) if not t.startswith(("http://", "https://"))]


def test_readme_is_a_front_door_with_a_table_of_contents():
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    assert "## Documentation" in text
    pages = [t for t in _local_links(README) if t.startswith("docs/")]
    for page in ("docs/extending.md", "docs/performance.md", "docs/cifar.md", "docs/workflow.md"):
        assert page in pages, f"README does not point to {page}"
    assert "docs/modules.md" not in pages, "the module map is ARCHITECTURE.md"
    first_screen = "\n".join(text.splitlines()[:30])
    for page in ("ARCHITECTURE.md", "CONTRIBUTING.md"):
        assert f"]({page})" in first_screen, f"README's first screen does not point to {page}"


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


def test_readme_library_example_runs_and_members_disagree_off_the_data():
    text = README.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "the README has no python example"
    namespace: dict = {}
    exec(compile(blocks[0], "README.md", "exec"), namespace)
    pred, epistemic = namespace["pred"], np.asarray(namespace["epistemic"])[:, 0]
    assert pred.means.shape == (50, 200, 1)
    grid = np.linspace(-6, 6, 200)
    inside, outside = np.abs(grid) <= 2, np.abs(grid) >= 4
    assert epistemic[outside].mean() > 10 * epistemic[inside].mean()


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
    first_screen = "\n".join(README.read_text().splitlines()[:40])
    for needed in ("MuJoCo", "CIFAR-10", "scripts/quick.sh", "-s cifar.smk", "core-hours"):
        assert needed in first_screen, needed

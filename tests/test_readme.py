"""The README's library example runs as shown and does what its comments say."""

import re
import subprocess
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[1] / "README.md"


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

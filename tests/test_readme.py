"""The README's library example runs as shown and does what its comments say."""

import re
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

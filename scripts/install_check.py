"""What a researcher gets from ``pip install pnc``, checked in an environment holding only the wheel
and its own dependencies (``scripts/install_check.sh`` builds one per Python and lock file).

Runs, and fails on the first broken claim:

1. nothing of the workflows came along: Snakemake, MuJoCo, Gymnasium, Minari and pandas are
   not importable; ``import pnc.studies`` (and ``python -m pnc.workflow``) stop with one line that
   names the extra to install;
2. every ``python`` block of the README, each in a fresh namespace; the library example's
   ensemble spreads more away from the data than on them, as its comment says;
3. the first example of docs/library.md: the paper's Gaussian MLP through ``pnc.train`` and
   ``pnc.build_members``;
4. the three examples of ``docs/any_model.md`` (``examples/``: flax.nnx regression, flax.linen CNN,
   a linen transformer) at small settings, with the claims their tests check;
5. P&C members built by programs loaded from JAX's persistent compilation cache equal, bit for
   bit, those its first compilation built (JAX 0.6.0's CPU executables loaded from the cache skip
   some while loops: the ridge solve's came back NaN).

Usage: ``python scripts/install_check.py`` from the checkout root, with that environment's Python.
Prints one JSON line of what it ran and the versions it ran with.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: What the ``[workflow]`` extra brings and the library never imports.
WORKFLOW_ONLY = ("snakemake", "mujoco", "gymnasium", "minari", "pandas")
EXTRA_HINT = 'pip install "pnc[workflow]"'


def _check_lean() -> None:
    import pnc

    if Path(pnc.__file__).resolve().is_relative_to(ROOT):
        raise AssertionError(f"pnc is imported from the checkout ({pnc.__file__}), not installed")
    present = [name for name in WORKFLOW_ONLY if importlib.util.find_spec(name) is not None]
    if present:
        raise AssertionError(f"the library install brought workflow packages: {present}")
    for code in ("import pnc.studies", "import pnc.workflow.commands", "import pnc.report.tables"):
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        last = run.stderr.strip().splitlines()[-1] if run.stderr.strip() else ""
        if run.returncode == 0 or EXTRA_HINT not in last:
            raise AssertionError(f"{code!r} should stop naming {EXTRA_HINT}; stderr ends: {last!r}")
    run = subprocess.run([sys.executable, "-m", "pnc.workflow", "--help"], capture_output=True,
                         text=True)  # fmt: skip
    if run.returncode == 0 or EXTRA_HINT not in run.stderr:
        raise AssertionError(f"python -m pnc.workflow should name {EXTRA_HINT}: {run.stderr!r}")


def readme_blocks(path: Path = ROOT / "README.md") -> list[str]:
    """The ``python`` code blocks of a Markdown file, in order."""
    return re.findall(r"^```python\n(.*?)^```", path.read_text(), flags=re.S | re.M)


def run_readme() -> int:
    blocks = readme_blocks()
    if not blocks:
        raise AssertionError("README.md has no python block")
    for block in blocks:
        namespace: dict = {"__name__": "__readme__"}
        exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102
        if "spread" in namespace:  # the library example: the members fan out off the data
            import numpy as np

            spread, x_test = np.asarray(namespace["spread"]), namespace["x_test"]
            inside = spread[np.abs(x_test) <= 2].mean()
            outside = spread[np.abs(x_test) >= 4].mean()
            if not (np.isfinite(spread).all() and outside > 10 * inside):
                raise AssertionError(f"README example: spread {inside} on the data, {outside} off")
    return len(blocks)


def run_library_example() -> None:
    """The first ``python`` block of docs/library.md, the paper's Gaussian MLP through
    ``pnc.train``, ``pnc.build_members`` and the predictive summaries: the members' means and
    variances are ``[50, 200, 1]`` and the epistemic variance is ten times larger off the
    training range than on it, as its comments say."""
    import numpy as np

    block = readme_blocks(ROOT / "docs" / "library.md")[0]
    namespace: dict = {"__name__": "__library__"}
    exec(compile(block, "docs/library.md", "exec"), namespace)  # noqa: S102
    pred, epistemic = namespace["pred"], np.asarray(namespace["epistemic"])[:, 0]
    if tuple(pred.means.shape) != (50, 200, 1) or not np.isfinite(epistemic).all():
        raise AssertionError(f"docs/library.md: means {pred.means.shape}")
    grid = np.linspace(-6, 6, 200)
    inside, outside = epistemic[np.abs(grid) <= 2], epistemic[np.abs(grid) >= 4]
    if not outside.mean() > 10 * inside.mean():
        raise AssertionError(f"docs/library.md: epistemic {inside.mean()} on, {outside.mean()} off")


#: P&C members on a small untrained network, printed as the hash of their predictions' bytes.
_CACHED_BUILD = """
import hashlib, sys
import jax, numpy as np
from flax import nnx
import pnc

class Net(nnx.Module):
    def __init__(self, rngs):
        self.hidden = nnx.Linear(1, 16, rngs=rngs)
        self.out = nnx.Linear(16, 1, rngs=rngs)
    def __call__(self, x):
        return self.out(jax.nn.tanh(self.hidden(x)))

x = np.linspace(-2, 2, 64, dtype=np.float32)[:, None]
ens = pnc.ensemble(Net(nnx.Rngs(0)), x, perturb=["hidden"], correct=["out"], key=jax.random.key(0),
                   config=pnc.PnCConfig(n_members=4, rank=4, sigma=1.0))
out = np.asarray(ens(np.linspace(-6, 6, 25, dtype=np.float32)[:, None]))
sys.exit("not finite") if not np.isfinite(out).all() else print(hashlib.sha256(out.tobytes()).hexdigest())
"""


def check_cached_programs() -> None:
    """Build the same members twice, each in a fresh interpreter sharing a new persistent
    compilation cache: the first compiles and stores its programs, the second loads them; both
    must give finite predictions with the same bytes."""
    import tempfile

    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "JAX_COMPILATION_CACHE_DIR": cache,
               "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
               "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "-1"}  # fmt: skip
        runs = []
        for attempt in ("compiled", "loaded from the cache"):
            run = subprocess.run([sys.executable, "-c", _CACHED_BUILD], capture_output=True,
                                 text=True, env=env)  # fmt: skip
            if run.returncode != 0:
                raise AssertionError(f"P&C members {attempt}: {run.stderr.strip()[-500:]}")
            runs.append(run.stdout.strip())
            if not any(Path(cache).rglob("*")):
                raise AssertionError("the persistent compilation cache stored nothing")
        if runs[0] != runs[1]:
            raise AssertionError("P&C members built by programs loaded from the persistent "
                                 "compilation cache differ from the compiled ones'")  # fmt: skip


def _claims(name: str, result: dict) -> list[str]:
    """What each example of docs/any_model.md claims, as the failed ones' descriptions."""
    failed = [f"{k} is not finite" for k, v in result.items()
              if isinstance(v, float) and not math.isfinite(v)]  # fmt: skip
    if name == "nnx_regression":
        if not result["epistemic_var_outside"] > 10 * result["epistemic_var_inside"]:
            failed.append("epistemic variance outside not ten times that inside")
    elif name == "linen_cnn":
        if not (result["base_test_accuracy"] > 0.8 and result["ensemble_test_accuracy"] > 0.8):
            failed.append("test accuracy of the network or the ensemble at most 0.8")
        if not 0.0 <= result["auroc_mixture_entropy"] <= 1.0:
            failed.append("AUROC outside [0, 1]")
    elif name == "transformer":
        if not result["base_test_accuracy"] > 0.6:
            failed.append("test accuracy at most 0.6")
        if not 0.0 <= result["auroc_mixture_entropy"] <= 1.0:
            failed.append("AUROC outside [0, 1]")
        if not (result["predict_shared_s"] > 0 and result["forward_s"] > 0):
            failed.append("a timing is not positive")
    return failed


def check_example(name: str) -> dict:
    """``examples/<name>.py`` at small settings (``main(quick=True, n_members=10)``), its result
    checked against what docs/any_model.md says of it; raises :class:`AssertionError` naming
    every claim that fails."""
    examples = str(ROOT / "examples")
    if examples not in sys.path:
        sys.path.insert(0, examples)  # the examples import their _common helpers
    spec = importlib.util.spec_from_file_location(
        f"example_{name}", ROOT / "examples" / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclass fields (linen modules) resolve their module
    spec.loader.exec_module(module)
    result = module.main(quick=True, n_members=10)
    failed = _claims(name, result)
    if failed:
        raise AssertionError(f"{name}: {'; '.join(failed)} ({result})")
    return result


#: The examples of docs/any_model.md, run in this order.
EXAMPLES = ("nnx_regression", "linen_cnn", "transformer")


def main() -> int:
    import flax
    import jax
    import numpy as np
    import optax

    start = time.perf_counter()
    _check_lean()
    n_blocks = run_readme()
    run_library_example()
    for name in EXAMPLES:
        check_example(name)
    check_cached_programs()
    print(json.dumps({
        "python": sys.version.split()[0], "jax": jax.__version__, "flax": flax.__version__,
        "optax": optax.__version__, "numpy": np.__version__, "readme_blocks": n_blocks,
        "examples": list(EXAMPLES),
        "seconds": round(time.perf_counter() - start, 1),
    }))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Costs of P&C on any Flax model: ``python -m bench.any_model_costs [--members M] [--out FILE]``.

Runs the three examples of ``docs/any_model.md`` (``examples/nnx_regression.py``,
``examples/linen_cnn.py``, ``examples/transformer.py``) with ``M`` members (default 50) and
prints, per example, wall-clock seconds measured after a compiling call (best of five):

- ``forward_s``: one forward pass of the trained network on the evaluation batch;
- ``predict_shared_s``: the ensemble's prediction (:class:`pnc.Ensemble`, the layers before the
  first perturbed one evaluated once), ``predict_full_s``: ``M`` full forward passes with the
  members' variables (:meth:`pnc.Ensemble.full_passes`), and their ratios to ``forward_s``;
- ``shared_over_full``: ``predict_shared_s / predict_full_s``;
- ``build_s`` (compiled) and ``build_first_call_s`` (compilation included), ``epoch_s`` (the
  median training epoch) and ``build_over_epoch``.
"""

from __future__ import annotations

import importlib.util
import platform
import sys
from pathlib import Path

import jax

from bench.command_line import bench_parser, emit

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"  # bench/ sits beside examples/
NAMES = ("nnx_regression", "linen_cnn", "transformer")


def load_example(name: str):
    """The module ``examples/<name>.py`` (loaded once per process)."""
    module_name = f"example_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, EXAMPLES / f"{name}.py")
    if spec is None or not (EXAMPLES / f"{name}.py").is_file():
        raise FileNotFoundError(f"example {name!r} not found under {EXAMPLES}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclass fields (linen modules) resolve their module
    spec.loader.exec_module(module)
    return module


def run_example(name: str, *, n_members: int, quick: bool = False) -> dict:
    """``main`` of ``examples/<name>.py`` with ``n_members`` members."""
    result = load_example(name).main(quick=quick, n_members=n_members)
    result["shared_over_full"] = result["predict_shared_s"] / result["predict_full_s"]
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = bench_parser(__doc__, out=True, members=50)
    parser.add_argument("--quick", action="store_true", help="the examples' small settings")
    parser.add_argument("--only", choices=NAMES, action="append", default=None)
    args = parser.parse_args(argv)
    report = {
        "platform": platform.platform(),
        "jax": jax.__version__,
        "devices": [str(d) for d in jax.devices()],
        "examples": {
            name: run_example(name, n_members=args.members, quick=args.quick)
            for name in (args.only or NAMES)
        },
    }
    return emit(report, args.out)


if __name__ == "__main__":
    main()

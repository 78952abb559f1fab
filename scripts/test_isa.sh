#!/usr/bin/env bash
# Run the numerical test files again with XLA's generated code pinned to another instruction-set
# level than the machine's own (docs/testing.md, "Tests on another instruction set"), so that an
# assertion finer than the float32 arithmetic behind it fails here, not on the next kind of CPU.
# Called by scripts/test.sh after the whole suite, in its venv. PNC_TEST_ISA picks the level
# (default AVX: the lowest jaxlib runs on, without the fused multiply-add of AVX2 and up, so its
# float32 rounding differs from every AVX2 or AVX-512 machine's); PNC_TEST_ISA=off skips the pass.
set -euo pipefail
cd "$(dirname "$0")/.."
isa="${PNC_TEST_ISA:-AVX}"
if [ "$isa" = off ]; then
    echo "[test_isa] skipped (PNC_TEST_ISA=off)"
    exit 0
fi
if [ "$(uname -m)" != x86_64 ]; then
    echo "[test_isa] skipped: --xla_cpu_max_isa=$isa is an x86-64 level and this is $(uname -m)"
    exit 0
fi
files=(
    tests/test_perturb_correct.py
    tests/test_theorem3.py
    tests/test_conv.py
    tests/test_mlp.py
    tests/test_calibration.py
    tests/test_metrics.py
    tests/test_methods_laplace.py
    tests/test_methods_swag.py
    tests/test_methods_subspace.py
    tests/test_methods_ess.py
    tests/test_cifar_scores.py
    tests/test_cifar_metrics.py
)
echo "[test_isa] the numerical tests again with XLA_FLAGS=--xla_cpu_max_isa=$isa"
XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }--xla_cpu_max_isa=$isa" \
    python -m pytest -n "${PNC_TEST_WORKERS:-2}" --dist loadfile -m "not slow" -q "${files[@]}"

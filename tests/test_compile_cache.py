"""The shared JAX compilation cache (pnc.runtime.compile_cache): hits, and faults that never change results."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental.compilation_cache import compilation_cache as jax_cc

from pnc.core.mlp import MLPConfig, forward, init_params
from pnc.runtime import compile_cache

_SETTINGS = (
    "jax_compilation_cache_dir",
    "jax_persistent_cache_min_compile_time_secs",
    "jax_persistent_cache_min_entry_size_bytes",
)


@pytest.fixture
def fresh_jax():
    """Restore JAX's cache settings afterwards and start and end with no compiled functions."""
    saved = {name: getattr(jax.config, name) for name in _SETTINGS}
    jax.clear_caches()
    jax_cc.reset_cache()
    yield
    for name, value in saved.items():
        jax.config.update(name, value)
    jax.clear_caches()
    jax_cc.reset_cache()


class _Hits:
    """Counts the persistent-cache hits JAX reports."""

    def __init__(self):
        self.count = 0
        jax.monitoring.register_event_listener(self._on_event)

    def _on_event(self, event: str, **kwargs) -> None:
        if event == "/jax/compilation_cache/cache_hits":
            self.count += 1


_HITS = _Hits()


_CONFIG = MLPConfig(out_dim=3, hidden=(16, 16))
_PARAMS = jax.tree.map(np.asarray, init_params(_CONFIG, 5, jax.random.key(0)))
_X = np.random.default_rng(1).normal(size=(32, 5)).astype(np.float32)


def _program(scale: float) -> np.ndarray:
    """A fresh process's view of one job: compile (or load) and run a network forward pass."""
    config, params, x = _CONFIG, _PARAMS, _X

    @jax.jit
    def run(params, x):
        mean, var = forward(params, x * scale, config)
        return mean + jnp.log(var)

    return np.asarray(run(params, x))


def _run_in_new_process(cache: Path | None, scale: float = 1.0) -> tuple[np.ndarray, int]:
    """Run :func:`_program` as a new job would: no compiled functions in memory, cache re-opened."""
    jax.clear_caches()
    jax_cc.reset_cache()
    if cache is None:
        jax.config.update("jax_compilation_cache_dir", None)
    else:
        assert compile_cache.enable(cache) is not None
    before = _HITS.count
    out = _program(scale)
    return out, _HITS.count - before


def _entries(cache: Path) -> list[Path]:
    return sorted(p for p in cache.rglob("*-cache") if p.is_file())


def test_second_job_loads_the_first_jobs_functions_with_identical_results(tmp_path, fresh_jax):
    reference, _ = _run_in_new_process(None)
    first, first_hits = _run_in_new_process(tmp_path)
    assert first_hits == 0 and _entries(tmp_path)
    second, second_hits = _run_in_new_process(tmp_path)
    assert second_hits > 0
    np.testing.assert_array_equal(first, reference)
    np.testing.assert_array_equal(second, reference)
    # one sub-directory per CPU kind
    assert {p.relative_to(tmp_path).parts[0] for p in _entries(tmp_path)} == {
        compile_cache.host_tag()
    }


def test_truncated_entries_warn_at_most_and_change_nothing(tmp_path, fresh_jax):
    reference, _ = _run_in_new_process(None)
    _run_in_new_process(tmp_path)
    entries = _entries(tmp_path)
    assert entries
    for entry in entries:  # a job killed while writing, or a read during another job's write
        data = entry.read_bytes()
        entry.write_bytes(data[: len(data) // 2])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out, hits = _run_in_new_process(tmp_path)
    np.testing.assert_array_equal(out, reference)
    assert hits == 0
    assert all("compilation cache" in str(w.message) for w in caught), [str(w) for w in caught]


def test_cache_of_another_program_changes_nothing(tmp_path, fresh_jax):
    reference, _ = _run_in_new_process(None)
    other, _ = _run_in_new_process(tmp_path, scale=2.0)  # another program fills the directory
    assert not np.array_equal(other, reference)
    assert _entries(tmp_path)
    # and stray files of unrelated tools, including one named like an entry
    host = tmp_path / compile_cache.host_tag()
    (host / "0123abcd-cache").write_bytes(b"not an executable")
    (host / "notes.txt").write_text("unrelated")
    out, hits = _run_in_new_process(tmp_path)
    np.testing.assert_array_equal(out, reference)


def test_unwritable_directory_warns_and_runs_without_cache(tmp_path, fresh_jax):
    blocker = tmp_path / "a-file"
    blocker.write_text("a file where the cache directory should be")
    before = jax.config.jax_compilation_cache_dir
    with pytest.warns(RuntimeWarning, match="compilation cache off"):
        assert compile_cache.enable(blocker / "jax_cache") is None
    assert jax.config.jax_compilation_cache_dir == before


def test_enable_from_env(tmp_path, monkeypatch, fresh_jax):
    for name in _SETTINGS:  # "off" removes them; monkeypatch restores the session's values
        if name.upper() in os.environ:
            monkeypatch.setenv(name.upper(), os.environ[name.upper()])
    monkeypatch.delenv(compile_cache.ENV_VAR, raising=False)
    assert compile_cache.enable_from_env() is None
    for off in ("off", "0", "False", ""):
        monkeypatch.setenv(compile_cache.ENV_VAR, off)
        assert compile_cache.enable_from_env(default=tmp_path / "unused") is None
    assert not (tmp_path / "unused").exists()
    monkeypatch.setenv(compile_cache.ENV_VAR, str(tmp_path / "cache"))
    directory = compile_cache.enable_from_env()
    assert directory == tmp_path / "cache" / compile_cache.host_tag()
    assert directory.is_dir()
    assert jax.config.jax_compilation_cache_dir == str(directory)
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 0.0


@pytest.mark.parametrize("jax_first", [False, True])
def test_off_undoes_a_cache_that_the_parent_process_turned_on(tmp_path, jax_first):
    # enable() before JAX is imported passes the cache on in JAX_* variables, which a child
    # inherits; PNC_COMPILE_CACHE=off in the child must still mean no cache
    parent = (
        "import os, subprocess, sys; from pnc.runtime import compile_cache; "
        f"compile_cache.enable({str(tmp_path)!r}); "
        "print(os.environ['JAX_COMPILATION_CACHE_DIR']); sys.stdout.flush(); "
        "env = {**os.environ, compile_cache.ENV_VAR: 'off'}; "
        "subprocess.run([sys.executable, '-c', sys.argv[1]], env=env, check=True)"
    )
    child = (
        ("import jax; " if jax_first else "")
        + "from pnc.runtime import compile_cache; compile_cache.enable_from_env(); import jax, os; "
        "print(jax.config.jax_compilation_cache_dir, os.environ.get('JAX_COMPILATION_CACHE_DIR'))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
    env.pop(compile_cache.ENV_VAR, None)
    out = subprocess.run([sys.executable, "-c", parent, child], env=env, capture_output=True,
                         text=True, check=True).stdout.split("\n")  # fmt: skip
    assert out[0] == str(tmp_path / compile_cache.host_tag())
    assert out[1] == "None None"


def test_host_tag_is_stable_and_names_the_architecture():
    import platform

    tag = compile_cache.host_tag()
    assert tag == compile_cache.host_tag()
    assert tag.startswith(platform.machine())
    assert len(tag.rsplit("-", 1)[1]) == 12


def test_cpu_name_reads_the_model_name_and_falls_back_without_cpuinfo(monkeypatch):
    import builtins
    import platform

    name = compile_cache.cpu_name()
    assert name and name == compile_cache.cpu_name()
    try:
        with open("/proc/cpuinfo") as f:
            models = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
    except OSError:
        models = []
    if models:
        assert name == models[0]
    real_open = builtins.open

    def no_cpuinfo(path, *args, **kwargs):
        if str(path) == "/proc/cpuinfo":
            raise OSError("no /proc here")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", no_cpuinfo)
    monkeypatch.setattr(platform, "processor", lambda: "")
    assert compile_cache.cpu_name() == (platform.machine() or "unknown")

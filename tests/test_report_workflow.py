"""The report stage's rules (with the targets of common.smk), included by a minimal Snakefile and run
on a synthetic results table; then the HTML report with the workflow's description."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from study_config import study_config
from synthetic_results import make_results

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "workflow" / "rules"
DESCRIPTION = ROOT / "workflow" / "report" / "workflow.rst"


@pytest.mark.slow
def test_report_rules_run_and_build_html_report(tmp_path):
    env = "InvertedPendulum"
    results, all_configs = make_results(envs=(env,), no_mid=(env,), seeds=(0, 1))
    (tmp_path / "results").mkdir()
    results.to_csv(tmp_path / "results" / "results.csv", index=False)
    all_configs.to_csv(tmp_path / "results" / "all_configs.csv", index=False)
    config = study_config(".test/config.yaml")  # the whole study config: here it is config.yaml
    config["envs"] = [env]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "Snakefile").write_text(
        'configfile: "config.yaml"\n'
        f'report: "{DESCRIPTION}"\n'
        f'include: "{RULES / "common.smk"}"\n'
        f'include: "{RULES / "report.smk"}"\n'
        "rule all:\n    input: report_targets()\n"
    )
    # the jobs' `python` must be the one running the tests
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    run_env = dict(os.environ, PATH=path)
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--cores",
        "1",
        "--snakefile",
        str(tmp_path / "Snakefile"),
        "-d",
        str(tmp_path),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, env=run_env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]

    for name in ("cross_env", "wilcoxon", "hparams", "per_env", "spearman"):
        for ext in ("tex", "md", "csv"):
            assert (tmp_path / "results" / "tables" / f"{name}.{ext}").stat().st_size > 0
    assert (tmp_path / "results" / "tables" / "stats.json").is_file()
    for kind in ("frontier", "metrics"):
        for ext in ("pdf", "png"):
            assert (tmp_path / "figures" / kind / f"{env}.{ext}").stat().st_size > 0
    assert (tmp_path / "figures" / "frontier_all.png").is_file()
    for rule in ("tables", "frontier_all", f"frontier/{env}", f"metrics/{env}"):
        assert (tmp_path / "logs" / "report" / f"{rule}.log").is_file()
        assert (tmp_path / "benchmarks" / "report" / f"{rule}.tsv").is_file()

    again = subprocess.run(cmd + ["-n"], capture_output=True, text=True, env=run_env, timeout=120)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr

    rep = subprocess.run(
        cmd + ["--report", str(tmp_path / "report.html")],
        capture_output=True,
        text=True,
        env=run_env,
        timeout=300,
    )
    assert rep.returncode == 0, rep.stderr[-3000:]
    html = (tmp_path / "report.html").read_text()
    assert f"ID/OOD frontier on {env}" in html  # rendered per-env caption
    assert "Cross-environment summary" in html
    assert '"Tables"' in html and '"Figures"' in html
    assert "one-step dynamics models" in html  # the workflow description (workflow.rst)

"""Measured study cost from Snakemake benchmark files (pnc.report.costs)."""

import json
from pathlib import Path

import pytest

from pnc.report import costs
from pnc.report.__main__ import main

ROOT = Path(__file__).resolve().parents[1]
HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def _write(root, rel, wall, cpu, rss=100.0):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + f"{wall}\t0:00:01\t{rss}\t0\t0\t0\t0\t0\t0\t{cpu}\n")


@pytest.fixture
def bench(tmp_path):
    root = tmp_path / "benchmarks"
    for env, scale in (("Hopper", 1.0), ("Ant", 2.0)):
        _write(root, f"offline_data/{env}.tsv", 30, 20 * scale)
        _write(root, f"select/{env}.tsv", 3, 2)
        _write(root, f"report/frontier/{env}.tsv", 5, 4)
        for seed in (0, 1):
            _write(root, f"far_data/{env}/seed{seed}.tsv", 6, 5)
            _write(root, f"splits/{env}/seed{seed}.tsv", 2, 1)
            _write(root, f"train/{env}/seed{seed}/base.tsv", 12, 10 * scale)
            _write(root, f"train/{env}/seed{seed}/mc_dropout-rate0.1.tsv", 9, 8)
            _write(root, f"evaluate/{env}/seed{seed}/pnc/base.tsv", 400, 300 * scale, rss=6000)
            _write(root, f"evaluate/{env}/seed{seed}/swag/base.tsv", 100, 90)
    _write(root, "aggregate.tsv", 2, 1)
    _write(root, "report/tables.tsv", 4, 3)
    return root


def test_jobs_are_read_with_stage_env_and_seed(bench):
    df = costs.read_benchmarks(bench)
    assert len(df) == 2 * 3 + 2 * 2 * 6 + 2
    row = df[df["job"] == "evaluate/Ant/seed1/pnc/base"].iloc[0]
    assert (row["stage"], row["env"], row["seed"], row["cpu_s"]) == ("evaluate", "Ant", 1, 600.0)
    assert df.loc[df["job"] == "offline_data/Hopper", "seed"].item() == -1
    assert df.loc[df["job"] == "report/frontier/Ant", "env"].item() == "Ant"
    assert df.loc[df["job"] == "aggregate", "env"].item() == ""


def test_summary_sums_per_env_seed_and_projects_by_hand(bench):
    out = costs.summarize(costs.read_benchmarks(bench), n_envs=11, n_seeds=10, cores=(2, 8, 32))
    hopper = out["per_env_seed"]["Hopper/seed0"]
    assert hopper["cpu_s"] == 5 + 1 + 10 + 8 + 300 + 90
    assert hopper["jobs"] == 6
    assert hopper["critical_path_cpu_s"] == 5 + 1 + 10 + 300
    assert hopper["max_rss_mb"] == 6000
    ant = out["per_env_seed"]["Ant/seed0"]["cpu_s"]
    assert ant == 5 + 1 + 20 + 8 + 600 + 90
    assert out["mean_cpu_s_per_env_seed"] == pytest.approx((414 + ant) / 2)
    assert out["per_env"]["Ant"] == {"jobs": 3, "cpu_s": 40 + 2 + 4}
    assert out["study_wide_cpu_s"] == 4
    total = (414 + ant) / 2 * 110 + (26 + 46) / 2 * 11 + 4
    proj = out["projection"]
    assert proj["core_hours"] == pytest.approx(total / 3600)
    critical = (5 + 1 + 20 + 600) + 46
    assert proj["critical_path_hours"] == pytest.approx(critical / 3600)
    assert proj["wall_hours"]["2"] == pytest.approx(total / 2 / 3600)
    # with many cores the chain of one (env, seed) bounds the wall time
    assert costs.summarize(costs.read_benchmarks(bench), n_envs=1, n_seeds=1, cores=(1000,))[
        "projection"
    ]["wall_hours"]["1000"] == pytest.approx(critical / 3600)


def test_bad_benchmarks_fail_clearly(tmp_path, bench):
    with pytest.raises(FileNotFoundError, match="no Snakemake benchmark"):
        costs.read_benchmarks(tmp_path / "missing")
    (bench / "train/Hopper/seed0/base.tsv").write_text("a\tb\n1\t2\n")
    with pytest.raises(costs.BenchmarkError, match="base.tsv"):
        costs.read_benchmarks(bench)
    report_only = costs.read_benchmarks(bench / "report")
    with pytest.raises(ValueError, match="no per-\\(env, seed\\) benchmark"):
        costs.summarize(report_only, n_envs=1, n_seeds=1)
    with pytest.raises(ValueError, match="n_envs"):
        costs.summarize(report_only, n_envs=0, n_seeds=1)


def test_costs_command_prints_and_writes_json(bench, tmp_path, capsys):
    out = tmp_path / "costs.json"
    assert main(["costs", str(bench), "--envs", "8", "--seeds", "3", "--out", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(out.read_text())
    assert printed["projection"]["n_envs"] == 8
    assert main(["costs", str(tmp_path / "nothing")]) == 2


def test_only_complete_env_seed_pairs_enter_the_projection(bench):
    # a study still running: Walker2d has its data and one training run so far
    _write(bench, "far_data/Walker2d/seed0.tsv", 6, 5)
    _write(bench, "train/Walker2d/seed0/base.tsv", 12, 10)
    out = costs.summarize(costs.read_benchmarks(bench), n_envs=1, n_seeds=1)
    assert "Walker2d/seed0" in out["per_env_seed"]
    assert "Walker2d/seed0" not in out["complete_env_seed_pairs"]
    assert len(out["complete_env_seed_pairs"]) == 4
    assert out["min_cpu_s_per_env_seed"] == 414


def test_exact_process_records_in_logs_replace_sampled_cpu(bench, tmp_path):
    """A job's log ending with its process record gives its exact CPU time and peak memory; a
    log without one (older code, a killed job) and a missing log keep the sampled values, and a
    run id with a dot ("rate0.1") maps to its own log."""
    from pnc.runtime.io import PROCESS_RECORD

    logs = tmp_path / "logs"

    def record(cpu: float, rss: float) -> str:
        return PROCESS_RECORD + json.dumps({"cpu_s": cpu, "max_rss_mb": rss})

    exact = logs / "evaluate/Ant/seed1/pnc/base.log"
    exact.parent.mkdir(parents=True)
    exact.write_text(f"starting\n{record(1.0, 1.0)}\nretrying\n{record(654.5, 2345.0)}\n")
    dotted = logs / "train/Ant/seed1/mc_dropout-rate0.1.log"
    dotted.parent.mkdir(parents=True)
    dotted.write_text(record(8.75, 300.0) + "\n")
    (logs / "train/Ant/seed1/base.log").write_text("no record: the job was killed\n")
    df = costs.read_benchmarks(bench, logs).set_index("job")
    assert df.loc["evaluate/Ant/seed1/pnc/base", ["cpu_s", "max_rss_mb"]].tolist() == [
        654.5,
        2345.0,
    ]
    assert df.loc["evaluate/Ant/seed1/pnc/base", "cpu_source"] == "process"
    assert df.loc["train/Ant/seed1/mc_dropout-rate0.1", "cpu_s"] == 8.75
    assert df.loc["train/Ant/seed1/base", ["cpu_s", "cpu_source"]].tolist() == [20.0, "sampled"]
    assert df.loc["evaluate/Ant/seed0/pnc/base", "cpu_source"] == "sampled"
    out = costs.summarize(df.reset_index(), n_envs=1, n_seeds=1)
    assert out["per_env_seed"]["Ant/seed1"]["jobs_with_exact_cpu"] == 2
    assert out["per_env_seed"]["Ant/seed1"]["cpu_s"] == 5 + 1 + 20 + 8.75 + 654.5 + 90
    assert out["per_env_seed"]["Ant/seed0"]["jobs_with_exact_cpu"] == 0


def test_stage_ends_with_its_process_record(capsys):
    """Every stage run through ``python -m pnc.workflow`` ends its log (stderr) with the exact
    record, also when its arguments are refused (before any thread limit)."""
    from pnc.runtime.io import PROCESS_RECORD
    from pnc.workflow import commands

    with pytest.raises(SystemExit):
        commands.main(["train_run", "--threads", "1"])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(PROCESS_RECORD)
    record = json.loads(last[len(PROCESS_RECORD) :])
    assert record["stage"] == "train_run" and record["status"] == 2
    assert record["cpu_s"] == pytest.approx(record["user_s"] + record["system_s"], abs=2e-3)
    assert record["cpu_s"] > 0 and record["max_rss_mb"] > 10


def test_a_pieces_listing_job_counts_for_its_env_and_seed(bench):
    _write(bench, "piece/Ant/seed1.tsv", 3, 2.5)
    out = costs.summarize(costs.read_benchmarks(bench), n_envs=11, n_seeds=10)
    assert out["per_env_seed"]["Ant/seed1"]["cpu_s"] == 724 + 2.5
    assert out["per_env_seed"]["Ant/seed1"]["jobs_by_stage"]["piece"] == 1
    assert out["study_wide_cpu_s"] == 4


def test_projection_by_env_mean_fills_each_env_from_its_own_seeds(bench):
    """Hopper's two pairs cost 414 each, Ant's 724: 11 x 10 needs 8 more of each and 9 x 10 of
    environments never measured, taken at the mean over all pairs."""
    _write(bench, "far_data/Walker2d/seed0.tsv", 6, 5)  # incomplete: not counted
    out = costs.summarize(costs.read_benchmarks(bench), n_envs=11, n_seeds=10)
    proj = out["by_env_mean"]
    assert proj["stored_pairs"] == 4 and proj["pairs_left"] == 106
    assert proj["stored_cpu_s"] == 2 * 414 + 2 * 724
    assert proj["data_cpu_s"] == (20 + 2 + 4) + (40 + 2 + 4) + 4
    assert proj["left_cpu_s"] == 8 * 414 + 8 * 724 + 9 * 10 * (414 + 724) / 2
    assert proj["core_hours"] * 3600 == pytest.approx(
        proj["stored_cpu_s"] + proj["data_cpu_s"] + proj["left_cpu_s"]
    )
    # more environments measured than projected: no such projection, and no line for it
    small = costs.summarize(costs.read_benchmarks(bench), n_envs=1, n_seeds=10)
    assert small["by_env_mean"] is None
    assert "Projected" not in costs.render_markdown(small)


def test_markdown_lists_each_env_cheapest_first_with_the_projection(bench, tmp_path):
    out = costs.summarize(costs.read_benchmarks(bench), n_envs=2, n_seeds=3)
    text = costs.render_markdown(out)
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[1:] == [
        "| Hopper | 0, 1 | 414 / 414 | 414 | 390 / 390 | 18 / 18 | 6.0 | 0 of 6 / 0 of 6 |",
        "| Ant | 0, 1 | 724 / 724 | 724 | 690 / 690 | 28 / 28 | 6.0 | 0 of 6 / 0 of 6 |",
    ]
    assert "**4 pairs**, 2,276 CPU s" in text
    # 2 x 3: one more seed of each environment at its own mean
    assert "**1.0 core-hours**, 0.3 of them for the 2 pairs" in " ".join(text.split())
    # Hopper: evaluations 390 of 414 (94 %), Ant 690 of 724 (95 %); training 18/414, 28/724
    assert "The evaluations are 94-95 % of every pair, the training runs 4 %." in " ".join(
        text.split()
    )
    md = tmp_path / "costs.md"
    assert main(["costs", str(bench), "--envs", "2", "--seeds", "3", "--markdown", str(md)]) == 0
    assert md.read_text() == text


REFERENCE_PIECES = ROOT / "docs/results/offline/pieces/benchmarks"
REFERENCE_COSTS = ROOT / "docs/performance/reference_costs.json"
BEGIN, END = costs.BLOCK_BEGIN, costs.BLOCK_END
REGENERATE = (
    "regenerate both after storing pieces: python -m pnc.report costs "
    "docs/results/offline/pieces/benchmarks --out docs/performance/reference_costs.json "
    "--markdown-into docs/performance.md"
)


def _flat(tree, prefix=""):
    if isinstance(tree, dict):
        return {k: v for key in tree for k, v in _flat(tree[key], f"{prefix}/{key}").items()}
    if isinstance(tree, list):
        return {f"{prefix}/{i}": v for i, v in enumerate(tree)} if tree else {prefix: "[]"}
    return {prefix: tree}


def test_committed_reference_costs_match_the_stored_pieces():
    """The committed cost summary is the one of the stored pieces' benchmark files, and the table
    in docs/performance.md is its markdown: neither can lag behind a newly stored piece."""
    committed = json.loads(REFERENCE_COSTS.read_text())
    fresh = costs.summarize(costs.read_benchmarks(REFERENCE_PIECES), n_envs=11, n_seeds=10)
    assert _flat(json.loads(json.dumps(fresh))) == pytest.approx(_flat(committed)), REGENERATE
    doc = (ROOT / "docs/performance.md").read_text()
    assert doc.count(BEGIN) == 1 and doc.count(END) == 1
    block = doc[doc.index(BEGIN) + len(BEGIN) : doc.index(END)]
    assert block.strip() == costs.render_markdown(committed).strip(), REGENERATE


def test_markdown_into_replaces_only_the_marked_block(bench, tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(f"# Costs\n\nintro\n{costs.BLOCK_BEGIN}\nold table\n{costs.BLOCK_END}\nafter\n")
    out = tmp_path / "costs.json"
    assert main(["costs", str(bench), "--markdown-into", str(doc), "--out", str(out)]) == 0
    text = doc.read_text()
    assert text.startswith(f"# Costs\n\nintro\n{costs.BLOCK_BEGIN}\n| environment |")
    assert text.endswith(f"training runs 4 %.\n{costs.BLOCK_END}\nafter\n")
    assert "old table" not in text
    block = text[text.index(costs.BLOCK_BEGIN) : text.index(costs.BLOCK_END)]
    assert block.count("| Ant |") == 1
    # a document without exactly one pair of markers is refused before anything is written
    out.unlink()
    doc.write_text(f"{costs.BLOCK_BEGIN}\n{costs.BLOCK_BEGIN}\n{costs.BLOCK_END}\n")
    assert main(["costs", str(bench), "--markdown-into", str(doc), "--out", str(out)]) == 2
    assert not out.exists()
    assert doc.read_text() == f"{costs.BLOCK_BEGIN}\n{costs.BLOCK_BEGIN}\n{costs.BLOCK_END}\n"


def test_batched_jobs_are_read_per_environment_and_refuse_a_projection(bench):
    """Config `batch: env`'s jobs hold every seed of an environment: read as per-environment
    jobs, and the summary refuses to project from them rather than leave them out."""
    _write(bench, "train_env/Hopper.tsv", 50, 40)
    _write(bench, "evaluate_env/Hopper.tsv", 70, 60)
    df = costs.read_benchmarks(bench)
    row = df[df["job"] == "train_env/Hopper"].iloc[0]
    assert (row["stage"], row["env"], row["seed"]) == ("train_env", "Hopper", -1)
    with pytest.raises(ValueError, match="batched per environment \\(evaluate_env, train_env"):
        costs.summarize(df, n_envs=1, n_seeds=1)

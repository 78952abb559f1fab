"""The study's measured cost, from the Snakemake benchmark files its jobs write.

Every rule of the workflow writes ``benchmarks/{stage}/...tsv`` (Snakemake's ``benchmark:``
directive: wall seconds ``s``, ``cpu_time`` of the job's processes, ``max_rss`` in MB, ...).
:func:`read_benchmarks` collects them into one table with the stage, environment and seed read from
the path; :func:`summarize` sums the CPU time per (env, seed), per environment and for the study as
a whole, and projects the cost of a protocol with ``n_envs`` environments and ``n_seeds`` seeds
onto machines with a given number of cores. :func:`render_markdown` prints the summary as a
per-environment table, and :func:`replace_block` puts that table into a document between two
marker lines (``python -m pnc.report costs --markdown-into``), so a document's cost table is
regenerated, never edited by hand.

The projection is CPU-time based: every job is single-threaded (``threads: 1`` in the configs),
so its CPU time is what it needs of one dedicated core, and CPU time, unlike wall time, barely
changes when other jobs share the machine. With ``c`` cores the projected wall time is
``max(total CPU / c, critical path)``, the critical path being the longest chain of dependent jobs
of one (env, seed): data, Far data, splits, the longest training run, the longest evaluation,
then selection and the report (perfect packing of the other jobs is assumed, so it is a lower
bound when jobs are few and long).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from pnc.report.pieces import process_record_path
from pnc.runtime.io import read_process_record

#: Stages whose benchmark files are per (env, seed): ``{stage}/{env}/seed{S}[/...].tsv``.
PER_SEED_STAGES = (
    "far_data", "splits", "train", "evaluate", "evaluate_test", "pnc_members", "mechanism",
    "piece",
)  # fmt: skip
#: Stages whose benchmark files are per environment: ``{stage}/{env}.tsv`` (the ``_env`` ones:
#: config ``batch: env``'s jobs, each every seed's training runs, evaluations or test phases).
BATCHED_STAGES = ("train_env", "evaluate_env", "evaluate_test_env")
PER_ENV_STAGES = (
    "behaviour_policies", "offline_data", "minari_data", "select", "assemble", *BATCHED_STAGES
)  # fmt: skip
#: The stages that score configurations: the evaluation (every configuration; with
#: ``evaluation: two_phase`` on the validation split) and the two-phase evaluation's test phase.
EVALUATION_STAGES = ("evaluate", "evaluate_test")


class BenchmarkError(ValueError):
    """A benchmark file is missing a column or is not where the workflow writes them."""


def read_benchmarks(root: str | Path, logs: str | Path | None = None) -> pd.DataFrame:
    """One row per job: ``stage, env, seed, job, wall_s, cpu_s, max_rss_mb, cpu_source``.

    ``env`` is empty for study-wide jobs (aggregate, report tables), ``seed`` is -1 for jobs that
    are not per seed. A file's last row is used (Snakemake writes one row per repeat).

    Snakemake's ``cpu_time`` is sampled (every 0.5 s for the first ~15 s of a job, then every
    30 s, the last sample kept), so it undercounts, the more so the busier the machine. Given the
    study's ``logs`` directory, a job whose log ``logs/{same path}.log`` ends with the exact
    record every stage writes (:data:`pnc.runtime.io.PROCESS_RECORD`) takes its ``cpu_s`` and
    ``max_rss_mb`` from there (``cpu_source`` ``"process"``), as does a job whose record was
    stored beside its benchmark file (``X.process.json``, :func:`pnc.report.pieces.store_piece`);
    the others keep the sampled values (``cpu_source`` ``"sampled"``).

    Raises:
        FileNotFoundError: ``root`` does not exist or holds no ``.tsv`` file.
        BenchmarkError: a file lacks the ``s`` or ``cpu_time`` column, or a per-(env, seed)
            stage's path has no ``seed{S}`` component.
    """
    root = Path(root)
    files = sorted(root.rglob("*.tsv")) if root.is_dir() else []
    if not files:
        raise FileNotFoundError(f"no Snakemake benchmark files (*.tsv) under {root}")
    rows = []
    for path in files:
        table = pd.read_csv(path, sep="\t")
        missing = {"s", "cpu_time"} - set(table.columns)
        if missing or table.empty:
            raise BenchmarkError(f"{path}: not a Snakemake benchmark file (missing {missing})")
        last = table.iloc[-1]
        parts = path.relative_to(root).with_suffix("").parts
        stage, env, seed = parts[0], "", -1
        if stage in PER_SEED_STAGES:
            if len(parts) < 3 or not parts[2].startswith("seed"):
                raise BenchmarkError(f"{path}: expected {stage}/{{env}}/seed{{S}}/...")
            env, seed = parts[1], int(parts[2].removeprefix("seed"))
        elif stage in PER_ENV_STAGES and len(parts) == 2:
            env = parts[1]
        elif stage == "report" and len(parts) == 3:  # report/{figure}/{env}
            env = parts[2]
        rss = float(last["max_rss"]) if "max_rss" in table.columns else float("nan")
        cpu, source = float(last["cpu_time"]), "sampled"
        record = None
        sidecar = process_record_path(path)
        if sidecar.is_file():
            record = json.loads(sidecar.read_text())
        elif logs is not None:
            record = read_process_record(Path(logs, *parts[:-1], f"{parts[-1]}.log"))
        if record is not None:
            cpu, rss, source = float(record["cpu_s"]), float(record["max_rss_mb"]), "process"
        rows.append(
            {
                "stage": stage,
                "env": env,
                "seed": seed,
                "job": "/".join(parts),
                "wall_s": float(last["s"]),
                "cpu_s": cpu,
                "max_rss_mb": rss,
                "cpu_source": source,
            }
        )
    return pd.DataFrame(rows)


def _critical_path(jobs: pd.DataFrame) -> float:
    """Longest dependent chain of one (env, seed)'s jobs, CPU seconds (see the module doc)."""
    chain = 0.0
    for stage in ("far_data", "splits", "train", *EVALUATION_STAGES, "pnc_members", "mechanism"):
        part = jobs.loc[jobs["stage"] == stage, "cpu_s"]
        chain += float(part.max()) if len(part) else 0.0
    return chain


def _projection_by_env_mean(
    pairs: dict, complete: list[str], per_env: dict, study_wide: float, n_envs: int, n_seeds: int
) -> dict | None:
    """``n_envs x n_seeds`` with each environment's missing seeds at its own measured mean; None
    when more environments or seeds were measured than that protocol has."""
    done = pd.DataFrame([pairs[k] for k in complete])
    by_env = done.groupby("env")["cpu_s"]
    if by_env.size().max() > n_seeds or by_env.ngroups > n_envs:
        return None
    left = float(((n_seeds - by_env.size()) * by_env.mean()).sum())
    left += (n_envs - by_env.ngroups) * n_seeds * float(done["cpu_s"].mean())
    stored = float(done["cpu_s"].sum())
    data = sum(e["cpu_s"] for e in per_env.values()) + study_wide
    return {
        "stored_pairs": len(complete),
        "stored_cpu_s": stored,
        "data_cpu_s": data,
        "pairs_left": n_envs * n_seeds - len(complete),
        "left_cpu_s": left,
        "core_hours": (stored + data + left) / 3600.0,
    }


def summarize(
    df: pd.DataFrame,
    *,
    n_envs: int,
    n_seeds: int,
    cores: Sequence[int] = (2, 8, 32),
) -> dict:
    """Measured cost per (env, seed) and environment; projected cost of ``n_envs x n_seeds``.

    Args:
        df: :func:`read_benchmarks`' table.
        n_envs, n_seeds: size of the protocol to project (the paper's: 11 x 10).
        cores: machine sizes for the projected wall time.

    Returns:
        A JSON-ready dict: ``per_env_seed`` (CPU and wall seconds and job count per measured
        (env, seed), with the stage breakdown and how many of its jobs had an exact CPU time,
        ``jobs_with_exact_cpu``, see :func:`read_benchmarks`), ``complete_env_seed_pairs`` (those that ran as
        many training and evaluation jobs as the fullest one; only they enter the means and the
        projection, so a study still running can be summarised), ``per_env`` (data and selection jobs per env),
        ``study_wide_cpu_s``, ``wall_over_cpu`` (summed job wall time over CPU time: about 1.3 on
        an idle machine here, more when jobs share cores), ``mean_cpu_s_per_env_seed`` (with
        ``min``/``max``), the projected
        ``core_hours`` and ``wall_hours`` per number of cores, and ``by_env_mean``: the same
        protocol projected with each environment's unmeasured seeds at the mean of its own
        measured ones (environments with no measured seed at the mean over all complete pairs),
        split into what is stored and what is left (:func:`render_markdown` prints it; None when
        more environments or seeds were measured than the projected protocol has).

    Raises:
        ValueError: no per-(env, seed) job in ``df``, jobs batched per environment (config
            ``batch: env``: their cost cannot be told apart per seed), or non-positive sizes.
    """
    if n_envs < 1 or n_seeds < 1 or not cores or min(cores) < 1:
        raise ValueError(
            f"n_envs, n_seeds and cores must be >= 1, got {n_envs}, {n_seeds}, {cores}"
        )
    batched = sorted(set(df["stage"]) & set(BATCHED_STAGES))
    if batched:
        raise ValueError(
            f"jobs batched per environment ({', '.join(batched)}; config `batch: env`): their "
            "cost per (env, seed) is not measured, so there is nothing to project from; "
            "measure a run with `batch: none`"
        )
    per_seed = df[df["seed"] >= 0]
    if per_seed.empty:
        raise ValueError("no per-(env, seed) benchmark in the table: nothing to project from")
    pairs = {}
    for (env, seed), jobs in per_seed.groupby(["env", "seed"]):
        pairs[f"{env}/seed{seed}"] = {
            "env": env,
            "seed": int(seed),
            "jobs": len(jobs),
            "cpu_s": float(jobs["cpu_s"].sum()),
            "wall_s": float(jobs["wall_s"].sum()),
            "critical_path_cpu_s": _critical_path(jobs),
            "max_rss_mb": float(jobs["max_rss_mb"].max()),
            "cpu_s_by_stage": {
                k: float(v) for k, v in jobs.groupby("stage")["cpu_s"].sum().items()
            },
            "jobs_by_stage": {k: int(v) for k, v in jobs.groupby("stage").size().items()},
            "jobs_with_exact_cpu": int((jobs.get("cpu_source") == "process").sum()),
        }
    per_env_jobs = df[(df["seed"] < 0) & (df["env"] != "")]
    per_env = {
        env: {"jobs": len(jobs), "cpu_s": float(jobs["cpu_s"].sum())}
        for env, jobs in per_env_jobs.groupby("env")
    }
    study_wide = float(df.loc[(df["seed"] < 0) & (df["env"] == ""), "cpu_s"].sum())
    # a pair is complete when it ran as many training and evaluation jobs as the fullest pair
    # (every (env, seed) has the same grid); only complete pairs enter the projection
    core = {
        k: p["jobs_by_stage"].get("train", 0) + p["jobs_by_stage"].get("evaluate", 0)
        for k, p in pairs.items()
    }
    complete = [k for k, n in core.items() if n == max(core.values())]
    pair_cpu = pd.Series([pairs[k]["cpu_s"] for k in complete])
    env_cpu = pd.Series([e["cpu_s"] for e in per_env.values()], dtype=float)
    mean_pair = float(pair_cpu.mean())
    mean_env = float(env_cpu.mean()) if len(env_cpu) else 0.0
    total = mean_pair * n_envs * n_seeds + mean_env * n_envs + study_wide
    critical = max(pairs[k]["critical_path_cpu_s"] for k in complete) + (
        float(env_cpu.max()) if len(env_cpu) else 0.0
    )
    return {
        "by_env_mean": _projection_by_env_mean(
            pairs, complete, per_env, study_wide, n_envs, n_seeds
        ),
        "measured_env_seed_pairs": len(pairs),
        "complete_env_seed_pairs": complete,
        "per_env_seed": pairs,
        "per_env": per_env,
        "study_wide_cpu_s": study_wide,
        "wall_over_cpu": float(df["wall_s"].sum() / df["cpu_s"].sum()),
        "mean_cpu_s_per_env_seed": mean_pair,
        "min_cpu_s_per_env_seed": float(pair_cpu.min()),
        "max_cpu_s_per_env_seed": float(pair_cpu.max()),
        "projection": {
            "n_envs": n_envs,
            "n_seeds": n_seeds,
            "core_hours": total / 3600.0,
            "critical_path_hours": critical / 3600.0,
            "wall_hours": {str(c): max(total / c, critical) / 3600.0 for c in cores},
        },
    }


def _thousands(values: Sequence[float]) -> str:
    return " / ".join(f"{v:,.0f}" for v in values)


def _stage_cpu(pair: dict, stages: Sequence[str]) -> float:
    """The CPU seconds of a pair's jobs of ``stages``."""
    return sum(pair["cpu_s_by_stage"].get(s, 0.0) for s in stages)


def _share(pairs: list[dict], stages: Sequence[str]) -> str:
    """The range of the share of ``stages`` in each pair's CPU time, as ``"89-97 %"``."""
    shares = [100 * _stage_cpu(p, stages) / p["cpu_s"] for p in pairs]
    low, high = f"{min(shares):.0f}", f"{max(shares):.0f}"
    return f"{low} %" if low == high else f"{low}-{high} %"


def render_markdown(summary: dict) -> str:
    """:func:`summarize`'s output as a markdown table per environment and a projection line.

    One row per environment with a complete (env, seed) pair, cheapest mean first: its seeds, the
    CPU s of each (all jobs, then the evaluations, both phases of a two-phase evaluation, and the
    training runs alone), their mean, the
    peak memory over its jobs and how many jobs had an exact CPU time. Below it, the stored total
    and ``by_env_mean``'s projection. The text is deterministic, so a document can carry it and a
    test can check that it matches the summary JSON it came from.
    """
    done = [summary["per_env_seed"][k] for k in summary["complete_env_seed_pairs"]]
    envs: dict[str, list[dict]] = {}
    for pair in sorted(done, key=lambda p: (p["env"], p["seed"])):
        envs.setdefault(pair["env"], []).append(pair)
    order = sorted(envs, key=lambda e: (sum(p["cpu_s"] for p in envs[e]) / len(envs[e]), e))
    lines = [
        "| environment | seeds | CPU s per (env, seed) | mean | of it: evaluate | train "
        "| peak memory (GB) | jobs with exact CPU time |",
        "| --- | --- | --- | ---: | --- | --- | ---: | --- |",
    ]
    for env in order:
        ps = envs[env]
        stage = {
            "evaluate": [_stage_cpu(p, EVALUATION_STAGES) for p in ps],
            "train": [_stage_cpu(p, ("train",)) for p in ps],
        }
        exact = " / ".join(f"{p['jobs_with_exact_cpu']} of {p['jobs']}" for p in ps)
        lines.append(
            f"| {env} | {', '.join(str(p['seed']) for p in ps)} "
            f"| {_thousands([p['cpu_s'] for p in ps])} "
            f"| {sum(p['cpu_s'] for p in ps) / len(ps):,.0f} "
            f"| {_thousands(stage['evaluate'])} | {_thousands(stage['train'])} "
            f"| {max(p['max_rss_mb'] for p in ps) / 1000:.1f} | {exact} |"
        )
    proj = summary["by_env_mean"]
    if proj is None:
        return "\n".join(lines) + "\n"
    total = proj["stored_cpu_s"] + proj["data_cpu_s"]
    n_envs, n_seeds = summary["projection"]["n_envs"], summary["projection"]["n_seeds"]
    lines += [
        "",
        textwrap.fill(
            f"Stored: **{proj['stored_pairs']} pairs**, {proj['stored_cpu_s']:,.0f} CPU s, plus "
            f"{proj['data_cpu_s']:,.0f} CPU s of data and study-wide jobs ({total / 3600:.1f} "
            f"core-hours in all). Projected for {n_envs} environments x {n_seeds} seeds, each "
            f"environment's missing seeds at the mean of its stored ones: **{proj['core_hours']:.1f} "
            f"core-hours**, {proj['left_cpu_s'] / 3600:.1f} of them for the {proj['pairs_left']} "
            "pairs not yet stored. "
            f"The evaluations are {_share(done, EVALUATION_STAGES)} of every pair, the training "
            f"runs {_share(done, ('train',))}.",
            width=100,
            break_on_hyphens=False,
        ),
    ]
    return "\n".join(lines) + "\n"


#: The lines that enclose :func:`render_markdown`'s block in a document (:func:`replace_block`).
BLOCK_BEGIN = "<!-- reference costs: begin -->"
BLOCK_END = "<!-- reference costs: end -->"


def replace_block(document: str, block: str) -> str:
    """``document`` with the text between :data:`BLOCK_BEGIN` and :data:`BLOCK_END` replaced.

    Raises:
        ValueError: the document does not hold each marker exactly once, begin before end.
    """
    counts = (document.count(BLOCK_BEGIN), document.count(BLOCK_END))
    if counts != (1, 1) or document.index(BLOCK_BEGIN) > document.index(BLOCK_END):
        raise ValueError(
            f"expected one {BLOCK_BEGIN!r} line before one {BLOCK_END!r} line, found "
            f"{counts[0]} and {counts[1]}"
        )
    head = document[: document.index(BLOCK_BEGIN) + len(BLOCK_BEGIN)]
    tail = document[document.index(BLOCK_END) :]
    return f"{head}\n{block.strip()}\n{tail}"

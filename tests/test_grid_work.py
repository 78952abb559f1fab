"""Scheduling sizes of the workflow's jobs (``pnc.studies.mujoco.grid.evaluation_work`` /
``training_work``): the rule priorities that start the longest jobs first."""

from __future__ import annotations

from pathlib import Path

from study_config import study_config

from pnc.studies.mujoco import grid

ROOT = Path(__file__).resolve().parents[1]


def _points(path: str = "config/offline.yaml"):
    return grid.expand_all(study_config(path)["methods"])


def test_evaluation_work_counts_networks_and_the_chain():
    work = grid.evaluation_work(_points())
    assert work[("pnc", "base")] == 24 * 50
    assert work[("pnc_nocorr", "base")] == 3 * 50
    assert work[("swag", "base")] == work[("laplace", "base")] == 5 * 100
    # Subspace: 5 temperatures x (100 samples + 100 burn-in states + 100 kept states)
    run = next(r for m, r in work if m == "subspace")
    assert work[("subspace", run)] == 5 * 300
    # one MC Dropout job per rate, 100 passes each
    assert sorted(w for (m, _), w in work.items() if m == "mc_dropout") == [100] * 5
    assert work[("deep_ensemble", "deep_ensemble-n_members5")] == 5


def test_the_order_follows_the_measured_cpu_time_of_a_humanoid_seed():
    """Humanoid seed 0 (exact CPU s): Subspace 1,239, P&C 1,175, SWAG 461, Laplace 439, each MC
    Dropout evaluation about 110, the Deep Ensemble a few seconds."""
    work = grid.evaluation_work(_points())
    by_method = {m: w for (m, _), w in work.items()}
    order = sorted(by_method, key=by_method.get, reverse=True)
    assert order.index("subspace") < order.index("pnc") < order.index("swag")
    assert order.index("laplace") < order.index("mc_dropout") < order.index("deep_ensemble")


def test_training_work_is_the_work_waiting_for_each_run():
    points = _points()
    work = grid.training_work(points)
    assert set(work) == {p.run_id for pts in points.values() for p in pts}
    # the shared base run feeds P&C, its ablation, SWAG and Laplace
    assert work["base"] == 24 * 50 + 3 * 50 + 5 * 100 + 5 * 100
    assert work["deep_ensemble-n_members5"] == 5 + 5
    assert max(work, key=work.get) == "base"


def test_a_method_without_members_or_samples_counts_one_network_per_configuration():
    points = grid.expand_all({"deep_ensemble": {"fixed": {"n_members": 3}}})
    assert grid.evaluation_work(points) == {("deep_ensemble", points["deep_ensemble"][0].run_id): 3}

    class Bare:  # no n_members / n_samples / burn_in
        pass

    point = points["deep_ensemble"][0]
    bare = grid.GridPoint(point.method, point.config_id, Bare(), point.spec)
    assert grid.evaluation_work({"x": [bare, bare]}) == {("x", point.run_id): 2}

"""The jobs of the CIFAR-10 workflow, one function each (run by the stages of :mod:`pnc.workflow.cifar_stages`).

- :func:`tiny_data`: write the generated tiny benchmark (CI scale) in the real file formats.
- :func:`prepare_data`: check every file, write the arrays (``cifar10.npz``, ``ood.npz``) and
  ``data.json``.
- :func:`train_run`: one training run of one seed on its 45k training split (``base``: also
  collects the SWAG moments; ``member<k>``: a further Deep Ensemble member; ``dropout<rate>``: an
  MC Dropout run), resuming from its per-epoch checkpoint; writes ``run.msgpack`` + ``run.json``
  (with the SHA-256 of ``run.msgpack``; :class:`pnc.core.classifier.trained.TrainedNetwork`).
- :func:`validate`: one method on one seed: every configuration it selects from built and scored
  on the validation split (the sweep), each record named by its configuration id.
- :func:`select`: the selection stage of one method: from every seed's sweep, the configuration
  it chooses.
- :func:`posthoc`: one method on one seed at the chosen configuration (read by its id from the
  method's sweep, :class:`pnc.studies.cifar.sweep.Sweep`), built again: confidences on the test set and
  every OOD dataset (``scores.npz``) and ``selection.json``.
- :func:`tables`: ``metrics.csv``, Table 2 and the sweep table from every method's outputs.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import jax
import numpy as np
import pandas as pd

from pnc.core.classifier.recipe import swag_moments, train, variables_of
from pnc.core.classifier.trained import TrainedNetwork
from pnc.core.conv.resnet import ResNetConfig
from pnc.methods import ood as registry
from pnc.methods.ood import posthoc as P
from pnc.methods.selection_rule import NoFiniteCandidateError, finite_or_none
from pnc.runtime.io import atomic_path, read_json, write_json
from pnc.studies.cifar import data as D
from pnc.studies.cifar import ood_tables as T
from pnc.studies.cifar.sweep import Sweep

log = logging.getLogger(__name__)


def resnet_config(model: Mapping, num_classes: int = D.NUM_CLASSES) -> ResNetConfig:
    return ResNetConfig(
        num_classes=num_classes,
        widths=tuple(model.get("widths", (64, 128, 256, 512))),
        blocks_per_stage=tuple(model.get("blocks_per_stage", (2, 2, 2, 2))),
    )


def tiny_data(root: str | Path, options: Mapping, id_name: str = "cifar10") -> dict:
    summary = D.write_tiny_benchmark(root, id_name=id_name, **options)
    write_json(Path(root) / "tiny.json", summary)
    return summary


def prepare_data(
    root: str | Path,
    ood: Sequence[str],
    out: str | Path,
    limit: int | None = None,
    id_name: str = "cifar10",
) -> dict:
    summary = D.prepare(root, ood, out, ood_limit=limit, id_name=id_name)
    write_json(Path(out) / "data.json", summary)
    return summary


def train_run(
    *,
    seed: int,
    run_id: str,
    data_dir: str | Path,
    out: str | Path,
    model: Mapping,
    train_section: Mapping,
    val_size: int,
    swag_starts: Sequence[int] = (),
    stop_after: int | None = None,
    checkpoint_every: int = 10,
) -> dict:
    """Train run ``run_id`` of ``seed`` (resuming from ``out/checkpoint.msgpack``, written after
    every ``checkpoint_every``-th epoch)."""
    recipe = registry.recipe_for(run_id, train_section, swag_starts)
    data = D.load_prepared(data_dir)
    config = resnet_config(model, data.num_classes)
    tr, _ = D.train_val_split(data.train_x.shape[0], val_size, seed)
    out = Path(out)
    start = time.perf_counter()
    state, history = train(
        data.train_x[tr],
        data.train_y[tr],
        config,
        recipe,
        seed=seed,
        run_id=run_id,
        checkpoint=out / "checkpoint.msgpack",
        stop_after=stop_after,
        checkpoint_every=checkpoint_every,
    )
    if stop_after is not None and int(state["epoch"]) < recipe.epochs:
        return {"epochs_done": int(state["epoch"])}
    summary = {
        "seed": seed,
        "run_id": run_id,
        "recipe": dataclasses.asdict(recipe),
        "model": dataclasses.asdict(config),
        "train_images": int(tr.size),
        "history": history,
        "seconds": time.perf_counter() - start,
        "device": str(jax.devices()[0]),
    }
    # run.msgpack, then run.json with its SHA-256 (checked whenever the run is read)
    TrainedNetwork(variables_of(state), swag_moments(state), summary).save(out)
    return {k: summary[k] for k in ("seed", "run_id", "seconds", "device")}


def context_from_prepared(
    data: D.Prepared, config: ResNetConfig, seed: int, val_size: int, batch_size: int = 500
) -> P.Context:
    """One seed's :class:`pnc.methods.ood.posthoc.Context`: the seed's train/val split of the
    prepared training images (:func:`pnc.studies.cifar.data.train_val_split`), the test and OOD sets."""
    tr, va = D.train_val_split(data.train_x.shape[0], val_size, seed)
    return P.Context(
        config=config,
        seed=seed,
        train_x=data.train_x[tr],
        train_y=data.train_y[tr],
        val_x=data.train_x[va],
        val_y=data.train_y[va],
        test_x=data.test_x,
        test_y=data.test_y,
        ood=dict(data.ood),
        batch_size=batch_size,
    )


def _sweep(sweep: Sweep | str | Path) -> Sweep:
    """A method's sweep: ``sweep`` itself, or the one the workflow wrote to that file."""
    return sweep if isinstance(sweep, Sweep) else Sweep.read(sweep)


@dataclasses.dataclass(frozen=True)
class MethodJob:
    """One method on one seed, as its validation job (:func:`validate`) and its scores job
    (:func:`posthoc`) read it.

    Attributes:
        seed: the seed (its train/val split and the training runs it reads).
        sweep: the method's sweep: its table, or the file the workflow wrote.
        data_dir: the prepared data (:func:`prepare_data`).
        runs_dir: the seed's training runs, one folder per run id.
        out: where the job writes.
        model: the network's ``model`` section.
        val_size: validation images of the seed's split.
        batch_size: images per forward pass.
    """

    seed: int
    sweep: Sweep | str | Path
    data_dir: str | Path
    runs_dir: str | Path
    out: str | Path
    model: Mapping
    val_size: int
    batch_size: int = 500

    @functools.cached_property
    def table(self) -> Sweep:
        """The method's sweep, read once."""
        return _sweep(self.sweep)

    def context(self, config: P.MethodSection) -> tuple[P.Context, P.Runs]:
        """The seed's context and the training runs the method configured by ``config`` reads."""
        data = D.load_prepared(self.data_dir)
        network = resnet_config(self.model, data.num_classes)
        ctx = context_from_prepared(data, network, self.seed, self.val_size, self.batch_size)
        method = registry.get(self.table.method)
        runs = {r: TrainedNetwork.load(Path(self.runs_dir) / r) for r in method.runs_of(config)}
        return ctx, runs


def validate(job: MethodJob) -> dict:
    """Build every configuration the method of ``job.sweep`` selects from on ``job.seed`` and score
    it on the validation split; write the sweep to ``job.out`` (JSON: ``method``, ``seed``,
    ``sweep``, ``seconds``), each record with the id of its configuration."""
    table, seed = job.table, job.seed
    method, config = table.method, table.config()
    ctx, runs = job.context(config)
    detector = registry.get(method)
    start = time.perf_counter()
    records = [{**r, "id": table.id_of(r["config"])} for r in detector.validate(config, ctx, runs)]
    summary = {"method": method, "seed": seed, "sweep": records}
    summary["seconds"] = time.perf_counter() - start
    write_json(job.out, finite_or_none(summary))
    return {"method": method, "seed": seed, "configs": len(records)}


def select(*, sweep: Sweep | str | Path, validation: Sequence[str | Path], out: str | Path) -> dict:
    """The selection stage of the method of ``sweep``: from each seed's sweep (the
    ``validation`` files of :func:`validate`), the configuration
    :meth:`~pnc.methods.ood.posthoc.PosthocMethod.choose` picks; write ``out`` (JSON: ``method`` and,
    per seed, the sweep with ``selected`` marked)."""
    table = _sweep(sweep)
    method, config = table.method, table.config()
    detector = registry.get(method)
    seeds = {}
    for path in validation:
        record = read_json(path)
        if record["method"] != method:
            raise ValueError(f"{path} holds the sweep of {record['method']!r}, not {method!r}")
        unknown = [r["id"] for r in record["sweep"] if r["id"] not in table.configurations]
        if unknown:
            raise ValueError(f"{path}: configuration(s) {unknown} not in the sweep of {method}")
        try:
            index = detector.choose(config, record["sweep"])
        except NoFiniteCandidateError as err:
            raise NoFiniteCandidateError(
                f"{method}, seed {record['seed']} ({path}): {err}"
            ) from None
        sweep_ = P.mark_selected(record["sweep"], index)
        seeds[str(record["seed"])] = {"sweep": sweep_}
    write_json(out, {"method": method, "seeds": seeds})
    chosen = {s: [r["id"] for r in v["sweep"] if r["selected"]] for s, v in seeds.items()}
    return {"method": method, "selected": chosen}


def posthoc(job: MethodJob, selection: str | Path | None = None) -> dict:
    """Score the method of ``job.sweep`` on ``job.seed`` at the configuration the selection stage
    chose (its file ``selection``, read by the chosen record's id; ``None``: validate and select
    here too); write ``scores.npz`` and ``selection.json`` (the chosen configuration, its
    temperature and the sweep) into ``job.out``."""
    table, seed = job.table, job.seed
    method = table.method
    detector = registry.get(method)
    if selection is None:
        config = table.config()
        ctx, runs = job.context(config)
        start = time.perf_counter()
        outputs, record = detector.run(config, ctx, runs)
    else:
        seeds = read_json(selection)["seeds"]
        if str(seed) not in seeds:
            raise ValueError(f"{selection} holds no selection for seed {seed}")
        marked = seeds[str(seed)]["sweep"]
        chosen = [r["id"] for r in marked if r["selected"]]
        # the chosen configuration only (the section narrowed to it); none: no selection
        config = table.at(chosen[0]) if len(chosen) == 1 else table.config()
        ctx, runs = job.context(config)
        start = time.perf_counter()
        outputs, record = detector.score_selected(config, ctx, runs, marked)
    record.update(method=method, seed=seed, seconds=time.perf_counter() - start)
    out = Path(job.out)
    out.mkdir(parents=True, exist_ok=True)
    with atomic_path(out / "scores.npz") as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, **outputs)
    write_json(out / "selection.json", finite_or_none(record))
    return {
        "method": method,
        "seed": seed,
        "id": next((r.get("id") for r in record["sweep"] if r["selected"]), None),
        "config": record["config"],
        "seconds": record["seconds"],
    }


def tables(
    *,
    scores_dir: str | Path,
    data_dir: str | Path,
    methods: Sequence[str],
    seeds: Sequence[int],
    out: str | Path,
    report: Mapping | None = None,
) -> pd.DataFrame:
    """Metrics of every (seed, method) and the tables (``report``: :class:`ood_tables.Report`
    keywords, the protocol options)."""
    options = T.Report(**(report or {}))
    summary = read_json(Path(data_dir) / "data.json")
    id_name = summary.get("id", "cifar10")
    groups = summary["ood_groups"]
    with np.load(Path(data_dir) / f"{id_name}.npz", allow_pickle=False) as f:
        test_y = f["test_y"]
    rows, sweep = [], []
    for seed in seeds:
        for method in methods:
            folder = Path(scores_dir) / f"seed{seed}" / method
            with np.load(folder / "scores.npz", allow_pickle=False) as f:
                scores = {k: f[k] for k in f.files}
            for row in T.method_metrics(scores, test_y, groups, id_name=id_name):
                rows.append({"seed": seed, "method": method, **row})
            sweep += T.sweep_rows(method, seed, read_json(folder / "selection.json"))
    sweep_frame = pd.DataFrame(
        sweep,
        columns=["seed", "method", "config", "temperature", "val_nll", "val_accuracy", "selected"],
    )
    return T.write_tables(pd.DataFrame(rows), sweep_frame, out, options)

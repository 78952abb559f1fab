"""docs/results/offline_authors/README.md names the pieces stored so far: the count and, per group
of environments with the same seeds, which seeds; recomputed from the stored manifests, so that the
README cannot fall behind the pieces that are committed beside it."""

from __future__ import annotations

import json
from pathlib import Path

from study_config import study_config

from pnc.report import claims, compare
from pnc.studies.mujoco.results import load

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "docs" / "results" / "offline_authors"
OFFLINE = ROOT / "docs" / "results" / "offline"
PAPER = ROOT / "docs" / "results" / "paper"
CONFIG = study_config("config/offline_authors.yaml")  # the overlay merged into config.yaml


def _readme_text() -> str:
    """The README with its whitespace collapsed (phrases may be wrapped anywhere)."""
    return " ".join((FOLDER / "README.md").read_text().split())


def _and(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def stored_phrase(manifests: Path, envs: list[str], seeds: list[int]) -> str:
    """The README's phrase for the pieces under ``manifests`` (``{env}/seed{seed}.json``):
    "k of n: seeds ... of ENVS, ..." with the groups of environments that share their seeds, the
    smaller groups of seeds first and the environments in alphabetical order, then the
    environments without any piece."""
    stored = {
        env: sorted(int(p.stem[4:]) for p in (manifests / env).glob("seed*.json")) for env in envs
    }
    groups: dict[tuple[int, ...], list[str]] = {}
    for env in sorted(envs):
        if stored[env]:
            groups.setdefault(tuple(stored[env]), []).append(env)
    parts = [
        f"seed{'s' if len(group) > 1 else ''} {_and([str(s) for s in group])} of {_and(names)}"
        for group, names in sorted(groups.items(), key=lambda item: (len(item[0]), item[0]))
    ]
    missing = sorted(env for env in envs if not stored[env])
    if missing == ["Humanoid", "HumanoidStandup"]:
        parts.append("and none of the two Humanoids yet")
    elif missing:
        parts.append(f"and none of {_and(missing)} yet")
    total = sum(len(s) for s in stored.values())
    return f"{total} of {len(envs) * len(seeds)}: " + ", ".join(parts)


def test_the_readme_names_the_stored_pieces():
    text = _readme_text()
    phrase = stored_phrase(FOLDER / "pieces" / "manifests", CONFIG["envs"], CONFIG["seeds"])
    if phrase.startswith(f"{len(CONFIG['envs']) * len(CONFIG['seeds'])} of "):
        # every piece stored: the README describes the generated tables instead
        assert f"all {phrase.split()[0]} of them" in text
        return
    assert phrase in text, f"the README should say: {phrase}"


def test_the_phrase_follows_the_manifests(tmp_path):
    """The phrase is the manifests' (a check on the helper above, on a made-up store)."""
    for env, seeds in {"A": [0, 1], "B": [0, 1], "C": [0, 1, 2], "D": [4]}.items():
        (tmp_path / env).mkdir()
        for seed in seeds:
            (tmp_path / env / f"seed{seed}.json").write_text("{}")
    phrase = stored_phrase(tmp_path, ["D", "C", "B", "A", "E"], [0, 1, 2, 3, 4])
    assert (
        phrase
        == "8 of 25: seed 4 of D, seeds 0 and 1 of A and B, seeds 0, 1 and 2 of C, and none of E yet"
    )


#: The pieces made on the reference runs' machine kind (an Intel Xeon) before the manifests
#: recorded the machine, and the one whose machine was not recorded; the README says so.
XEON_PIECES = {
    (env, 0)
    for env in ["InvertedPendulum", "Ant", "HalfCheetah", "Hopper", "Walker2d", "Swimmer", "Reacher",
                "Pusher"]
}  # fmt: skip
UNRECORDED_PIECES = {("InvertedDoublePendulum", 0)}


def piece_cpu_seconds(benchmarks: Path) -> tuple[dict, dict, set]:
    """Per stored piece ``(env, seed)``: the CPU seconds of its jobs' process records
    (``{stage}/{env}/seed{S}[/...].process.json``), and of P&C's evaluation alone; and the pieces
    whose P&C evaluation ran without huge pages (``malloc_hugetlb`` ``"0"``: the allocator's
    tunables of ``docs/performance.md``). The ID data's job (``offline_data/{env}.process.json``,
    once per environment) belongs to no piece."""
    every: dict[tuple[str, int], float] = {}
    pnc: dict[tuple[str, int], float] = {}
    tuned: set[tuple[str, int]] = set()
    for record in benchmarks.rglob("*.process.json"):
        parts = record.relative_to(benchmarks).parts
        if len(parts) < 3:
            continue
        stage, env, seed = parts[:3]
        key = (env, int(seed.split(".")[0][4:]))
        fields = json.loads(record.read_text())
        every[key] = every.get(key, 0.0) + fields["cpu_s"]
        if stage == "evaluate" and record.parent.name == "pnc":
            pnc[key] = pnc.get(key, 0.0) + fields["cpu_s"]
            if fields.get("malloc_hugetlb") == "0":
                tuned.add(key)
    return every, pnc, tuned


def _span(values) -> str:
    values = list(values)
    return f"{min(values):,.0f}-{max(values):,.0f}"


def test_the_readme_cpu_times_follow_the_process_records():
    """The README's CPU seconds per piece (by machine kind) are the stored records' sums."""
    text = _readme_text()
    pieces = FOLDER / "pieces"
    every, pnc, tuned = piece_cpu_seconds(pieces / "benchmarks")
    manifests = sorted((pieces / "manifests").glob("*/seed*.json"))
    stored = {(p.parent.name, int(p.stem[4:])) for p in manifests}
    assert set(every) == stored, "every stored piece has its process records, and only those"
    assert XEON_PIECES | UNRECORDED_PIECES <= stored
    xeon = sorted(XEON_PIECES)

    def job(stage: str, env: str, rest: str) -> str:
        record = pieces / "benchmarks" / stage / env / "seed0" / f"{rest}.process.json"
        return f"{json.loads(record.read_text())['cpu_s']:,.0f}"

    ip, hopper = (
        [job("evaluate", env, f"{m}/base-steps2000") for m in ("pnc", "pnc_nocorr")]
        + [job("train", env, "base-steps2000")]
        for env in ("InvertedPendulum", "Hopper")
    )
    assert (
        f"InvertedPendulum: P&C's evaluation {ip[0]} CPU s, P&C w/o correction {ip[1]}, the "
        f"2,000-step run {ip[2]}; Hopper, beside other jobs: {hopper[0]}, {hopper[1]} and {hopper[2]}"
    ) in text
    assert f"the six jobs of a piece took {_span(every[k] for k in xeon)} CPU s in all" in text
    epyc = stored - XEON_PIECES - UNRECORDED_PIECES
    humanoids = [k for k in epyc if k[0] in ("Humanoid", "HumanoidStandup")]
    smaller = [k for k in epyc if k not in humanoids]
    # seeds 7-9 of the two Humanoids ran with the allocator's tunables, as the README says
    assert tuned == {(env, seed) for env in ("Humanoid", "HumanoidStandup") for seed in (7, 8, 9)}
    paged = [k for k in humanoids if k not in tuned]
    hosted = sum(1 for p in manifests if json.loads(p.read_text()).get("host"))
    expected = (
        f"the other {len(epyc)} on an AMD EPYC with AVX-512 ({_span(every[k] for k in smaller)} "
        f"CPU s per piece of the nine smaller environments; {_span(every[k] for k in paged)} "
        f"per piece of Humanoid and HumanoidStandup, P&C's evaluation "
        f"{_span(pnc[k] for k in paged)} of it, and {_span(every[k] for k in tuned)} for their "
        f"seeds 7-9, P&C's evaluation {_span(pnc[k] for k in tuned)}, which ran with the "
        f"allocator's tunables of `docs/performance.md`; "
        f"{sum(every[k] for k in epyc):,.0f} in all). "
        f"The manifests written since the machine is recorded ({hosted} of the {len(epyc)}) name it"
    )
    assert expected in text, f"the README should say: {expected}"


def _number(quantity: str, value: float) -> str:
    """A move's number as the README writes it: wins as a count, ranks with two decimals."""
    return f"{value:.0f}" if quantity.endswith("wins") else f"{value:.2f}"


def moves_phrases(folder: Path = FOLDER) -> list[str]:
    """The README's summary of what the authors' settings move, one phrase per ranking claim's
    number and Subspace's ID RMSE rank (:func:`pnc.report.claims.variant_moves`, the draws
    reading), from this folder's and the reference's generated ``results.csv``; then the sentence
    on the two results that do not reproduce."""
    moves = claims.variant_moves(
        compare.our_readings(load(OFFLINE / "results.csv")),
        compare.our_readings(load(folder / "results.csv")),
        compare.statistics_of(load(PAPER / "results.csv")),
    )
    by_quantity = {m.quantity: m for m in moves}
    wins, subspace = by_quantity["P&C's ID RMSE wins"], moves[-1]
    return [
        f"{m.quantity}: {_number(m.quantity, m.ours)} in ours, "
        f"{_number(m.quantity, m.variant)} with the authors' settings and "
        f"{_number(m.quantity, m.paper)} in the paper ({m.moves})"
        for m in moves
    ] + [
        "Of the two results that do not reproduce, the authors' settings move P&C's ID RMSE wins "
        f"{wins.moves} and Subspace's ID RMSE rank {subspace.moves}"
    ]


def test_the_readme_says_what_the_settings_move():
    """Every piece stored: the folder's tables are generated, and the README's summary of what the
    authors' settings move is theirs."""
    assert (FOLDER / "results.csv").is_file(), "the 110 pieces are stored: generate the tables"
    text = _readme_text()
    missing = [p for p in moves_phrases() if p not in text]
    assert missing == [], f"the README should say: {missing}"


def _beats(frame, method: str = "subspace", other: str = "pnc") -> tuple[int, int]:
    """In how many environments ``method``'s ID RMSE seed mean is below ``other``'s, of how many."""
    rows = frame[(frame.split == "id") & (frame.metric == "rmse")]
    means = rows.groupby(["env", "method"])["value"].mean().unstack()
    return int((means[method] < means[other]).sum()), len(means)


def test_the_readme_says_why_subspaces_rank_moves():
    """Subspace's rows are the reference's in this folder too, so its ID RMSE rank moves with
    P&C's: the README's counts are the two folders' seed means, and the generated comparison says
    the same."""
    ours, variant = load(OFFLINE / "results.csv"), load(FOLDER / "results.csv")

    def rows(frame):
        sub = frame[frame.method == "subspace"]
        return sub.sort_values(list(sub.columns)).reset_index(drop=True)

    assert rows(ours).equals(rows(variant)), "Subspace's rows are the same in both folders"
    (k, n), (j, _) = _beats(variant), _beats(ours)
    assert k > j  # P&C's ID RMSE moved, not Subspace's
    expected = (
        "Subspace's rows are identical in both folders (its pieces are the reference's, reused), "
        "so its rank moves only because P&C's ID RMSE gets worse: Subspace's ID RMSE seed mean "
        f"beats P&C's in {k} of {n} environments with the authors' settings and in {j} of {n} in "
        "ours."
    )
    assert expected in _readme_text()
    comparison = (OFFLINE / compare.COMPARISON_FILE).read_text()
    assert (
        f"Subspace's ID RMSE seed mean beats P&C's in {k} of {n} environments with the authors' "
        f"settings and in {j} of {n} in ours." in comparison
    )


def test_the_readme_and_the_comparison_list_the_calibration_pool_caveat():
    """The variant's P&C draws its calibration rows from the ID pool, validation rows included:
    both pages say that those rows then select its configuration."""
    assert CONFIG["methods"]["pnc"]["calibration_pool"] == "id_pool"
    assert (
        "its P&C calibrates on the validation rows that then select its configuration** "
        "(`calibration_pool: id_pool`)" in _readme_text()
    )
    comparison = " ".join((OFFLINE / compare.COMPARISON_FILE).read_text().split())
    assert compare.calibration_caveat(FOLDER) in comparison
    assert "Caveat: the variant's P&C draws its calibration rows from the whole ID pool" in (
        comparison
    )

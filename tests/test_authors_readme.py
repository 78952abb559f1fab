"""docs/results/offline_authors/README.md against what it describes: the pieces it says are stored
(the manifests), the CPU seconds it gives (the process records), what the authors' settings move
(recomputed from the folders' and the paper's ``results.csv``), Subspace's counts, the calibration
caveat (the config), and the files, sections and commands it names. A claim's numbers are looked
up in the page by value and in order, never by the sentence around them, so that the README
cannot fall behind the data committed beside it and can be reworded freely."""

from __future__ import annotations

import json
import re
import shlex
from importlib import import_module
from pathlib import Path

from study_config import study_config

from pnc.report import compare, variant_moves
from pnc.studies.mujoco.results_table import load

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "docs" / "results" / "offline_authors"
README = FOLDER / "README.md"
OFFLINE = ROOT / "docs" / "results" / "offline"
PAPER = ROOT / "docs" / "results" / "paper"
CONFIG = study_config("config/offline_authors.yaml")  # the overlay merged into config.yaml
#: A number as pages write it: optional sign, thousands commas, decimals (a range ``a-b`` reads
#: as two numbers only where the page's numbers are unsigned: see :func:`numbers`).
NUMBER = re.compile(r"(?<![\w.])[-−]?\d[\d,]*(?:\.\d+)?(?![\w])")


def _paragraphs() -> list[str]:
    """The README's paragraphs and list items, each with its whitespace collapsed."""
    blocks, current = [], []
    for line in README.read_text().splitlines():
        if not line.strip() or line.startswith(("- ", "#")):
            if current:
                blocks.append(" ".join(current))
            current = [line] if line.strip() else []
        else:
            current.append(line.strip())
    if current:
        blocks.append(" ".join(current))
    return [" ".join(b.split()) for b in blocks]


def numbers(text: str, signed: bool = True) -> list[float]:
    """The numbers of ``text`` in order (``236-542`` is 236 and 542 when ``signed`` is false)."""
    out = []
    for token in NUMBER.findall(text):
        token = token.replace(",", "").replace("−", "-")
        out.append(float(token if signed else token.lstrip("-")))
    return out


def in_order(found: list[float], expected: list[float], tol: float = 1e-9) -> bool:
    """Whether ``expected`` is a subsequence of ``found``."""
    it = iter(found)
    return all(any(abs(v - e) <= tol for v in it) for e in expected)


def paragraph_with(value: float, signed: bool = True) -> str:
    """The one paragraph holding the number ``value``."""
    hits = [p for p in _paragraphs() if value in numbers(p, signed)]
    assert len(hits) == 1, f"{len(hits)} paragraphs of the README give {value:,g}"
    return hits[0]


def test_numbers_and_in_order_read_numbers_not_words():
    text = "took 1,442-1,623 CPU s, then -1.18 in ours and 2.82 (away); seeds 7-9"
    assert numbers(text, signed=False) == [1442, 1623, 1.18, 2.82, 7, 9]
    assert numbers("-1.18 in ours, -1.03") == [-1.18, -1.03]
    assert in_order([1, 5, 2, 7, 3], [1, 2, 3]) and not in_order([1, 3, 2], [1, 2, 3])


def test_the_readme_counts_the_stored_pieces():
    """Every environment and seed of the variant's config has its manifest, and the README's count
    of the pieces is theirs: the total, the environments and the seeds."""
    stored = {(p.parent.name, int(p.stem[4:])) for p in (FOLDER / "pieces" / "manifests").glob(
        "*/seed*.json")}  # fmt: skip
    expected = {(env, seed) for env in CONFIG["envs"] for seed in CONFIG["seeds"]}
    assert stored == expected
    total, envs, seeds = len(stored), len(CONFIG["envs"]), len(CONFIG["seeds"])
    assert in_order(numbers(paragraph_with(total)), [total, envs, seeds])


def test_the_pieces_hold_the_two_changed_methods_only():
    """The README: only P&C and P&C w/o correction read the two settings, and the folder's pieces
    hold their jobs only, with the ``base-steps2000`` run it names."""
    for stage in ("results/metrics", "benchmarks/evaluate"):
        methods = {p.name for p in (FOLDER / "pieces" / stage).glob("*/seed*/*") if p.is_dir()}
        assert methods == {"pnc", "pnc_nocorr"}, stage
    runs = {p.name.split(".")[0] for p in (FOLDER / "pieces" / "benchmarks" / "train").rglob("*")
            if p.is_file()}  # fmt: skip
    assert runs == {"base-steps2000"} and "`base-steps2000`" in README.read_text()


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


def _span(values) -> list[float]:
    """The smallest and largest of ``values``, rounded as the README writes CPU seconds."""
    values = list(values)
    return [round(min(values)), round(max(values))]


def test_the_readme_cpu_times_follow_the_process_records():
    """The README's CPU seconds per piece (by machine kind) are the stored records' sums, in the
    order the README gives them, with the pieces' environments and counts."""
    pieces = FOLDER / "pieces"
    every, pnc, tuned = piece_cpu_seconds(pieces / "benchmarks")
    manifests = sorted((pieces / "manifests").glob("*/seed*.json"))
    stored = {(p.parent.name, int(p.stem[4:])) for p in manifests}
    assert set(every) == stored, "every stored piece has its process records, and only those"
    assert XEON_PIECES | UNRECORDED_PIECES <= stored
    epyc = stored - XEON_PIECES - UNRECORDED_PIECES
    total = round(sum(every[k] for k in epyc))
    text = paragraph_with(total, signed=False)
    for env, _ in XEON_PIECES | UNRECORDED_PIECES:
        assert env in text, f"the README does not name {env}'s seed 0 beside its machine"

    def job(stage: str, env: str, rest: str) -> float:
        record = pieces / "benchmarks" / stage / env / "seed0" / f"{rest}.process.json"
        return round(json.loads(record.read_text())["cpu_s"])

    ip, hopper = (
        [job("evaluate", env, f"{m}/base-steps2000") for m in ("pnc", "pnc_nocorr")]
        + [job("train", env, "base-steps2000")]
        for env in ("InvertedPendulum", "Hopper")
    )
    humanoids = [k for k in epyc if k[0] in ("Humanoid", "HumanoidStandup")]
    smaller = [k for k in epyc if k not in humanoids]
    # seeds 7-9 of the two Humanoids ran with the allocator's tunables, as the README says
    assert tuned == {(env, seed) for env in ("Humanoid", "HumanoidStandup") for seed in (7, 8, 9)}
    paged = [k for k in humanoids if k not in tuned]
    hosted = sum(1 for p in manifests if json.loads(p.read_text()).get("host"))
    expected = [
        *ip,
        *hopper,
        *_span(every[k] for k in sorted(XEON_PIECES)),
        len(epyc),
        *_span(every[k] for k in smaller),
        *_span(every[k] for k in paged),
        *_span(pnc[k] for k in paged),
        *_span(every[k] for k in tuned),
        *_span(pnc[k] for k in tuned),
        total,
        hosted,
        len(epyc),
    ]
    assert in_order(numbers(text, signed=False), expected), (
        f"the README should give, in this order: {expected}"
    )


def _moves() -> list[variant_moves.Move]:
    """What the authors' settings move (:func:`pnc.report.variant_moves.variant_moves`, the draws
    reading), from this folder's and the reference's generated ``results.csv`` and the paper's."""
    return variant_moves.variant_moves(
        compare.our_readings(load(OFFLINE / "results.csv")),
        compare.our_readings(load(FOLDER / "results.csv")),
        compare.statistics_of(load(PAPER / "results.csv")),
    )


def _rounded(quantity: str, value: float) -> float:
    """A move's number as the README writes it: wins as a count, ranks with two decimals."""
    return round(value) if quantity.endswith("wins") else round(value, 2)


DIRECTIONS = (variant_moves.TOWARD, variant_moves.AWAY, variant_moves.UNCHANGED)


def _direction_after(text: str, label: str) -> str | None:
    """The first of :data:`DIRECTIONS` that ``text`` gives after ``label``."""
    rest = text[text.index(label) + len(label) :]
    found = [(rest.find(d), d) for d in DIRECTIONS if d in rest]
    return min(found)[1] if found else None


def test_the_readme_says_what_the_settings_move():
    """Every piece stored: the folder's tables are generated, and per quantity the README gives
    its number in ours, with the authors' settings and in the paper, and where the settings move
    it; its summary of the two results that do not reproduce says the same."""
    assert (FOLDER / "results.csv").is_file(), "the 110 pieces are stored: generate the tables"
    items = [p for p in _paragraphs() if p.startswith("- ")]
    moves = _moves()
    for m in moves:
        item = next((p for p in items if p[2:].startswith(f"{m.quantity}:")), None)
        assert item is not None, f"the README has no item for {m.quantity}"
        rest = item[2 + len(m.quantity) + 1 :]
        expected = [_rounded(m.quantity, v) for v in (m.ours, m.variant, m.paper)]
        assert numbers(rest)[:3] == expected, (m.quantity, expected)
        assert _direction_after(item, m.quantity) == m.moves, (m.quantity, m.moves)
    wins = next(m for m in moves if m.quantity == "P&C's ID RMSE wins")
    subspace = moves[-1]
    summary = next(p for p in _paragraphs() if not p.startswith("- ") and wins.quantity in p)
    assert _direction_after(summary, wins.quantity) == wins.moves
    assert _direction_after(summary, "Subspace's ID RMSE rank") == subspace.moves


def _beats(frame, method: str = "subspace", other: str = "pnc") -> tuple[int, int]:
    """In how many environments ``method``'s ID RMSE seed mean is below ``other``'s, of how many."""
    rows = frame[(frame.split == "id") & (frame.metric == "rmse")]
    means = rows.groupby(["env", "method"])["value"].mean().unstack()
    return int((means[method] < means[other]).sum()), len(means)


def test_the_readme_says_why_subspaces_rank_moves():
    """Subspace's rows are the reference's in this folder too, so its ID RMSE rank moves with
    P&C's: the README's counts are the two folders' seed means, and the generated comparison
    gives the same."""
    ours, variant = load(OFFLINE / "results.csv"), load(FOLDER / "results.csv")

    def rows(frame):
        sub = frame[frame.method == "subspace"]
        return sub.sort_values(list(sub.columns)).reset_index(drop=True)

    assert rows(ours).equals(rows(variant)), "Subspace's rows are the same in both folders"
    (k, n), (j, _) = _beats(variant), _beats(ours)
    assert k > j  # P&C's ID RMSE moved, not Subspace's
    summary = next(p for p in _paragraphs() if not p.startswith("- ") and "Subspace" in p
                   and "P&C's ID RMSE wins" in p)  # fmt: skip
    assert in_order(numbers(summary), [k, n, j, n])
    comparison = (OFFLINE / compare.COMPARISON_FILE).read_text()
    assert any(in_order(numbers(line), [k, n, j, n]) for line in comparison.splitlines()
               if "Subspace" in line)  # fmt: skip


def test_the_readme_and_the_comparison_list_the_calibration_pool_caveat():
    """The variant's P&C draws its calibration rows from the ID pool, validation rows included:
    the README names the setting, and the reference's comparison carries the generated caveat."""
    assert CONFIG["methods"]["pnc"]["calibration_pool"] == "id_pool"
    assert "`calibration_pool: id_pool`" in README.read_text()
    comparison = " ".join((OFFLINE / compare.COMPARISON_FILE).read_text().split())
    assert compare.calibration_caveat(FOLDER) in comparison


#: Where a file the README names in backticks may be: the repository, this folder, the reference
#: folder (whose ``comparison.md`` and ``pieces/`` the README names as the reference's).
BASES = (ROOT, FOLDER, OFFLINE)


def test_the_files_and_sections_the_readme_names_exist():
    text = README.read_text()
    named = [t for t in re.findall(r"`([^`\s]+)`", text)
             if "/" in t or re.search(r"\.(md|csv|json|yaml|py|sh)$", t)]  # fmt: skip
    assert len(named) > 10
    missing = [t for t in named if not any((base / t).exists() for base in BASES)]
    assert not missing, f"the README names files that do not exist: {missing}"
    # the sections it quotes are headings of the pages it names
    headings = set()
    for page in (OFFLINE / compare.COMPARISON_FILE, ROOT / "docs" / "results.md"):
        headings |= {h.lstrip("#").strip() for h in page.read_text().splitlines() if
                     h.startswith("#")}  # fmt: skip
    quoted = re.findall(r'"([^"]+)"', " ".join(text.split()))
    assert quoted and not [q for q in quoted if q not in headings]
    # the variant's label in the reference's variants file is this folder's name
    assert FOLDER.name in json.loads((OFFLINE / "variants.json").read_text())


def _commands() -> list[list[str]]:
    """The README's commands: its indented block (continuations joined, ``&&`` split) and its
    inline ``python -m`` commands."""
    block = [line[4:] for line in README.read_text().splitlines() if line.startswith("    ")]
    joined = " ".join(block).replace("\\ ", " ")
    inline = re.findall(r"`(python -m [^`]+)`", " ".join(README.read_text().split()))
    return [shlex.split(c) for c in joined.split("&&") + inline]


def test_the_readme_commands_name_real_scripts_options_and_paths():
    """Each command's script exists and takes the options given; ``python -m pnc.report``'s
    arguments parse; the paths given exist (or, for ``rm``, are gone from the folder)."""
    commands = [c for chunk in _commands() for c in _split_chained(chunk)]
    assert len(commands) >= 5
    parser = import_module("pnc.report.__main__")._parser()
    for words in commands:
        if words[0] == "rm":
            assert not (ROOT / words[1]).exists(), words
        elif words[0].startswith("scripts/"):
            script = (ROOT / words[0]).read_text()
            for option in (w for w in words if w.startswith("--")):
                assert f"{option})" in script, (words[0], option)
        else:
            assert words[:3] == ["python", "-m", "pnc.report"], words
            parser.parse_args(words[3:])
        if words[0] != "rm":
            paths = [w for w in words[1:] if w.startswith(("docs/", "config/"))]
            assert all((ROOT / w).exists() for w in paths), words


def _split_chained(words: list[str]) -> list[list[str]]:
    """A command line that runs several commands one after another, split at each of them."""
    out, current = [], []
    for word in words:
        if current and (word.startswith("scripts/") or word == "python"):
            out.append(current)
            current = []
        current.append(word)
    return out + ([current] if current else [])

"""docs/results/offline_authors/README.md names the pieces stored so far: the count and, per group
of environments with the same seeds, which seeds; recomputed from the stored manifests, so that the
README cannot fall behind the pieces that are committed beside it."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "docs" / "results" / "offline_authors"
CONFIG = yaml.safe_load((ROOT / "config" / "offline_authors.yaml").read_text())


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
    text = " ".join((FOLDER / "README.md").read_text().split())
    phrase = stored_phrase(FOLDER / "pieces" / "manifests", CONFIG["envs"], CONFIG["seeds"])
    if phrase.startswith(f"{len(CONFIG['envs']) * len(CONFIG['seeds'])} of "):
        return  # every piece stored: the README then describes the generated tables instead
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

"""Fetch the CIFAR study's data into ``data.root`` from the official sources, checksums verified.

Every archive the study can need is a :class:`Source`: the binary CIFAR-10 / CIFAR-100 archives
from the CIFAR page of the University of Toronto (its published md5 sums), and OpenOOD v1.5's
image lists (``benchmark_imglist``) and image folders (``images_classic/<name>``) from the Google
Drive files that OpenOOD's own evaluation API downloads. OpenOOD publishes no checksums: for those
archives the sha256 of the first download is recorded in ``root/checksums.json`` and every later
download is verified against it; pin a value with ``data.sources.<name>.sha256``.

:func:`fetch` downloads only the sources whose files are missing, verifies each archive before it
extracts anything (a mismatch fails at once, naming the archive, both checksums and the expected
layout), extracts it, then checks again: if files are still missing (no network, a source that
failed) it stops with one :class:`~pnc.studies.cifar.data.DataError` naming every missing file and how to
place each archive by hand. ``file://`` URLs work like any other (tests, local mirrors), and so
does any HTTP server holding the archives under the sources' names (``data.sources``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import http.client
import json
import shutil
import tarfile
import urllib.error
import urllib.request
import zipfile
import zlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pnc.studies.cifar import data as D

GDRIVE = "https://drive.google.com/uc?export=download&confirm=t&id={}"
CHECKSUMS = "checksums.json"


@dataclasses.dataclass(frozen=True)
class Source:
    """One downloadable archive.

    Attributes:
        url: where it is downloaded from (``https://``, ``file://``).
        archive: its file name (``.tar.gz`` or ``.zip``).
        extract_to: the folder under the data root it is extracted into.
        md5, sha256: the expected checksums (lower-case hex); ``None``: unpublished.
    """

    url: str
    archive: str
    extract_to: str = ""
    md5: str | None = None
    sha256: str | None = None


#: The official sources (CIFAR: https://www.cs.toronto.edu/~kriz/cifar.html, with its md5 sums;
#: OpenOOD v1.5: the Google Drive ids of openood/evaluation_api/datasets.py).
SOURCES: dict[str, Source] = {
    "cifar10": Source(
        "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz",
        "cifar-10-binary.tar.gz",
        md5="c32a1d4ab5d03f1284b67883e8d87530",
    ),
    "cifar100": Source(
        "https://www.cs.toronto.edu/~kriz/cifar-100-binary.tar.gz",
        "cifar-100-binary.tar.gz",
        md5="03b5dce01913d631647c71ecec9e9cb8",
    ),
    "benchmark_imglist": Source(
        GDRIVE.format("1lI1j0_fDDvjIt9JlWAw09X8ks-yrR_H1"), "benchmark_imglist.zip"
    ),
    **{
        f"images_{name}": Source(GDRIVE.format(gid), f"{name}.zip", D.IMAGE_DIR)
        for name, gid in {
            "cifar10": "1Co32RiiWe16lTaiOU6JMMnyUYS41IlO1",
            "cifar100": "1PGKheHUsf29leJPPGuXqzLBMwl8qMF8_",
            "tin": "1PZ-ixyx52U989IKsMA2OT-24fToTrelC",
            "mnist": "1CCHAGWqA1KJTFFswuF9cbhmB-j98Y1Sb",
            "svhn": "1DQfc11HOtB1nEwqS4pWUFp8vtQ3DczvI",
            "texture": "1OSz1m3hHfVWbRdmMwKbUzoU8Hg9UKcam",
            "places365": "1Ec-LRSTf6u5vEctKX9vRp9OA6tqnJ0Ay",
        }.items()
    },
}


def sources(overrides: Mapping[str, Mapping] | None = None) -> dict[str, Source]:
    """:data:`SOURCES` with ``overrides`` (name -> ``{url, md5, sha256}``) applied.

    Raises:
        ValueError: an override names no known source.
    """
    out = dict(SOURCES)
    for name, fields in (overrides or {}).items():
        if name not in out:
            raise ValueError(f"data.sources: unknown source {name!r}; known: {', '.join(out)}")
        out[name] = dataclasses.replace(
            out[name], **{k: fields[k] for k in ("url", "md5", "sha256") if k in fields}
        )
    return out


def missing_by_source(
    root: str | Path, id_name: str, ood_names: Sequence[str]
) -> dict[str, list[str]]:
    """Source name -> the missing files (relative to ``root``) it provides; only sources with
    missing files. An OOD set's images count as missing when its folder is absent or its image
    list names an absent image."""
    root = Path(root)
    spec = D.id_dataset(id_name)
    D.check_ood_names(ood_names, id_name)
    out: dict[str, list[str]] = {}
    ids = [f for f in spec.files() if not (root / f).is_file()]
    if ids:
        out[id_name] = ids
    lists = [
        str(D.image_list_path(root, n, id_name).relative_to(root))
        for n in ood_names
        if not D.image_list_path(root, n, id_name).is_file()
    ]
    if lists:
        out["benchmark_imglist"] = lists
    for name in ood_names:
        folder = root / D.IMAGE_DIR / name
        if not folder.is_dir():
            out[f"images_{name}"] = [f"{D.IMAGE_DIR}/{name}/"]
        elif D.image_list_path(root, name, id_name).is_file():
            absent = [m.split(": ", 1)[1] for m in D.missing_images(root, name, id_name)]
            if absent:
                out[f"images_{name}"] = [str(Path(p).relative_to(root)) for p in absent]
    return out


def _digest(path: Path) -> tuple[str, str]:
    md5, sha = hashlib.md5(), hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            md5.update(block)
            sha.update(block)
    return md5.hexdigest(), sha.hexdigest()


def _download(url: str, dest: Path, timeout: float = 60.0) -> None:
    """Download ``url`` to ``dest`` through ``dest.part``, renamed when complete; a failed
    download (a connection cut, a body shorter than announced) leaves no file."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, open(part, "wb") as f:
            shutil.copyfileobj(response, f, 1 << 20)
            announced = response.headers.get("Content-Length")
        # http.client ends a read early without an error when the connection closes
        if announced is not None and part.stat().st_size != int(announced):
            raise http.client.IncompleteRead(b"", int(announced) - part.stat().st_size)
        part.replace(dest)
    finally:
        part.unlink(missing_ok=True)


def _extract(archive: Path, dest: Path) -> None:
    """Extract ``archive`` into ``dest``: first into a folder beside the archive, then each of its
    top-level entries moved into ``dest``, so that an archive that cannot be read (cut short, not
    an archive) leaves nothing under ``dest``.

    Raises:
        DataError: the archive cannot be read or holds an unsafe path.
    """
    tmp = archive.with_name(archive.name + ".extract")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        if archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as z:
                for member in z.namelist():
                    if member.startswith("/") or ".." in Path(member).parts:
                        raise D.DataError(f"{archive}: unsafe path {member!r} in the archive")
                z.extractall(tmp)
        else:
            with tarfile.open(archive) as t:
                t.extractall(tmp, filter="data")
        dest.mkdir(parents=True, exist_ok=True)
        _merge(tmp, dest)
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, zlib.error) as err:
        raise D.DataError(f"{archive.name} cannot be read ({type(err).__name__}: {err})") from err
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _merge(src: Path, dest: Path) -> None:
    """Move the entries of ``src`` into ``dest``, descending into folders that exist in both."""
    for entry in sorted(src.iterdir()):
        target = dest / entry.name
        if entry.is_dir() and target.is_dir():
            _merge(entry, target)
        else:
            if target.is_dir():
                shutil.rmtree(target)
            entry.replace(target)


def hand_instructions(root: str | Path, names: Sequence[str], table: Mapping[str, Source]) -> str:
    """How to place the archives of ``names`` by hand."""
    root = Path(root)
    lines = []
    for name in names:
        s = table[name]
        sums = ", ".join(f"{k} {v}" for k, v in (("md5", s.md5), ("sha256", s.sha256)) if v)
        lines.append(
            f"  {name}: download {s.url} ({s.archive}{'; ' + sums if sums else ''}) and extract it"
            f" into {root / s.extract_to}"
        )
    return "\n".join(lines)


def fetch(
    root: str | Path,
    id_name: str,
    ood_names: Sequence[str],
    *,
    overrides: Mapping[str, Mapping] | None = None,
    download: Callable[[str, Path], None] = _download,
) -> dict:
    """Download, verify and extract every source with missing files; return a summary.

    Raises:
        DataError: an archive's checksum differs from the expected one, or it cannot be read
            (nothing of it is extracted; the archive is removed); or files are still missing
            afterwards (a download failed: no partial file is kept): one message naming every
            missing file and how to place each archive by hand.
    """
    root = Path(root)
    table = sources(overrides)
    needed = missing_by_source(root, id_name, ood_names)
    recorded_path = root / CHECKSUMS
    recorded = json.loads(recorded_path.read_text()) if recorded_path.is_file() else {}
    fetched, failed = [], {}
    for name in needed:
        src = table[name]
        archive = root / ".downloads" / src.archive
        try:
            download(src.url, archive)
        except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as err:
            failed[name] = f"{type(err).__name__}: {err}"
            continue
        md5, sha = _digest(archive)
        expected_sha = src.sha256 or recorded.get(src.archive)
        bad = [
            f"{kind} {got} (expected {want})"
            for kind, got, want in (("md5", md5, src.md5), ("sha256", sha, expected_sha))
            if want and got != want
        ]
        if bad:
            archive.unlink()
            raise D.DataError(
                f"checksum mismatch for {src.archive} from {src.url}: {'; '.join(bad)}; the"
                f" download was removed and nothing extracted. Place the archive by hand:\n"
                f"{hand_instructions(root, [name], table)}\n{D.LAYOUT}"
            )
        try:
            _extract(archive, root / src.extract_to)
        except D.DataError as err:
            raise D.DataError(
                f"{err}; downloaded from {src.url}, it was removed and nothing extracted. Run"
                f" again to download it again, or place the archive by hand:\n"
                f"{hand_instructions(root, [name], table)}\n{D.LAYOUT}"
            ) from err
        finally:
            archive.unlink(missing_ok=True)
        recorded[src.archive] = sha
        recorded_path.parent.mkdir(parents=True, exist_ok=True)
        recorded_path.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
        fetched.append(name)
    still = missing_by_source(root, id_name, ood_names)
    if still:
        files = "\n".join(f"  {root}/{f}" for fs in still.values() for f in fs)
        reasons = "\n".join(f"  {n}: {failed[n]}" for n in still if n in failed)
        raise D.DataError(
            f"{sum(map(len, still.values()))} data file(s) missing under {root}:\n{files}\n"
            + (f"downloads that failed:\n{reasons}\n" if reasons else "")
            + f"place them by hand:\n{hand_instructions(root, list(still), table)}\n{D.LAYOUT}"
        )
    return {"root": str(root), "id": id_name, "fetched": fetched, "present": not needed}

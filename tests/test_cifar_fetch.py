"""The data rule's download (pnc.studies.cifar.fetch) against a fake source on the local filesystem
(file:// URLs) and over HTTP from a server on 127.0.0.1 (``tests/loopback_hub.py``; never the
network), the ``cifar_fetch`` rule run by Snakemake against that server, transfers cut short,
its offline message, and the bad-input cases of the data check: a checksum mismatch, an image list
naming a missing image, an empty OOD set."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
import yaml
from loopback_hub import LoopbackHub
from workflow_copy import copy_workflow

from pnc.studies.cifar import data as D
from pnc.studies.cifar import fetch as F

OOD = ["svhn", "tin"]


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


@pytest.fixture
def fake_source(tmp_path) -> tuple[Path, dict]:
    """Archives in the official formats under ``tmp_path/mirror`` and overrides pointing at them:
    the CIFAR-10 binary tar.gz, the image-list zip and one zip per OOD image folder."""
    gen = tmp_path / "gen"
    D.write_tiny_benchmark(gen, train_per_file=3, test=4, ood=3, ood_names=OOD)
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    with tarfile.open(mirror / "cifar-10-binary.tar.gz", "w:gz") as t:
        t.add(gen / D.CIFAR_DIR, arcname=D.CIFAR_DIR)
    with zipfile.ZipFile(mirror / "benchmark_imglist.zip", "w") as z:
        for path in (gen / "benchmark_imglist").rglob("*.txt"):
            z.write(path, path.relative_to(gen))
    for name in OOD:
        with zipfile.ZipFile(mirror / f"{name}.zip", "w") as z:
            for path in (gen / D.IMAGE_DIR / name).rglob("*.png"):
                z.write(path, path.relative_to(gen / D.IMAGE_DIR))
    overrides = {
        "cifar10": {"url": (mirror / "cifar-10-binary.tar.gz").as_uri(),
                    "md5": _md5(mirror / "cifar-10-binary.tar.gz")},
        "benchmark_imglist": {"url": (mirror / "benchmark_imglist.zip").as_uri()},
        **{f"images_{n}": {"url": (mirror / f"{n}.zip").as_uri()} for n in OOD},
    }  # fmt: skip
    return mirror, overrides


@pytest.fixture
def http_source(fake_source):
    """The fake source's archives served over HTTP by a loopback server (stopped at teardown, or
    by itself after 120 s), and overrides pointing at it."""
    mirror, overrides = fake_source
    files = {f"/mirror/{p.name}": p.read_bytes() for p in mirror.iterdir()}
    with LoopbackHub(static=files, lifetime=120) as hub:
        http = {
            name: {**fields, "url": f"{hub.url}/mirror/{Path(fields['url']).name}"}
            for name, fields in overrides.items()
        }
        yield hub, http


def _leftovers(root: Path) -> list[Path]:
    """What a download may leave under the data root: archives, partial files, extractions."""
    downloads = root / ".downloads"
    return sorted(downloads.iterdir()) if downloads.is_dir() else []


def test_fetch_over_http_from_a_loopback_server(tmp_path, http_source):
    hub, overrides = http_source
    root = tmp_path / "root"
    summary = F.fetch(root, "cifar10", OOD, overrides=overrides)
    assert len(summary["fetched"]) == 4
    assert sorted(r[1] for r in hub.served("GET", "^/mirror/")) == sorted(
        f"/mirror/{n}" for n in ("cifar-10-binary.tar.gz", "benchmark_imglist.zip", "svhn.zip", "tin.zip")
    )  # fmt: skip
    info = D.prepare(root, OOD, tmp_path / "out")
    assert info["train"] == 15 and info["ood"] == {"svhn": 3, "tin": 3}
    assert _leftovers(root) == []


def test_a_transfer_cut_short_is_refused_and_a_rerun_fetches_it(tmp_path, http_source):
    """The server announces the whole SVHN archive but closes the connection halfway (no partial
    file is kept: the fetch names the failed download and how to place it); then it sends half of
    it with a matching length (unreadable: refused before anything is extracted). A rerun with
    the whole archive fetches it; the other archives are not downloaded again."""
    hub, overrides = http_source
    root = tmp_path / "root"
    hub.altered["/mirror/svhn.zip"] = "cut"
    with pytest.raises(D.DataError) as err:
        F.fetch(root, "cifar10", OOD, overrides=overrides)
    text = str(err.value)
    assert "images_svhn: IncompleteRead" in text and "images_classic/svhn/" in text, text
    assert f"images_svhn: download {hub.url}/mirror/svhn.zip" in text
    assert not (root / D.IMAGE_DIR / "svhn").exists() and _leftovers(root) == []
    assert (root / D.IMAGE_DIR / "tin").is_dir()  # the archives that arrived are extracted

    hub.altered["/mirror/svhn.zip"] = "truncate"
    with pytest.raises(D.DataError) as err:
        F.fetch(root, "cifar10", OOD, overrides=overrides)
    text = str(err.value)
    assert "svhn.zip cannot be read (BadZipFile" in text and "nothing extracted" in text, text
    assert not (root / D.IMAGE_DIR / "svhn").exists() and _leftovers(root) == []
    assert "svhn.zip" not in json.loads((root / F.CHECKSUMS).read_text())

    hub.altered.clear()
    before = len(hub.served("GET", "^/mirror/"))
    assert F.fetch(root, "cifar10", OOD, overrides=overrides)["fetched"] == ["images_svhn"]
    assert len(hub.served("GET", "^/mirror/")) == before + 1
    assert D.prepare(root, OOD, tmp_path / "out")["ood"] == {"svhn": 3, "tin": 3}


def test_a_cut_tar_archive_leaves_nothing_extracted(tmp_path, fake_source):
    """A CIFAR-10 archive cut short (the md5 pinned to the cut file, so that the checksum passes)
    fails to extract: nothing of it is left under the data root, and the message names it."""
    mirror, overrides = fake_source
    data = (mirror / "cifar-10-binary.tar.gz").read_bytes()
    (mirror / "cifar-10-binary.tar.gz").write_bytes(data[: len(data) * 2 // 3])
    overrides["cifar10"]["md5"] = _md5(mirror / "cifar-10-binary.tar.gz")
    root = tmp_path / "root"
    with pytest.raises(D.DataError, match=r"cifar-10-binary\.tar\.gz cannot be read"):
        F.fetch(root, "cifar10", OOD, overrides=overrides)
    assert not (root / D.CIFAR_DIR).exists() and _leftovers(root) == []


@pytest.mark.slow
def test_the_fetch_rule_downloads_over_http_then_the_data_check_reads_it(tmp_path, http_source):
    """``cifar_fetch`` run by Snakemake with the sources on the loopback server (data.sources),
    then ``cifar_data`` reads what it fetched."""
    hub, overrides = http_source
    workdir = copy_workflow(tmp_path / "w", ("workflow", "config", "envs", "profiles"), ("cifar.smk",))
    config = yaml.safe_load((workdir / "config/cifar_tiny.yaml").read_text())
    del config["data"]["tiny"]
    config["data"].update(root="data/openood", fetch=True, ood=OOD, val_size=4, sources=overrides)
    config["evaluate"] = ["msp"]  # an overlay of config/cifar.yaml: the methods that run
    (workdir / "mirror.yaml").write_text(yaml.safe_dump(config))
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", "cifar.smk", "resources/cifar/data/data.json"]
        + ["--cores", "1", "--configfile", "mirror.yaml"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **os.environ,
            "PYTHONWARNINGS": "ignore",
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "NO_PROXY": "127.0.0.1,localhost",
        },
    )
    logs = "".join(p.read_text() for p in sorted((workdir / "logs").rglob("*.log")))
    assert proc.returncode == 0, proc.stderr[-3000:] + logs[-3000:]
    summary = json.loads((workdir / "resources/cifar/fetch.json").read_text())
    assert sorted(summary["fetched"]) == sorted(overrides)
    info = json.loads((workdir / "resources/cifar/data/data.json").read_text())
    assert info["ood"] == {"svhn": 3, "tin": 3}, info
    assert len(hub.served("GET", "^/mirror/")) == 4
    assert _leftovers(workdir / "data/openood") == []
    shutil.rmtree(workdir / "data")  # the rerun finds the summary and has nothing to do
    rerun = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", "cifar.smk", "resources/cifar/data/data.json"]
        + ["-n", "--cores", "1", "--configfile", "mirror.yaml"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert rerun.returncode == 0 and "Nothing to be done" in rerun.stdout + rerun.stderr


def test_fetch_downloads_verifies_extracts_and_the_data_check_passes(tmp_path, fake_source):
    _, overrides = fake_source
    root = tmp_path / "root"
    summary = F.fetch(root, "cifar10", OOD, overrides=overrides)
    assert sorted(summary["fetched"]) == sorted(["cifar10", "benchmark_imglist", *(f"images_{n}" for n in OOD)])  # fmt: skip
    info = D.prepare(root, OOD, tmp_path / "out")
    assert info["train"] == 15 and info["ood"] == {"svhn": 3, "tin": 3}
    recorded = json.loads((root / F.CHECKSUMS).read_text())
    assert set(recorded) == {"cifar-10-binary.tar.gz", "benchmark_imglist.zip", "svhn.zip", "tin.zip"}  # fmt: skip
    assert not list((root / ".downloads").iterdir())  # archives removed after extraction
    again = F.fetch(root, "cifar10", OOD, overrides=overrides)
    assert again["fetched"] == [] and again["present"]


def test_a_checksum_mismatch_fails_before_extracting_naming_the_archive(tmp_path, fake_source):
    _, overrides = fake_source
    overrides["cifar10"]["md5"] = "0" * 32
    root = tmp_path / "root"
    with pytest.raises(D.DataError) as err:
        F.fetch(root, "cifar10", OOD, overrides=overrides)
    text = str(err.value)
    assert "checksum mismatch for cifar-10-binary.tar.gz" in text and "0" * 32 in text
    assert "expected layout" in text and "extract it into" in text
    assert not (root / D.CIFAR_DIR).exists()
    assert not (root / ".downloads" / "cifar-10-binary.tar.gz").exists()


def test_a_recorded_checksum_is_verified_on_a_later_download(tmp_path, fake_source):
    mirror, overrides = fake_source
    root = tmp_path / "root"
    F.fetch(root, "cifar10", OOD, overrides=overrides)
    for path in (root / D.IMAGE_DIR / "svhn").rglob("*.png"):
        path.unlink()
    with zipfile.ZipFile(mirror / "svhn.zip", "a") as z:  # the source changed since
        z.writestr("svhn/extra.txt", "changed")
    with pytest.raises(D.DataError, match=r"checksum mismatch for svhn\.zip.*sha256"):
        F.fetch(root, "cifar10", OOD, overrides=overrides)


def test_offline_names_every_missing_file_and_how_to_place_it(tmp_path):
    nowhere = {n: {"url": (tmp_path / "none" / n).as_uri()} for n in F.SOURCES}
    root = tmp_path / "root"
    with pytest.raises(D.DataError) as err:
        F.fetch(root, "cifar10", ["svhn", "places365"], overrides=nowhere)
    text = str(err.value)
    for name in (*D.TRAIN_FILES, D.TEST_FILE, "test_svhn.txt", "test_places365.txt"):
        assert name in text, name
    assert "images_classic/svhn/" in text and "images_classic/places365/" in text
    assert "downloads that failed" in text and "place them by hand" in text
    assert f"extract it into {root / D.IMAGE_DIR}" in text
    assert text.count("\n  cifar10: download") == 1


def test_cifar100_sources_and_missing_files(tmp_path):
    missing = F.missing_by_source(tmp_path, "cifar100", ["cifar10", "mnist"])
    assert missing["cifar100"] == ["cifar-100-binary/train.bin", "cifar-100-binary/test.bin"]
    assert missing["benchmark_imglist"] == [
        "benchmark_imglist/cifar100/test_cifar10.txt", "benchmark_imglist/cifar100/test_mnist.txt",
    ]  # fmt: skip
    assert {"images_cifar10", "images_mnist"} <= set(missing)
    with pytest.raises(ValueError, match="unknown source 'nope'"):
        F.sources({"nope": {"url": "x"}})


def test_an_image_list_naming_a_missing_image_fails_before_reading(tmp_path):
    D.write_tiny_benchmark(tmp_path, train_per_file=2, test=2, ood=3, ood_names=OOD)
    (tmp_path / D.IMAGE_DIR / "tin/test/00001.png").unlink()
    with pytest.raises(D.DataError) as err:
        D.prepare(tmp_path, OOD, tmp_path / "out")
    text = str(err.value)
    assert "test_tin.txt" in text and "00001.png" in text and "expected layout" in text
    assert not (tmp_path / "out").exists()


def test_an_empty_ood_set_fails_naming_its_list(tmp_path):
    D.write_tiny_benchmark(tmp_path, train_per_file=2, test=2, ood=3, ood_names=OOD)
    lst = D.image_list_path(tmp_path, "svhn")
    lst.write_text("\n  \n")
    with pytest.raises(D.DataError, match=r"test_svhn\.txt lists no images(.|\n)*expected layout"):
        D.prepare(tmp_path, OOD, tmp_path / "out")
    with pytest.raises(D.DataError, match=r"no image read from .*test_tin\.txt"):
        D.read_ood_dataset(tmp_path, "tin", limit=0)


def test_cifar100_binary_records_use_the_fine_label(tmp_path):
    images = np.arange(2 * 3072, dtype=np.uint8).reshape(2, 32, 32, 3)
    D.write_cifar_batch(tmp_path / "t.bin", images, np.array([7, 99]), "cifar100")
    raw = np.fromfile(tmp_path / "t.bin", np.uint8).reshape(2, 3074)
    assert raw[:, :2].tolist() == [[1, 7], [19, 99]]  # coarse, fine
    x, y = D.read_cifar_batch(tmp_path / "t.bin", "cifar100")
    assert np.array_equal(x, images) and y.tolist() == [7, 99]
    with pytest.raises(D.DataError, match="3073-byte records.*cifar10"):
        D.read_cifar_batch(tmp_path / "t.bin", "cifar10")


def test_cifar100_tiny_benchmark_through_the_real_readers(tmp_path):
    D.write_tiny_benchmark(tmp_path, train_per_file=4, test=5, ood=2, id_name="cifar100")
    info = D.prepare(tmp_path, ["cifar10", "tin", "svhn"], tmp_path / "out", id_name="cifar100")
    assert info["id"] == "cifar100" and info["num_classes"] == 100 and info["train"] == 20
    assert info["ood_groups"] == {"cifar10": "near", "tin": "near", "svhn": "far"}
    data = D.load_prepared(tmp_path / "out")
    assert data.id_name == "cifar100" and data.num_classes == 100
    with pytest.raises(D.DataError, match="unknown OOD dataset.*'cifar100'.*for ID cifar100"):
        D.prepare(tmp_path, ["cifar100"], tmp_path / "out2", id_name="cifar100")

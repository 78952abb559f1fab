"""The data rule's download (pnc.cifar.fetch) against a fake source on the local filesystem
(file:// URLs, never the network), its offline message, and the bad-input cases of the data
check: a checksum mismatch, an image list naming a missing image, an empty OOD set."""

from __future__ import annotations

import hashlib
import json
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from pnc.cifar import data as D
from pnc.cifar import fetch as F

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

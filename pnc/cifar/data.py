"""CIFAR-10 and the OpenOOD v1.5 CIFAR-10 benchmark from local files (no pickle).

Layout under ``data.root`` (paths in the config; the defaults are the distributions' own names)::

    cifar-10-batches-bin/data_batch_1.bin .. data_batch_5.bin, test_batch.bin
        the official binary distribution of CIFAR-10: fixed-size records of 1 label byte
        (0-9) and 3,072 pixel bytes (the 1,024 red, then green, then blue values of a 32x32
        image, rows in order); 10,000 records per file.
    benchmark_imglist/cifar10/test_{cifar100,tin,mnist,svhn,texture,places365}.txt
        the OpenOOD v1.5 image lists: one image a line, ``RELATIVE/PATH LABEL`` (the label is
        ignored), paths relative to
    images_classic/
        the OpenOOD v1.5 image folders (``images_classic/cifar100/test/...`` and so on).

The OOD groups are OpenOOD v1.5's: Near = CIFAR-100, TinyImageNet (``tin``); Far = MNIST, SVHN,
Textures (``texture``), Places365 (``places365``). OOD images are read as OpenOOD's test
transform reads them: converted to RGB, the shorter side resized to 32 (bilinear), centre-cropped
to 32x32. :func:`prepare` checks every file, then writes the arrays once as ``.npz`` (uint8), so
the training and post-hoc jobs never decode images. :func:`write_tiny_benchmark` writes a small
generated dataset in exactly these formats (the CI run).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

IMAGE_SHAPE = (32, 32, 3)
RECORD_BYTES = 1 + 32 * 32 * 3
NUM_CLASSES = 10
TRAIN_FILES = tuple(f"data_batch_{i}.bin" for i in range(1, 6))
TEST_FILE = "test_batch.bin"
CIFAR_DIR = "cifar-10-batches-bin"
IMGLIST_DIR = "benchmark_imglist/cifar10"
IMAGE_DIR = "images_classic"

#: OpenOOD v1.5's CIFAR-10 OOD datasets: name -> (group, image list file).
OOD_DATASETS: dict[str, tuple[str, str]] = {
    "cifar100": ("near", "test_cifar100.txt"),
    "tin": ("near", "test_tin.txt"),
    "mnist": ("far", "test_mnist.txt"),
    "svhn": ("far", "test_svhn.txt"),
    "texture": ("far", "test_texture.txt"),
    "places365": ("far", "test_places365.txt"),
}
OOD_GROUPS = ("near", "far")

LAYOUT = f"""expected layout under the data root:
  {CIFAR_DIR}/{{{",".join(TRAIN_FILES)},{TEST_FILE}}}  (CIFAR-10 binary version,
      records of 1 label byte + 3072 pixel bytes)
  {IMGLIST_DIR}/test_<name>.txt  (OpenOOD v1.5 image lists: 'relative/path label' per line)
  {IMAGE_DIR}/<relative/path>  (OpenOOD v1.5 images_classic folder)
(docs/cifar.md)"""


class DataError(ValueError):
    """A data file is missing or malformed; the message names it and the expected layout."""


def check_ood_names(names: Sequence[str]) -> None:
    """Raise :class:`DataError` naming any OOD dataset that OpenOOD v1.5's CIFAR-10 lacks."""
    unknown = [n for n in names if n not in OOD_DATASETS]
    if unknown:
        raise DataError(
            f"unknown OOD dataset(s) {unknown}; known: {', '.join(OOD_DATASETS)}"
            " (OpenOOD v1.5 CIFAR-10: near cifar100, tin; far mnist, svhn, texture, places365)"
        )


# ----------------------------------------------------------------------------- CIFAR-10 binary


def read_cifar_batch(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Images ``[N, 32, 32, 3]`` uint8 (NHWC) and labels ``[N]`` uint8 of one binary batch file."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"missing CIFAR-10 file {path}\n{LAYOUT}")
    raw = np.fromfile(path, dtype=np.uint8)
    if raw.size == 0 or raw.size % RECORD_BYTES:
        raise DataError(
            f"{path}: {raw.size} bytes is not a whole number of {RECORD_BYTES}-byte records"
            f" (1 label byte + 3072 pixel bytes); is it the binary version of CIFAR-10?\n{LAYOUT}"
        )
    records = raw.reshape(-1, RECORD_BYTES)
    labels = records[:, 0].copy()
    if labels.max() >= NUM_CLASSES:
        bad = int(np.argmax(labels >= NUM_CLASSES))
        raise DataError(f"{path}: record {bad} has label {labels[bad]}, not in 0..9")
    images = records[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(images), labels


def write_cifar_batch(path: str | Path, images: np.ndarray, labels: np.ndarray) -> None:
    """Write images ``[N, 32, 32, 3]`` uint8 and labels ``[N]`` as one binary batch file."""
    images, labels = np.asarray(images), np.asarray(labels)
    if images.shape[1:] != IMAGE_SHAPE or images.dtype != np.uint8:
        raise ValueError(f"images must be uint8 [N, 32, 32, 3], got {images.dtype} {images.shape}")
    if labels.shape != images.shape[:1] or labels.min() < 0 or labels.max() >= NUM_CLASSES:
        raise ValueError("labels must be [N] integers in 0..9")
    records = np.empty((images.shape[0], RECORD_BYTES), np.uint8)
    records[:, 0] = labels
    records[:, 1:] = images.transpose(0, 3, 1, 2).reshape(images.shape[0], -1)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    records.tofile(path)


def read_cifar10(root: str | Path) -> dict[str, np.ndarray]:
    """``{"train_x", "train_y", "test_x", "test_y"}`` from ``root/cifar-10-batches-bin``."""
    folder = Path(root) / CIFAR_DIR
    train = [read_cifar_batch(folder / name) for name in TRAIN_FILES]
    test_x, test_y = read_cifar_batch(folder / TEST_FILE)
    return {
        "train_x": np.concatenate([x for x, _ in train]),
        "train_y": np.concatenate([y for _, y in train]),
        "test_x": test_x,
        "test_y": test_y,
    }


# ----------------------------------------------------------------------------- OpenOOD image lists


def read_image_list(path: str | Path) -> list[str]:
    """The relative image paths of an OpenOOD image list (``path label`` per line; only the first
    field is read)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"missing OpenOOD image list {path}\n{LAYOUT}")
    paths = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        if parts[0].startswith("/") or ".." in Path(parts[0]).parts:
            raise DataError(
                f"{path}, line {number}: expected 'relative/path label' (a path inside"
                f" {IMAGE_DIR}/), got {line!r}\n{LAYOUT}"
            )
        paths.append(parts[0])
    if not paths:
        raise DataError(f"{path} lists no images\n{LAYOUT}")
    return paths


def load_image(path: Path, size: int = 32) -> np.ndarray:
    """One image as OpenOOD's test transform reads it: RGB, shorter side ``size``, centre crop."""
    from PIL import Image, UnidentifiedImageError

    if not path.is_file():
        raise DataError(f"missing image {path}\n{LAYOUT}")
    try:
        with Image.open(path) as img:
            img = img.convert("RGB")
            w, h = img.size
            if (w, h) != (size, size):
                scale = size / min(w, h)
                img = img.resize(
                    (max(size, round(w * scale)), max(size, round(h * scale))),
                    Image.Resampling.BILINEAR,
                )
                w, h = img.size
                left, top = (w - size) // 2, (h - size) // 2
                img = img.crop((left, top, left + size, top + size))
            return np.asarray(img, np.uint8)
    except (UnidentifiedImageError, OSError) as err:
        raise DataError(f"{path}: not a readable image ({err})") from None


def read_ood_dataset(root: str | Path, name: str, limit: int | None = None) -> np.ndarray:
    """Images ``[N, 32, 32, 3]`` uint8 of OOD dataset ``name`` (its first ``limit`` list entries)."""
    check_ood_names([name])
    root = Path(root)
    paths = read_image_list(root / IMGLIST_DIR / OOD_DATASETS[name][1])
    if limit is not None:
        paths = paths[:limit]
    return np.stack([load_image(root / IMAGE_DIR / p) for p in paths])


# ----------------------------------------------------------------------------- prepared arrays


@dataclasses.dataclass(frozen=True)
class Prepared:
    """The checked arrays: CIFAR-10 train/test and every OOD dataset (uint8 NHWC)."""

    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    ood: dict[str, np.ndarray]


def check_files(root: str | Path, ood_names: Sequence[str]) -> list[Path]:
    """Every file the study reads that is missing (image lists and CIFAR batches, not images)."""
    check_ood_names(ood_names)
    root = Path(root)
    wanted = [root / CIFAR_DIR / name for name in (*TRAIN_FILES, TEST_FILE)]
    wanted += [root / IMGLIST_DIR / OOD_DATASETS[n][1] for n in ood_names]
    return [p for p in wanted if not p.is_file()]


def prepare(
    root: str | Path,
    ood_names: Sequence[str],
    out: str | Path,
    *,
    ood_limit: int | None = None,
) -> dict:
    """Check and read all data, write ``out/cifar10.npz`` and ``out/ood.npz``; return a summary.

    Raises:
        DataError: naming every missing file (and the expected layout) before anything is read,
            or the first malformed file.
    """
    missing = check_files(root, ood_names)
    if missing:
        names = "\n".join(f"  {p}" for p in missing)
        raise DataError(f"{len(missing)} data file(s) missing:\n{names}\n{LAYOUT}")
    cifar = read_cifar10(root)
    ood = {name: read_ood_dataset(root, name, ood_limit) for name in ood_names}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    np.savez(out / "cifar10.npz", **cifar)
    np.savez(out / "ood.npz", **ood)
    return {
        "root": str(root),
        "train": int(cifar["train_y"].size),
        "test": int(cifar["test_y"].size),
        "class_counts_train": np.bincount(cifar["train_y"], minlength=NUM_CLASSES).tolist(),
        "ood": {name: int(x.shape[0]) for name, x in ood.items()},
        "ood_groups": {name: OOD_DATASETS[name][0] for name in ood_names},
    }


def load_prepared(folder: str | Path) -> Prepared:
    """The arrays :func:`prepare` wrote to ``folder``."""
    folder = Path(folder)
    for name in ("cifar10.npz", "ood.npz"):
        if not (folder / name).is_file():
            raise DataError(f"missing prepared data {folder / name}; run the data stage first")
    with np.load(folder / "cifar10.npz", allow_pickle=False) as f:
        cifar = {k: f[k] for k in f.files}
    with np.load(folder / "ood.npz", allow_pickle=False) as f:
        ood = {k: f[k] for k in f.files}
    return Prepared(ood=ood, **cifar)


def train_val_split(n: int, n_val: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices ``(train, val)`` of a random split of ``n`` training images (the paper: 45k/5k)."""
    if not 0 < n_val < n:
        raise ValueError(f"validation size must be in 1..{n - 1}, got {n_val}")
    perm = np.random.default_rng([seed, 45_000]).permutation(n)
    return np.sort(perm[n_val:]), np.sort(perm[:n_val])


# ----------------------------------------------------------------------------- the tiny dataset


def _tiny_id_images(
    rng: np.random.Generator, labels: np.ndarray, palette: np.ndarray
) -> np.ndarray:
    """Class ``c``: oriented stripes at angle ``c pi / 10`` in colour ``palette[c]`` plus noise."""
    yy, xx = np.mgrid[:32, :32].astype(np.float32)
    out = np.empty((labels.size, 32, 32, 3), np.float32)
    for i, c in enumerate(labels):
        angle = np.pi * c / NUM_CLASSES + rng.normal(0, 0.08)
        phase = rng.uniform(0, 2 * np.pi)
        wave = 0.5 + 0.5 * np.sin(0.9 * (np.cos(angle) * xx + np.sin(angle) * yy) + phase)
        colour = palette[c] * rng.uniform(0.7, 1.0)
        out[i] = wave[..., None] * colour + 0.12 * rng.normal(size=(32, 32, 3))
    return out


def _tiny_ood_images(rng: np.random.Generator, name: str, n: int) -> np.ndarray:
    """Generated stand-ins with a genuine shift from the ID stripes (near: stripes at unseen
    angles and colours or blends of two classes; far: digits-like strokes, grey blobs, checkers,
    smooth gradients)."""
    yy, xx = np.mgrid[:32, :32].astype(np.float32)
    out = np.empty((n, 32, 32, 3), np.float32)
    for i in range(n):
        if name == "cifar100":  # stripes at angles between the ID classes, random colours
            angle = np.pi * (rng.integers(NUM_CLASSES) + 0.5) / NUM_CLASSES
            wave = 0.5 + 0.5 * np.sin(0.9 * (np.cos(angle) * xx + np.sin(angle) * yy))
            img = wave[..., None] * rng.uniform(0.2, 1.0, 3)
        elif name == "tin":  # crossed stripes
            a, b = rng.uniform(0, np.pi, 2)
            img = (0.25 * (2 + np.sin(0.9 * (np.cos(a) * xx + np.sin(a) * yy)) + np.sin(b * xx)))[
                ..., None
            ] * rng.uniform(0.3, 1.0, 3)
        elif name == "mnist":  # a bright stroke on black, grey
            y0, x0, y1, x1 = rng.uniform(6, 26, 4)
            t = np.clip(((xx - x0) * (x1 - x0) + (yy - y0) * (y1 - y0)) / ((x1 - x0) ** 2 + (y1 - y0) ** 2 + 1e-3), 0, 1)  # fmt: skip
            d = np.hypot(xx - x0 - t * (x1 - x0), yy - y0 - t * (y1 - y0))
            img = np.repeat((d < 2.0).astype(np.float32)[..., None], 3, axis=2)
        elif name == "svhn":  # blobs on a flat coloured background
            cy, cx = rng.uniform(8, 24, 2)
            blob = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 30.0)
            img = rng.uniform(0, 1, 3) * (1 - blob[..., None]) + blob[..., None] * rng.uniform(0, 1, 3)  # fmt: skip
        elif name == "texture":  # checkerboards
            s = rng.integers(2, 6)
            img = np.repeat(((xx // s + yy // s) % 2)[..., None], 3, axis=2) * rng.uniform(0.4, 1.0)
        else:  # places365: smooth colour gradients
            g = (np.cos(rng.uniform(0, 2 * np.pi)) * xx + np.sin(rng.uniform(0, 2 * np.pi)) * yy) / 45 + 0.5  # fmt: skip
            img = g[..., None] * rng.uniform(0, 1, 3) + (1 - g[..., None]) * rng.uniform(0, 1, 3)
        grey = name == "mnist"  # MNIST is grey: one noise value for the three channels
        out[i] = img + 0.08 * rng.normal(size=(32, 32, 1 if grey else 3))
    return out


def _to_uint8(x: np.ndarray) -> np.ndarray:
    return np.clip(np.round(255 * x), 0, 255).astype(np.uint8)


def write_tiny_benchmark(
    root: str | Path,
    *,
    train_per_file: int = 60,
    test: int = 200,
    ood: int = 100,
    ood_names: Sequence[str] = tuple(OOD_DATASETS),
    seed: int = 0,
) -> dict:
    """Write a small generated CIFAR-10 + OpenOOD benchmark under ``root`` in the real formats.

    ``train_per_file`` records in each of the 5 training batch files, ``test`` in the test batch,
    ``ood`` PNG images per OOD dataset with its image list. Returns the counts.
    """
    from PIL import Image

    check_ood_names(ood_names)
    root = Path(root)
    rng = np.random.default_rng(seed)
    palette = rng.uniform(0.3, 1.0, (NUM_CLASSES, 3)).astype(np.float32)
    for name in (*TRAIN_FILES, TEST_FILE):
        n = test if name == TEST_FILE else train_per_file
        labels = rng.integers(0, NUM_CLASSES, n).astype(np.uint8)
        write_cifar_batch(root / CIFAR_DIR / name, _to_uint8(_tiny_id_images(rng, labels, palette)), labels)  # fmt: skip
    counts: dict[str, int] = {}
    for name in ood_names:
        images = _to_uint8(_tiny_ood_images(rng, name, ood))
        lines = []
        for i, image in enumerate(images):
            rel = f"{name}/test/{i:05d}.png"
            path = root / IMAGE_DIR / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(image).save(path)
            lines.append(f"{rel} 0")
        list_path = root / IMGLIST_DIR / OOD_DATASETS[name][1]
        list_path.parent.mkdir(parents=True, exist_ok=True)
        list_path.write_text("\n".join(lines) + "\n")
        counts[name] = len(lines)
    return {"train": 5 * train_per_file, "test": test, "ood": counts}


def ood_group_names(names: Sequence[str]) -> Mapping[str, list[str]]:
    """``{"near": [...], "far": [...]}`` of the given OOD datasets, in the given order."""
    check_ood_names(names)
    return {g: [n for n in names if OOD_DATASETS[n][0] == g] for g in OOD_GROUPS}

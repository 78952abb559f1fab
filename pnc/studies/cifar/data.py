"""CIFAR-10 / CIFAR-100 and their OpenOOD v1.5 benchmarks from local files (no pickle).

Layout under ``data.root`` (the distributions' own names)::

    cifar-10-batches-bin/data_batch_1.bin .. data_batch_5.bin, test_batch.bin
        the official binary distribution of CIFAR-10: fixed-size records of 1 label byte
        (0-9) and 3,072 pixel bytes (the 1,024 red, then green, then blue values of a 32x32
        image, rows in order); 10,000 records per file.
    cifar-100-binary/train.bin, test.bin  (CIFAR-100 as ID)
        the same with 2 label bytes (coarse, then fine; the fine label 0-99 is used).
    benchmark_imglist/<id>/test_<name>.txt
        the OpenOOD v1.5 image lists: one image a line, ``RELATIVE/PATH LABEL`` (the label is
        ignored), paths relative to
    images_classic/
        the OpenOOD v1.5 image folders (``images_classic/cifar100/test/...`` and so on).

The OOD groups are OpenOOD v1.5's. CIFAR-10 as ID: Near = CIFAR-100, TinyImageNet (``tin``);
Far = MNIST, SVHN, Textures (``texture``), Places365 (``places365``). CIFAR-100 as ID: Near =
CIFAR-10, TinyImageNet; Far the same four. OOD images are read as OpenOOD's test
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


@dataclasses.dataclass(frozen=True)
class IdDataset:
    """An ID dataset: its binary files, label layout and OpenOOD v1.5 OOD sets."""

    name: str
    folder: str
    train_files: tuple[str, ...]
    test_file: str
    label_bytes: int  # label bytes per record before the 3,072 pixel bytes
    label_index: int  # which of them is the class
    num_classes: int
    ood: dict[str, tuple[str, str]]  # name -> (group, image list file)

    @property
    def imglist_dir(self) -> str:
        return f"benchmark_imglist/{self.name}"

    @property
    def record_bytes(self) -> int:
        return self.label_bytes + 32 * 32 * 3

    def files(self) -> list[str]:
        """The binary files, relative to the data root."""
        return [f"{self.folder}/{f}" for f in (*self.train_files, self.test_file)]


#: The ID datasets: ``cifar10`` (paper Table 2) and ``cifar100``.
ID_DATASETS: dict[str, IdDataset] = {
    "cifar10": IdDataset(
        "cifar10",
        CIFAR_DIR,
        TRAIN_FILES,
        TEST_FILE,
        1,
        0,
        10,
        OOD_DATASETS,
    ),
    "cifar100": IdDataset(
        "cifar100",
        "cifar-100-binary",
        ("train.bin",),
        "test.bin",
        2,
        1,
        100,
        {
            "cifar10": ("near", "test_cifar10.txt"),
            "tin": ("near", "test_tin.txt"),
            **{k: v for k, v in OOD_DATASETS.items() if v[0] == "far"},
        },
    ),
}


def id_dataset(name: str) -> IdDataset:
    """The :class:`IdDataset` called ``name``; a :class:`DataError` naming the known ones."""
    if name not in ID_DATASETS:
        raise DataError(f"unknown ID dataset {name!r}; known: {', '.join(ID_DATASETS)}")
    return ID_DATASETS[name]


LAYOUT = f"""expected layout under the data root:
  {CIFAR_DIR}/{{{",".join(TRAIN_FILES)},{TEST_FILE}}}  (CIFAR-10 binary version,
      records of 1 label byte + 3072 pixel bytes)
  cifar-100-binary/{{train.bin,test.bin}}  (CIFAR-100 binary version, only with data.id cifar100:
      records of 2 label bytes + 3072 pixel bytes)
  benchmark_imglist/<id>/test_<name>.txt  (OpenOOD v1.5 image lists: 'relative/path label' per
      line)
  {IMAGE_DIR}/<relative/path>  (OpenOOD v1.5 images_classic folder)
(docs/cifar_results.md, 'Data')"""


class DataError(ValueError):
    """A data file is missing or malformed; the message names it and the expected layout."""


def check_ood_names(names: Sequence[str], id_name: str = "cifar10") -> None:
    """Raise :class:`DataError` naming any OOD dataset that OpenOOD v1.5 lacks for ``id_name``."""
    spec = id_dataset(id_name)
    unknown = [n for n in names if n not in spec.ood]
    if unknown:
        groups = "; ".join(
            f"{g} {', '.join(n for n, v in spec.ood.items() if v[0] == g)}" for g in OOD_GROUPS
        )
        raise DataError(
            f"unknown OOD dataset(s) {unknown} for ID {id_name}; known: {', '.join(spec.ood)}"
            f" (OpenOOD v1.5 {id_name}: {groups})"
        )


# ----------------------------------------------------------------------------- CIFAR-10 binary


def read_cifar_batch(path: str | Path, id_name: str = "cifar10") -> tuple[np.ndarray, np.ndarray]:
    """Images ``[N, 32, 32, 3]`` uint8 (NHWC) and labels ``[N]`` uint8 of one binary batch file
    of ``id_name`` (CIFAR-100: the fine label)."""
    spec = id_dataset(id_name)
    path = Path(path)
    if not path.is_file():
        label = {"cifar10": "CIFAR-10", "cifar100": "CIFAR-100"}[id_name]
        raise DataError(f"missing {label} file {path}\n{LAYOUT}")
    raw = np.fromfile(path, dtype=np.uint8)
    size = spec.record_bytes
    if raw.size == 0 or raw.size % size:
        raise DataError(
            f"{path}: {raw.size} bytes is not a whole number of {size}-byte records"
            f" ({spec.label_bytes} label byte(s) + 3072 pixel bytes); is it the binary version of"
            f" {id_name}?\n{LAYOUT}"
        )
    records = raw.reshape(-1, size)
    labels = records[:, spec.label_index].copy()
    if labels.max() >= spec.num_classes:
        bad = int(np.argmax(labels >= spec.num_classes))
        raise DataError(
            f"{path}: record {bad} has label {labels[bad]}, not in 0..{spec.num_classes - 1}"
        )
    images = records[:, spec.label_bytes :].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(images), labels


def write_cifar_batch(
    path: str | Path, images: np.ndarray, labels: np.ndarray, id_name: str = "cifar10"
) -> None:
    """Write images ``[N, 32, 32, 3]`` uint8 and labels ``[N]`` as one binary batch file of
    ``id_name`` (CIFAR-100: coarse label ``label // 5``, then the fine label)."""
    spec = id_dataset(id_name)
    images, labels = np.asarray(images), np.asarray(labels)
    if images.shape[1:] != IMAGE_SHAPE or images.dtype != np.uint8:
        raise ValueError(f"images must be uint8 [N, 32, 32, 3], got {images.dtype} {images.shape}")
    if labels.shape != images.shape[:1] or labels.min() < 0 or labels.max() >= spec.num_classes:
        raise ValueError(f"labels must be [N] integers in 0..{spec.num_classes - 1}")
    records = np.empty((images.shape[0], spec.record_bytes), np.uint8)
    if spec.label_bytes == 2:
        records[:, 0] = labels // 5
    records[:, spec.label_index] = labels
    records[:, spec.label_bytes :] = images.transpose(0, 3, 1, 2).reshape(images.shape[0], -1)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    records.tofile(path)


def read_cifar10(root: str | Path, id_name: str = "cifar10") -> dict[str, np.ndarray]:
    """``{"train_x", "train_y", "test_x", "test_y"}`` of ``id_name`` from ``root``."""
    spec = id_dataset(id_name)
    folder = Path(root) / spec.folder
    train = [read_cifar_batch(folder / name, id_name) for name in spec.train_files]
    test_x, test_y = read_cifar_batch(folder / spec.test_file, id_name)
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


def image_list_path(root: str | Path, name: str, id_name: str = "cifar10") -> Path:
    """``root/benchmark_imglist/<id>/test_<name>.txt``."""
    spec = id_dataset(id_name)
    return Path(root) / spec.imglist_dir / spec.ood[name][1]


def missing_images(
    root: str | Path, name: str, id_name: str = "cifar10", limit: int | None = None
) -> list[str]:
    """``"LIST, line N: PATH"`` for every image that OOD list ``name`` names and that is absent."""
    lst = image_list_path(root, name, id_name)
    paths = read_image_list(lst)[:limit]
    return [
        f"{lst}: {Path(root) / IMAGE_DIR / p}"
        for p in paths
        if not (Path(root) / IMAGE_DIR / p).is_file()
    ]


def read_ood_dataset(
    root: str | Path, name: str, limit: int | None = None, id_name: str = "cifar10"
) -> np.ndarray:
    """Images ``[N, 32, 32, 3]`` uint8 of OOD dataset ``name`` (its first ``limit`` list entries).

    Raises:
        DataError: the list is missing, malformed, or empty after reading (naming the list).
    """
    check_ood_names([name], id_name)
    root = Path(root)
    lst = image_list_path(root, name, id_name)
    paths = read_image_list(lst)
    if limit is not None:
        paths = paths[:limit]
    images = [load_image(root / IMAGE_DIR / p) for p in paths]
    if not images:
        raise DataError(f"OOD dataset {name}: no image read from {lst}\n{LAYOUT}")
    return np.stack(images)


# ----------------------------------------------------------------------------- prepared arrays


@dataclasses.dataclass(frozen=True)
class Prepared:
    """The checked arrays: ID train/test and every OOD dataset (uint8 NHWC)."""

    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    ood: dict[str, np.ndarray]
    id_name: str = "cifar10"

    @property
    def num_classes(self) -> int:
        return ID_DATASETS[self.id_name].num_classes


def check_files(root: str | Path, ood_names: Sequence[str], id_name: str = "cifar10") -> list[Path]:
    """Every file the study reads that is missing (image lists and ID batches, not images)."""
    check_ood_names(ood_names, id_name)
    root = Path(root)
    wanted = [root / f for f in id_dataset(id_name).files()]
    wanted += [image_list_path(root, n, id_name) for n in ood_names]
    return [p for p in wanted if not p.is_file()]


def prepare(
    root: str | Path,
    ood_names: Sequence[str],
    out: str | Path,
    *,
    ood_limit: int | None = None,
    id_name: str = "cifar10",
) -> dict:
    """Check and read all data, write ``out/<id>.npz`` and ``out/ood.npz``; return a summary.

    Raises:
        DataError: before anything is read, naming every missing file (and the expected layout),
            then every image that an image list names and that is absent (with its list); or
            the first malformed file, or an OOD set with no image.
    """
    missing = check_files(root, ood_names, id_name)
    if missing:
        names = "\n".join(f"  {p}" for p in missing)
        raise DataError(f"{len(missing)} data file(s) missing:\n{names}\n{LAYOUT}")
    absent = [m for n in ood_names for m in missing_images(root, n, id_name, ood_limit)]
    if absent:
        shown = "\n".join(f"  {m}" for m in absent[:20])
        more = f"\n  ... and {len(absent) - 20} more" if len(absent) > 20 else ""
        raise DataError(
            f"{len(absent)} image(s) named by an image list are missing (list: image):\n"
            f"{shown}{more}\n{LAYOUT}"
        )
    spec = id_dataset(id_name)
    cifar = read_cifar10(root, id_name)
    ood = {name: read_ood_dataset(root, name, ood_limit, id_name) for name in ood_names}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    np.savez(out / f"{id_name}.npz", **cifar)
    np.savez(out / "ood.npz", **ood)
    return {
        "root": str(root),
        "id": id_name,
        "num_classes": spec.num_classes,
        "train": int(cifar["train_y"].size),
        "test": int(cifar["test_y"].size),
        "class_counts_train": np.bincount(cifar["train_y"], minlength=spec.num_classes).tolist(),
        "ood": {name: int(x.shape[0]) for name, x in ood.items()},
        "ood_groups": {name: spec.ood[name][0] for name in ood_names},
    }


def load_prepared(folder: str | Path) -> Prepared:
    """The arrays :func:`prepare` wrote to ``folder`` (``<id>.npz`` and ``ood.npz``)."""
    folder = Path(folder)
    found = [n for n in ID_DATASETS if (folder / f"{n}.npz").is_file()]
    if len(found) != 1 or not (folder / "ood.npz").is_file():
        raise DataError(
            f"expected one of {[f'{n}.npz' for n in ID_DATASETS]} and ood.npz in {folder}"
            f" (found {found}); run the data stage first"
        )
    with np.load(folder / f"{found[0]}.npz", allow_pickle=False) as f:
        cifar = {k: f[k] for k in f.files}
    with np.load(folder / "ood.npz", allow_pickle=False) as f:
        ood = {k: f[k] for k in f.files}
    return Prepared(ood=ood, id_name=found[0], **cifar)


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
    """Class ``c`` of ``K``: stripes at angle ``c pi / K`` in colour ``palette[c]`` plus noise."""
    yy, xx = np.mgrid[:32, :32].astype(np.float32)
    out = np.empty((labels.size, 32, 32, 3), np.float32)
    for i, c in enumerate(labels):
        angle = np.pi * c / palette.shape[0] + rng.normal(0, 0.08 * 10 / palette.shape[0])
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
        if name in ("cifar100", "cifar10"):  # stripes between the ID classes' angles
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
            t = np.clip(
                ((xx - x0) * (x1 - x0) + (yy - y0) * (y1 - y0))
                / ((x1 - x0) ** 2 + (y1 - y0) ** 2 + 1e-3),
                0,
                1,
            )
            d = np.hypot(xx - x0 - t * (x1 - x0), yy - y0 - t * (y1 - y0))
            img = np.repeat((d < 2.0).astype(np.float32)[..., None], 3, axis=2)
        elif name == "svhn":  # blobs on a flat coloured background
            cy, cx = rng.uniform(8, 24, 2)
            blob = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 30.0)
            background = rng.uniform(0, 1, 3)  # drawn before the blob's colour
            img = background * (1 - blob[..., None]) + blob[..., None] * rng.uniform(0, 1, 3)
        elif name == "texture":  # checkerboards
            s = rng.integers(2, 6)
            img = np.repeat(((xx // s + yy // s) % 2)[..., None], 3, axis=2) * rng.uniform(0.4, 1.0)
        else:  # places365: smooth colour gradients
            a, b = rng.uniform(0, 2 * np.pi), rng.uniform(0, 2 * np.pi)
            g = (np.cos(a) * xx + np.sin(b) * yy) / 45 + 0.5
            img = g[..., None] * rng.uniform(0, 1, 3) + (1 - g[..., None]) * rng.uniform(0, 1, 3)
        grey = name == "mnist"  # MNIST is grey: one noise value for the three channels
        out[i] = img + 0.08 * rng.normal(size=(32, 32, 1 if grey else 3))
    return out


def _to_uint8(x: np.ndarray) -> np.ndarray:
    return np.clip(np.round(255 * x), 0, 255).astype(np.uint8)


#: Default training records per training batch file of the tiny benchmark.
TINY_TRAIN_PER_FILE = 60


def tiny_train_images(options: Mapping) -> int:
    """The training images of the tiny benchmark that ``options`` (:func:`write_tiny_benchmark`
    keywords, config ``data.tiny``) writes: ``5 * train_per_file``."""
    return 5 * int(options.get("train_per_file", TINY_TRAIN_PER_FILE))


def write_tiny_benchmark(
    root: str | Path,
    *,
    train_per_file: int = TINY_TRAIN_PER_FILE,
    test: int = 200,
    ood: int = 100,
    ood_names: Sequence[str] | None = None,
    seed: int = 0,
    id_name: str = "cifar10",
) -> dict:
    """Write a small generated ID + OpenOOD benchmark under ``root`` in the real formats.

    ``5 * train_per_file`` training records (CIFAR-10: ``train_per_file`` in each of its 5
    training batch files; CIFAR-100: all in ``train.bin``), ``test`` in the test file, ``ood``
    PNG images per OOD dataset (default: all of ``id_name``'s) with its image list. Returns the
    counts.
    """
    from PIL import Image

    spec = id_dataset(id_name)
    ood_names = list(spec.ood) if ood_names is None else list(ood_names)
    check_ood_names(ood_names, id_name)
    root = Path(root)
    rng = np.random.default_rng(seed)
    palette = rng.uniform(0.3, 1.0, (spec.num_classes, 3)).astype(np.float32)
    per_file = 5 * train_per_file // len(spec.train_files)
    for name in (*spec.train_files, spec.test_file):
        n = test if name == spec.test_file else per_file
        labels = rng.integers(0, spec.num_classes, n).astype(np.uint8)
        images = _to_uint8(_tiny_id_images(rng, labels, palette))
        write_cifar_batch(root / spec.folder / name, images, labels, id_name)
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
        list_path = image_list_path(root, name, id_name)
        list_path.parent.mkdir(parents=True, exist_ok=True)
        list_path.write_text("\n".join(lines) + "\n")
        counts[name] = len(lines)
    return {"id": id_name, "train": 5 * train_per_file, "test": test, "ood": counts}


def ood_group_names(names: Sequence[str], id_name: str = "cifar10") -> Mapping[str, list[str]]:
    """``{"near": [...], "far": [...]}`` of the given OOD datasets, in the given order."""
    check_ood_names(names, id_name)
    spec = id_dataset(id_name)
    return {g: [n for n in names if spec.ood[n][0] == g] for g in OOD_GROUPS}

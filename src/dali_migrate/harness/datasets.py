"""Synthetic datasets for the readers a pipeline uses: small, deterministic, written once.

Every dataset is described by a *spec*, a JSON-able dict with a ``kind``; ``make_dataset(spec,
root)`` writes it under ``root`` and returns a :class:`Dataset` whose ``paths`` say where each
reader argument should point (``file_root``, ``path``, ``index_path``, ``annotations_file``, ...).

Kinds (all sizes small on purpose: the harness compares every sample, CI runs on 2 cores):

* ``jpeg_folders`` / ``png_folders``: ``{"classes": C, "per_class": N}``; ``class_<c>/img_<i>.jpg``
  RGB images of varied sizes (20-60 px per side), for ``readers.file`` + ``decoders.image``.
* ``npy``: ``{"count": N, "shape": [...], "dtype": "uint8"}``; ``arr_<i>.npy``, for
  ``readers.numpy``.
* ``tfrecord``: ``{"count": N}``; ``data.tfrecord`` and its index ``data.idx`` with the ImageNet
  features ``image/encoded`` (JPEG bytes) and ``image/class/label`` (int64), for
  ``readers.tfrecord``.
* ``coco``: ``{"count": N}``; ``images/`` plus ``annotations.json`` with two boxes per image, for
  ``readers.coco``.
* ``wav_folders``: ``{"classes": C, "per_class": N}``; 16-bit mono WAV files, 8 kHz, 0.05-0.2 s,
  for ``readers.file`` + ``decoders.audio``.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Dataset", "KINDS", "make_dataset", "spec_for_reader"]

KINDS = ("jpeg_folders", "png_folders", "npy", "tfrecord", "coco", "wav_folders")


@dataclass
class Dataset:
    """A dataset on disk: ``root`` and the path each reader argument should get."""

    kind: str
    root: Path
    paths: dict[str, str] = field(default_factory=dict)
    count: int = 0

    def for_argument(self, argument: str) -> str:
        """The path for a reader argument (``file_root``, ``path``, ``index_path``, ...)."""
        return self.paths.get(argument, str(self.root))


def _image(c: int, i: int):
    import numpy as np

    rng = np.random.default_rng(1000 * c + i)
    h, w = (int(v) for v in rng.integers(20, 61, size=2))
    yy, xx = np.mgrid[0:h, 0:w]
    img = np.stack(
        [xx * 255 // w, yy * 255 // h, np.full((h, w), 60 * c + 10 * i)], axis=-1
    ) + rng.integers(0, 40, size=(h, w, 3))
    return np.clip(img, 0, 255).astype(np.uint8)


def _write_image(array, path: Path) -> None:
    from PIL import Image

    if path.suffix == ".jpg":
        Image.fromarray(array).save(path, quality=90)
    else:
        Image.fromarray(array).save(path)


# -- TFRecord, written by hand (no TensorFlow): protobuf Example + masked CRC32C framing --------

_CRC_TABLE: list[int] = []


def _crc32c(data: bytes) -> int:
    if not _CRC_TABLE:
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
            _CRC_TABLE.append(c)
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def _masked_crc(data: bytes) -> int:
    c = _crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282ED8) & 0xFFFFFFFF


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | 0x80 if n else b)
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:  # length-delimited field
    return _varint((number << 3) | 2) + _varint(len(payload)) + payload


def _example(features: dict[str, bytes]) -> bytes:
    entries = b"".join(_field(1, _field(1, k.encode()) + _field(2, v)) for k, v in features.items())
    return _field(1, entries)


def _bytes_feature(value: bytes) -> bytes:
    return _field(1, _field(1, value))  # Feature.bytes_list.value


def _int64_feature(values: list[int]) -> bytes:
    return _field(3, _field(1, b"".join(_varint(v) for v in values)))  # Feature.int64_list, packed


def _write_tfrecord(root: Path, count: int) -> dict[str, str]:
    import io

    from PIL import Image

    record, index = root / "data.tfrecord", root / "data.idx"
    offset = 0
    with open(record, "wb") as f, open(index, "w") as idx:
        for i in range(count):
            buf = io.BytesIO()
            Image.fromarray(_image(i % 3, i)).save(buf, format="JPEG", quality=90)
            ex = _example(
                {
                    "image/encoded": _bytes_feature(buf.getvalue()),
                    "image/class/label": _int64_feature([i % 3]),
                }
            )
            header = struct.pack("<Q", len(ex))
            chunk = (
                header
                + struct.pack("<I", _masked_crc(header))
                + ex
                + struct.pack("<I", _masked_crc(ex))
            )
            f.write(chunk)
            idx.write(f"{offset} {len(chunk)}\n")
            offset += len(chunk)
    return {"path": str(record), "index_path": str(index), "file_root": str(root)}


def _write_coco(root: Path, count: int) -> dict[str, str]:
    images_dir = root / "images"
    images_dir.mkdir()
    images: list[dict[str, object]] = []
    annotations: list[dict[str, object]] = []
    for i in range(count):
        array = _image(i % 3, i)
        name = f"img_{i:03d}.jpg"
        _write_image(array, images_dir / name)
        h, w = array.shape[:2]
        images.append({"id": i + 1, "file_name": name, "width": w, "height": h})
        for k in range(2):
            bbox = [1 + k, 1 + i % 3, 5 + i % 4, 4 + k]
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": i + 1,
                    "category_id": 1 + (i + k) % 3,
                    "bbox": bbox,
                    "area": bbox[2] * bbox[3],
                    "iscrowd": 0,
                }
            )
    categories = [{"id": c, "name": f"class_{c}"} for c in (1, 2, 3)]
    ann = root / "annotations.json"
    ann.write_text(
        json.dumps({"images": images, "annotations": annotations, "categories": categories})
    )
    return {"file_root": str(images_dir), "annotations_file": str(ann)}


def _write_wav(path: Path, c: int, i: int) -> None:
    import wave

    import numpy as np

    rate = 8000
    n = int(rate * (0.05 + 0.05 * ((c + i) % 4)))
    t = np.arange(n) / rate
    signal = 0.3 * np.sin(2 * np.pi * (220 + 110 * c + 15 * i) * t)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes((signal * 32767).astype("<i2").tobytes())


def make_dataset(spec: dict, root: Path) -> Dataset:
    """Write the synthetic data ``spec`` asks for under ``root`` (created), deterministically."""
    import numpy as np

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    kind = spec["kind"]
    paths: dict[str, str] = {"file_root": str(root)}
    if kind in ("jpeg_folders", "png_folders", "wav_folders"):
        suffix = {"jpeg_folders": ".jpg", "png_folders": ".png", "wav_folders": ".wav"}[kind]
        for c in range(spec["classes"]):
            folder = root / f"class_{c}"
            folder.mkdir()
            for i in range(spec["per_class"]):
                name = folder / f"{'clip' if kind == 'wav_folders' else 'img'}_{i}{suffix}"
                if kind == "wav_folders":
                    _write_wav(name, c, i)
                else:
                    _write_image(_image(c, i), name)
        count = spec["classes"] * spec["per_class"]
    elif kind == "npy":
        dtype = np.dtype(spec.get("dtype", "uint8"))
        for i in range(spec["count"]):
            rng = np.random.default_rng(i)
            np.save(
                root / f"arr_{i:03d}.npy", rng.integers(0, 100, size=spec["shape"]).astype(dtype)
            )
        count = spec["count"]
    elif kind == "tfrecord":
        paths = _write_tfrecord(root, spec["count"])
        count = spec["count"]
    elif kind == "coco":
        paths = _write_coco(root, spec["count"])
        count = spec["count"]
    else:
        raise ValueError(f"unknown synthetic data kind {kind!r} (known: {', '.join(KINDS)})")
    return Dataset(kind, root, paths, count)


#: reader schema (without the ``readers__`` prefix, lower case) -> dataset kind
_READER_KINDS = {"file": "jpeg_folders", "numpy": "npy", "tfrecord": "tfrecord", "coco": "coco"}


def spec_for_reader(
    reader: str, samples: int, *, audio: bool = False, image_format: str = "jpeg"
) -> dict | None:
    """The dataset spec for a reader (``"file"``, ``"numpy"``, ``"tfrecord"``, ``"coco"``) with
    about ``samples`` samples, or None when the harness cannot synthesize data for it."""
    kind = _READER_KINDS.get(reader.lower())
    if kind is None:
        return None
    if kind == "jpeg_folders":
        per_class = max(1, -(-samples // 2))
        if audio:
            return {"kind": "wav_folders", "classes": 2, "per_class": per_class}
        return {
            "kind": "png_folders" if image_format == "png" else "jpeg_folders",
            "classes": 2,
            "per_class": per_class,
        }
    if kind == "npy":
        return {"kind": "npy", "count": samples, "shape": [6, 5, 3], "dtype": "uint8"}
    return {"kind": kind, "count": samples}

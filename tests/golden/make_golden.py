"""Writes the committed golden files of the current format version (v7):
`python tests/golden/make_golden.py`.

Run it only when deliberately creating the files of a new format version (into a new folder);
test_golden.py checks that today's `save` still writes exactly these bytes, and that `load`
reads them, and the files of every earlier version, back to `golden_dataset(version)`.
"""

from __future__ import annotations

import collections
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

VERSION = 7
# From version 5: the element `Labeled(features, label)`, and a `Span` among the features
Labeled = collections.namedtuple("Labeled", "features label")
Span = collections.namedtuple("Span", "start stop")
Nothing = collections.namedtuple("Nothing", "")  # from version 7, a namedtuple of no fields
GOLDEN_DIR = Path(__file__).resolve().parent / f"v{VERSION}"
TFRECORD_NAME = "golden.tfrecord"  # header: golden.tfrecord.header.yaml (the default name)


def golden_dataset(version: int = VERSION) -> tf.data.Dataset:
    """4 elements of `(features, label)`: several dtypes, an unknown-shape and a ragged part;
    from version 2 also a uint8 image, which version 2 stores raw; from version 3 int16 and
    uint16 values, which version 3 stores raw; from version 4 a sparse tensor (its indices
    in no particular order), which version 4 stores; from version 5 namedtuples: the
    element is `Labeled(features, label)`, and the features hold a `Span(start, stop)`; from
    version 6 a qint8 tensor, which version 6 stores; from version 7 parts with no tensor
    (None, an empty dict, an empty tuple and an empty namedtuple), which version 7 stores."""
    f64 = np.array([[0.1, 1e300], [-0.0, 5e-324], [np.inf, -np.inf], [1 / 3, -2.5]], np.float64)
    f64[3, 1] = np.array(0x7FF8000000000001, np.uint64).view(np.float64)  # NaN with a payload
    f32 = np.array([0x7FC00001, 0x80000000, 0x3DCCCCCD, 0x00000001], np.uint32).view(np.float32)
    u64 = np.array([2**64 - 1, 2**63, 0, 12345], np.uint64)
    i8 = np.array([-128, 127, 0, -1], np.int8)
    b16 = tf.bitcast(tf.constant([[0x3F80], [0x7FC1], [0x8000], [0x0001]], tf.uint16),
                     tf.bfloat16)
    text = np.array([[b"", b"\x00"], ["é✓".encode(), b"\xff\xfe"], [b"abc", b""],
                     [b"a\x00b", b"z"]], object)
    flag = np.array([True, False, False, True])
    unknown = [np.array([], np.float32), np.array([1.5], np.float32),
               np.array([-0.0, 2.0, 3.0], np.float32), np.array([7.0, 8.0], np.float32)]
    ragged = tf.ragged.constant([[[1, 2], []], [], [[3]], [[-(2**63)], [2**63 - 1, 0]]],
                                tf.int64, row_splits_dtype=tf.int32)
    label = np.array([0, 1, 2, 3], np.int64)
    u8 = np.array([[[0, 255], [128, 7]], [[1, 2], [3, 4]], [[200, 0], [0, 0]], [[9, 8], [7, 6]]],
                  np.uint8)
    i16 = np.array([[-32768, 32767, -1], [0, 1, -2], [300, -300, 16384], [7, -7, 0]], np.int16)
    u16 = np.array([0, 65535, 16384, 127], np.uint16)
    sparse = [tf.SparseTensor(np.array(i, np.int64).reshape(-1, 2), np.array(v, np.float64), s)
              for i, v, s in (([[1, 2], [0, 0]], [0.1, -0.0], [2, 3]), ([], [], [1, 3]),
                              ([[0, 1]], [1e300], [1, 3]), ([[3, 2]], [-2.5], [4, 3]))]

    # in sorted order: save now lists a dict's keys in the dict's own order in the header,
    # where the writers of these files listed them sorted
    features = tf.data.Dataset.zip(dict(sorted({
        "f64": tf.data.Dataset.from_tensor_slices(f64),
        "f32": tf.data.Dataset.from_tensor_slices(f32),
        "u64": tf.data.Dataset.from_tensor_slices(u64),
        "i8": tf.data.Dataset.from_tensor_slices(i8),
        "b16": tf.data.Dataset.from_tensor_slices(b16),
        "text": tf.data.Dataset.from_tensor_slices(tf.constant(text, tf.string)),
        "flag": tf.data.Dataset.from_tensor_slices(flag),
        "unknown": tf.data.Dataset.from_generator(
            lambda: iter(unknown), output_signature=tf.TensorSpec([None], tf.float32)),
        "ragged": tf.data.Dataset.from_tensor_slices(ragged),
        **({"u8": tf.data.Dataset.from_tensor_slices(u8)} if version >= 2 else {}),
        **({"i16": tf.data.Dataset.from_tensor_slices(i16),
            "u16": tf.data.Dataset.from_tensor_slices(u16)} if version >= 3 else {}),
        **({"sparse": tf.data.Dataset.from_generator(
            lambda: iter(sparse), output_signature=tf.SparseTensorSpec([None, 3], tf.float64))}
           if version >= 4 else {}),
        **({"span": tf.data.Dataset.from_tensor_slices(
            Span(np.array([0, 5, -1, 2**31 - 1], np.int32), np.array([3, 5, 0, -(2**31)],
                                                                      np.int32)))}
           if version >= 5 else {}),
        **({"q8": tf.data.Dataset.from_tensor_slices(tf.bitcast(
            tf.constant([[-128, 127], [0, -1], [1, 2], [-3, 100]], tf.int8), tf.qint8))}
           if version >= 6 else {}),
    }.items())))
    if version >= 7:  # among the features, their dict still in sorted order
        features = features.map(lambda parts: dict(sorted({
            **parts, "none": None, "empty_dict": {}, "empty_tuple": (), "nothing": Nothing(),
        }.items())))
    element = Labeled if version >= 5 else lambda *parts: parts
    return tf.data.Dataset.zip(element(features, tf.data.Dataset.from_tensor_slices(label)))


def main(folder: Path = GOLDEN_DIR) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    import super_serial

    folder.mkdir(parents=True, exist_ok=True)
    super_serial.save(golden_dataset(), str(folder / TFRECORD_NAME))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else GOLDEN_DIR)

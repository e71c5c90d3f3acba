"""The YAML header: deterministic bytes, the documented fields, and read_header."""

from __future__ import annotations

import os

import numpy as np
import pytest
import tensorflow as tf
import yaml
from conftest import ENCODINGS

import super_serial


def _mixed(order: str = "ab") -> tf.data.Dataset:
    """A tuple (features, label) with fixed, unknown-shape and ragged components."""
    n = 5
    unknown = tf.data.Dataset.from_generator(
        lambda: iter([np.full((i % 3, 2), i / 10, np.float64) for i in range(n)]),
        output_signature=tf.TensorSpec([None, 2], tf.float64))
    ragged = tf.data.Dataset.from_tensor_slices(
        tf.ragged.constant([[[1, 2], []], [], [[3]], [[4, 5, 6]], [[7], [8]]], tf.int32,
                           row_splits_dtype=tf.int32))
    parts = {
        "image": tf.data.Dataset.from_tensor_slices(np.arange(n * 6, dtype=np.uint8)
                                                    .reshape(n, 2, 3)),
        "text": tf.data.Dataset.from_tensor_slices([b"a", b"", b"\x00", "é".encode(), b"z"]),
        "big": tf.data.Dataset.from_tensor_slices(np.array([2**64 - 1, 0, 1, 2, 3], np.uint64)),
        "unknown": unknown,
        "ragged": ragged,
    }
    features = {k: parts[k] for k in (sorted(parts) if order == "ab" else sorted(parts)[::-1])}
    label = tf.data.Dataset.from_tensor_slices(np.array([0.1, 1e300, -0.0, 5e-324, 2.5]))
    return tf.data.Dataset.zip((tf.data.Dataset.zip(features), label))


def _save(dataset, folder, name="data.tfrecord", **kwargs):
    os.makedirs(folder, exist_ok=True)
    tfrecord = os.path.join(folder, name)
    written = super_serial.save(dataset, tfrecord, **kwargs)
    return tfrecord, super_serial.default_header_path(tfrecord), written


def _read(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


# --------------------------------------------------------------------------------------------
# Determinism
# --------------------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:.*shard files hold no records")  # small, unknown size
@pytest.mark.parametrize("compression", [None, "GZIP", "ZLIB"], ids=["raw", "gzip", "zlib"])
@pytest.mark.parametrize("num_shards", [1, 3])
def test_same_dataset_same_bytes(tmp_path, compression, num_shards):
    first = _save(_mixed(), tmp_path / "a", compression=compression, num_shards=num_shards)
    second = _save(_mixed(), tmp_path / "b", compression=compression, num_shards=num_shards)
    assert _read(first[1]) == _read(second[1]), "header bytes differ between two saves"
    files_a = sorted(os.listdir(tmp_path / "a"))
    assert files_a == sorted(os.listdir(tmp_path / "b"))
    assert len(files_a) == num_shards + 1
    for name in files_a:
        assert _read(tmp_path / "a" / name) == _read(tmp_path / "b" / name), name


def test_dict_insertion_order_changes_only_the_headers_structure(tmp_path):
    """The records do not depend on it; the header lists each dict in its own order, which
    load gives back (the header was the same for both, and load sorted the keys)."""
    first = _save(_mixed("ab"), tmp_path / "a")
    second = _save(_mixed("ba"), tmp_path / "b")
    assert _read(first[0]) == _read(second[0])
    ordered = ["big", "image", "ragged", "text", "unknown"]
    for (_, header, _), order in ((first, ordered), (second, ordered[::-1])):
        text = _read(header).decode()
        structure = "- {" + ", ".join(f"{k}: 0/{k}" for k in order) + "}"
        assert f"\nstructure:\n{structure}\n- '1'\n" in text
        other = _read(second[1] if header == first[1] else first[1]).decode()
        assert text.replace(structure, "") == other.replace(
            "- {" + ", ".join(f"{k}: 0/{k}" for k in order[::-1]) + "}", "")
        assert list(super_serial.load(tfrecord_path=str(header)[:-len(".header.yaml")])
                    .element_spec[0]) == order


def test_resave_in_place_is_identical(tmp_path):
    tfrecord, header, _ = _save(_mixed(), tmp_path)
    before = _read(header), _read(tfrecord)
    _save(_mixed(), tmp_path)
    assert (_read(header), _read(tfrecord)) == before
    assert sorted(os.listdir(tmp_path)) == ["data.tfrecord", "data.tfrecord.header.yaml"]


def test_header_has_no_timestamps_or_paths(tmp_path):
    _, header, _ = _save(_mixed(), tmp_path / "somewhere-unique")
    text = _read(header).decode()
    assert "somewhere-unique" not in text and str(tmp_path) not in text
    assert "time" not in text.lower() and "date" not in text.lower()


@pytest.mark.parametrize("single", [False, True])
def test_header_is_pyyaml_dump_of_the_whole_mapping(tmp_path, single):
    """save dumps the features once per schema and the rest each time: the text must be what
    dumping the whole header gives, also for names that look like YAML or like its fields."""
    names = ["a", "é✓", "x y", "'q'", "k: v", "1", "- z", "#h", "null", "features",
             "super_serial_features", "n" * 120]
    columns = np.zeros((3, 2), np.float32)
    dataset = tf.data.Dataset.from_tensor_slices(
        columns if single else {name: columns for name in names})
    _, header_path, written = _save(dataset, tmp_path, num_shards=2)
    comment, body = _read(header_path).decode().split("\n", 1)
    assert comment.startswith("# super_serial header")
    if not single:  # the structure's dict in its own order, which sort_keys would sort
        assert list(written["structure"]) == names and names != sorted(names)
    assert body == yaml.safe_dump(_sorted_but_the_structure(written), sort_keys=False,
                                  default_flow_style=None, allow_unicode=True, width=100)
    assert yaml.safe_load(body) == written


def _sorted_but_the_structure(node, structure=False):
    if isinstance(node, dict):
        return {k: _sorted_but_the_structure(node[k], structure or k == "structure")
                for k in (node if structure else sorted(node))}
    return [_sorted_but_the_structure(v, structure) for v in node] if isinstance(
        node, list) else node


def test_header_keys_are_sorted(tmp_path):
    _, header, _ = _save(_mixed(), tmp_path)
    lines = _read(header).decode().splitlines()
    top = [line.split(":")[0] for line in lines if line and line[0] not in "# -"]
    assert top == sorted(top)
    assert top == ["block_records", "compression", "features", "format", "layout",
                   "num_records", "shards", "structure", "version"]


# --------------------------------------------------------------------------------------------
# Fields
# --------------------------------------------------------------------------------------------


def test_header_fields(tmp_path):
    tfrecord, header_path, written = _save(_mixed(), tmp_path)
    with open(header_path, "rb") as f:
        header = yaml.safe_load(f)
    assert header == written
    assert header["format"] == "super_serial"
    assert header["version"] == 3
    assert header["num_records"] == 5
    assert header["compression"] is None
    assert header["structure"] == [
        {"big": "0/big", "image": "0/image", "ragged": "0/ragged", "text": "0/text",
         "unknown": "0/unknown"},
        "1",
    ]
    assert header["features"] == {
        "0/big": {"path": [0, "big"], "dtype": "uint64", "dtype_enum": 23, "shape": [],
                  "encoding": "raw"},
        "0/image": {"path": [0, "image"], "dtype": "uint8", "dtype_enum": 4, "shape": [2, 3],
                    "encoding": "raw"},
        "0/ragged": {"path": [0, "ragged"], "dtype": "int32", "dtype_enum": 3,
                     "shape": [None, None], "encoding": "int64", "ragged_rank": 1,
                     "row_splits_dtype": "int32"},
        "0/text": {"path": [0, "text"], "dtype": "string", "dtype_enum": 7, "shape": [],
                   "encoding": "bytes"},
        "0/unknown": {"path": [0, "unknown"], "dtype": "float64", "dtype_enum": 2,
                      "shape": [None, 2], "encoding": "raw"},
        "1": {"path": [1], "dtype": "float64", "dtype_enum": 2, "shape": [], "encoding": "raw"},
    }
    assert header["shards"] == [{"file": "data.tfrecord", "num_records": 5,
                                 "num_bytes": os.path.getsize(tfrecord)}]
    assert header["layout"] in ("round_robin", "sequential")
    assert isinstance(header["block_records"], int) and header["block_records"] >= 1


def test_unknown_dims_are_null_in_yaml(tmp_path):
    _, header_path, _ = _save(_mixed(), tmp_path)
    text = _read(header_path).decode()
    assert "shape: [null, 2]" in text or "- null\n" in text
    assert yaml.safe_load(text)["features"]["0/unknown"]["shape"] == [None, 2]


def test_dtype_names_enums_and_encodings(tmp_path):
    columns = {name: tf.zeros([2, 1], tf.as_dtype(name)) for name in ENCODINGS}
    _, header_path, _ = _save(tf.data.Dataset.from_tensor_slices(columns), tmp_path)
    features = super_serial.read_header(header_path)["features"]
    assert sorted(features) == sorted(ENCODINGS)
    for name, encoding in ENCODINGS.items():
        entry = features[name]
        assert entry["dtype"] == name
        assert entry["dtype_enum"] == tf.as_dtype(name).as_datatype_enum
        assert tf.as_dtype(entry["dtype_enum"]) == tf.as_dtype(name)
        assert entry["encoding"] == encoding, name
        assert entry["shape"] == [1]
        assert entry["path"] == [name]


@pytest.mark.parametrize("structure, expected", [
    ("tensor", "tensor"),
    ("dict", {"a": {"b": "a/b"}, "c": "c"}),
    ("tuple", [["0/0", "0/1"], {"x": "1/x"}]),
], ids=["single-tensor", "nested-dict", "nested-tuple"])
def test_structure_field(tmp_path, structure, expected):
    x = tf.data.Dataset.range(2)
    dataset = {
        "tensor": x,
        "dict": tf.data.Dataset.zip({"a": {"b": x}, "c": x}),
        "tuple": tf.data.Dataset.zip(((x, x), {"x": x})),
    }[structure]
    _, header_path, written = _save(dataset, tmp_path)
    assert written["structure"] == expected
    for name, feature in written["features"].items():
        node = written["structure"]
        for key in feature["path"]:
            node = node[key]
        assert node == name


def test_shards_field(tmp_path):
    tfrecord, header_path, written = _save(tf.data.Dataset.range(10), tmp_path, num_shards=2)
    names = ["data.tfrecord-00000-of-00002", "data.tfrecord-00001-of-00002"]
    assert [s["file"] for s in written["shards"]] == names
    assert sum(s["num_records"] for s in written["shards"]) == written["num_records"] == 10
    for shard in written["shards"]:
        assert shard["num_bytes"] == os.path.getsize(tmp_path / shard["file"])


def test_compression_field(tmp_path):
    _, header_path, written = _save(tf.data.Dataset.range(3), tmp_path, compression="gzip")
    assert written["compression"] == "GZIP"
    assert super_serial.read_header(header_path)["compression"] == "GZIP"


def test_empty_dataset_header(tmp_path):
    tfrecord, header_path, written = _save(_mixed().take(0), tmp_path)
    assert written["num_records"] == 0
    assert written["shards"][0]["num_records"] == 0
    assert written["shards"][0]["num_bytes"] == os.path.getsize(tfrecord) == 0
    assert len(written["features"]) == 6


# --------------------------------------------------------------------------------------------
# read_header
# --------------------------------------------------------------------------------------------


def test_header_is_safe_yaml(tmp_path):
    _, header_path, _ = _save(_mixed(), tmp_path)
    text = _read(header_path)
    assert b"!!" not in text  # no YAML tags: plain safe types only
    assert text.startswith(b"# super_serial header")
    assert yaml.safe_load(text)["format"] == "super_serial"


def test_read_header_returns_the_written_header(tmp_path):
    _, header_path, written = _save(_mixed(), tmp_path)
    with open(header_path, "rb") as f:
        on_disk = yaml.safe_load(f)
    assert super_serial.read_header(header_path) == on_disk == written
    from pathlib import Path
    assert super_serial.read_header(Path(header_path)) == written


def test_read_header_round_trips_through_yaml(tmp_path):
    """Dumping read_header's dict again gives a header that reads back the same."""
    _, header_path, written = _save(_mixed(), tmp_path)
    again = tmp_path / "again.yaml"
    again.write_text(yaml.safe_dump(super_serial.read_header(header_path)))
    assert super_serial.read_header(again) == written


def test_read_header_missing(tmp_path):
    with pytest.raises(super_serial.HeaderError, match="not found"):
        super_serial.read_header(tmp_path / "nope.yaml")


def test_features_are_dumped_once_per_schema(tmp_path):
    """PyYAML's emitter takes milliseconds for the features, so a schema saved again reuses
    their YAML text (`_features_yaml` is cached), and the header is the same."""
    from super_serial import core

    dataset = _mixed()
    super_serial.save(dataset, str(tmp_path / "a.tfrecord"))
    before = core._features_yaml.cache_info()
    super_serial.save(dataset, str(tmp_path / "b.tfrecord"))
    after = core._features_yaml.cache_info()
    assert (after.hits, after.misses) == (before.hits + 1, before.misses)
    header_a = (tmp_path / "a.tfrecord.header.yaml").read_text()
    header_b = (tmp_path / "b.tfrecord.header.yaml").read_text()
    assert header_a.replace("a.tfrecord", "b.tfrecord") == header_b

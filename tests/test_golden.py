"""Golden files pin the on-disk format: the original module's files and super_serial's own."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import yaml
from conftest import GOLDEN, assert_same_elements, example, golden_module, write_records

import super_serial

# Copied from ../shared/golden/original-module (files the original module wrote), so that
# a clone anywhere runs the suite
ORIGINAL = GOLDEN / "original-module"

# --------------------------------------------------------------------------------------------
# (a) Files written by the original super serial 2.0 module
# --------------------------------------------------------------------------------------------


def _original_xy():
    """The dataset the original files were written from (see their README)."""
    x = np.linspace(1, 3000, num=3000).reshape(10, 10, 10, 3)  # float64
    y = np.linspace(1, 10, num=10).astype(int)  # int64
    return x, y


def _load_original(**kwargs):
    return super_serial.load(str(ORIGINAL / "images.tfrecord"), str(ORIGINAL / "images.header"),
                             **kwargs)


def test_original_files_are_there():
    assert (ORIGINAL / "images.tfrecord").is_file(), ORIGINAL
    assert (ORIGINAL / "images.header").is_file(), ORIGINAL


def test_original_module_files_load():
    """10 elements; image float64 (10, 10, 3) == x[i], label int64 == y[i].

    The original module stored float64 as float32 FloatLists, so the exact expectation is x
    rounded to float32 and cast back to float64 (x holds the integers 1..3000, which float32
    represents exactly, so this also equals x itself).
    """
    x, y = _original_xy()
    loaded = _load_original()
    assert loaded.element_spec == {"image": tf.TensorSpec([10, 10, 3], tf.float64),
                                   "label": tf.TensorSpec([], tf.int64)}
    elements = list(loaded)
    assert len(elements) == 10
    expected_image = x.astype(np.float32).astype(np.float64)
    for i, element in enumerate(elements):
        image, label = element["image"].numpy(), element["label"].numpy()
        assert image.dtype == np.float64 and image.shape == (10, 10, 3)
        assert image.tobytes() == expected_image[i].tobytes(), f"image {i}"
        np.testing.assert_array_equal(image, x[i])
        assert label.dtype == np.int64 and label == y[i]
    expected = tf.data.Dataset.from_tensor_slices({"image": expected_image, "label": y})
    assert_same_elements(expected, loaded)


def test_original_module_files_load_original_dtypes_false():
    x, y = _original_xy()
    loaded = _load_original(original_dtypes=False)
    assert loaded.element_spec == {"image": tf.TensorSpec([10, 10, 3], tf.float32),
                                   "label": tf.TensorSpec([], tf.int64)}
    expected = tf.data.Dataset.from_tensor_slices({"image": x.astype(np.float32), "label": y})
    assert_same_elements(expected, loaded)


def test_original_module_files_load_batched():
    x, y = _original_xy()
    expected = tf.data.Dataset.from_tensor_slices(
        {"image": x.astype(np.float32).astype(np.float64), "label": y}).batch(4)
    assert_same_elements(expected, _load_original(batch_size=4))


def test_original_module_files_that_do_not_match_are_counted_once(tmp_path, monkeypatch):
    """load reads a header again where its files do not match it (a save in another process
    may be putting new ones in place), but not the original module's, whose records it counts
    by reading the whole file each time: such a file is refused after one count."""
    shutil.copy(ORIGINAL / "images.tfrecord", tmp_path / "images.tfrecord")
    header = yaml.safe_load((ORIGINAL / "images.header").read_text())
    header["image"]["shape"] = [10, 10, 300]  # more bytes a record than the file holds
    (tmp_path / "images.header").write_text(yaml.safe_dump(header))
    counted, real_count = [], super_serial.core._count_records
    monkeypatch.setattr(super_serial.core, "_count_records",
                        lambda *args: counted.append(1) or real_count(*args))
    with pytest.raises(super_serial.CorruptDataError, match="cannot hold the 10 records"):
        super_serial.load(str(tmp_path / "images.tfrecord"), str(tmp_path / "images.header"))
    assert len(counted) == 1


@pytest.mark.parametrize("names", [("format",), ("version",), ("format", "version")])
def test_original_module_features_named_format_or_version_load(tmp_path, names):
    """The original module's header is its features' names, each mapped to a shape and dtype:
    features named 'format' or 'version' (this format's own fields) are read as features.
    Written as that module wrote them (`yaml.dump`, one Example a record)."""
    header = {name: {"shape": [], "dtype": tf.int64.as_datatype_enum} for name in names}
    header["x"] = {"shape": [2], "dtype": tf.float32.as_datatype_enum}
    header_path, records = tmp_path / "data.header", tmp_path / "data.tfrecord"
    header_path.write_text(yaml.dump(header))
    write_records(records, [example({**{name: [i + k] for k, name in enumerate(names)},
                                     "x": [i, i + .5]}) for i in range(3)])
    expected = tf.data.Dataset.from_tensor_slices({
        **{name: np.arange(3, dtype=np.int64) + k for k, name in enumerate(names)},
        "x": np.array([[i, i + .5] for i in range(3)], np.float32)})
    assert_same_elements(expected, super_serial.load(str(records), str(header_path)))
    assert super_serial.read_header(header_path)["version"] == 0
    assert super_serial.verify(records, header_path)["num_records"] == 3


def test_original_module_header():
    header = super_serial.read_header(ORIGINAL / "images.header")
    assert header["version"] == 0
    assert header["structure"] == {"image": "image", "label": "label"}
    assert header["features"]["image"]["dtype"] == "float64"
    assert header["features"]["image"]["encoding"] == "float"
    assert header["features"]["image"]["shape"] == [10, 10, 3]
    assert header["features"]["label"]["dtype"] == "int64"
    assert header["features"]["label"]["encoding"] == "int64"


def test_original_module_files_verify():
    summary = super_serial.verify(ORIGINAL / "images.tfrecord", ORIGINAL / "images.header")
    assert summary["num_records"] == 10


def test_verify_counts_and_reads_without_autotuning(monkeypatch):
    """verify's reads, and counting an original-module file's records, are super_serial's own
    pipelines: tf.data's autotuning is off there, whose thread can hold up deleting the
    iterator at the end. Records are counted in blocks (a vector of records at a time), not
    with a function call for each."""
    passes = []
    real_iter, real_reduce = tf.data.Dataset.__iter__, tf.data.Dataset.reduce
    monkeypatch.setattr(tf.data.Dataset, "__iter__", lambda self: (
        passes.append(("iter", self.options().autotune.enabled)) or real_iter(self)))
    monkeypatch.setattr(tf.data.Dataset, "reduce", lambda self, *args, **kwargs: (
        passes.append(("reduce", self.options().autotune.enabled, self.element_spec.shape))
        or real_reduce(self, *args, **kwargs)))
    summary = super_serial.verify(ORIGINAL / "images.tfrecord", ORIGINAL / "images.header")
    assert summary["num_records"] == 10
    assert passes == [("reduce", False, tf.TensorShape([None])), ("iter", False)]


# --------------------------------------------------------------------------------------------
# (b) super_serial's own formats: tests/golden/v<N>, written by tests/golden/make_golden.py
#     when version N was current. Every version keeps loading; today's save writes the newest.
# --------------------------------------------------------------------------------------------

RECORDS_SHA256 = {
    1: "da7be4d855ddf1080be0c47dcfdc70fecc7e86df62b261bcb5cc1e7545d3d765",
    2: "a717d7ae5ab159c7cbef65d5aa47bdbbec0294d716ba66cd259ec2ac8b4928d7",
    3: "9c2b1338173c2137dae8397b5b9dcf2aec3276f76280efe4614e6ecc611b7ce7",
    4: "1c06ce55f5ae0f31a26546713b4299b6c1758e71efa8a63a535d4a56a0b7a805",
    5: "77fd5d2df753bcc747dcf93ce94a2fbaee593e520c3f23181a381a7fa857d04c",
    6: "bb29394f8892a1b2292e873f7c7b87c2b8e8b46ee3c0610b292205a2d682bc3d",
    7: "bb29394f8892a1b2292e873f7c7b87c2b8e8b46ee3c0610b292205a2d682bc3d",  # v6's records
}
VERSIONS = sorted(RECORDS_SHA256)
V1_HEADER = (
    '# super_serial header: the schema of the tf.train.Example records beside it.\n'
    'block_records: 126\n'
    'compression: null\n'
    'features:\n'
    '  0/b16:\n'
    '    dtype: bfloat16\n'
    '    dtype_enum: 14\n'
    '    encoding: raw\n'
    '    path: [0, b16]\n'
    '    shape: [1]\n'
    '  0/f32:\n'
    '    dtype: float32\n'
    '    dtype_enum: 1\n'
    '    encoding: float\n'
    '    path: [0, f32]\n'
    '    shape: []\n'
    '  0/f64:\n'
    '    dtype: float64\n'
    '    dtype_enum: 2\n'
    '    encoding: raw\n'
    '    path: [0, f64]\n'
    '    shape: [2]\n'
    '  0/flag:\n'
    '    dtype: bool\n'
    '    dtype_enum: 10\n'
    '    encoding: int64\n'
    '    path: [0, flag]\n'
    '    shape: []\n'
    '  0/i8:\n'
    '    dtype: int8\n'
    '    dtype_enum: 6\n'
    '    encoding: int64\n'
    '    path: [0, i8]\n'
    '    shape: []\n'
    '  0/ragged:\n'
    '    dtype: int64\n'
    '    dtype_enum: 9\n'
    '    encoding: int64\n'
    '    path: [0, ragged]\n'
    '    ragged_rank: 1\n'
    '    row_splits_dtype: int32\n'
    '    shape: [null, null]\n'
    '  0/text:\n'
    '    dtype: string\n'
    '    dtype_enum: 7\n'
    '    encoding: bytes\n'
    '    path: [0, text]\n'
    '    shape: [2]\n'
    '  0/u64:\n'
    '    dtype: uint64\n'
    '    dtype_enum: 23\n'
    '    encoding: raw\n'
    '    path: [0, u64]\n'
    '    shape: []\n'
    '  0/unknown:\n'
    '    dtype: float32\n'
    '    dtype_enum: 1\n'
    '    encoding: float\n'
    '    path: [0, unknown]\n'
    '    shape: [null]\n'
    "  '1':\n"
    '    dtype: int64\n'
    '    dtype_enum: 9\n'
    '    encoding: int64\n'
    '    path: [1]\n'
    '    shape: []\n'
    'format: super_serial\n'
    'layout: round_robin\n'
    'num_records: 4\n'
    'shards:\n'
    '- {file: golden.tfrecord, num_bytes: 1149, num_records: 4}\n'
    'structure:\n'
    '- {b16: 0/b16, f32: 0/f32, f64: 0/f64, flag: 0/flag, i8: 0/i8, ragged: 0/ragged, '
    'text: 0/text, u64: 0/u64,\n'
    '  unknown: 0/unknown}\n'
    "- '1'\n"
    'version: 1\n'
)
V2_HEADER = (
    '# super_serial header: the schema of the tf.train.Example records beside it.\n'
    'block_records: 125\n'
    'compression: null\n'
    'features:\n'
    '  0/b16:\n'
    '    dtype: bfloat16\n'
    '    dtype_enum: 14\n'
    '    encoding: raw\n'
    '    path: [0, b16]\n'
    '    shape: [1]\n'
    '  0/f32:\n'
    '    dtype: float32\n'
    '    dtype_enum: 1\n'
    '    encoding: float\n'
    '    path: [0, f32]\n'
    '    shape: []\n'
    '  0/f64:\n'
    '    dtype: float64\n'
    '    dtype_enum: 2\n'
    '    encoding: raw\n'
    '    path: [0, f64]\n'
    '    shape: [2]\n'
    '  0/flag:\n'
    '    dtype: bool\n'
    '    dtype_enum: 10\n'
    '    encoding: int64\n'
    '    path: [0, flag]\n'
    '    shape: []\n'
    '  0/i8:\n'
    '    dtype: int8\n'
    '    dtype_enum: 6\n'
    '    encoding: raw\n'
    '    path: [0, i8]\n'
    '    shape: []\n'
    '  0/ragged:\n'
    '    dtype: int64\n'
    '    dtype_enum: 9\n'
    '    encoding: int64\n'
    '    path: [0, ragged]\n'
    '    ragged_rank: 1\n'
    '    row_splits_dtype: int32\n'
    '    shape: [null, null]\n'
    '  0/text:\n'
    '    dtype: string\n'
    '    dtype_enum: 7\n'
    '    encoding: bytes\n'
    '    path: [0, text]\n'
    '    shape: [2]\n'
    '  0/u64:\n'
    '    dtype: uint64\n'
    '    dtype_enum: 23\n'
    '    encoding: raw\n'
    '    path: [0, u64]\n'
    '    shape: []\n'
    '  0/u8:\n'
    '    dtype: uint8\n'
    '    dtype_enum: 4\n'
    '    encoding: raw\n'
    '    path: [0, u8]\n'
    '    shape: [2, 2]\n'
    '  0/unknown:\n'
    '    dtype: float32\n'
    '    dtype_enum: 1\n'
    '    encoding: float\n'
    '    path: [0, unknown]\n'
    '    shape: [null]\n'
    "  '1':\n"
    '    dtype: int64\n'
    '    dtype_enum: 9\n'
    '    encoding: int64\n'
    '    path: [1]\n'
    '    shape: []\n'
    'format: super_serial\n'
    'layout: round_robin\n'
    'num_records: 4\n'
    'shards:\n'
    '- {file: golden.tfrecord, num_bytes: 1203, num_records: 4}\n'
    'structure:\n'
    '- {b16: 0/b16, f32: 0/f32, f64: 0/f64, flag: 0/flag, i8: 0/i8, ragged: 0/ragged, '
    'text: 0/text, u64: 0/u64,\n'
    '  u8: 0/u8, unknown: 0/unknown}\n'
    "- '1'\n"
    'version: 2\n'
)
V3_HEADER = (
    '# super_serial header: the schema of the tf.train.Example records beside it.\n'
    'block_records: 125\n'
    'compression: null\n'
    'features:\n'
    '  0/b16:\n'
    '    dtype: bfloat16\n'
    '    dtype_enum: 14\n'
    '    encoding: raw\n'
    '    path: [0, b16]\n'
    '    shape: [1]\n'
    '  0/f32:\n'
    '    dtype: float32\n'
    '    dtype_enum: 1\n'
    '    encoding: float\n'
    '    path: [0, f32]\n'
    '    shape: []\n'
    '  0/f64:\n'
    '    dtype: float64\n'
    '    dtype_enum: 2\n'
    '    encoding: raw\n'
    '    path: [0, f64]\n'
    '    shape: [2]\n'
    '  0/flag:\n'
    '    dtype: bool\n'
    '    dtype_enum: 10\n'
    '    encoding: int64\n'
    '    path: [0, flag]\n'
    '    shape: []\n'
    '  0/i16:\n'
    '    dtype: int16\n'
    '    dtype_enum: 5\n'
    '    encoding: raw\n'
    '    path: [0, i16]\n'
    '    shape: [3]\n'
    '  0/i8:\n'
    '    dtype: int8\n'
    '    dtype_enum: 6\n'
    '    encoding: raw\n'
    '    path: [0, i8]\n'
    '    shape: []\n'
    '  0/ragged:\n'
    '    dtype: int64\n'
    '    dtype_enum: 9\n'
    '    encoding: int64\n'
    '    path: [0, ragged]\n'
    '    ragged_rank: 1\n'
    '    row_splits_dtype: int32\n'
    '    shape: [null, null]\n'
    '  0/text:\n'
    '    dtype: string\n'
    '    dtype_enum: 7\n'
    '    encoding: bytes\n'
    '    path: [0, text]\n'
    '    shape: [2]\n'
    '  0/u16:\n'
    '    dtype: uint16\n'
    '    dtype_enum: 17\n'
    '    encoding: raw\n'
    '    path: [0, u16]\n'
    '    shape: []\n'
    '  0/u64:\n'
    '    dtype: uint64\n'
    '    dtype_enum: 23\n'
    '    encoding: raw\n'
    '    path: [0, u64]\n'
    '    shape: []\n'
    '  0/u8:\n'
    '    dtype: uint8\n'
    '    dtype_enum: 4\n'
    '    encoding: raw\n'
    '    path: [0, u8]\n'
    '    shape: [2, 2]\n'
    '  0/unknown:\n'
    '    dtype: float32\n'
    '    dtype_enum: 1\n'
    '    encoding: float\n'
    '    path: [0, unknown]\n'
    '    shape: [null]\n'
    "  '1':\n"
    '    dtype: int64\n'
    '    dtype_enum: 9\n'
    '    encoding: int64\n'
    '    path: [1]\n'
    '    shape: []\n'
    'format: super_serial\n'
    'layout: round_robin\n'
    'num_records: 4\n'
    'shards:\n'
    '- {file: golden.tfrecord, num_bytes: 1355, num_records: 4}\n'
    'structure:\n'
    '- {b16: 0/b16, f32: 0/f32, f64: 0/f64, flag: 0/flag, i16: 0/i16, i8: 0/i8, ragged: 0/ragged, '
    'text: 0/text,\n'
    '  u16: 0/u16, u64: 0/u64, u8: 0/u8, unknown: 0/unknown}\n'
    "- '1'\n"
    'version: 3\n'
)
# Version 4's header is version 3's with the sparse feature's entry (and its place in the
# structure, and the block size it changes): the entry as the README gives it, then its bytes.
V4_SPARSE_ENTRY = (
    '  0/sparse:\n'
    '    dtype: float64\n'
    '    dtype_enum: 2\n'
    '    encoding: raw\n'
    '    path: [0, sparse]\n'
    '    shape: [null, 3]\n'
    '    sparse: true\n'
)
V4_HEADER_SHA256 = "74250653d405cc372b8aafd423b4a85d76f512fa2f07361c8f62dee0f443dadc"
# Version 5's adds the namedtuples (and the Span's features): the entry, then its bytes.
V5_NAMEDTUPLES_ENTRY = (
    'namedtuples:\n'
    '- fields: [features, label]\n'
    '  name: Labeled\n'
    '  path: []\n'
    '- fields: [start, stop]\n'
    '  name: Span\n'
    '  path: [0, span]\n'
)
V5_HEADER_SHA256 = "2acbc76cff503ed58913df234756d1ec28954184ecbf6a0fb4f9329c1006ecea"
# Version 6's adds a qint8 feature
V6_QUANTIZED_ENTRY = (
    '  0/q8:\n'
    '    dtype: qint8\n'
    '    dtype_enum: 11\n'
    '    encoding: raw\n'
    '    path: [0, q8]\n'
    '    shape: [2]\n'
)
V6_HEADER_SHA256 = "13db7099c4a39688004d8c267fa0f834364798c88732760c0fe914c1ddb840bf"
# Version 7's adds parts with no tensor to the structure, and an empty namedtuple
V7_EMPTY_PARTS_ENTRIES = (
    '  empty_dict: {}\n'
    '  empty_tuple: []\n',
    '  none: null\n'
    '  nothing: []\n',
    '- fields: []\n'
    '  name: Nothing\n'
    '  path: [0, nothing]\n',
)
V7_HEADER_SHA256 = "0694cb8e47541e2cb7c56fcad3bd45411b7346835c1f55fdb811fc1139715a5e"
HEADERS = {1: V1_HEADER, 2: V2_HEADER, 3: V3_HEADER}


def _folder(version: int) -> Path:
    return GOLDEN / f"v{version}"


def test_every_version_has_golden_files_and_the_newest_is_current():
    assert sorted(p.name for p in GOLDEN.iterdir() if p.is_dir()) == [
        "original-module", *(f"v{v}" for v in VERSIONS)]
    assert golden_module().VERSION == VERSIONS[-1] == super_serial.core.FORMAT_VERSION


@pytest.mark.parametrize("version", VERSIONS)
def test_golden_files_are_small(version):
    sizes = {p.name: p.stat().st_size for p in _folder(version).iterdir()}
    assert sorted(sizes) == ["golden.tfrecord", "golden.tfrecord.header.yaml"]
    assert sum(sizes.values()) < 10_000


@pytest.mark.parametrize("version", VERSIONS)
def test_golden_header_bytes_are_pinned(version):
    text = (_folder(version) / "golden.tfrecord.header.yaml").read_text(encoding="utf-8")
    if version in HEADERS:
        assert text == HEADERS[version]
    elif version == 4:
        assert V4_SPARSE_ENTRY in text and text.endswith("\nversion: 4\n")
        assert hashlib.sha256(text.encode()).hexdigest() == V4_HEADER_SHA256
    elif version == 5:
        assert V4_SPARSE_ENTRY in text and V5_NAMEDTUPLES_ENTRY in text
        assert text.endswith("\nversion: 5\n")
        assert hashlib.sha256(text.encode()).hexdigest() == V5_HEADER_SHA256
    elif version == 6:
        assert V4_SPARSE_ENTRY in text and V5_NAMEDTUPLES_ENTRY in text
        assert V6_QUANTIZED_ENTRY in text and text.endswith("\nversion: 6\n")
        assert hashlib.sha256(text.encode()).hexdigest() == V6_HEADER_SHA256
    else:  # its namedtuples: the Nothing of V7_EMPTY_PARTS_ENTRIES between version 5's two
        assert V4_SPARSE_ENTRY in text and V5_NAMEDTUPLES_ENTRY not in text
        assert V6_QUANTIZED_ENTRY in text and text.endswith("\nversion: 7\n")
        assert all(entry in text for entry in V7_EMPTY_PARTS_ENTRIES)
        assert hashlib.sha256(text.encode()).hexdigest() == V7_HEADER_SHA256


@pytest.mark.parametrize("version", VERSIONS)
def test_golden_record_bytes_are_pinned(version):
    data = (_folder(version) / "golden.tfrecord").read_bytes()
    assert hashlib.sha256(data).hexdigest() == RECORDS_SHA256[version]


def test_save_writes_the_newest_golden_bytes(tmp_path):
    make_golden = golden_module()
    make_golden.main(tmp_path)
    for name in ("golden.tfrecord", "golden.tfrecord.header.yaml"):
        assert (tmp_path / name).read_bytes() == (_folder(VERSIONS[-1]) / name).read_bytes(), (
            f"{name}: save() no longer writes the v{VERSIONS[-1]} golden bytes"
        )


@pytest.mark.parametrize("version", [3, 4, 5, 6])
def test_save_writes_earlier_version_bytes_without_what_later_ones_added(tmp_path, version):
    """A header says the lowest version that reads it: without a sparse feature, today's save
    writes exactly version 3's files, without a namedtuple version 4's, without a quantized
    feature version 5's, and without a part that holds no tensor version 6's, which readers
    of those versions read."""
    path = str(tmp_path / "golden.tfrecord")
    super_serial.save(golden_module().golden_dataset(version), path)
    for name in ("golden.tfrecord", "golden.tfrecord.header.yaml"):
        assert (tmp_path / name).read_bytes() == (_folder(version) / name).read_bytes(), name


def test_v1_stored_8_bit_ints_as_int64_and_v2_stores_them_raw():
    def encodings(version):
        return {name: feature["encoding"] for name, feature in super_serial.read_header(
            _folder(version) / "golden.tfrecord.header.yaml")["features"].items()}

    assert encodings(1)["0/i8"] == "int64"
    assert encodings(2)["0/i8"] == encodings(2)["0/u8"] == "raw"
    assert {k: v for k, v in encodings(2).items() if k != "0/u8"} == {
        **encodings(1), "0/i8": "raw"}


def test_v2_stored_16_bit_ints_as_int64_and_v3_stores_them_raw(tmp_path):
    """Version 3 stores int16 and uint16 as their little-endian bytes, two a value (version 2
    wrote a 3-byte varint for a uint16 from 16,384 and 10 bytes for a negative int16); the
    other features are encoded as in version 2. A version-2 file with them still loads."""
    def encodings(version):
        return {name: feature["encoding"] for name, feature in super_serial.read_header(
            _folder(version) / "golden.tfrecord.header.yaml")["features"].items()}

    assert encodings(3)["0/i16"] == encodings(3)["0/u16"] == "raw"
    assert {k: v for k, v in encodings(3).items() if k not in ("0/i16", "0/u16")} == encodings(2)
    path = str(tmp_path / "v2.tfrecord")
    dataset = tf.data.Dataset.from_tensor_slices({
        "i16": np.array([[-32768, 32767], [-1, 0]], np.int16),
        "u16": np.array([65535, 16384], np.uint16)})
    super_serial.save(dataset, path)
    records = [tf.train.Example.FromString(r.numpy()).features.feature
               for r in tf.data.TFRecordDataset(path)]
    assert records[0]["i16"].bytes_list.value == [b"\x00\x80\xff\x7f"]
    assert records[1]["u16"].bytes_list.value == [b"\x00\x40"]
    # as version 2 wrote it: Int64Lists, and a header that says so
    size = write_records(path, [example({"i16": i16, "u16": [u16]})
                                for i16, u16 in ([[-32768, 32767], 65535], [[-1, 0], 16384])])
    header = super_serial.read_header(path + ".header.yaml")
    header["version"] = 2
    for name in ("i16", "u16"):
        header["features"][name]["encoding"] = "int64"
    header["shards"][0]["num_bytes"] = size
    Path(path + ".header.yaml").write_text(yaml.safe_dump(header))
    assert_same_elements(dataset, super_serial.load(path))


@pytest.mark.parametrize("version", VERSIONS)
def test_golden_files_load(tmp_path, version):
    make_golden = golden_module()
    copy = tmp_path / f"v{version}"
    shutil.copytree(_folder(version), copy)  # load from a copy: nothing may depend on the folder
    loaded = super_serial.load(str(copy / "golden.tfrecord"))
    assert_same_elements(make_golden.golden_dataset(version), loaded)
    in_place = super_serial.load(str(_folder(version) / "golden.tfrecord"))
    assert_same_elements(make_golden.golden_dataset(version), in_place)


@pytest.mark.parametrize("version", VERSIONS)
def test_golden_files_load_expected_values(version):
    """A few values spelled out, independent of make_golden.py."""
    elements = list(super_serial.load(str(_folder(version) / "golden.tfrecord")))
    assert len(elements) == 4
    features, label = elements[0]
    assert features["f64"].numpy().tolist() == [0.1, 1e300]
    assert features["u64"].numpy() == 2**64 - 1
    assert features["text"].numpy().tolist() == [b"", b"\x00"]
    assert features["unknown"].numpy().shape == (0,)
    assert features["ragged"].to_list() == [[1, 2], []]
    assert features["ragged"].row_splits.dtype == tf.int32
    assert label.numpy() == 0
    f64_nan = elements[3][0]["f64"].numpy()[1]
    assert np.array(f64_nan).view(np.uint64) == 0x7FF8000000000001
    assert np.array(elements[0][0]["f32"].numpy()).view(np.uint32) == 0x7FC00001
    assert elements[3][0]["ragged"].to_list() == [[-(2**63)], [2**63 - 1, 0]]
    assert [tuple(e[0]["unknown"].shape) for e in elements] == [(0,), (1,), (3,), (2,)]
    assert [int(e[0]["i8"].numpy()) for e in elements] == [-128, 127, 0, -1]
    if version >= 2:
        assert features["u8"].dtype == tf.uint8
        assert features["u8"].numpy().tolist() == [[0, 255], [128, 7]]
    if version >= 4:
        sparse = features["sparse"]
        assert sparse.indices.numpy().tolist() == [[1, 2], [0, 0]]  # in the order given
        assert sparse.values.numpy().tolist() == [0.1, -0.0]
        assert np.signbit(sparse.values.numpy()[1])
        assert sparse.dense_shape.numpy().tolist() == [2, 3]
        assert elements[1][0]["sparse"].values.shape == (0,)
        assert elements[3][0]["sparse"].dense_shape.numpy().tolist() == [4, 3]
    if version >= 5:
        assert type(elements[0]).__name__ == "Labeled"
        assert type(elements[0])._fields == ("features", "label")
        assert elements[0].label.numpy() == 0
        span = elements[3].features["span"]
        assert type(span).__name__ == "Span" and type(span)._fields == ("start", "stop")
        assert (span.start.numpy(), span.stop.numpy()) == (2**31 - 1, -(2**31))
        assert span.start.dtype == tf.int32
    else:
        assert type(elements[0]) is tuple
    if version >= 6:
        assert features["q8"].dtype == tf.qint8
        assert [tf.bitcast(e[0]["q8"], tf.int8).numpy().tolist() for e in elements] == [
            [-128, 127], [0, -1], [1, 2], [-3, 100]]
    if version >= 7:
        for element in elements:
            parts = element.features
            assert parts["none"] is None
            assert parts["empty_dict"] == {} and parts["empty_tuple"] == ()
            assert type(parts["empty_tuple"]) is tuple
            assert type(parts["nothing"]).__name__ == "Nothing" and not parts["nothing"]
            assert type(parts["nothing"])._fields == ()
        assert list(elements[0].features)[:3] == ["b16", "empty_dict", "empty_tuple"]
    else:
        assert "none" not in features


@pytest.mark.parametrize("version", VERSIONS)
def test_golden_files_load_batched(version):
    make_golden = golden_module()
    assert_same_elements(make_golden.golden_dataset(version).ragged_batch(3),
                         super_serial.load(str(_folder(version) / "golden.tfrecord"),
                                           batch_size=3))


@pytest.mark.parametrize("dtype", [tf.bool, tf.int8, tf.uint16, tf.int32, tf.uint64, tf.int64,
                                   tf.float16, tf.float32, tf.float64, tf.string],
                         ids=lambda d: d.name)
def test_original_module_files_of_every_saveable_dtype_load(tmp_path, dtype):
    """Original-module files of each dtype that module could save load, written as it wrote them
    (FloatList for floats, Int64List for integers and bools, BytesList for strings). The golden
    files hold no bool: a check that refused it passed every test (helper-122)."""
    values = np.array([[1, 0], [0, 1], [1, 1]]).astype(dtype.as_numpy_dtype)
    if dtype == tf.string:
        values = np.array([[b"a", b""], [b"bc", b"d"], [b"", b"e"]], dtype=object)
    header_path, records = tmp_path / "data.header", tmp_path / "data.tfrecord"
    header_path.write_text(yaml.dump({"x": {"shape": [2], "dtype": dtype.as_datatype_enum}}))
    write_records(records, [example({"x": row}) for row in values])
    assert super_serial.read_header(header_path)["version"] == 0
    expected = tf.data.Dataset.from_tensor_slices({"x": tf.constant(values, dtype)})
    assert_same_elements(expected, super_serial.load(str(records), str(header_path)))

"""Headers are data, never code: every field is validated and every bad header is a HeaderError."""

from __future__ import annotations

import collections
import copy
import re
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import yaml
from conftest import copy_pair, edit_header, example, fifo_at, save_pair, write_records

from super_serial import (
    CorruptDataError,
    HeaderError,
    core,
    load,
    merge,
    read_header,
    save,
    verify,
)

N = 4
DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "bfloat16", "float32", "float64", "complex64", "complex128", "string",
          "qint8", "quint8", "qint32")
ENCODINGS = core.ENCODINGS  # every pairing with every dtype is tried


def dataset() -> tf.data.Dataset:
    ragged = tf.ragged.constant([[[1], [2, 3]], [[3]], [], [[4], [5, 6]]], dtype=tf.int32)
    ds = tf.data.Dataset.from_tensor_slices({
        "x": np.arange(2 * N, dtype=np.float32).reshape(N, 2),  # fixed, FloatList
        "y": np.arange(N),  # fixed, Int64List
        "z": np.arange(N) / 3,  # fixed, raw float64
        "s": [b"a", b"b", b"", b"d"],  # fixed, BytesList
        "r": ragged,  # ragged [None, None]
    })
    return ds.map(lambda d: {**d, "v": tf.zeros([d["y"]], tf.int32)})  # unknown shape [None]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return save_pair(tmp_path_factory.mktemp("pristine"), dataset())


@pytest.fixture
def saved(paths, pristine):
    """(tfrecord_path, header_path, the header as a dict), freshly copied for each test."""
    tfrecord_path, header_path = copy_pair(pristine, paths)
    return tfrecord_path, header_path, yaml.safe_load(Path(header_path).read_text())


class NoAliasDumper(yaml.SafeDumper):
    """Writes objects that appear twice in full, as save does, instead of as YAML aliases."""

    def ignore_aliases(self, data):
        return True


def write(header_path, content):
    """Writes a header: bytes or text as they are, anything else as YAML (without aliases)."""
    if isinstance(content, bytes):
        Path(header_path).write_bytes(content)
    elif isinstance(content, str):
        Path(header_path).write_text(content)
    else:
        Path(header_path).write_text(yaml.dump(content, Dumper=NoAliasDumper))


def assert_header_error(tfrecord_path, header_path, match: str):
    """read_header and load both raise a one-line HeaderError naming the file and matching."""
    for call in (lambda: read_header(header_path), lambda: load(tfrecord_path, header_path)):
        with pytest.raises(HeaderError) as info:
            call()
        message = str(info.value)
        assert message.startswith(f"{header_path}: "), message
        assert "\n" not in message and len(message) < 400, message
        assert info.match(match)


def test_the_saved_header_is_valid(saved, yaml_loader):
    tfrecord_path, header_path, header = saved
    assert read_header(header_path) == header
    assert len(list(load(tfrecord_path, header_path))) == N


# ---- YAML that would run code ------------------------------------------------------------------

UNSAFE = [
    "!!python/object/apply:os.system ['touch {pwned}']",
    "!!python/object/apply:subprocess.call [['touch', '{pwned}']]",
    "!!python/object/new:os.system ['touch {pwned}']",
    "!!python/name:os.system",
    "!!python/module:os",
    "!!python/object:argparse.Namespace {{a: 1}}",
]


@pytest.mark.parametrize("tag", UNSAFE)
@pytest.mark.parametrize("where", ["document", "format", "shape", "legacy"])
def test_yaml_tags_never_run(saved, tmp_path_factory, tag, where, yaml_loader):
    tfrecord_path, header_path, header = saved
    pwned = tmp_path_factory.mktemp("pwned") / "pwned"
    value = tag.format(pwned=pwned)
    text = yaml.safe_dump(header)
    if where == "document":
        text = value + "\n"
    elif where == "format":
        text = text.replace("format: super_serial", f"format: {value}")
    elif where == "shape":
        text = text.replace("shape:\n    - 2\n", f"shape: {value}\n")
    else:
        text = f"x:\n  dtype: 1\n  shape: {value}\n"
    assert value in text
    write(header_path, text)
    assert_header_error(tfrecord_path, header_path, r"tag")
    assert not pwned.exists(), "a YAML tag in a header ran a command"


# ---- every field of the current format ---------------------------------------------------------


@pytest.mark.parametrize("length, shown", [(58, "'" + "x" * 58 + "'"),
                                           (59, "'" + "x" * 56 + "...")])
def test_a_value_is_quoted_whole_up_to_60_characters(saved, length, shown):
    """Messages quote a header's value by its repr, cut to 57 characters and '...' past 60
    (helper-123: a mutant cutting one of 60 passed)."""
    tfrecord_path, header_path, header = saved
    write(header_path, {**header, "format": "x" * length})
    assert_header_error(tfrecord_path, header_path,
                        re.escape(f"field 'format': expected 'super_serial', found {shown}") + "$")


def setter(*keys, value=None, delete=False):
    def change(header):
        node = header
        for key in keys[:-1]:
            node = node[key]
        if delete:
            del node[keys[-1]]
        else:
            node[keys[-1]] = copy.deepcopy(value)

    return change


def both(*changes):
    def change(header):
        for c in changes:
            c(header)

    return change


def set_counts(total, *per_shard):
    def change(header):
        header["num_records"] = total
        for shard, count in zip(header["shards"], per_shard):
            shard["num_records"] = count

    return change


def duplicate_shard(header):
    header["shards"] = [dict(header["shards"][0]), dict(header["shards"][0])]
    header["num_records"] *= 2


def mixed_feature_keys(header):
    header["features"][1] = copy.deepcopy(header["features"]["x"])


def clashing_keys(header):
    # feature "v" (unknown shape) stores its shape under the key "v#shape"; a second feature
    # of that name would be parsed from the same key.
    header["features"]["v#shape"] = dict(copy.deepcopy(header["features"]["y"]), path=["v#shape"])
    header["structure"]["v#shape"] = "v#shape"


def ragged_scalar(header):
    # it said "with ragged_rank 0 only the first dim may be unknown", of a shape of no dims
    header["features"]["r"].update(shape=[], ragged_rank=0)


HUGE = 2**63  # one more than int64 holds

FIELD_EDITS = {
    # name: (edit, the field the message must name[, what it must say of it: where another
    # field's check could refuse the edit too, each must be the one that does])
    "version_unknown": (setter("version", value=core.FORMAT_VERSION + 1), "version"),
    "version_zero": (setter("version", value=0), "version"),
    "version_str": (setter("version", value="1"), "version"),
    "version_bool": (setter("version", value=True), "version"),
    "version_missing": (setter("version", delete=True), "version"),
    "format_other": (setter("format", value="tfds"), "format"),
    "format_missing": (setter("format", delete=True), "format"),
    "features_list": (setter("features", value=["x"]), "features"),
    "features_missing": (setter("features", delete=True), "features"),
    "feature_not_mapping": (setter("features", "x", value=[1, 2]), r"features\.x"),
    "features_mixed_keys": (mixed_feature_keys, "features",
                            "every feature name must be a string"),
    "dtype_unknown": (setter("features", "x", "dtype", value="float128"), r"features\.x\.dtype"),
    "dtype_int": (setter("features", "x", "dtype", value=1), r"features\.x\.dtype"),
    "dtype_missing": (setter("features", "x", "dtype", delete=True), r"features\.x\.dtype"),
    "dtype_enum_mismatch": (setter("features", "x", "dtype_enum", value=2),
                            r"features\.x\.dtype_enum"),
    "dtype_enum_str": (setter("features", "x", "dtype_enum", value="1"),
                       r"features\.x\.dtype_enum"),
    "shape_negative": (setter("features", "x", "shape", value=[-1]), r"features\.x\.shape"),
    "shape_str_dim": (setter("features", "x", "shape", value=["2"]), r"features\.x\.shape"),
    "shape_float_dim": (setter("features", "x", "shape", value=[2.0]), r"features\.x\.shape"),
    "shape_bool_dim": (setter("features", "x", "shape", value=[True]), r"features\.x\.shape"),
    "shape_inf_dim": (setter("features", "x", "shape", value=[float("inf")]),
                      r"features\.x\.shape"),
    "shape_scalar": (setter("features", "x", "shape", value=2), r"features\.x\.shape"),
    "shape_missing": (setter("features", "x", "shape", delete=True), r"features\.x\.shape"),
    "shape_rank_64": (setter("features", "x", "shape", value=[1] * 64), r"features\.x\.shape"),
    "shape_absurd": (setter("features", "x", "shape", value=[2**40]), r"features\.x\.shape"),
    "shape_absurd_2d": (setter("features", "y", "shape", value=[2**20, 2**20]),
                        r"features\.y\.shape"),
    "shape_absurd_unknown": (setter("features", "v", "shape", value=[None, 2**40]),
                             r"features\.v\.shape"),
    "shape_beyond_int64_zero_size": (setter("features", "x", "shape", value=[0, HUGE]),
                                     r"features\.x\.shape"),
    "encoding_unknown": (setter("features", "x", "encoding", value="zip"),
                         r"features\.x\.encoding"),
    "encoding_for_other_dtype": (setter("features", "x", "encoding", value="bytes"),
                                 r"features\.x\.encoding"),
    "encoding_float_for_string": (setter("features", "s", "encoding", value="float"),
                                  r"features\.s\.encoding"),
    "encoding_missing": (setter("features", "x", "encoding", delete=True),
                         r"features\.x\.encoding"),
    "ragged_rank_too_big": (setter("features", "r", "ragged_rank", value=5),
                            r"features\.r\.ragged_rank"),
    "ragged_of_no_dims": (ragged_scalar, r"features\.r\.shape", "a ragged tensor needs a dim"),
    "ragged_rank_negative": (setter("features", "r", "ragged_rank", value=-1),
                             r"features\.r\.ragged_rank"),
    "row_splits_dtype": (setter("features", "r", "row_splits_dtype", value="int8"),
                         r"features\.r\.row_splits_dtype"),
    # a dense [None] list with row splits loaded batches as a ragged tensor of int32 splits
    "row_splits_dtype_of_dense": (setter("features", "v", "row_splits_dtype", value="int32"),
                                  r"features\.v\.row_splits_dtype"),
    "tensor_name_not_text": (setter("features", "x", "tensor_name", value=7),
                             r"features\.x\.tensor_name"),
    "tensor_name_of_ragged": (setter("features", "r", "tensor_name", value="r"),
                              r"features\.r\.tensor_name"),
    "path_mismatch": (setter("features", "x", "path", value=["q"]), r"features\.x\.path"),
    "path_str": (setter("features", "x", "path", value="x"), r"features\.x\.path"),
    "structure_missing_leaf": (setter("structure", "x", delete=True), "structure"),
    "structure_extra_leaf": (setter("structure", "q", value="q"), "structure"),
    "structure_int": (setter("structure", value=5), "structure"),
    "structure_missing": (setter("structure", delete=True), "structure"),
    "structure_empty_dict": (setter("structure", "x", value={}), r"structure\.x"),
    "structure_int_key": (setter("structure", 7, value="x"), "structure"),
    "structure_duplicate_leaf": (setter("structure", "q", value="x"), "structure"),
    "duplicate_record_keys": (clashing_keys, "features",
                              "two features write the same TFRecord key"),
    "num_records_mismatch": (setter("num_records", value=N + 1), "shards",
                             f"record counts add up to {N}, but num_records is {N + 1}"),
    "num_records_negative": (set_counts(-1, -1), "num_records", "must be >= 0, found -1"),
    "num_records_float": (setter("num_records", value=4.0), "num_records"),
    "num_records_missing": (setter("num_records", delete=True), "num_records"),
    "num_records_beyond_int64": (set_counts(HUGE, HUGE), "num_records",
                                 f"{HUGE} does not fit in 64 bits"),
    "compression_unknown": (setter("compression", value="LZ4"), "compression"),
    "compression_lowercase": (setter("compression", value="gzip"), "compression"),
    "compression_missing": (setter("compression", delete=True), "compression"),
    "block_records_zero": (setter("block_records", value=0), "block_records"),
    "block_records_negative": (setter("block_records", value=-3), "block_records"),
    "block_records_huge": (setter("block_records", value=2**40), "block_records"),
    "block_records_str": (setter("block_records", value="62"), "block_records"),
    "layout_unknown": (setter("layout", value="random"), "layout"),
    "shards_mapping": (setter("shards", value={"file": "data.tfrecord"}), "shards"),
    "shards_empty": (setter("shards", value=[]), "shards"),
    "shards_missing": (setter("shards", delete=True), "shards"),
    "shard_not_mapping": (setter("shards", 0, value="data.tfrecord"), r"shards\[0\]"),
    "shard_file_slash": (setter("shards", 0, "file", value="sub/data.tfrecord"),
                         r"shards\[0\]\.file"),
    "shard_file_parent": (setter("shards", 0, "file", value=".."), r"shards\[0\]\.file"),
    "shard_file_escape": (setter("shards", 0, "file", value="../data.tfrecord"),
                          r"shards\[0\]\.file"),
    "shard_file_absolute": (setter("shards", 0, "file", value="/etc/passwd"),
                            r"shards\[0\]\.file"),
    "shard_file_backslash": (setter("shards", 0, "file", value="..\\data.tfrecord"),
                             r"shards\[0\]\.file"),
    "shard_file_dot": (setter("shards", 0, "file", value="."), r"shards\[0\]\.file"),
    "shard_file_empty": (setter("shards", 0, "file", value=""), r"shards\[0\]\.file"),
    "shard_file_nul": (setter("shards", 0, "file", value="data\0.tfrecord"),
                       r"shards\[0\]\.file"),
    "shard_file_url": (setter("shards", 0, "file", value="gs://bucket/x"),
                       r"shards\[0\]\.file"),
    "shard_file_int": (setter("shards", 0, "file", value=3), r"shards\[0\]\.file"),
    "shard_duplicate_files": (duplicate_shard, r"shards"),
    "shard_count_negative": (setter("shards", 0, "num_records", value=-1), r"shards\[0\]"),
    "shard_bytes_negative": (setter("shards", 0, "num_bytes", value=-5), r"shards\[0\]"),
    "shard_bytes_str": (setter("shards", 0, "num_bytes", value="601"), r"shards\[0\]"),
    "shard_bytes_beyond_int64": (setter("shards", 0, "num_bytes", value=HUGE), r"shards\[0\]"),
    "shard_count_missing": (setter("shards", 0, "num_records", delete=True), r"shards\[0\]"),
}


@pytest.mark.parametrize("name", sorted(FIELD_EDITS))
def test_invalid_field(saved, name):
    tfrecord_path, header_path, header = saved
    change, field, *problem = FIELD_EDITS[name]
    change(header)
    write(header_path, header)
    said = f": {re.escape(problem[0])}$" if problem else ""
    assert_header_error(tfrecord_path, header_path, rf"field '({field})[^']*'{said}")


@pytest.mark.parametrize("value", ["0x" + "f" * 4_000, "-0b" + "1" * 15_000,
                                   "[" * 990 + "]" * 990])
@pytest.mark.parametrize(("keys", "field"), [
    (("num_records",), "num_records"), (("format",), "format"),
    (("features", "x", "path", 0), r"features\.x\.path"),
    (("features", "r", "ragged_rank"), r"features\.r\.ragged_rank"),
    (("features", "v", "shape"), r"features\.v\.shape"),
    (("shards", 0, "num_bytes"), r"shards\[0\]"),
])
def test_values_that_repr_cannot_show_are_named_in_a_header_error(saved, yaml_loader, keys,
                                                                  field, value):
    """A hand-edited value nested about 1,000 deep, or an int of more digits than Python
    writes out in decimal, made the message's `repr` raise a bare RecursionError or
    ValueError from read_header and load."""
    tfrecord_path, header_path, header = saved
    setter(*keys, value="MARKER")(header)
    write(header_path, yaml.dump(header, Dumper=NoAliasDumper).replace("MARKER", value))
    # PyYAML's own loader may reach Python's recursion limit first, itself a HeaderError
    deep = "|not a valid header: maximum recursion depth exceeded" if "[" in value else ""
    assert_header_error(tfrecord_path, header_path, rf"field '{field}{deep}")


@pytest.mark.parametrize(("name", "problems"), [
    ("structure_missing_leaf", "feature 'x' is named by no leaf"),
    ("structure_extra_leaf", "leaf 'q' names no feature"),
    ("structure_duplicate_leaf", "'x' is named by 2 leaves"),
])
def test_leaves_that_do_not_match_the_features_are_named(saved, name, problems):
    """"its leaves do not name exactly the features" left the reader to find which."""
    tfrecord_path, header_path, header = saved
    FIELD_EDITS[name][0](header)
    write(header_path, header)
    assert_header_error(tfrecord_path, header_path, re.escape(
        "field 'structure': its leaves do not name exactly the features listed under "
        f"'features': {problems}") + "$")


def test_a_renamed_leaf_is_named_with_the_feature_it_left(saved):
    tfrecord_path, header_path, header = saved
    header["structure"]["x"] = "zz"
    write(header_path, header)
    assert_header_error(tfrecord_path, header_path, re.escape(
        "leaf 'zz' names no feature; feature 'x' is named by no leaf") + "$")


def test_a_field_named_by_a_key_that_does_not_print_stays_on_one_line(paths):
    """save takes any string as a dict key; a bad field under a key holding a newline or a tab
    is named with them escaped, as repr writes them, so that the message is one line."""
    tfrecord_path, header_path = paths
    save(tf.data.Dataset.from_tensor_slices({"bad\nkey\t": [1, 2], "a": [3, 4]}),
         tfrecord_path, header_path)
    header = yaml.safe_load(Path(header_path).read_text())
    header["features"]["bad\nkey\t"]["dtype"] = "int33"
    write(header_path, header)
    assert_header_error(tfrecord_path, header_path,
                        re.escape(r"field 'features.bad\nkey\t.dtype': unknown dtype 'int33'"))


# The pairs a header may give (README, "The format"): each dtype's own encoding, and those the
# original module's files hold (a FloatList for every float, an Int64List for every integer)
ACCEPTED = {
    "bool": {"int64"}, "int8": {"raw", "int64"}, "int16": {"raw", "int64"}, "int32": {"int64"},
    "int64": {"int64"}, "uint8": {"raw", "int64"}, "uint16": {"raw", "int64"},
    "uint32": {"int64"},
    "uint64": {"raw", "int64"}, "float16": {"raw", "float"}, "bfloat16": {"raw", "float"},
    "float32": {"float"}, "float64": {"raw", "float"}, "complex64": {"raw"},
    "complex128": {"raw"}, "string": {"bytes"}, "qint8": {"raw"}, "quint8": {"raw"},
    "qint32": {"raw"},
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("encoding", ENCODINGS)
def test_every_accepted_encoding_can_be_decoded(saved, dtype, encoding):
    """A header rejects a dtype/encoding pair that is not in ACCEPTED, naming the field, and
    load builds a dataset for every pair that is."""
    tfrecord_path, header_path, header = saved
    header["features"]["x"].update(dtype=dtype, encoding=encoding,
                                   dtype_enum=tf.as_dtype(dtype).as_datatype_enum)
    if tf.as_dtype(dtype).is_quantized:  # which a header of an earlier version cannot hold
        header["version"] = 6
    write(header_path, header)
    if encoding not in ACCEPTED[dtype]:
        with pytest.raises(HeaderError, match=re.escape("field 'features.x.encoding'")):
            read_header(header_path)
        return
    read_header(header_path)
    dataset = load(tfrecord_path, header_path)  # any exception here fails the test
    assert dataset.element_spec["x"].dtype == tf.as_dtype(dtype)


# ---- headers of the original module ------------------------------------------------------------

@pytest.mark.parametrize("edit, match", [
    (setter("block_records", value=1), r"record counts \[4, 2, 2\] are not those of blocks of "
                                       r"1 records dealt to 3 files in turn, \[3, 3, 2\]"),
    (lambda h: h["shards"].reverse(), r"record counts \[2, 2, 4\] are not those"),
])
def test_round_robin_counts_must_be_those_the_blocks_give(paths, edit, match):
    """Blocks of block_records go to the files in turn, so the counts follow from num_records:
    an edit of block_records or of the files' order read the elements in another order."""
    tfrecord_path, header_path = paths
    header = save(tf.data.Dataset.range(8), tfrecord_path, header_path, num_shards=3)
    assert header["block_records"] == 2 and header["layout"] == "round_robin"
    assert [s["num_records"] for s in header["shards"]] == [4, 2, 2]
    edit(header)
    write(header_path, header)
    assert_header_error(tfrecord_path, header_path, "field 'shards': " + match)


LEGACY_EDITS = {
    "dtype_unknown_enum": ({"x": {"shape": [2], "dtype": 12345}}, r"x\.dtype"),
    "dtype_str": ({"x": {"shape": [2], "dtype": "float32"}}, r"x\.dtype"),
    "shape_negative": ({"x": {"shape": [-2], "dtype": 1}}, r"x\.shape"),
    "shape_unknown": ({"x": {"shape": [None], "dtype": 1}}, r"x\.shape"),
    "shape_absurd": ({"x": {"shape": [2**40], "dtype": 1}}, r"x\.shape"),
    "shape_absurd_int": ({"y": {"shape": [2**31 - 1], "dtype": 9}}, r"y\.shape"),
    "complex": ({"x": {"shape": [2], "dtype": 8}}, r"x\.dtype"),
}


@pytest.mark.parametrize("name", sorted(LEGACY_EDITS))
def test_invalid_legacy_field(saved, name):
    tfrecord_path, header_path, _ = saved
    content, field = LEGACY_EDITS[name]
    write(header_path, content)
    assert_header_error(tfrecord_path, header_path, rf"field '{field}'")


@pytest.mark.parametrize("shape, block", [([2], 256), ([256, 256, 3], 5),
                                          ([1000, 1000, 3], 1)])
def test_legacy_blocks_are_sized_by_their_records(saved, shape, block):
    """An original-module header has no block size, and load parsed 256 records at a time
    whatever their size: 3 GB at once for float images of 12 MB. Blocks come to about 4 MiB,
    as save sizes them, and at most 256 records."""
    tfrecord_path, header_path, _ = saved
    write(header_path, {"image": {"shape": shape, "dtype": tf.float32.as_datatype_enum},
                        "label": {"shape": [], "dtype": tf.int64.as_datatype_enum}})
    assert read_header(header_path)["block_records"] == block


def test_legacy_blocks_of_strings_are_sized_by_the_records_read(tmp_path):
    """The header's shapes give a string no size: its blocks were 256 records whatever the
    strings held (encoded images of 1 MB: 256 MB parsed at once). Counting the records, which
    load does for such a file, gives their size too."""
    tfrecord_path, header_path = str(tmp_path / "old.tfrecord"), str(tmp_path / "old.header")
    write_records(tfrecord_path, [example({"jpeg": [bytes(100_000)]})] * 50)
    write(header_path, {"jpeg": {"shape": [], "dtype": tf.string.as_datatype_enum}})
    header = core._read_header(header_path, tfrecord_path)
    assert header.block_records == 256  # all the shapes tell
    counted = core._count_records(header, tfrecord_path)
    assert counted.num_records == 50
    assert counted.block_records == 41  # 4 MiB of records of about 100 kB
    assert [len(e["jpeg"].numpy()) for e in load(tfrecord_path, header_path)] == [100_000] * 50


def test_legacy_shapes_of_rank_past_32(tmp_path):
    """NumPy 2 holds 64 dims, and the original module wrote and loaded a feature of 33; its
    header was refused for this format's limit of 32 (helper-88)."""
    shape = [1] * 32 + [2]
    tfrecord_path, header_path = str(tmp_path / "old.tfrecord"), str(tmp_path / "old.header")
    write_records(tfrecord_path, [example({"x": [i, i + 0.5]}) for i in range(3)])
    write(header_path, {"x": {"shape": shape, "dtype": tf.float32.as_datatype_enum}})
    assert read_header(header_path)["features"]["x"]["shape"] == shape
    values = list(load(tfrecord_path, header_path))  # (NumPy 1 holds only 32 dims: no .numpy())
    assert [v["x"].shape.as_list() for v in values] == [shape] * 3
    assert [tf.reshape(v["x"], [-1]).numpy().tolist() for v in values] == [
        [i, i + 0.5] for i in range(3)]
    assert verify(tfrecord_path, header_path)["num_records"] == 3
    write(header_path, {"x": {"shape": [1] * 65, "dtype": tf.float32.as_datatype_enum}})
    assert_header_error(tfrecord_path, header_path, r"field 'x.shape': rank 65 is more than 64$")


@pytest.mark.parametrize("dtype, values, refused", [
    (tf.float32, 600_000_000, True),  # 2.4 GB of floats
    (tf.float64, 300_000_000, False),  # 1.2 GB: written as float32
    (tf.int64, 300_000_000, False),  # a varint of a byte each at least: 0.3 GB
    (tf.int64, 2**31 - 1, True),  # beside its key
], ids=["float32", "float64", "int64", "int64 past"])
def test_legacy_feature_sizes_are_those_of_their_records(saved, dtype, values, refused):
    """The original module wrote floats as float32 and integers as varints: float64 and int64
    features were refused for 8 bytes a value, which they never took (helper-88)."""
    tfrecord_path, header_path, _ = saved
    write(header_path, {"x": {"shape": [values], "dtype": dtype.as_datatype_enum}})
    if refused:
        assert_header_error(tfrecord_path, header_path, rf"field 'x.shape': \[{values}\] is "
                                                        r"larger than a record can hold \(2 GiB\)$")
    else:
        assert read_header(header_path)["features"]["x"]["shape"] == [values]


@pytest.mark.parametrize("content, match", [
    ("x: {shape: [2], dtype: 1}\nyes: {shape: [], dtype: 9}\n",
     r"field 'True': a feature name must be a string, not a bool: YAML reads it as one "
     r"unquoted; quote it \('\.\.\.'\)$"),
    ("x: {shape: [2], dtype: 1}\n2024: {shape: [], dtype: 9}\n",
     r"field '2024': a feature name must be a string, not an int: "),
    ("x: {shape: [2], dtype: 1}\nlabel: [9, []]\n",
     r"field 'label': expected a mapping of 'shape' and 'dtype', found \[9, \[\]\]$"),
    ("x: {shape: [2], dtype: 1}\nlabel:\n", r"field 'label': expected a mapping of 'shape' and "
                                           r"'dtype', found None$"),
], ids=["yes", "a number", "a list", "nothing"])
def test_a_broken_entry_of_an_original_module_header_is_named(saved, content, match):
    """Each gave "not a valid header: expected 'format: super_serial' or an original-module
    header", naming neither the entry nor what was wrong with it (helper-88)."""
    tfrecord_path, header_path, _ = saved
    write(header_path, content.encode())
    assert_header_error(tfrecord_path, header_path, match)


def test_legacy_features_past_what_a_record_holds(saved):
    tfrecord_path, header_path, _ = saved
    write(header_path, {name: {"shape": [2**28], "dtype": tf.float32.as_datatype_enum}
                        for name in ("a", "b")})  # 1 GiB each
    assert_header_error(tfrecord_path, header_path, "not a valid header: its features take at "
                        "least 2,147,483,648 bytes a record, more than a record can hold")


# ---- not a header at all -------------------------------------------------------------------------

NOT_HEADERS = {
    "empty": b"",
    "whitespace": b"   \n\n",
    "comment_only": b"# nothing here\n",
    "null": b"null\n",
    "list": b"- format: super_serial\n- version: 1\n",
    "string": b"super_serial\n",
    "number": b"42\n",
    "invalid_yaml": b"format: [super_serial\nversion: 1\n",
    "tabs": b"format: super_serial\n\tversion: 1\n",
    "utf16": "format: super_serial\n".encode("utf-16"),
    "latin1": "format: caf\xe9\n".encode("latin-1"),
    "nul_bytes": b"format: super\0serial\n",
    "binary": bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8)),
    "tfrecord_bytes": b"\x1a\x00\x00\x00\x00\x00\x00\x00\x8b\x9d\x8e\x01" + b"\n\x18" * 20,
    "deep_nesting": b"[" * 50_000 + b"]" * 50_000,
    "deep_mapping": b"a: " + b"{a: " * 5_000 + b"1" + b"}" * 5_000 + b"\n",
    "unhashable_key": b"? [a, b]\n: 1\n",
    "duplicate_anchor": b"format: &a super_serial\nversion: *b\n",
    "legacy_empty_mapping": b"{}\n",
    "legacy_int_key": b"1: {shape: [2], dtype: 1}\n",
    "legacy_not_mapping": b"x: [2, 1]\n",
}


@pytest.mark.parametrize("opening", ["[", "{a: "])
def test_pythons_yaml_loader_refuses_nesting_past_libyamls_limit(saved, opening, monkeypatch):
    """PyYAML's own scanner works in time that grows with the square of the depth: 50,000
    nested brackets took 2.1 s a read to reach Python's recursion limit (Python 3.9, PyYAML
    5.4.1), and load reads a header twice. Its scanner now stops past libyaml's 1,000 levels,
    as libyaml does."""
    tfrecord_path, header_path, _ = saved
    closing = "]" if opening == "[" else "}"
    assert len(list(yaml.scan(opening * 1000 + "1" + closing * 1000, Loader=core._SafeLoader)))
    with pytest.raises(yaml.scanner.ScannerError,
                       match="collections nested deeper than 1000 levels"):
        list(yaml.scan(opening * 1001 + "1" + closing * 1001, Loader=core._SafeLoader))
    # A header of them: brackets reach the limit (nested mappings reach Python's recursion
    # limit first, at a few hundred levels, and quickly)
    monkeypatch.setattr(core, "_YAML_LOADER", core._SafeLoader)
    write(header_path, opening * 50_000 + "1" + closing * 50_000)
    problem = ("collections nested deeper than 1000 levels" if opening == "["
               else "maximum recursion depth exceeded")
    for call in (lambda: read_header(header_path), lambda: load(tfrecord_path, header_path)):
        with pytest.raises(HeaderError, match=(
                f"^{re.escape(header_path)}: not a valid header: .*{problem}")):
            call()


def test_libyaml_is_used_only_where_it_bounds_nesting(monkeypatch):
    """Some PyYAML builds carry a libyaml that recurses without bound on deep nesting and
    crashes the process (Python 3.9's wheel): their loader is not used."""
    if hasattr(yaml, "CSafeLoader"):
        try:
            yaml.load("[" * 1001 + "]" * 1001, Loader=yaml.CSafeLoader)
            bounded = False
        except yaml.YAMLError:
            bounded = True
        assert core._yaml_loader() is (yaml.CSafeLoader if bounded else core._SafeLoader)

    class Unbounded(yaml.SafeLoader):
        def get_single_data(self):  # parses any depth, as an old libyaml does
            return []

    monkeypatch.setattr(yaml, "CSafeLoader", Unbounded, raising=False)
    assert core._yaml_loader() is core._SafeLoader
    monkeypatch.delattr(yaml, "CSafeLoader")
    assert core._yaml_loader() is core._SafeLoader


@pytest.mark.parametrize("name", sorted(NOT_HEADERS))
def test_not_a_header(saved, name):
    tfrecord_path, header_path, _ = saved
    write(header_path, NOT_HEADERS[name])
    start = time.perf_counter()
    assert_header_error(tfrecord_path, header_path, r".")
    assert time.perf_counter() - start < 5, "rejecting a 100 KB header took over 5 s"


@pytest.mark.parametrize("edit", ["tab", "unclosed", "indent"])
def test_yaml_syntax_errors_say_where_and_what(saved, yaml_loader, edit):
    """PyYAML's reason and where it found it, not only its first line ("while scanning for the
    next token")."""
    tfrecord_path, header_path, _ = saved
    lines = Path(header_path).read_text().splitlines(keepends=True)
    if edit == "tab":  # a tab can start no token
        at = next(i for i, line in enumerate(lines) if line == "  s:\n")
        lines[at] = "\ts:\n"
    elif edit == "unclosed":
        at = next(i for i, line in enumerate(lines) if line.startswith("structure: {"))
        lines[at] = lines[at].replace("}", "")
    else:
        at = next(i for i, line in enumerate(lines) if line == "    dtype: int32\n")
        lines[at] = "      dtype: int32\n"
    write(header_path, "".join(lines))
    for call in (lambda: read_header(header_path), lambda: load(tfrecord_path, header_path)):
        with pytest.raises(HeaderError) as info:
            call()
        found = re.search(r": not a valid header: line (\d+), column (\d+): \w.*\(while \w",
                          str(info.value))
        assert found, info.value
        assert int(found[1]) - 1 in (at, at + 1), (info.value, at)  # the line edited, or the
        # next, where a missing closing bracket shows


@pytest.mark.parametrize("edit, refused", [
    (lambda t: t.replace("\nformat: super_serial\n", "\nformat:\tsuper_serial\n"), None),
    (lambda t: t.replace("- {file: ", "- {file:\t"), None),
    (lambda t: t.replace("- {file: ", "- {\tfile: "), None),
    (lambda t: t.replace(", num_bytes: ", ",\tnum_bytes: "), None),
    (lambda t: "\ufeff" + t.split("\n", 1)[1], None),  # the comment gone: a key comes first
    (lambda t: t.replace("\nlayout: round_robin\n", "\nlayout: round_robin  # c\x85"), None),
    (lambda t: t.replace("\nlayout: round_robin\n", "\nlayout: round_robin  # c\u2028"), None),
    (lambda t: t.replace("\nlayout: round_robin\n", "\nlayout: round_robin\t# tab\n"), None),
    (lambda t: "%YAML 1.2\n---\n" + t, None),
    (lambda t: "%YAML 1.3\n---\n" + t, "found incompatible YAML document"),
    (lambda t: "%YAML 1.0\n---\n" + t, "found incompatible YAML document"),
    (lambda t: t.replace("\nformat: super_serial\n", "\n\tformat: super_serial\n"),
     "found character .*that cannot start any token"),  # libyaml names no character
], ids=["tab after a colon", "tab in a flow mapping", "tab after a brace", "tab after a comma",
        "byte order mark", "comment ended by NEL", "comment ended by LS",
        "tab before a comment", "YAML 1.2",
        "YAML 1.3", "YAML 1.0", "tab indenting"])
def test_both_yaml_loaders_read_tabs_and_directives_alike(saved, yaml_loader, edit, refused):
    """libyaml read a header with a tab after a colon, which PyYAML's own loader refused (a
    hand-edited header loaded with one PyYAML build and not with another), and refused
    `%YAML 1.3`, which PyYAML's took (helper-100). Tabs that indent are refused by both. The
    tabs in flow mappings, a byte order mark before a key and comments ended by a Unicode line
    break were not pinned for PyYAML's own loader (helper-108's mutants)."""
    tfrecord_path, header_path, header = saved
    text = Path(header_path).read_text()
    assert edit(text) != text, "the edit found nothing to change"
    write(header_path, edit(text))
    if refused is None:
        assert read_header(header_path) == header
        assert len(list(load(tfrecord_path, header_path))) == N
    else:
        assert_header_error(tfrecord_path, header_path, ": not a valid header: line \\d+, "
                            f"column \\d+: {refused}")


def test_header_is_a_fifo(saved):
    """Reading it waited for a writer forever: load, read_header, and the CLI."""
    tfrecord_path, header_path, _ = saved
    Path(header_path).unlink()
    with fifo_at(header_path):
        began = time.monotonic()
        assert_header_error(tfrecord_path, header_path, r": a FIFO \(named pipe\), not a header "
                                                        r"file$")
        assert time.monotonic() - began < 2.0


def test_header_is_a_folder(saved):
    """It was "<path>: cannot read header: <path>; Is a directory" (TensorFlow's words)."""
    tfrecord_path, header_path, _ = saved
    Path(header_path).unlink()
    Path(header_path).mkdir()
    assert_header_error(tfrecord_path, header_path, r": a folder, not a header file$")
    with pytest.raises(HeaderError, match=f"^{re.escape(header_path)}: a folder, not a header "
                                          "file$"):
        verify(tfrecord_path, header_path)


# ---- aliases: small headers that expand into huge or endless structures -----------------------


def recursive_structure(header_path, header):
    text = yaml.safe_dump({k: v for k, v in header.items() if k != "structure"})
    return text + "structure: &s [*s]\n"


def recursive_mapping(header_path, header):
    text = yaml.safe_dump({k: v for k, v in header.items() if k != "structure"})
    return text + "structure: &s {x: *s}\n"


def laughs(levels: int, field: str):
    """`field` is an alias for 10**levels strings, in a header of under 1 KB."""

    def make(header_path, header):
        lines = ['lol0: &l0 "lol"']
        lines += [f"lol{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]"
                  for i in range(1, levels + 1)]
        text = yaml.safe_dump({k: v for k, v in header.items() if k != field})
        return "\n".join(lines) + "\n" + text + f"{field}: *l{levels}\n"

    return make


ALIAS_BOMBS = {
    "recursive_structure": recursive_structure,
    "recursive_mapping": recursive_mapping,
    "laughs_in_format": laughs(7, "format"),
    "laughs_in_structure": laughs(6, "structure"),
    "laughs_in_shards": laughs(7, "shards"),
    "laughs_in_compression": laughs(7, "compression"),
}


@pytest.mark.parametrize("name", sorted(ALIAS_BOMBS))
def test_alias_bombs_are_rejected_quickly(saved, name, yaml_loader):
    tfrecord_path, header_path, header = saved
    text = ALIAS_BOMBS[name](header_path, header)
    assert len(text) < 4096
    write(header_path, text)
    start = time.perf_counter()
    with pytest.raises(HeaderError, match=f"^{header_path}: "):
        read_header(header_path)
    elapsed = time.perf_counter() - start
    assert elapsed < 1.0, f"{elapsed:.1f} s to reject a {len(text)}-byte header"
    assert_header_error(tfrecord_path, header_path, r".")


def test_fields_it_does_not_know_are_ignored(saved, yaml_loader):
    """As the README says: room for optional fields within a version."""
    tfrecord_path, header_path, header = saved
    edited = copy.deepcopy(header)
    edited["written_by"] = "a later super_serial"
    edited["features"]["x"]["note"] = {"unit": "m"}
    write(header_path, edited)
    assert read_header(header_path) == header
    assert len(list(load(tfrecord_path, header_path))) == N


def scalar_alias(text: str) -> str:
    """The record count given once, with an anchor, and again as an alias: the same values."""
    count = re.search(r"^num_records: (\d+)$", text, re.M)[1]
    text = re.sub(r"^num_records: \d+$", "num_records: &n " + count, text, count=1, flags=re.M)
    return re.sub(r"^  num_records: " + count + "$", "  num_records: *n", text, count=1,
                  flags=re.M)


def merge_key(text: str) -> str:
    """The first shard's fields merged from a mapping (`<<: {...}`), no alias needed."""
    first = re.search(r"- file: (\S+)\n  num_bytes: (\d+)\n  num_records: (\d+)\n", text)
    merged = (f"- <<: {{file: {first[1]}, num_bytes: {first[2]}}}\n"
              f"  num_records: {first[3]}\n")
    return text.replace(first[0], merged, 1)


@pytest.mark.parametrize("edit, problem", [
    (scalar_alias, r"YAML aliases \(\*name\) are not allowed"),
    (merge_key, r"YAML merge keys \(<<\) are not allowed"),
    (lambda text: text + "version: 3\n", r"key 'version' appears twice in one mapping \(line "),
    (lambda text: text.replace("    dtype: ", "    dtype: int8\n    dtype: ", 1),
     r"key 'dtype' appears twice in one mapping \(line \d+\)$"),
    (lambda text: text.replace("format: super_serial", "format: &f super_serial", 1)
     + "*f : 1\n", r"YAML aliases \(\*name\) are not allowed"),  # an alias as a key
    (lambda text: text + "? [a, b]\n: c\n",
     r"not a valid header: a key that is a list or mapping \(line \d+\) is not allowed"),
    (lambda text: text + "{x: 1}: c\n",
     r"not a valid header: a key that is a list or mapping \(line \d+\) is not allowed"),
])
def test_aliases_of_scalars_merge_keys_and_repeated_keys_are_refused(saved, yaml_loader, edit,
                                                                       problem):
    """Aliases of mappings and lists were refused, but not those of scalars or merge keys, and
    a key given twice kept its last value without a word (a second `version`, `dtype`). A key
    that is a list or mapping was refused as if it were a YAML tag (helper-71)."""
    tfrecord_path, header_path, header = saved
    text = yaml.dump(header, Dumper=NoAliasDumper, sort_keys=False)
    edited = edit(text)
    assert edited != text
    write(header_path, edited)
    assert_header_error(tfrecord_path, header_path, problem)


# ---- absurd sizes never reach an allocation ----------------------------------------------------

ABSURD = {
    # Headers whose claims, if believed, would make load allocate far more than the files hold.
    "float_shape_1gib": setter("features", "x", "shape", value=[2**28]),
    "int_shape_2g_values": setter("features", "y", "shape", value=[2**31 - 1]),
    "int8_as_int64_4gib": both(setter("features", "y", "shape", value=[2**29]),
                               setter("features", "y", "dtype", value="int8"),
                               setter("features", "y", "dtype_enum", value=6)),
    "string_shape": setter("features", "s", "shape", value=[2**30]),
    "many_records": both(set_counts(2**40, 2**40), setter("block_records", value=2**16)),
    "ragged_inner": both(setter("features", "r", "shape", value=[None, None, 2**40]),
                         setter("features", "r", "ragged_rank", value=1)),
    "one_record_block": both(setter("features", "y", "shape", value=[2**29]),
                             setter("features", "y", "dtype", value="int8"),
                             setter("features", "y", "dtype_enum", value=6),
                             setter("block_records", value=1)),
}


# What each refusal says: the header's field where the header alone tells, else the record
# file, whose size cannot hold what the header claims
TOO_LARGE_BLOCK = (HeaderError, "header", r"field 'block_records': 249 records of at least \d+ "
                   r"bytes are more than load parses at once \(1024 MiB\)")
FILE_TOO_SMALL = (CorruptDataError, "records", r"601 bytes cannot hold the \d+ records of the "
                  r"shapes that {header} gives \(at least \d+ bytes\)")
ABSURD_REFUSALS = {
    "float_shape_1gib": TOO_LARGE_BLOCK,
    "int8_as_int64_4gib": TOO_LARGE_BLOCK,
    "int_shape_2g_values": (HeaderError, "header", r"field 'features.y.shape': \[2147483647\] is "
                            r"larger than a record can hold \(2 GiB\)"),
    "many_records": FILE_TOO_SMALL,
    "one_record_block": FILE_TOO_SMALL,
    "ragged_inner": (HeaderError, "header", r"field 'features.r.shape': \[None, None, "
                     r"1099511627776\] has a dim larger than a record can hold"),
    "string_shape": (HeaderError, "header", r"field 'features': together at least 2,147,483,665 "
                     r"bytes a record, more than a record can hold \(2 GiB\)"),
}


def assert_refused(tfrecord_path, header_path, refusal):
    """load raises `refusal` (its class, the file it names first, its message) at once."""
    error, names, message = refusal
    first = header_path if names == "header" else tfrecord_path
    message = message.replace("{header}", re.escape(header_path))
    with pytest.raises(error, match=f"^{re.escape(first)}: {message}$"):
        load(tfrecord_path, header_path)


@pytest.mark.parametrize("name", sorted(ABSURD))
def test_absurd_sizes_fail_in_load(saved, name):
    """load raises before building anything that could allocate; iteration never starts."""
    tfrecord_path, header_path, header = saved
    ABSURD[name](header)
    write(header_path, header)
    assert_refused(tfrecord_path, header_path, ABSURD_REFUSALS[name])


@pytest.mark.parametrize("dtype, shape, refusal", [
    (tf.int64, [2**40], (HeaderError, "header", r"field 'y.shape': \[1099511627776\] has a dim "
                         r"larger than a record can hold")),
    (tf.int64, [2**31 - 1], (HeaderError, "header", r"field 'y.shape': \[2147483647\] is larger "
                             r"than a record can hold \(2 GiB\)")),
    (tf.int64, [2**16, 2**16], (HeaderError, "header", r"field 'y.shape': \[65536, 65536\] is "
                                r"larger than a record can hold \(2 GiB\)")),
    (tf.int8, [2**30], FILE_TOO_SMALL),  # 1 GiB of int8, but parsed as 8 GiB of int64
    (tf.uint8, [2**16, 2**14], FILE_TOO_SMALL),
])
def test_absurd_legacy_shapes_fail_in_load(saved, dtype, shape, refusal):
    """The original module's headers have no sizes or counts, so the header check is all that
    stands between such a header and TensorFlow's parser (which crashes on it)."""
    tfrecord_path, header_path, _ = saved
    write(header_path, {"y": {"shape": shape, "dtype": dtype.as_datatype_enum}})
    assert_refused(tfrecord_path, header_path, refusal)


@pytest.mark.parametrize("dtype", [tf.qint8, tf.quint8, tf.qint32])
def test_a_quantized_feature_needs_version_6(dtype, paths):
    """A reader of version 5 knows no quantized dtype, so a header that has one says 6; one
    that says less is refused, naming the feature."""
    tfrecord_path, header_path = paths
    header = save(tf.data.Dataset.from_tensors({"q": tf.bitcast(tf.zeros([3], tf.int32), dtype),
                                                "y": 1}), tfrecord_path, header_path)
    assert header["version"] == 6
    header["version"] = 5
    write(header_path, header)
    assert_header_error(tfrecord_path, header_path, re.escape(
        f"field 'features.q.dtype': {dtype.name} needs format version 6; the header says 5"))


@pytest.mark.parametrize("part, text", [(None, "None"), ({}, "{}"), ([], "[]")])
def test_a_part_with_no_tensor_needs_version_7(saved, part, text):
    """A reader of version 6 refuses a null, {} or [] in the structure, so a header that has
    one says 7; one that says less is refused, naming where it is. At 7 it loads as a None,
    an empty dict or an empty tuple."""
    tfrecord_path, header_path, header = saved
    header["structure"] = {"p": [header["structure"], part]}
    for feature in header["features"].values():
        feature["path"] = ["p", 0, *feature["path"]]
    for version in (3, 6):
        header["version"] = version
        write(header_path, header)
        assert_header_error(tfrecord_path, header_path, "^" + re.escape(
            f"{header_path}: field 'structure.p[1]': {text}, a part with no tensor, needs "
            f"format version 7; the header says {version}") + "$")
    header["version"] = 7
    write(header_path, header)
    element = next(iter(load(tfrecord_path, header_path)))
    assert set(element) == {"p"} and len(element["p"]) == 2
    assert element["p"][1] == (tuple(part) if isinstance(part, list) else part)
    assert type(element["p"][1]) is (tuple if part == [] else type(part))


@pytest.mark.parametrize("structure", [None, {}, [], {"a": None}, [{}, [None, []]]])
def test_a_structure_of_no_feature_is_refused(saved, structure):
    tfrecord_path, header_path, header = saved
    header.update(version=7, structure=structure, features={})
    write(header_path, header)
    assert_header_error(tfrecord_path, header_path, re.escape(
        "field 'structure': names no feature; an element holds at least one tensor"))


@pytest.mark.parametrize("dtype", [tf.qint8, tf.quint8, tf.qint32])
def test_a_quantized_dtype_in_an_original_module_header_is_refused(dtype, saved):
    """The original module could not save these (it said 'unknown tf.DType enum' before
    super_serial knew them)."""
    tfrecord_path, header_path, _ = saved
    write(header_path, {"y": {"shape": [2], "dtype": dtype.as_datatype_enum}})
    assert_header_error(tfrecord_path, header_path, re.escape(
        f"field 'y.dtype': {dtype.name} was not saveable by the original module"))


Point = collections.namedtuple("Point", "x y")


@pytest.fixture(scope="module")
def pristine_namedtuples(tmp_path_factory):
    """A save whose element is `(Point(x, y), {"p": Point(x, y)})`: a header of version 5."""
    element = (Point(np.arange(N), np.arange(N) / 2), {"p": Point(np.arange(N), [b"a"] * N)})
    return save_pair(tmp_path_factory.mktemp("namedtuples"),
                     tf.data.Dataset.from_tensor_slices(element))


NAMEDTUPLE_EDITS = {
    "version_4": (setter("version", value=4), "namedtuples", "namedtuples need format version 5"),
    "not_a_list": (setter("namedtuples", value={"path": []}), "namedtuples", "expected a list"),
    "entry_not_mapping": (setter("namedtuples", 0, value="Point"), r"namedtuples\[0\]",
                          "expected a mapping"),
    "name_missing": (setter("namedtuples", 0, "name", delete=True), r"namedtuples\[0\]\.name",
                     "missing"),
    "name_not_python": (setter("namedtuples", 0, "name", value="a point"),
                        r"namedtuples\[0\]\.name", "cannot name a namedtuple"),
    "name_keyword": (setter("namedtuples", 0, "name", value="class"), r"namedtuples\[0\]\.name",
                     "cannot name a namedtuple"),
    "field_underscore": (setter("namedtuples", 0, "fields", value=["x", "_y"]),
                         r"namedtuples\[0\]\.fields", "cannot name a namedtuple's field"),
    "field_not_text": (setter("namedtuples", 0, "fields", value=["x", 2]),
                       r"namedtuples\[0\]\.fields", "cannot name a namedtuple's field"),
    "field_twice": (setter("namedtuples", 0, "fields", value=["x", "x"]),
                    r"namedtuples\[0\]\.fields", "a field is named twice"),
    "fields_too_few": (setter("namedtuples", 0, "fields", value=["x"]),
                       r"namedtuples\[0\]\.fields", "1 fields for a tuple of 2"),
    "path_to_a_leaf": (setter("namedtuples", 0, "path", value=[0, 0]), r"namedtuples\[0\]\.path",
                       "leads to no tuple"),
    "path_to_a_dict": (setter("namedtuples", 0, "path", value=[1]), r"namedtuples\[0\]\.path",
                       "leads to no tuple"),
    "path_out_of_range": (setter("namedtuples", 0, "path", value=[2]),
                          r"namedtuples\[0\]\.path", "leads to no tuple"),
    "path_bool_index": (setter("namedtuples", 0, "path", value=[True, "p"]),
                        r"namedtuples\[0\]\.path", "leads to no tuple"),
    "path_text_index": (setter("namedtuples", 0, "path", value=["0"]), r"namedtuples\[0\]\.path",
                        "leads to no tuple"),
    "path_twice": (setter("namedtuples", 1, "path", value=[0]), "namedtuples",
                   "a path is listed twice"),
    # two strings that Python reads as one name (NFKC): no type can have both
    "fields_alike_to_python": (setter("namedtuples", 0, "fields", value=["\ufb01", "fi"]),
                               r"namedtuples\[0\]\.fields",
                               "no namedtuple type has these fields .*duplicate argument"),
}


@pytest.mark.parametrize("name", sorted(NAMEDTUPLE_EDITS))
def test_invalid_namedtuples(paths, pristine_namedtuples, name):
    tfrecord_path, header_path = copy_pair(pristine_namedtuples, paths)
    header = yaml.safe_load(Path(header_path).read_text())
    assert [n["path"] for n in header["namedtuples"]] == [[0], [1, "p"]]
    change, field, problem = NAMEDTUPLE_EDITS[name]
    change(header)
    write(header_path, header)
    assert_header_error(tfrecord_path, header_path, rf"field '({field})[^']*': .*{problem}")


def test_namedtuples_listed_in_another_order_read_as_save_lists_them(paths, pristine_namedtuples,
                                                                     tmp_path):
    """The order of the header's entries says nothing: read in the order save writes them
    (the structure's, depth first), so that merge takes such a header's part for the same
    schema."""
    tfrecord_path, header_path = copy_pair(pristine_namedtuples, paths)
    header = yaml.safe_load(Path(header_path).read_text())
    header["namedtuples"].reverse()
    write(header_path, header)
    assert read_header(header_path)["namedtuples"] == yaml.safe_load(
        (pristine_namedtuples / "data.header.yaml").read_text())["namedtuples"]
    merged = str(tmp_path / "merged" / "data.tfrecord")
    parts = []
    for i, source in enumerate((pristine_namedtuples, Path(header_path).parent)):
        part = tmp_path / "merged" / f"data.tfrecord-part{i}"
        part.parent.mkdir(exist_ok=True)
        part.write_bytes((source / Path(tfrecord_path).name).read_bytes())
        header = yaml.safe_load((source / Path(header_path).name).read_text())
        header["shards"][0]["file"] = part.name
        write(str(part) + ".header.yaml", header)
        parts.append(str(part))
    assert merge(parts, merged)["num_records"] == 2 * N


def test_a_sequential_header_listing_a_file_twice_is_refused(tmp_path):
    """A sequential header listing one file twice is refused, not read twice (helper-77's
    mutation sweep)."""
    path = str(tmp_path / "d.tfrecord")
    save(tf.data.Dataset.from_tensor_slices(np.arange(4)), path)
    header_path = path + ".header.yaml"

    def listed_twice(header):
        header["layout"] = "sequential"
        header["shards"] = [dict(header["shards"][0]), dict(header["shards"][0])]
        header["num_records"] *= 2

    edit_header(header_path, listed_twice)
    with pytest.raises(HeaderError, match=r"field 'shards': a file is listed twice"):
        read_header(header_path)
    with pytest.raises(HeaderError, match="listed twice"):
        load(path)


def test_a_ragged_rank_as_large_as_the_rank_is_refused(tmp_path):
    """A ragged_rank as large as the rank, one past the largest valid, is refused
    (helper-77's mutation sweep)."""
    path = str(tmp_path / "d.tfrecord")
    ragged = tf.ragged.constant([[[1], [2, 3]], [[3]], [], [[4], [5, 6]]], dtype=tf.int32)
    save(tf.data.Dataset.from_tensor_slices({"r": ragged}), path)
    header_path = path + ".header.yaml"

    def rank_as_ragged_rank(header):
        rank = len(header["features"]["r"]["shape"])
        assert header["features"]["r"]["ragged_rank"] == rank - 1  # valid as saved
        header["features"]["r"]["ragged_rank"] = rank

    edit_header(header_path, rank_as_ragged_rank)
    with pytest.raises(HeaderError, match=r"field 'features\.r\.ragged_rank': must be in 0\.\."):
        read_header(header_path)


def test_ragged_rank_0_with_an_unknown_inner_dim_is_refused(tmp_path):
    """Of ragged_rank 0 only the first dim may be unknown (helper-77's mutation sweep)."""
    path = str(tmp_path / "d.tfrecord")
    # slices of a ragged_rank-1 tensor: RaggedTensorSpec([None], ragged_rank=0) elements
    save(tf.data.Dataset.from_tensor_slices({"r": tf.ragged.constant([[1, 2], [3]])}), path)
    header_path = path + ".header.yaml"

    def unknown_inner_dim(header):
        feature = header["features"]["r"]
        assert feature["ragged_rank"] == 0 and feature["shape"] == [None]
        feature["shape"] = [2, None]

    edit_header(header_path, unknown_inner_dim)
    with pytest.raises(HeaderError, match=r"field 'features\.r\.shape': with ragged_rank 0 "
                                          r"only the first dim may be unknown"):
        read_header(header_path)


def test_a_missing_or_null_shape_is_named_as_such(tmp_path):
    """A missing `shape` said "expected a list of non-negative integers or null, found None",
    which read as a contradiction (helper-86); a missing `dtype` said "missing"."""
    path = str(tmp_path / "d.tfrecord")
    save(tf.data.Dataset.from_tensor_slices({"x": np.arange(4)}), path)
    header_path = path + ".header.yaml"
    edit_header(header_path, lambda header: header["features"]["x"].pop("shape"))
    with pytest.raises(HeaderError, match=re.escape(
            f"{header_path}: field 'features.x.shape': missing") + "$"):
        read_header(header_path)
    edit_header(header_path, lambda header: header["features"]["x"].update(shape=None))
    with pytest.raises(HeaderError, match=re.escape(
            "field 'features.x.shape': expected a list of dims, each a non-negative integer "
            "or null (unknown), found None")):
        read_header(header_path)


def test_a_missing_shape_in_an_original_module_header_is_named_as_such(tmp_path):
    header_path = tmp_path / "old.header"
    header_path.write_text("x: {dtype: 9}\n")
    with pytest.raises(HeaderError, match=re.escape(
            f"{header_path}: field 'x.shape': missing") + "$"):
        read_header(str(header_path))


@pytest.mark.parametrize("version", [3, 7])
@pytest.mark.parametrize("structure", ["left out", None, {}, []])
def test_a_missing_or_empty_structure_is_not_blamed_on_the_version(saved, structure, version):
    """A header without 'structure' (read as None), or whose whole structure is null, {} or
    [], was refused below version 7 as "None, a part with no tensor, needs format version 7",
    which no version mends (helper-113)."""
    tfrecord_path, header_path, header = saved
    header["version"] = version
    if structure == "left out":
        del header["structure"]
    else:
        header["structure"] = structure
    write(header_path, header)
    assert_header_error(tfrecord_path, header_path, "^" + re.escape(
        f"{header_path}: field 'structure': ") + (
        "missing$" if structure == "left out" else
        re.escape("names no feature; an element holds at least one tensor") + "$"))


def test_a_none_lies_as_deep_as_a_feature_may(saved):
    """A feature 400 levels deep loads; a None as deep was refused, "nests more than 400
    levels deep" (helper-113)."""
    tfrecord_path, header_path, header = saved
    header["version"] = 7
    header["structure"] = {**header["structure"], "zz": "MARKER"}
    write(header_path, yaml.dump(header, Dumper=NoAliasDumper).replace(
        "MARKER", "[" * 399 + "null" + "]" * 399))
    deep = read_header(header_path)["structure"]["zz"]
    for _ in range(399):
        assert isinstance(deep, list) and len(deep) == 1
        deep = deep[0]
    assert deep is None
    assert len(list(load(tfrecord_path, header_path))) > 0


@pytest.mark.parametrize("splits", ["int16", "int8", "uint64", "float32", "string"])
def test_row_splits_of_a_dtype_tf_refuses_are_a_header_error(saved, splits):
    """Row splits of any dtype but int32 and int64 are refused naming the field; load would give
    TensorFlow's error instead (helper-122: only int8 was tried)."""
    tfrecord_path, header_path, header = saved
    header["features"]["r"]["row_splits_dtype"] = splits
    write(header_path, header)
    assert_header_error(tfrecord_path, header_path,
                        r"field 'features\.r\.row_splits_dtype': expected int32 or int64")


@pytest.mark.parametrize("shape", [[None, None, None], [None, None, 2, None]])
def test_unknown_dims_after_the_ragged_dims_are_a_header_error(saved, shape):
    """A ragged feature of ragged rank 1 with an unknown dim after its ragged ones, which save
    never writes, is refused naming the field: without the check, load raised a bare TypeError
    (helper-122: only ragged rank 0, which has a check of its own, was tried)."""
    tfrecord_path, header_path, header = saved
    assert header["features"]["r"]["ragged_rank"] == 1
    header["features"]["r"]["shape"] = shape
    write(header_path, header)
    assert_header_error(tfrecord_path, header_path,
                        r"field 'features\.r\.shape': dims after the ragged dims must be known")


def test_a_block_of_two_records_past_what_load_parses_at_once_is_a_header_error(saved):
    """A block of 2 records of at least 516 MiB each is more than load parses at once, and
    refused (helper-122: only blocks of 249 records and of 1 were tried)."""
    tfrecord_path, header_path, header = saved
    header["features"]["x"]["shape"] = [2**27 + 2**20]  # float32 as a FloatList: 4 bytes each
    header["block_records"] = 2
    write(header_path, header)
    assert_header_error(tfrecord_path, header_path,
                        r"field 'block_records': 2 records of at least \d+ bytes are more than "
                        r"load parses at once \(1024 MiB\)")


def test_a_structure_key_that_is_no_string_is_named_as_such(saved):
    """A feature under the int key 7 is refused as such; without the check, load raised a bare
    TypeError (helper-122: the "structure_int_key" edit also adds a second leaf for 'x', which
    another check refuses)."""
    tfrecord_path, header_path, header = saved
    header["structure"][7] = header["structure"].pop("x")
    header["features"]["x"]["path"] = [7]
    write(header_path, header)
    assert_header_error(tfrecord_path, header_path,
                        r"field 'structure': dict key 7 is not a string$")


def test_a_missing_dtype_in_an_original_module_header_is_named_as_such(tmp_path):
    """An original-module header whose entries give a shape and no dtype is one, with its dtype
    missing, as the twin test says of a missing shape (helper-122)."""
    header_path = tmp_path / "old.header"
    header_path.write_text("x: {shape: [2]}\n")
    with pytest.raises(HeaderError, match=re.escape(
            f"{header_path}: field 'x.dtype': missing") + "$"):
        read_header(str(header_path))

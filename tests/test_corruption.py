"""Loads verify: corrupt, truncated, swapped or missing files raise errors naming the file."""

from __future__ import annotations

import re
import shutil
import struct
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import yaml
from conftest import copy_pair, edit_header, fifo_at, rewrite_records, save_pair

from super_serial import CorruptDataError, HeaderError, core, load, merge, read_header, save, verify

NUM = 1100  # two blocks of records (1024 and 76)
ITERATION_ERRORS = (tf.errors.InvalidArgumentError, tf.errors.DataLossError)


def dataset(n: int = NUM) -> tf.data.Dataset:
    ids = np.arange(n)
    return tf.data.Dataset.from_tensor_slices({
        "x": np.stack([ids, -ids], axis=1).astype(np.float32),  # FloatList
        "y": ids.astype(np.int64),  # Int64List
        "z": ids.astype(np.float64) / 3,  # raw bytes
    })


def record_spans(data: bytes) -> list[tuple[int, int]]:
    """(offset of the record's frame, payload length) of every record of an uncompressed file."""
    spans, offset = [], 0
    while offset < len(data):
        (length,) = struct.unpack("<Q", data[offset : offset + 8])
        spans.append((offset, length))
        offset += 16 + length
    assert offset == len(data)
    return spans


def flip(path, position: int):
    data = bytearray(Path(path).read_bytes())
    data[position] ^= 0x5A
    Path(path).write_bytes(bytes(data))


def iterate(tfrecord_path, header_path=None, **options) -> int:
    count = 0
    for _ in load(tfrecord_path, header_path, **options):
        count += 1
    return count


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """One good save, copied by `saved` for each test."""
    return save_pair(tmp_path_factory.mktemp("pristine"), dataset())


@pytest.fixture
def saved(paths, pristine):
    return copy_pair(pristine, paths)


# ---- (a) a flipped byte ------------------------------------------------------------------------

# Where in a record's frame (length, length CRC, payload, payload CRC) the byte is flipped.
FRAME_POSITIONS = {
    "length": lambda offset, length: offset + 1,
    "length_crc": lambda offset, length: offset + 9,
    "payload_start": lambda offset, length: offset + 12,
    "payload_middle": lambda offset, length: offset + 12 + length // 2,
    "payload_crc": lambda offset, length: offset + 12 + length + 2,
}


FLIPS = [(1050, where) for where in sorted(FRAME_POSITIONS)] + [
    (0, "payload_middle"), (500, "length_crc"), (NUM - 1, "payload_crc")]


@pytest.mark.parametrize("record, where", FLIPS)
def test_flipped_byte_fails_iteration_and_verify(saved, where, record):
    tfrecord_path, header_path = saved
    offset, length = record_spans(Path(tfrecord_path).read_bytes())[record]
    flip(tfrecord_path, FRAME_POSITIONS[where](offset, length))
    with pytest.raises(ITERATION_ERRORS) as info:
        iterate(tfrecord_path, header_path)
    assert "super_serial" in info.value.message
    assert tfrecord_path in info.value.message
    with pytest.raises(CorruptDataError, match="data.tfrecord") as info:
        verify(tfrecord_path, header_path)
    assert str(info.value).startswith(tfrecord_path)


@pytest.mark.parametrize("record", [0, 1050])
def test_a_failed_checksum_says_how_many_records_could_be_read(saved, record):
    """Reading a file stops at a record whose checksum fails: the message says how many
    were read before it, not that the file holds only those."""
    tfrecord_path, header_path = saved
    offset, length = record_spans(Path(tfrecord_path).read_bytes())[record]
    flip(tfrecord_path, FRAME_POSITIONS["payload_crc"](offset, length))
    with pytest.raises(ITERATION_ERRORS) as info:
        iterate(tfrecord_path, header_path)
    assert (f"{tfrecord_path}: the header says {NUM} records, but only {record} could be read "
            "from it; it is corrupt, truncated, or belongs to another header"
            ) in info.value.message


@pytest.mark.parametrize("layout", [{"num_shards": 3}, {"compression": "GZIP"},
                                    {"compression": "ZLIB", "num_shards": 2}])
def test_flipped_byte_in_sharded_or_compressed_files(tmp_path, layout):
    tfrecord_path = str(tmp_path / "data.tfrecord")
    header = save(dataset(), tfrecord_path, **layout)
    victim = str(tmp_path / header["shards"][1 if len(header["shards"]) > 1 else 0]["file"])
    flip(victim, Path(victim).stat().st_size // 2)
    with pytest.raises(ITERATION_ERRORS) as info:
        iterate(tfrecord_path)
    assert "super_serial" in info.value.message and victim in info.value.message
    with pytest.raises(CorruptDataError) as info:
        verify(tfrecord_path)
    assert str(info.value).startswith(victim)


@pytest.mark.parametrize("compression", ["GZIP", "ZLIB"])
@pytest.mark.parametrize("num_shards", [1, 3])
def test_verify_fails_where_a_tfrecord_reader_fails_at_the_end_of_a_compressed_file(
        tmp_path, compression, num_shards):
    """A byte flipped near the end of the compressed stream, after the last record's bytes:
    every record still decodes and the count is right, so verify said OK for a file that
    `tf.data.TFRecordDataset` refuses (GZIP: 9 and 10 bytes from the end of one file,
    here). Of several files, the one damaged is named."""
    tfrecord_path = str(tmp_path / "data.tfrecord")
    header = save(dataset(), tfrecord_path, compression=compression, num_shards=num_shards)
    victim = str(tmp_path / header["shards"][num_shards // 2]["file"])
    pristine = Path(victim).read_bytes()
    for back in range(1, 17):
        Path(victim).write_bytes(pristine)
        flip(victim, len(pristine) - back)
        try:
            for _ in tf.data.TFRecordDataset(victim, compression):
                pass
            readable = True
        except tf.errors.DataLossError:
            readable = False
        if readable:
            verify(tfrecord_path)
        else:
            with pytest.raises(CorruptDataError) as info:
                verify(tfrecord_path)
            assert str(info.value).startswith(f"{victim}: "), back


def test_flipped_byte_never_yields_wrong_values(saved):
    """Everything yielded before the error is exactly what was saved."""
    tfrecord_path, header_path = saved
    offset, length = record_spans(Path(tfrecord_path).read_bytes())[900]
    flip(tfrecord_path, offset + 12 + length // 2)
    seen = []
    with pytest.raises(ITERATION_ERRORS):
        for element in load(tfrecord_path, header_path):
            seen.append(int(element["y"]))
    assert seen == list(range(len(seen))) and len(seen) <= 900


# ---- (b) a truncated or grown file -------------------------------------------------------------


@pytest.mark.parametrize("keep", [0, 1, 100, -1, -17])
def test_truncated_file_fails_load_at_once(saved, keep):
    tfrecord_path, header_path = saved
    data = Path(tfrecord_path).read_bytes()
    Path(tfrecord_path).write_bytes(data[:keep])
    size = Path(tfrecord_path).stat().st_size
    for call in (load, verify):
        with pytest.raises(CorruptDataError, match=(
                f"^{re.escape(tfrecord_path)}: {size} bytes on disk, but "
                f"{re.escape(header_path)} says {len(data)}: the file is truncated")):
            call(tfrecord_path, header_path)


def test_appended_bytes_fail_load_at_once(saved):
    tfrecord_path, header_path = saved
    with open(tfrecord_path, "ab") as f:
        f.write(b"\0" * 16)
    with pytest.raises(CorruptDataError, match=r"data\.tfrecord: \d+ bytes on disk"):
        load(tfrecord_path, header_path)


def test_truncated_shard_fails_load_at_once(tmp_path):
    tfrecord_path = str(tmp_path / "data.tfrecord")
    header = save(dataset(), tfrecord_path, num_shards=3)
    victim = tmp_path / header["shards"][1]["file"]
    victim.write_bytes(victim.read_bytes()[:-5])
    with pytest.raises(CorruptDataError, match=f"^{victim}: "):
        load(tfrecord_path)


# ---- (c) a record file of another save, with the header's size patched to match --------------


# load refuses a file too small for the header's records at once (README, Guarantees);
# iterating finds the others (a TensorFlow error whose message carries super_serial's)
TOO_FEW = "only {} could be read from it"
TOO_MANY = f"the file holds more than {NUM}"


@pytest.mark.parametrize("values, least, claimed", [(None, 17, 1), (100, 416, 100)],
                         ids=["framing", "values"])
def test_a_record_count_the_file_cannot_hold_fails_load_at_once(paths, values, least, claimed):
    """A record takes 16 bytes of framing and its fixed-shape values at the least (an int64's
    1 byte; 400 bytes of 100 float32s): a header claiming more records than the file holds so,
    though not without the framing or the values, is refused by load, naming the file, not
    left to fail while iterating (helper-128: a mutant counting no framing passed)."""
    tfrecord_path, header_path = paths
    dataset = (tf.data.Dataset.range(3) if values is None else
               tf.data.Dataset.from_tensor_slices(tf.zeros([3, values])))
    save(dataset, tfrecord_path, header_path)
    size = Path(tfrecord_path).stat().st_size
    count = size // claimed  # records of `claimed` bytes each fit, of `least` do not

    def claim(header):
        header["num_records"] = count
        header["shards"][0]["num_records"] = count

    edit_header(header_path, claim)
    with pytest.raises(CorruptDataError, match="^" + re.escape(
            f"{tfrecord_path}: {size} bytes cannot hold the {count} records of the shapes that "
            f"{header_path} gives (at least {count * least} bytes)") + "$"):
        load(tfrecord_path, header_path)


@pytest.mark.parametrize("other_count, found", [
    (NUM - 1000, None), (NUM - 1, TOO_FEW.format(NUM - 1)), (NUM + 1, TOO_MANY),
    (NUM + 1100, TOO_MANY),
])
def test_record_count_mismatch(saved, tmp_path_factory, other_count, found):
    tfrecord_path, header_path = saved
    other = str(tmp_path_factory.mktemp("other") / "data.tfrecord")
    save(dataset(other_count), other)
    shutil.copyfile(other, tfrecord_path)
    size = Path(tfrecord_path).stat().st_size
    edit_header(header_path, lambda h: h["shards"][0].__setitem__("num_bytes", size))
    if found is None:
        with pytest.raises(CorruptDataError, match=(
                f"^{re.escape(tfrecord_path)}: {size} bytes cannot hold the {NUM} records of "
                f"the shapes that {re.escape(header_path)} gives \\(at least \\d+ bytes\\)$")):
            load(tfrecord_path, header_path)
    else:
        with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(
                f"super_serial: {tfrecord_path}: the header says {NUM} records, but {found}; it "
                "is corrupt, truncated, or belongs to another header")):
            iterate(tfrecord_path, header_path)
    with pytest.raises(CorruptDataError, match=str(NUM)) as info:
        verify(tfrecord_path, header_path)
    assert str(info.value).startswith(tfrecord_path)


# ---- (d) records that do not match a hand-edited header -----------------------------------------


def rename_x(header):
    header["features"]["w"] = header["features"].pop("x")
    header["features"]["w"]["path"] = ["w"]
    header["structure"] = {"w": "w", "y": "y", "z": "z"}


MISMATCHES = {
    # edit, then words the iteration error must hold (besides the file), and verify's message
    # where it says otherwise (what TensorFlow's parser says, in verify's words)
    "renamed_key": (rename_x, ["Feature: w", "could not be found"], None),
    "float_shape": (lambda h: h["features"]["x"].update(shape=[3]),
                    ["Key: x", "Values size: 2", "output shape: [3]"],
                    ["record 0: feature 'x': expected 3 float values, found 2"]),
    "int_shape": (lambda h: h["features"]["y"].update(shape=[2]),
                  ["Key: y", "Values size: 1", "output shape: [2]"],
                  ["record 0: feature 'y': expected 2 int64 values, found 1"]),
    "float_as_int": (lambda h: h["features"]["x"].update(dtype="int32", dtype_enum=3,
                                                         encoding="int64"),
                     ["Key: x", "Data type: float", "expected type: int64"],
                     ["record 0: feature 'x': holds a FloatList, where the header gives an "
                      "Int64List"]),
    "raw_as_float": (lambda h: h["features"]["z"].update(dtype="float32", dtype_enum=1,
                                                         encoding="float"),
                     ["Key: z", "Data type: string", "expected type: float"],
                     ["record 0: feature 'z': holds a BytesList, where the header gives a "
                      "FloatList"]),
    "raw_shape": (lambda h: h["features"]["z"].update(shape=[3]),
                  ["z", "expected 24 bytes", "found 8"], None),
}


@pytest.mark.parametrize("name", sorted(MISMATCHES))
def test_records_not_matching_header(saved, name):
    tfrecord_path, header_path = saved
    change, words, verify_words = MISMATCHES[name]
    edit_header(header_path, change)
    read_header(header_path)  # the header itself is valid
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        iterate(tfrecord_path, header_path)
    for word in [tfrecord_path, *words]:
        assert word in info.value.message, f"{word!r} not in {info.value.message!r}"
    with pytest.raises(CorruptDataError) as info:
        verify(tfrecord_path, header_path)
    for word in [tfrecord_path, *(verify_words or words)]:
        assert word in str(info.value), f"{word!r} not in {str(info.value)!r}"


@pytest.mark.parametrize("name", sorted(MISMATCHES))
def test_verify_message_is_one_clean_line(saved, name):
    """verify's message starts with the file, without TensorFlow's op and iterator decorations."""
    tfrecord_path, header_path = saved
    edit_header(header_path, MISMATCHES[name][0])
    with pytest.raises(CorruptDataError) as info:
        verify(tfrecord_path, header_path)
    message = str(info.value)
    assert message.startswith((tfrecord_path, f"Name: {tfrecord_path}:")), message
    assert "\n" not in message and "Iterator::" not in message and "[[" not in message, message
    assert "\\'" not in message, f"escaped quotes in {message!r}"


def test_a_record_file_that_cannot_be_read_is_named(saved, monkeypatch):
    """Only a missing file was named by super_serial; others (permission denied, say: tests
    run as root, so the error is made here) came as TensorFlow's own error types."""
    tfrecord_path, header_path = saved
    stat = tf.io.gfile.stat

    def denied(path):
        if path == tfrecord_path:
            raise tf.errors.PermissionDeniedError(None, None, f"{path}; Permission denied")
        return stat(path)

    monkeypatch.setattr(tf.io.gfile, "stat", denied)
    for call in (load, verify):
        with pytest.raises(CorruptDataError, match=re.escape(
                f"{tfrecord_path}: cannot read record file (listed in {header_path}): "
                "Permission denied") + "$"):  # the path once
            call(tfrecord_path, header_path)


def test_a_record_file_that_does_not_open_is_named_by_load(saved, monkeypatch):
    """A file that can be looked at but not opened (mode 000, for another user) was loaded
    without a word, and reading it raised TensorFlow's PermissionDeniedError. Made here, as
    tests run as root: the OS refuses to open the record file."""
    tfrecord_path, header_path = saved
    os_open = core.os.open

    def denied(path, *args, **kwargs):
        if str(path) == tfrecord_path:
            raise PermissionError(13, "Permission denied", str(path))
        return os_open(path, *args, **kwargs)

    monkeypatch.setattr(core.os, "open", denied)
    for call in (load, verify):
        with pytest.raises(CorruptDataError, match=re.escape(
                f"{tfrecord_path}: cannot read record file (listed in {header_path}): "
                "Permission denied") + "$"):
            call(tfrecord_path, header_path)


def test_a_header_that_cannot_be_read_names_its_path_once(saved, monkeypatch):
    """TensorFlow's message begins with the path ("<path>; Permission denied"), which the
    HeaderError gives already."""
    tfrecord_path, header_path = saved
    gfile = tf.io.gfile.GFile

    def denied(path, *args, **kwargs):
        if path == header_path:
            raise tf.errors.PermissionDeniedError(None, None, f"{path}; Permission denied")
        return gfile(path, *args, **kwargs)

    monkeypatch.setattr(tf.io.gfile, "GFile", denied)
    for call in (load, verify, read_header):
        args = (header_path,) if call is read_header else (tfrecord_path, header_path)
        with pytest.raises(HeaderError, match=re.escape(
                f"{header_path}: cannot read header: Permission denied") + "$"):
            call(*args)


def test_verify_takes_progress_by_name_only(saved):
    """As every option of save and load: verify(path, header, True) read as progress."""
    with pytest.raises(TypeError, match="positional arguments but 3 were given"):
        verify(*saved, True)  # noqa: FBT003 - the call refused


def test_verify_reads_a_block_at_a_time(paths, monkeypatch):
    """verify read batches of at least 256 records whatever their size: for records of 500 kB,
    in blocks of 8, 128 MB at once where load parses 4 MB."""
    tfrecord_path, header_path = paths
    dataset = tf.data.Dataset.range(40).map(lambda i: tf.fill([125_000], tf.cast(i, tf.float32)))
    header = save(dataset, tfrecord_path, header_path)
    assert header["block_records"] == 8
    assert verified_in_batches_of(tfrecord_path, header_path, monkeypatch) == (40, [8])


def test_verify_reads_small_records_many_at_a_time(paths, monkeypatch):
    """Where the spec's guess makes small blocks (3 records of three unknown dims a block,
    dealt to two shards), records that turn out small are read about 4 MiB at a time, not a
    block at a time: 3.5 times the time for 20,000 records of 63 bytes."""
    tfrecord_path, header_path = paths
    one = lambda i: i // 100 + 1  # noqa: E731 - 1, but not known to be
    dataset = tf.data.Dataset.range(100).map(lambda i: tf.zeros(tf.stack([one(i), one(i), i % 3])))
    assert dataset.element_spec.shape.as_list() == [None, None, None]
    header = save(dataset, tfrecord_path, header_path, num_shards=2)
    assert header["block_records"] == 3
    assert verified_in_batches_of(tfrecord_path, header_path, monkeypatch) == (100, [1024])


def verified_in_batches_of(tfrecord_path, header_path, monkeypatch) -> tuple:
    """verify's record count, and the blocks of records it asked load's pipeline to check."""
    asked, real = [], core._load

    def spy(*args, **options):
        asked.append(options["checked"][0].block_records)
        return real(*args, **options)

    monkeypatch.setattr(core, "_load", spy)
    return verify(tfrecord_path, header_path)["num_records"], asked


def edit_examples(tfrecord_path, header_path, edits: dict, kind: str = "int64_list"):
    """Rewrites a one-file dataset with {record index: key: new values of the list `kind`}
    applied, and its header's byte count to match (protobuf's own serialization may differ in
    size)."""
    records = list(tf.data.TFRecordDataset(tfrecord_path).as_numpy_iterator())
    for index, changes in edits.items():
        example = tf.train.Example.FromString(records[index])
        for key, values in changes.items():
            getattr(example.features.feature[key], kind).value[:] = values
        records[index] = example.SerializeToString()
    rewrite_records(tfrecord_path, header_path, records)


def assert_check_fails(tfrecord_path, header_path, record: int, feature: str, problem: str):
    """Iterating raises TensorFlow's error, verify a one-line message; both name the file, the
    record (its place in the file), the feature and the problem."""
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        iterate(tfrecord_path, header_path)
    assert (f"{tfrecord_path}: record {record}: feature \\'{feature}\\': {problem}"
            in info.value.message)
    with pytest.raises(CorruptDataError) as info:
        verify(tfrecord_path, header_path)
    assert str(info.value) == f"{tfrecord_path}: record {record}: feature '{feature}': {problem}"


def test_a_record_that_fails_a_check_in_a_later_block(paths):
    """Checks made on a whole block of records name the file, the first failing record (its
    place in the file, not in the block) and the feature, and quote the failing value; a
    later block is checked as the first."""
    tfrecord_path, header_path = paths
    lengths = [i % 3 for i in range(NUM)]
    save(tf.data.Dataset.from_generator(
        lambda: ({"v": np.full(n, 0.5)} for n in lengths),
        output_signature={"v": tf.TensorSpec([None], tf.float64)}), tfrecord_path, header_path)
    # in the second block (1024 records a block); each holds one value
    edit_examples(tfrecord_path, header_path, {1030: {"v#shape": [2]}, 1033: {"v#shape": [2]}})
    assert_check_fails(tfrecord_path, header_path, 1030, "v",
                       "the number of values does not match the stored shape, found 1")


@pytest.mark.parametrize("bad", [0, 3, 4])
def test_a_failing_record_is_named_beside_checks_of_the_whole_block(paths, bad):
    """verify checks an int32's range for the block as a whole (`_check_range`), which names
    no record; beside it, a record that fails a check of its own is still named, from the
    first of the block to the last."""
    tfrecord_path, header_path = paths
    save(tf.data.Dataset.from_generator(
        lambda: ({"a": np.full(i % 2 + 1, 0.5), "i": np.array([i, -i], np.int32)}
                 for i in range(5)),
        output_signature={"a": tf.TensorSpec([None], tf.float64),
                          "i": tf.TensorSpec([2], tf.int32)}), tfrecord_path, header_path)
    assert read_header(header_path)["features"]["i"]["encoding"] == "int64"
    edit_examples(tfrecord_path, header_path, {bad: {"a#shape": [3]}})
    assert_check_fails(tfrecord_path, header_path, bad, "a",
                       f"the number of values does not match the stored shape, found {bad % 2 + 1}")


@pytest.mark.parametrize("spec_shape, stored", [
    ([None, None], [2**62 + 1, 4]),  # 4 values, as the product wraps in int64
    ([None, None, None], [2**32, 2**32, 1]),  # no values: it wraps to 0
])
def test_a_stored_shape_whose_product_wraps(paths, spec_shape, stored):
    """A stored shape whose number of values overflows int64 is refused with the file and the
    feature named; it came to the values stored, and TensorFlow's reshape refused it with
    a message naming neither."""
    tfrecord_path, header_path = paths
    values = 4 if stored[0] % 2 else 0
    shape = [2, 2] if values else [0, 0, 0]
    save(tf.data.Dataset.from_generator(lambda: ({"v": np.zeros(shape)} for _ in range(2)),
                                        output_signature={"v": tf.TensorSpec(spec_shape,
                                                                             tf.float64)}),
         tfrecord_path, header_path)
    edit_examples(tfrecord_path, header_path, {1: {"v#shape": stored}})
    assert_check_fails(tfrecord_path, header_path, 1, "v",
                       f"the number of values does not match the stored shape, found {values}")


RAGGED_EDITS = {
    # key to edit in record 0 ([[[1, 2], [3]]]: row lengths [2], then [2, 1]), its new row
    # lengths, the problem named
    "values": ("r#row_lengths_1", [2, 2], "the number of values does not match the row lengths, "
                                          "found 3"),
    "levels": ("r#row_lengths_0", [1], "row lengths of level 1 do not match level 0"),
    # lengths that add up to the 3 values but are not counts: TensorFlow refused the splits
    # they make, with a message naming neither the file nor the feature
    # found: the negative length (not the lengths' sum, 3), or the sum of several
    "negative": ("r#row_lengths_1", [-1, 4], "row lengths of level 1 are negative or too "
                                             "large, found -1"),
    "two negative": ("r#row_lengths_1", [-2, 6, -1], "row lengths of level 1 are negative or "
                                                     "too large, found -3"),
    "wrapping": ({"r#row_lengths_0": [4], "r#row_lengths_1": [2**62, 2**62, 2**62, 2**62 + 3]},
                 None, "row lengths of level 1 are negative or too large, found 3"),
    # negative lengths whose sum wraps to 0, beside positive ones: every sum is right, in int64
    # and in float64 (found: the wrapped sum of the negative ones)
    "negative, wrapping": ({"r#row_lengths_0": [7], "r#row_lengths_1": [
        -2**63, -2**63, 2**62, 2**62, 2**62, 2**62, 3]}, None,
        "row lengths of level 1 are negative or too large, found 0"),
}


@pytest.mark.parametrize("name", sorted(RAGGED_EDITS))
def test_ragged_row_lengths_that_do_not_add_up(paths, name):
    tfrecord_path, header_path = paths
    save(tf.data.Dataset.from_tensor_slices({"r": tf.ragged.constant(
        [[[[1, 2], [3]]], [[[4]]], [[[5, 6], [7]], [[8]]]], tf.int64)}), tfrecord_path, header_path)
    key, lengths, problem = RAGGED_EDITS[name]
    edit_examples(tfrecord_path, header_path, {0: key if lengths is None else {key: lengths}})
    assert_check_fails(tfrecord_path, header_path, 0, "r", problem)


@pytest.mark.parametrize("dim", [2, 3])
def test_ragged_rows_that_do_not_have_the_headers_known_length(paths, dim):
    """Rows of lengths 1 and 3, then 2 and 2, under a header edited from [None, None] to
    [None, dim]: with 2, the totals fit and the values came back in other rows; with 3,
    TensorFlow's own assertion named neither the file nor the feature."""
    tfrecord_path, header_path = paths
    save(tf.data.Dataset.from_tensor_slices({"r": tf.ragged.constant(
        [[[0], [1, 2, 3]], [[4, 5], [6, 7]]], tf.int32)}), tfrecord_path, header_path)
    with open(header_path) as f:
        text = f.read()
    assert "shape: [null, null]" in text
    with open(header_path, "w") as f:
        f.write(text.replace("shape: [null, null]", f"shape: [null, {dim}]"))
    # found: the number of rows of other lengths in the first failing record, record 0
    assert_check_fails(tfrecord_path, header_path, 0, "r",
                       f"the header gives dim 1 as {dim}, but rows of other lengths are stored, "
                       f"found {4 - dim}")


def test_a_zero_size_component_over_records_that_hold_values(paths):
    """A float64 scalar under a header edited to shape [0]: zero-size components are made for
    each element, not decoded, but their records are still checked."""
    tfrecord_path, header_path = paths
    save(tf.data.Dataset.from_tensor_slices({"z": np.arange(4) / 3, "y": np.arange(4)}),
         tfrecord_path, header_path)
    with open(header_path) as f:
        header = yaml.safe_load(f)
    assert header["features"]["z"]["shape"] == []
    header["features"]["z"]["shape"] = [0]
    with open(header_path, "w") as f:
        yaml.safe_dump(header, f)
    problem = "expected 0 bytes of float64 per record, found 8"
    assert_check_fails(tfrecord_path, header_path, 0, "z", problem)
    with pytest.raises(tf.errors.InvalidArgumentError, match=problem):
        iterate(tfrecord_path, header_path, batch_size=2)


@pytest.mark.parametrize("values, problem", [
    (np.arange(4, dtype=np.float32), "expected 0 float values, found 1"),
    (np.array([b"a", b"b", b"c", b"d"]), "expected 0 strings, found 1"),
], ids=["float32", "string"])
@pytest.mark.parametrize("how", ["eager", "batch_size", "in a graph", "verify"])
def test_a_lone_zero_size_component_over_records_that_hold_values(paths, values, problem, how):
    """With no other feature beside it, nothing used the parse of the records: every form of
    load gave [] for each element and verify passed, the values silently dropped (helper-101;
    in a graph, a control dependency on the parse was not enough)."""
    tfrecord_path, header_path = paths
    save(tf.data.Dataset.from_tensor_slices({"z": values}), tfrecord_path, header_path)
    edit_header(header_path, lambda h: h["features"]["z"].update(shape=[0]))
    if how == "verify":
        with pytest.raises(CorruptDataError, match="^" + re.escape(
                f"{tfrecord_path}: record 0: feature 'z': {problem}") + "$"):
            verify(tfrecord_path, header_path)
        return
    run = {"eager": lambda: iterate(tfrecord_path, header_path),
           "batch_size": lambda: iterate(tfrecord_path, header_path, batch_size=2),
           "in a graph": tf.function(lambda: load(tfrecord_path, header_path).reduce(
               np.int64(0), lambda n, _: n + 1))}[how]
    with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(
            f"Name: {tfrecord_path}:0, Key: z, Index: 0.  ")):  # the parse's own error
        run()


def test_a_lone_zero_size_component_over_records_that_are_no_examples(paths):
    """verify read no record of a save whose only component is zero-size (helper-101)."""
    tfrecord_path, header_path = paths
    save(tf.data.Dataset.from_tensor_slices({"z": np.zeros((4, 0), np.float32)}),
         tfrecord_path, header_path)
    rewrite_records(tfrecord_path, header_path, [b"not a tf.train.Example"] * 4)
    with pytest.raises(CorruptDataError, match="^" + re.escape(
            f"{tfrecord_path}: record 0 is not a tf.train.Example TensorFlow can parse") + "$"):
        verify(tfrecord_path, header_path)
    with pytest.raises(tf.errors.InvalidArgumentError, match="Could not parse example input"):
        iterate(tfrecord_path, header_path)


RANGE_CASES = {
    # dtype saved, its spec's shape, a stored value that does not fit, what the message says
    "int16": (tf.int16, [2], 40000, "int16 (-32768 to 32767), found 40000"),
    "uint32": (tf.uint32, [2], -1, "uint32 (0 to 4294967295), found -1"),
    "bool": (tf.bool, [2], 2, "bool (0 to 1), found 2"),
    "int32 [None]": (tf.int32, [None], 2**31, "int32 (-2147483648 to 2147483647), found "
                                              "2147483648"),
    "uint16 ragged": (tf.uint16, None, 70000, "uint16 (0 to 65535), found 70000"),
}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("bad", [None, "rounded", "subnormal"])
def test_verify_finds_float_values_that_are_not_the_dtype(paths, dtype, bad):
    """A header edited from float32 to float16 or bfloat16 (stored as a FloatList, as the
    original module stored them) made `load` round the values, 70000.0 to inf, and `verify`
    passed it (helper-103). Values of the dtype pass, NaN, infinities, -0.0 and the smallest
    subnormal among them; one value that is not fails."""
    tfrecord_path, header_path = paths
    tf_dtype = tf.as_dtype(dtype)
    values = tf.cast(tf.constant([[np.nan, np.inf], [-np.inf, -0.0], [1.5, 2.0 ** -24]]),
                     tf_dtype)
    values = tf.cast(values, tf.float32).numpy()
    if dtype == "bfloat16":  # the smallest subnormal of bfloat16, a float32 subnormal too
        values[0, 1] = np.array(0x00010000, np.uint32).view(np.float32)
    if bad == "rounded":  # beyond its range, or between two of its values
        values[2, 0] = 70000.0 if dtype == "float16" else 1.1
    elif bad == "subnormal":  # a float32 subnormal none of its values, which TensorFlow's
        # float comparisons called equal to what it rounds to (helper-105)
        values[1, 1] = np.array(0x00011C2B, np.uint32).view(np.float32)
    save(tf.data.Dataset.from_tensor_slices({"x": values}), tfrecord_path, header_path)
    edit_header(header_path, lambda h: h["features"]["x"].update(
        dtype=dtype, dtype_enum=tf_dtype.as_datatype_enum))
    if bad is None:
        assert verify(tfrecord_path, header_path)["num_records"] == 3
        loaded = np.stack([e["x"].numpy() for e in load(tfrecord_path, header_path)])
        assert loaded.dtype == tf_dtype.as_numpy_dtype
        np.testing.assert_array_equal(loaded.astype(np.float32), values)
        return
    with pytest.raises(CorruptDataError, match="^" + re.escape(
            f"{tfrecord_path}: feature 'x': a value is not exactly a {dtype} (it would load "
            "rounded)") + "$"):
        verify(tfrecord_path, header_path)


def test_verify_passes_every_nan_of_a_float_list_read_as_float16(paths):
    """NaNs (any sign or payload) of a FloatList that a header gives as float16 load as NaNs:
    verify's exactness check leaves them be, as `_check_exact` says."""
    bits = np.array([0x7E00, 0xFE00, 0x7C01, 0x7E01, 0x7FFF, 0xFC01], np.uint16)
    values = bits.view(np.float16).astype(np.float32).reshape(3, 2)
    values[2, 1] = np.array(0x7FC00001, np.uint32).view(np.float32)  # a float32 NaN payload
    save(tf.data.Dataset.from_tensor_slices({"x": values}), *paths)
    edit_header(paths[1], lambda h: h["features"]["x"].update(
        dtype="float16", dtype_enum=tf.float16.as_datatype_enum))
    assert verify(*paths)["num_records"] == 3
    loaded = np.stack([e["x"].numpy() for e in load(*paths)])
    assert loaded.dtype == np.float16 and np.isnan(loaded).all()


# 16-bit ints are raw since format version 3; version 2 stored them as int64, as it stored
# 32-bit ones: saved as those, then their header says what version 2 wrote
_INT64_ENCODED = {tf.int16: tf.int32, tf.uint16: tf.uint32}


def _as_written_by_version_2(header_path, name: str, dtype: tf.DType):
    edit_header(header_path, lambda header: (
        header.update(version=2),
        header["features"][name].update(dtype=dtype.name, dtype_enum=dtype.as_datatype_enum)))


@pytest.mark.parametrize("name", sorted(RANGE_CASES))
def test_verify_finds_int64_values_that_do_not_fit_the_dtype(paths, name):
    """A header that says int16 over records whose Int64List holds 40000 (an edited header,
    or another file's): verify names the file, the feature and the value. load does not check
    (it would cost its loads of such lists 5-15%) and wraps the value as tf.cast does."""
    tfrecord_path, header_path = paths
    dtype, shape, bad, problem = RANGE_CASES[name]
    stored = _INT64_ENCODED.get(dtype, dtype)
    values = np.zeros([NUM, 2], stored.as_numpy_dtype)
    if shape is None:
        source = tf.data.Dataset.from_tensor_slices({"v": tf.RaggedTensor.from_tensor(values)})
    else:
        source = tf.data.Dataset.from_generator(
            lambda: ({"v": v} for v in values),
            output_signature={"v": tf.TensorSpec(shape, stored)})
    save(source, tfrecord_path, header_path)
    if stored != dtype:
        _as_written_by_version_2(header_path, "v", dtype)
    first = load(tfrecord_path, header_path).take(2).as_numpy_iterator()
    assert [e["v"].tolist() for e in first] == [[0, 0]] * 2
    edit_examples(tfrecord_path, header_path, {1050: {"v": [0, bad]}})
    with pytest.raises(CorruptDataError) as info:
        verify(tfrecord_path, header_path)
    assert str(info.value) == f"{tfrecord_path}: feature 'v': a value does not fit {problem}"
    loaded = list(load(tfrecord_path, header_path).skip(1050).take(1).as_numpy_iterator())
    assert loaded[0]["v"].tolist() == tf.cast([0, bad], dtype).numpy().tolist()


@pytest.mark.parametrize("dtype", [np.int32, np.uint32])
def test_verify_accepts_the_extremes_of_int64_list_dtypes(paths, dtype):
    """verify's range check of values stored in an Int64List is inclusive at both ends: a
    dtype's least and greatest value fit it."""
    info = np.iinfo(dtype)
    values = np.array([[info.min, info.max], [0, 1]], dtype)
    dataset = tf.data.Dataset.from_tensor_slices({"v": values})
    save(dataset, *paths)
    assert verify(*paths)["num_records"] == 2
    np.testing.assert_array_equal(np.stack([e["v"].numpy() for e in load(*paths)]), values)


def test_int64_values_are_not_range_checked_as_raw_lists(paths):
    """With original_dtypes=False nothing is narrowed, so nothing is checked."""
    tfrecord_path, header_path = paths
    save(tf.data.Dataset.from_tensor_slices({"v": np.zeros([3, 2], np.int32)}), tfrecord_path,
         header_path)
    _as_written_by_version_2(header_path, "v", tf.int16)
    edit_examples(tfrecord_path, header_path, {1: {"v": [0, 40000]}})
    raw = [e["v"].tolist() for e in load(tfrecord_path, header_path,
                                         original_dtypes=False).as_numpy_iterator()]
    assert raw == [[0, 0], [0, 40000], [0, 0]]


@pytest.mark.parametrize("original_dtypes", [True, False])
@pytest.mark.parametrize("kind", ["fixed", "unknown shape"])
def test_raw_bytes_of_the_wrong_count_fail_also_as_bytes(paths, kind, original_dtypes):
    """With original_dtypes=False a raw feature is its bytes as stored; they were returned
    unchecked (a uint8 [2] of 3 bytes came back as b"abc"), though the header gives their
    number (or, for an unknown shape, the size of a value)."""
    tfrecord_path, header_path = paths
    if kind == "fixed":
        values = {"u": np.arange(8, dtype=np.uint8).reshape(4, 2)}
        problem, stored = "expected 2 bytes of uint8 per record, found 3", b"abc"
    else:
        values = {"u": tf.ragged.constant([[0.5], [1.5, 2.5], [], [3.5]], tf.float64)}
        problem, stored = "byte count is not a multiple of 8 (float64), found 9", b"x" * 9
    save(tf.data.Dataset.from_tensor_slices(values), tfrecord_path, header_path)
    assert read_header(header_path)["features"]["u"]["encoding"] == "raw"
    edit_examples(tfrecord_path, header_path, {2: {"u": [stored]}}, "bytes_list")
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        iterate(tfrecord_path, header_path, original_dtypes=original_dtypes)
    assert f"{tfrecord_path}: record 2: feature \\'u\\': {problem}" in info.value.message


@pytest.mark.parametrize("shape, stored", [([], [b"x", b"y"]), ([2], [b"x"] * 3)])
def test_verify_counts_the_strings_of_a_record_tensorflow_cannot_parse(paths, shape, stored):
    """For more strings than a known shape holds, TensorFlow's parse error gives no count
    (only "Can't parse serialized Example", though the record parses), unlike for fewer, or
    for numbers: verify reads the record again and says what it holds."""
    tfrecord_path, header_path = paths
    save(tf.data.Dataset.from_tensor_slices({"s": np.full([3, *shape], b"a", object)}),
         tfrecord_path, header_path)
    edit_examples(tfrecord_path, header_path, {1: {"s": stored}}, "bytes_list")
    with pytest.raises(tf.errors.InvalidArgumentError, match="Can't parse serialized Example"):
        iterate(tfrecord_path, header_path)  # TensorFlow's own message, as the README says
    expected = 2 if shape else 1
    with pytest.raises(CorruptDataError) as info:
        verify(tfrecord_path, header_path)
    assert str(info.value) == (f"{tfrecord_path}: record 1: feature 's': expected {expected} "
                               f"string{'s' if expected > 1 else ''}, found {len(stored)}")


@pytest.mark.parametrize("values", [
    np.zeros((3, 4), np.uint8),  # fixed
    tf.ragged.constant([[0.5], [1.5, 2.5], [], [3.5]][:3], tf.float64),  # ragged
], ids=["fixed", "ragged"])
def test_verify_counts_the_strings_of_a_raw_feature_tensorflow_cannot_parse(paths, values):
    """A raw feature is one string of its bytes: for two, verify gave only TensorFlow's
    "Can't parse serialized Example", as for a record that is none. Found by helper-72."""
    tfrecord_path, header_path = paths
    save(tf.data.Dataset.from_tensor_slices({"u": values}), tfrecord_path, header_path)
    assert read_header(header_path)["features"]["u"]["encoding"] == "raw"
    edit_examples(tfrecord_path, header_path, {1: {"u": [b"ab", b"cd"]}}, "bytes_list")
    with pytest.raises(CorruptDataError) as info:
        verify(tfrecord_path, header_path)
    assert str(info.value) == (f"{tfrecord_path}: record 1: feature 'u': expected 1 string "
                               "(its raw bytes), found 2")


@pytest.mark.parametrize("values, kind, problem", [
    ([1.0, 2.0, 3.0], "float_list", "expected 2 float values, found 3"),
    ([1.0], "float_list", "expected 2 float values, found 1"),
    ([1, 2], "int64_list", "holds an Int64List, where the header gives a FloatList"),
    ([b"a"], "bytes_list", "holds a BytesList, where the header gives a FloatList"),
])
def test_verify_says_what_a_record_holds_that_tensorflow_cannot_parse(paths, values, kind,
                                                                      problem):
    """verify gave TensorFlow's own text: "Name: <file>:17, Key: x, Index: 17.  Number of
    float values != expected.  Values size: 3 but output shape: [2]", whose "Index" (the
    record's in the block parsed) read as a second record number (helper-86)."""
    tfrecord_path, header_path = paths
    save(tf.data.Dataset.from_tensor_slices({"x": np.ones([300, 2], np.float32)}),
         tfrecord_path, header_path)
    edit_examples(tfrecord_path, header_path, {257: {"x": values}}, kind)
    with pytest.raises(CorruptDataError) as info:
        verify(tfrecord_path, header_path)
    assert str(info.value) == f"{tfrecord_path}: record 257: feature 'x': {problem}"


def test_a_feature_named_as_check_numerics_words_its_error_is_still_corrupt_data(paths):
    """verify lets `tf.debugging.enable_check_numerics()`'s error through as it is
    (tests/test_settings.py); a parse error quoting a feature of its words was let through
    too, as TensorFlow's error (helper-99)."""
    tfrecord_path, header_path = paths
    name = "!!! Detected Infinity or NaN in output 0 of graph op"
    save(tf.data.Dataset.from_tensor_slices({name: np.ones([3, 2], np.float32)}),
         tfrecord_path, header_path)
    edit_examples(tfrecord_path, header_path, {1: {name: [1, 2]}}, "int64_list")
    with pytest.raises(CorruptDataError) as info:
        verify(tfrecord_path, header_path)
    assert str(info.value) == (f"{tfrecord_path}: record 1: feature '{name}': holds an "
                               "Int64List, where the header gives a FloatList")


def test_of_several_failing_checks_the_first_feature_is_named(paths):
    """Records failing the checks of two features: the message is always the one of the
    feature that comes first (in the order of the structure)."""
    tfrecord_path, header_path = paths
    rows = [np.arange(i % 3 + 1, dtype=np.float64) for i in range(5)]
    source = tf.data.Dataset.from_generator(lambda: iter(rows),
                                            output_signature=tf.TensorSpec([None], tf.float64))
    save(tf.data.Dataset.zip({"a": source, "b": source}), tfrecord_path, header_path)
    edit_examples(tfrecord_path, header_path, {2: {"a#shape": [9], "b#shape": [8]}})
    assert_check_fails(tfrecord_path, header_path, 2, "a",
                       "the number of values does not match the stored shape, found 3")


# ---- (e) missing files ---------------------------------------------------------------------


def test_missing_record_file(saved):
    tfrecord_path, header_path = saved
    Path(tfrecord_path).unlink()
    for call in (load, verify):
        with pytest.raises(CorruptDataError, match=f"^{tfrecord_path}: record file not found"):
            call(tfrecord_path, header_path)


def test_missing_shard(tmp_path):
    tfrecord_path = str(tmp_path / "data.tfrecord")
    header = save(dataset(50), tfrecord_path, num_shards=3)
    missing = tmp_path / header["shards"][2]["file"]
    missing.unlink()
    with pytest.raises(CorruptDataError, match=f"^{missing}: record file not found"):
        load(tfrecord_path)


def _iterate_within(dataset, seconds: float = 60):
    """Iterates `dataset` in a thread: what it raised, or a failure if it has not ended in
    `seconds` (the hang this guards against spins in TensorFlow, out of reach)."""
    outcome: list = []

    def run():
        try:
            outcome.append(sum(1 for _ in dataset))
        except Exception as error:  # noqa: BLE001 - handed to the test
            outcome.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"iteration still running after {seconds} s"
    return outcome[0]


@pytest.mark.parametrize("shards, batch_size", [(1, None), (3, None), (3, 8), (1, 8)])
def test_file_removed_after_load_raises_naming_it(tmp_path, shards, batch_size):
    """`load` checked the files, but each iterator opens them again: one gone by then is an
    error naming it, not an endless retry (tf.data's `ignore_errors`, which ends a file's
    stream at a corrupt record, retries a file it cannot open forever)."""
    tfrecord_path = str(tmp_path / "data.tfrecord")
    header = save(dataset(50), tfrecord_path, num_shards=shards)
    loaded = load(tfrecord_path, batch_size=batch_size)
    assert _iterate_within(loaded) == (50 if batch_size is None else 7)  # a first epoch
    missing = tmp_path / header["shards"][-1]["file"]
    missing.unlink()
    error = _iterate_within(loaded)
    assert isinstance(error, tf.errors.NotFoundError), error
    assert str(missing) in error.message


def test_missing_header(saved):
    tfrecord_path, header_path = saved
    Path(header_path).unlink()
    for call in (load, verify):
        with pytest.raises(HeaderError, match=f"^{header_path}: header file not found"):
            call(tfrecord_path, header_path)
    with pytest.raises(HeaderError, match=f"^{header_path}: header file not found"):
        read_header(header_path)


def test_a_header_in_a_folder_that_cannot_be_searched_is_not_called_missing(saved,
                                                                          monkeypatch):
    """TensorFlow's look for a file says only that it is not there where a folder above it
    cannot be searched (no x permission): the OS's reason is given instead of "not found".
    Made here (tests run as root, which may search any folder): the header hidden from
    TensorFlow, and the OS denying to open it."""
    tfrecord_path, header_path = saved
    exists, os_open = tf.io.gfile.exists, core.os.open

    def denied(path, *args, **kwargs):
        if str(path) == header_path:
            raise PermissionError(13, "Permission denied", str(path))
        return os_open(path, *args, **kwargs)

    monkeypatch.setattr(tf.io.gfile, "exists", lambda path: path != header_path and exists(path))
    monkeypatch.setattr(core.os, "open", denied)
    for call in (load, verify, read_header):
        args = (header_path,) if call is read_header else (tfrecord_path, header_path)
        with pytest.raises(HeaderError, match=re.escape(
                f"{header_path}: cannot read header: Permission denied") + "$"):
            call(*args)


def test_a_scheme_tensorflow_cannot_read_is_a_header_error(tmp_path):
    """load, verify, read_header and merge on "foo://..." let TensorFlow's
    UnimplementedError through (helper-86); save's is "nothing was saved"."""
    path = "foo://bucket/data.tfrecord"
    reason = "cannot read header: File system scheme 'foo' not implemented"
    for call in (load, verify):
        with pytest.raises(HeaderError, match=re.escape(f"{path}.header.yaml: {reason}")):
            call(path)
    with pytest.raises(HeaderError, match=re.escape(f"{path}: {reason}")):
        read_header(path)
    with pytest.raises(HeaderError, match=re.escape(f"foo://bucket/a.header.yaml: {reason}")):
        merge(["foo://bucket/a"], path)


def test_default_header_missing(paths):
    tfrecord_path, _ = paths
    save(dataset(5), tfrecord_path, tfrecord_path + ".other.yaml")
    with pytest.raises(HeaderError, match=r"data\.tfrecord\.header\.yaml: header file not found"):
        load(tfrecord_path)


@pytest.mark.parametrize("compression, kind", [(None, "TFRecord records"),
                                               ("GZIP", "GZIP-compressed records"),
                                               ("ZLIB", "ZLIB-compressed records")])
def test_records_given_as_the_header_are_named_so(tmp_path, compression, kind, yaml_loader):
    """load(header, records), the two swapped, said "not a valid header: unacceptable
    character #x0013: control characters are not allowed" (#x001f for GZIP; helper-86)."""
    tfrecord_path = str(tmp_path / "data.tfrecord")
    save(dataset(5), tfrecord_path, compression=compression)
    for call in (load, verify):
        with pytest.raises(HeaderError, match=re.escape(
                f"{tfrecord_path}: not a header: it holds {kind}; were the records' path and "
                "the header's swapped?")):
            call(tfrecord_path + ".header.yaml", tfrecord_path)
    with pytest.raises(HeaderError, match=re.escape(f"{tfrecord_path}: not a header: it holds")):
        read_header(tfrecord_path)


def test_a_header_or_a_shard_given_for_the_records_is_named_so(tmp_path):
    """load("data.tfrecord.header.yaml") looked for "data.tfrecord.header.yaml.header.yaml"
    and said only that it was not found; the same for one shard's name."""
    tfrecord_path = str(tmp_path / "data.tfrecord")
    save(dataset(5), tfrecord_path, num_shards=2)
    for given, what in ((tfrecord_path + ".header.yaml", "a header"),
                        (tfrecord_path + "-00001-of-00002", "one shard of a save")):
        for call in (load, verify):
            with pytest.raises(HeaderError, match=re.escape(
                    f"{given}.header.yaml: header file not found; {given} is {what}: give the "
                    f"records' path, {tfrecord_path}")):
                call(given)
    # nothing more said of no such file, nor where another header was given
    for given, header_path in ((tfrecord_path + "-00000-of-00001", None),
                               (tfrecord_path + "-00001-of-00002", str(tmp_path / "typo.yaml"))):
        with pytest.raises(HeaderError, match=re.escape(
                f"{header_path or given + '.header.yaml'}: header file not found") + "$"):
            load(given, header_path)


def test_a_folder_given_for_the_records_is_named_so_with_the_saves_in_it(tmp_path):
    """load("data") of the folder saved into looked for "data.header.yaml" and said only that
    it was not found."""
    folder = tmp_path / "data"
    for name in ("b.tfrecord", "a.tfrecord", "c.tfrecord", "d.tfrecord"):
        save(dataset(2), str(folder / name))
    for given in (str(folder), str(folder) + "/"):
        for call in (load, verify):
            with pytest.raises(HeaderError, match=re.escape(
                    f"{given}.header.yaml: header file not found; {given} is a folder: give the "
                    f"path of records saved in it ({folder}/a.tfrecord, {folder}/b.tfrecord, "
                    f"{folder}/c.tfrecord, ... there)") + "$"):
                call(given)
    (tmp_path / "empty").mkdir()
    with pytest.raises(HeaderError, match=re.escape(
            f"{tmp_path}/empty.header.yaml: header file not found; {tmp_path}/empty is a "
            "folder: give the path of records saved in it") + "$"):
        load(str(tmp_path / "empty"))


@pytest.mark.parametrize("num_shards", [None, 2])
def test_a_copied_pair_does_not_read_the_original_records(tmp_path, num_shards):
    """The header names its files and the path gives their folder: a copy of a pair loaded the
    original's records, and verify passed a corrupt copy."""
    original, copy = str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")
    save(dataset(10), original, num_shards=num_shards)
    header = Path(original + ".header.yaml")
    shutil.copy(header, copy + ".header.yaml")
    for name in [s["file"] for s in read_header(str(header))["shards"]]:
        shutil.copy(tmp_path / name, tmp_path / name.replace("a.", "b.", 1))
    listed = "a.tfrecord-00000-of-00002', ..." if num_shards else "a.tfrecord'"
    first = copy + ("-00000-of-00002" if num_shards else "")
    for call in (load, verify):
        with pytest.raises(HeaderError, match=f"b.tfrecord.header.yaml: lists the record files "
                                              f"'{re.escape(listed)}, not {first}, which is "):
            call(copy)
    assert iterate(original) == 10  # the original still loads
    Path(first).unlink()  # nothing there: the files listed, in the folder given, as for a merge
    assert iterate(copy) == 10
    Path(first).mkdir()  # a folder of that name is no copy of the records (helper-128)
    assert iterate(copy) == 10


def test_a_merged_header_over_an_earlier_save_still_loads(tmp_path):
    """The earlier save's file stays beside the merged header that replaced its header: the
    header lists its parts' files, which are no one save's, and they are what load reads."""
    merged = str(tmp_path / "train.tfrecord")
    save(dataset(4), merged)  # train.tfrecord, soon without a header of its own
    parts = [str(tmp_path / f"train.tfrecord-part{i}") for i in range(2)]
    for i, part in enumerate(parts):
        save(dataset(10).shard(2, i), part)
    merge(parts, merged)
    assert Path(merged).exists()
    assert iterate(merged) == 10


# ---- headers of the original module: no sizes or counts, but errors still name the file -------


@pytest.fixture
def legacy(saved):
    """The saved records under a header of the original module (which had no counts or sizes)."""
    tfrecord_path, header_path = saved
    Path(header_path).write_text(yaml.safe_dump({
        "x": {"shape": [2], "dtype": tf.float32.as_datatype_enum},
        "y": {"shape": [], "dtype": tf.int64.as_datatype_enum},
    }))
    assert iterate(tfrecord_path, header_path) == NUM
    return tfrecord_path, header_path


def test_a_folder_where_a_record_file_should_be_is_called_one(legacy, tmp_path):
    """It was "<path>: <path>; Is a directory: the file is corrupt or truncated", and a shard
    "4096 bytes on disk, but ... says 210: the file is truncated"."""
    tfrecord_path, header_path = legacy
    folder = tmp_path / "a folder"
    folder.mkdir()
    for call in (iterate, verify):
        with pytest.raises(CorruptDataError, match=f"^{re.escape(str(folder))}: a folder, not a "
                                                   "record file$"):
            call(str(folder), header_path)
    shards = str(tmp_path / "shards.tfrecord")
    save(tf.data.Dataset.range(3000), shards, num_shards=3)
    second = Path(f"{shards}-00001-of-00003")
    second.unlink()
    second.mkdir()
    for call in (iterate, verify):
        with pytest.raises(CorruptDataError, match=f"^{re.escape(str(second))}: a folder, not a "
                                                   f"record file \\(listed in {shards}"):
            call(shards)


def test_a_fifo_where_a_record_file_should_be_is_called_one(legacy, tmp_path):
    """An original-module file is counted by reading it, which waited for a writer forever;
    a shard's was "0 bytes on disk, but ... says 210: the file is truncated"."""
    _, header_path = legacy
    with fifo_at(str(tmp_path / "pipe")) as pipe:
        for call in (iterate, verify):
            began = time.monotonic()
            with pytest.raises(CorruptDataError, match=f"^{re.escape(pipe)}: a FIFO \\(named "
                                                       "pipe\\), not a record file$"):
                call(pipe, header_path)
            assert time.monotonic() - began < 2.0
    shards = str(tmp_path / "shards.tfrecord")
    for elements in (3000, 1):  # the second shard holds records; none (0 bytes, as a FIFO)
        save(tf.data.Dataset.range(elements), shards, num_shards=3)
        second = f"{shards}-00001-of-00003"
        Path(second).unlink()
        with fifo_at(second):
            for call in (iterate, verify):
                with pytest.raises(CorruptDataError, match=(
                        f"^{re.escape(second)}: a FIFO \\(named pipe\\), not a record file "
                        f"\\(listed in {shards}")):
                    call(shards)
        Path(second).unlink()


@pytest.mark.parametrize("where", ["payload_middle", "length"])
def test_legacy_flipped_byte_names_the_file(legacy, where):
    tfrecord_path, header_path = legacy
    offset, length = record_spans(Path(tfrecord_path).read_bytes())[1050]
    flip(tfrecord_path, FRAME_POSITIONS[where](offset, length))
    # Their headers hold no record count, so load() counts the records first and fails there.
    with pytest.raises(CorruptDataError, match=f"^{tfrecord_path}: corrupted record"):
        iterate(tfrecord_path, header_path)
    with pytest.raises(CorruptDataError, match=f"^{tfrecord_path}"):
        verify(tfrecord_path, header_path)


def test_legacy_truncated_file_names_the_file(legacy):
    """Its records are counted first (the header holds no count), where TensorFlow's reader
    says "truncated record at 72322' failed with Read less bytes than requested": the
    message gives its offset without the stray quote."""
    tfrecord_path, header_path = legacy
    data = Path(tfrecord_path).read_bytes()
    Path(tfrecord_path).write_bytes(data[: len(data) // 2])
    expected = (f"^{re.escape(tfrecord_path)}: truncated record at byte \\d+ \\(read less bytes "
                "than requested\\): the file is corrupt or truncated$")
    for call in (iterate, verify):
        with pytest.raises(CorruptDataError, match=expected):
            call(tfrecord_path, header_path)


@pytest.mark.parametrize("cut", [0, 1, 11])
@pytest.mark.parametrize("records", [0, 1, 1050])
def test_legacy_file_cut_inside_a_records_framing_names_the_file(legacy, records, cut):
    """TensorFlow's reader takes a file that ends within a record's 12-byte length header for
    one that ends before it: an original-module file cut there loaded one record short (or,
    cut under 12 bytes, empty) without an error. A cut between records cannot be told apart
    from a shorter file (those headers hold no counts): cut 0 only when the header could not
    hold the record."""
    tfrecord_path, header_path = legacy
    data = Path(tfrecord_path).read_bytes()
    offset = record_spans(data)[records][0]
    Path(tfrecord_path).write_bytes(data[: offset + cut])
    if not cut:  # a whole number of records
        assert iterate(tfrecord_path, header_path) == records
        return
    with pytest.raises(CorruptDataError, match=f"^{tfrecord_path}: {cut} bytes after its last "
                                               f"whole record \\(record {records}\\)"):
        iterate(tfrecord_path, header_path)
    with pytest.raises(CorruptDataError, match=f"^{tfrecord_path}: {cut} bytes after"):
        verify(tfrecord_path, header_path)


# ---- a record with a valid checksum that is not a tf.train.Example -----------------------------

# Example{features: 161 bytes follow} but only 12 do: the parser rejects it, and TensorFlow's
# message quotes these bytes, 0xa1 included, which is not UTF-8.
MALFORMED = b"\n\xa1\x01\n\t\n\x01r\x12\x04\x1a\x02\n"


@pytest.fixture
def malformed(saved):
    tfrecord_path, header_path = saved
    data = Path(tfrecord_path).read_bytes()
    payloads = [data[o + 12 : o + 12 + n] for o, n in record_spans(data)]
    payloads[5] = MALFORMED
    rewrite_records(tfrecord_path, header_path, payloads)
    return tfrecord_path, header_path


@pytest.mark.xfail(raises=UnicodeDecodeError, strict=True,
                   reason="TensorFlow quotes the record's raw bytes in its parse error and cannot "
                   "decode that message (tensorflow/tensorflow#5676); README: not promised")
def test_malformed_record_fails_iteration_with_a_tensorflow_error(malformed):
    """Pins the known limitation: once TensorFlow raises its own error here, this XPASSes and
    fails, and the README's "not promised" line can go."""
    tfrecord_path, header_path = malformed
    with pytest.raises(tf.errors.InvalidArgumentError):  # not UnicodeDecodeError
        iterate(tfrecord_path, header_path)


def test_malformed_record_fails_verify(malformed):
    tfrecord_path, header_path = malformed
    with pytest.raises(CorruptDataError, match=f"^{tfrecord_path}: record 5 is not a "
                                               "tf.train.Example TensorFlow can parse$"):
        verify(tfrecord_path, header_path)


@pytest.mark.parametrize("compression", [None, "GZIP"])
def test_malformed_record_in_a_shard_is_named_with_its_shard(tmp_path, compression):
    """verify named `tfrecord_path`, which is no file when the records are in shards."""
    tfrecord_path = str(tmp_path / "data.tfrecord")
    save(tf.data.Dataset.range(6000), tfrecord_path, num_shards=3, compression=compression)
    shard = f"{tfrecord_path}-00001-of-00003"
    records = list(tf.data.TFRecordDataset(shard, compression or "").as_numpy_iterator())
    records[1500] = MALFORMED  # in the file's second batch of 1,024, as it is read again
    rewrite_records(shard, tfrecord_path + ".header.yaml", records, shard=1,
                    compression=compression or "")
    with pytest.raises(CorruptDataError, match=f"^{re.escape(shard)}: record 1500 is not a "
                                               "tf.train.Example TensorFlow can parse$"):
        verify(tfrecord_path)


def known_rows(header):
    """The ragged feature `r` of unknown rows per element, edited to 2."""
    assert header["features"]["r"]["shape"] == [None, None]
    header["features"]["r"]["shape"] = [2, None]


def test_ragged_rows_per_element_that_differ_from_the_headers_known_first_dim(tmp_path):
    """A header edited to a known number of rows ([2, None]) over elements of 1 and 2 rows
    fails verify and iteration, naming the feature (helper-77's mutation sweep)."""
    path = str(tmp_path / "d.tfrecord")
    save(tf.data.Dataset.from_tensor_slices({"r": tf.ragged.constant(
        [[[0]], [[1, 2], [3]]], tf.int32)}), path)
    edit_header(path + ".header.yaml", known_rows)
    with pytest.raises(CorruptDataError, match=r"rows per element differ from the header's 2"):
        verify(path)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"feature .*r.*: rows per element differ from the "
                             r"header.*s 2, found 1"):
        for _ in load(path):
            pass


def test_rows_that_add_up_across_elements_are_not_silently_regrouped(tmp_path):
    """1 row then 3 rows under [2, None]: 4 rows in all, as 2 elements of 2 would hold; without
    the check, load gave [[[0], [1, 2]], [[3], [4]]] (rows moved between elements)."""
    path = str(tmp_path / "d.tfrecord")
    save(tf.data.Dataset.from_tensor_slices({"r": tf.ragged.constant(
        [[[0]], [[1, 2], [3], [4]]], tf.int32)}), path)
    edit_header(path + ".header.yaml", known_rows)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"rows per element differ"):
        list(load(path))

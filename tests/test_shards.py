"""Shards, compression, ram:// paths, parallel reads, and merge() of separately saved parts."""

from __future__ import annotations

import collections
import dataclasses
import os
import re
import shutil
import stat
import sys
import threading
import uuid
import warnings
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import yaml
from conftest import GOLDEN, assert_same_elements, assert_same_multiset, fifo_at, golden_module

from super_serial import CorruptDataError, SchemaError, core, load, merge, read_header, save, verify

NUM_ELEMENTS = 23  # not a multiple of any block or shard count below
SHARD_SIZE = 300  # bytes: several files for every structure below


def flat_dict(n: int = NUM_ELEMENTS) -> tf.data.Dataset:
    ids = tf.range(n, dtype=tf.int64)
    return tf.data.Dataset.from_tensor_slices({
        "id": ids,
        "x": tf.reshape(tf.range(3 * n, dtype=tf.float32), [n, 3]) / 7,
        "name": tf.strings.join(["item-", tf.strings.as_string(ids)]),
    })


def features_label(n: int = NUM_ELEMENTS) -> tf.data.Dataset:
    features = {
        "a": tf.reshape(tf.range(2 * n, dtype=tf.float32), [n, 2]) * 0.5,
        "b": tf.range(n, dtype=tf.int32) - 5,
    }
    return tf.data.Dataset.from_tensor_slices((features, tf.range(n, dtype=tf.int64)))


def ragged_and_unknown_shape(n: int = NUM_ELEMENTS) -> tf.data.Dataset:
    # Element i: a ragged [i % 3, None] int32 (row r holds (i + r) % 4 values) and an unknown-
    # shape [None, 2] float32 with i % 3 rows (zero rows included).
    rows = [[list(range(10 * i, 10 * i + (i + r) % 4)) for r in range(i % 3)] for i in range(n)]
    ragged = tf.data.Dataset.from_tensor_slices(
        tf.ragged.constant(rows, dtype=tf.int32, ragged_rank=2))

    def matrix(i):
        return tf.reshape(tf.range((i % 3) * 2, dtype=tf.float32) + tf.cast(i, tf.float32), [-1, 2])

    matrices = tf.data.Dataset.range(n).map(matrix)
    return tf.data.Dataset.zip((tf.data.Dataset.range(n), ragged, matrices)).map(
        lambda i, r, m: {"id": i, "ragged": r, "matrix": m})


STRUCTURES = {
    "flat_dict": flat_dict,
    "features_label": features_label,
    "ragged_unknown_shape": ragged_and_unknown_shape,
}
LAYOUTS = {
    "one_shard": {"num_shards": 1},
    "three_shards": {"num_shards": 3},
    "shard_size": {"shard_size": SHARD_SIZE},
}


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of a few records, so that tiny datasets fill several round-robin shards."""
    monkeypatch.setattr(core, "_TARGET_BLOCK_BYTES", 256)


@pytest.fixture
def ram_folder():
    folder = f"ram://super_serial_tests/{uuid.uuid4().hex}"
    yield folder
    if tf.io.gfile.exists(folder):
        tf.io.gfile.rmtree(folder)


def ids_of(dataset: tf.data.Dataset) -> list[int]:
    return [int(element["id"]) for element in dataset]


def folder_contents(tfrecord_path: str) -> list[str]:
    return sorted(tf.io.gfile.listdir(tfrecord_path.rpartition("/")[0]))


def expected_file_names(base: str, layout: dict, header: dict) -> list[str]:
    count = layout.get("num_shards") or len(header["shards"])
    if count == 1:
        return [base]
    return [f"{base}-{i:05d}-of-{count:05d}" for i in range(count)]


def assert_shards_match_files(tfrecord_path: str, header: dict):
    """Every listed shard exists with the listed size, and its records number as listed."""
    folder = tfrecord_path.rpartition("/")[0]
    assert sum(s["num_records"] for s in header["shards"]) == header["num_records"]
    for shard in header["shards"]:
        path = f"{folder}/{shard['file']}"
        assert tf.io.gfile.stat(path).length == shard["num_bytes"], shard["file"]
        records = tf.data.TFRecordDataset(path, compression_type=header["compression"] or "")
        assert int(records.reduce(0, lambda n, _: n + 1)) == shard["num_records"], shard["file"]


# ---- round trips: shards x compression x structure -------------------------------------------


@pytest.mark.parametrize("structure", STRUCTURES)
@pytest.mark.parametrize("compression", [None, "GZIP", "ZLIB"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_round_trip(paths, small_blocks, structure, compression, layout):
    tfrecord_path, _ = paths
    dataset = STRUCTURES[structure]()
    header = save(dataset, tfrecord_path, compression=compression, **LAYOUTS[layout])

    assert_same_elements(dataset, load(tfrecord_path))  # no compression argument needed
    names = expected_file_names("data.tfrecord", LAYOUTS[layout], header)
    assert [s["file"] for s in header["shards"]] == names
    assert folder_contents(tfrecord_path) == sorted(names + ["data.tfrecord.header.yaml"])
    assert header["num_records"] == NUM_ELEMENTS
    assert header["compression"] == compression
    assert read_header(tfrecord_path + ".header.yaml") == header
    assert_shards_match_files(tfrecord_path, header)
    if layout == "three_shards":
        assert all(s["num_records"] > 0 for s in header["shards"]), header["shards"]
    if layout == "shard_size":
        assert len(header["shards"]) >= 3, header["shards"]
        assert all(s["num_records"] > 0 for s in header["shards"]), header["shards"]


@pytest.mark.parametrize("compression, magic", [("GZIP", b"\x1f\x8b"), ("ZLIB", b"\x78")])
def test_compressed_files_are_compressed(paths, compression, magic):
    tfrecord_path, _ = paths
    save(flat_dict(), tfrecord_path, compression=compression.lower())
    with open(tfrecord_path, "rb") as f:
        assert f.read(len(magic)) == magic
    with pytest.raises(tf.errors.DataLossError):
        list(tf.data.TFRecordDataset(tfrecord_path))
    assert read_header(tfrecord_path + ".header.yaml")["compression"] == compression


def test_round_robin_deals_whole_blocks(paths):
    """With the real block size: block i of `block_records` records goes to shard i % n."""
    tfrecord_path, _ = paths
    n = 2500
    dataset = tf.data.Dataset.range(n).map(lambda i: {"id": i})
    header = save(dataset, tfrecord_path, num_shards=3)
    block = header["block_records"]
    assert header["layout"] == "round_robin" and 1 <= block < n // 2
    expected_counts = [0, 0, 0]
    for start in range(0, n, block):
        expected_counts[(start // block) % 3] += min(block, n - start)
    assert [s["num_records"] for s in header["shards"]] == expected_counts
    for i, shard in enumerate(header["shards"]):
        assert shard["file"] == f"data.tfrecord-{i:05d}-of-00003"
        records = tf.data.TFRecordDataset(f"{tfrecord_path}-{i:05d}-of-00003")
        first = tf.io.parse_single_example(next(iter(records)),
                                           {"id": tf.io.FixedLenFeature([], tf.int64)})
        assert int(first["id"]) == i * block
    assert ids_of(load(tfrecord_path)) == list(range(n))
    assert ids_of(load(tfrecord_path, batch_size=1000).unbatch()) == list(range(n))


@pytest.mark.parametrize("options, threads", [
    ({"num_shards": 3, "compression": "GZIP"}, 3),
    ({"num_shards": 2}, 2),
    ({"num_shards": 9}, 4),  # at most core._WRITER_THREADS, each writing every 4th shard
    ({"shard_size": 2000}, 1),  # one file at a time
])
def test_shards_are_written_by_writer_threads(paths, small_blocks, monkeypatch, options,
                                              threads):
    real_writer, writers_of = core._record_writer, {}

    class Recording:
        def __init__(self, inner, path):
            self.inner, self.path = inner, path

        def prepare(self, records, sizes):
            return self.inner.prepare(records, sizes)

        def write(self, prepared):
            writers_of.setdefault(self.path, set()).add(threading.current_thread().name)
            self.inner.write(prepared)

        def close(self):
            self.inner.close()

    monkeypatch.setattr(core, "_record_writer",
                        lambda path, compression: Recording(real_writer(path, compression), path))
    dataset = flat_dict(300)
    header = save(dataset, paths[0], **options)
    assert len(header["shards"]) >= threads
    assert all(len(names) == 1 for names in writers_of.values()), writers_of  # one per shard
    names = set().union(*writers_of.values())
    assert len(names) == threads and threading.current_thread().name not in names, names
    if "num_shards" in options:  # shard i is written by thread i % threads
        for path, (name,) in writers_of.items():
            shard = int(re.search(r"\.tmp(\d+)", path).group(1))
            assert name == f"super_serial-writer-{shard % threads}", (path, name)
    assert_same_elements(dataset, load(paths[0]))


@pytest.mark.parametrize("num_elements, num_shards", [
    (300, 64), (100, 64), (2000, 64), (10, 4), (7, 3), (64, 64), (130, 64)])
def test_every_shard_gets_records_when_the_size_is_known(paths, num_elements, num_shards):
    """Each worker of a FILE-sharded load reads its own files: none may be left empty, and
    none should hold more than a block beyond another."""
    header = save(tf.data.Dataset.range(num_elements), paths[0], num_shards=num_shards)
    counts = [s["num_records"] for s in header["shards"]]
    assert len(counts) == num_shards and sum(counts) == num_elements
    assert min(counts) > 0, counts
    assert max(counts) - min(counts) <= header["block_records"], counts
    assert [int(i) for i in load(paths[0])] == list(range(num_elements))


def test_empty_shards_of_a_dataset_of_unknown_size_are_warned_of(paths):
    """Blocks of the usual size, up to 1,024 records, where the size is unknown: 300 records
    fill one block, and 3 of 4 shards stay empty. The warning names the way out."""
    unknown = tf.data.Dataset.range(300).filter(lambda i: True)
    assert int(unknown.cardinality()) == tf.data.UNKNOWN_CARDINALITY
    with pytest.warns(UserWarning, match=r"3 of 4 shard files hold no records.*"
                                         r"assert_cardinality\(n\)"):
        save(unknown, paths[0], num_shards=4)
    sized = unknown.apply(tf.data.experimental.assert_cardinality(300))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        header = save(sized, paths[0], num_shards=4)
    assert min(s["num_records"] for s in header["shards"]) > 0
    assert [int(i) for i in load(paths[0])] == list(range(300))


@pytest.mark.parametrize("num_elements", [0, 3])
def test_more_shards_than_records(paths, num_elements):
    tfrecord_path, _ = paths
    dataset = flat_dict(num_elements)
    header = save(dataset, tfrecord_path, num_shards=5)
    names = [f"data.tfrecord-{i:05d}-of-00005" for i in range(5)]
    assert [s["file"] for s in header["shards"]] == names
    assert folder_contents(tfrecord_path) == sorted(names + ["data.tfrecord.header.yaml"])
    # The size is known, so blocks are one record each and the first shards get one apiece.
    assert [s["num_records"] for s in header["shards"]] == [1] * num_elements + [0] * (
        5 - num_elements)
    assert_shards_match_files(tfrecord_path, header)
    assert_same_elements(dataset, load(tfrecord_path))
    assert_same_multiset(dataset, load(tfrecord_path, shuffle_files=True, deterministic=False))


@pytest.mark.parametrize("first, second", [
    ({"num_shards": 3}, {"num_shards": 1}),
    ({"shard_size": SHARD_SIZE}, {"num_shards": 2}),
    ({"num_shards": 4}, {"shard_size": SHARD_SIZE}),
])
def test_saving_again_leaves_no_stale_shards(paths, small_blocks, first, second):
    tfrecord_path, _ = paths
    save(flat_dict(), tfrecord_path, **first)
    header = save(flat_dict(7), tfrecord_path, **second)
    names = [s["file"] for s in header["shards"]]
    assert folder_contents(tfrecord_path) == sorted(names + ["data.tfrecord.header.yaml"])
    assert_same_elements(flat_dict(7), load(tfrecord_path))


@pytest.mark.parametrize("kind", ["clips", "strings"])
def test_shards_dealt_in_turn_get_blocks_fitted_to_the_records_written(paths, monkeypatch, kind):
    """Blocks are sized from the element spec, which guesses 64 values an unknown dim and 32
    bytes a string; shards dealt in turn kept that guess (blocks of 1,024 clips of 400 kB, 400
    MB parsed at once on load, and a save of fewer records put them all in the first file).
    Now fitted to the first records, as other saves fit theirs to all; records of about the
    guessed size keep the guess."""
    monkeypatch.setattr(core, "_TARGET_BLOCK_BYTES", 40_000)  # 10 records of 4 kB
    width = 1_000  # float32 values (or bytes: strings of 4,000)
    values = [np.full(width, i, np.float32) for i in range(60)]
    if kind == "clips":  # an unknown size and shape: a generator
        dataset = tf.data.Dataset.from_generator(
            lambda: iter(values), output_signature=tf.TensorSpec([None], tf.float32))
    else:
        dataset = tf.data.Dataset.from_generator(
            lambda: (v.tobytes() for v in values), output_signature=tf.TensorSpec([], tf.string))
    tfrecord_path, _ = paths
    header = save(dataset, tfrecord_path, num_shards=2)
    assert 8 <= header["block_records"] <= 10, header["block_records"]
    counts = [s["num_records"] for s in header["shards"]]
    assert counts == core._dealt_counts(60, header["block_records"], 2) and min(counts) >= 20
    assert_same_elements(dataset, load(tfrecord_path))
    assert verify(tfrecord_path)["num_records"] == 60
    # Records no larger than guessed: the spec's block, as before
    guessed = save(flat_dict(), tfrecord_path, num_shards=2)["block_records"]
    assert guessed == core._block_and_batch_records(
        core._schema_from_spec(flat_dict().element_spec)[0], 2, NUM_ELEMENTS)[0]


def test_shards_dealt_in_turn_are_the_same_files_whatever_the_batches(tmp_path, monkeypatch):
    """The README: "`elements_per_batch=N` reads and encodes exactly N elements at a time; the
    files are the same either way." Shards dealt in turn fitted their block to the first
    batch: a short string first, then long ones, made blocks of 100 (300 elements in 3 shards:
    the guess kept) where the first batch was that string alone, and of 10 where long ones
    came with it, so the files differed with elements_per_batch and with the pipeline the
    strings came from (where its size is known to be the same: a dataset of unknown size may
    get larger blocks, as `_block_and_batch_records` makes them)."""
    monkeypatch.setattr(core, "_TARGET_BLOCK_BYTES", 40_000)  # 10 records of 4 kB
    strings = [b"x"] + [bytes([i % 256]) * 4_000 for i in range(1, 300)]
    sliced = tf.data.Dataset.from_tensor_slices(strings)
    # Its size known, as for the slices: a block is at most a shard's share of the records
    generated = tf.data.Dataset.from_generator(
        lambda: iter(strings), output_signature=tf.TensorSpec([], tf.string),
    ).apply(tf.data.experimental.assert_cardinality(300))
    saves = [(sliced, None), (sliced, 1), (sliced, 2), (sliced, 7), (generated, None),
             (generated, 1), (generated, 3)]
    contents = []
    for i, (dataset, elements_per_batch) in enumerate(saves):
        tfrecord_path = str(tmp_path / str(i) / "data.tfrecord")
        header = save(dataset, tfrecord_path, num_shards=3, elements_per_batch=elements_per_batch)
        assert [s["num_records"] for s in header["shards"]] == core._dealt_counts(
            300, header["block_records"], 3)
        assert load(tfrecord_path).as_numpy_iterator().__iter__().__next__() == b"x"
        contents.append(sorted((path.name, path.read_bytes())
                               for path in (tmp_path / str(i)).iterdir()))
    assert 9 <= read_header(str(tmp_path / "0" / "data.tfrecord.header.yaml"))[
        "block_records"] <= 11
    assert all(c == contents[0] for c in contents), [
        read_header(str(tmp_path / str(i) / "data.tfrecord.header.yaml"))["block_records"]
        for i in range(len(saves))]
    assert_same_elements(sliced, load(str(tmp_path / "6" / "data.tfrecord")))


def test_a_large_first_record_does_not_make_blocks_of_one(tmp_path, monkeypatch):
    """Blocks are fitted to the records that make a batch's bytes (or a block's count), not
    to those that make a block's bytes: one record of 100 kB first, then 299 of 100 bytes,
    made blocks of 1 record, each parsed by itself on load."""
    monkeypatch.setattr(core, "_TARGET_BLOCK_BYTES", 40_000)
    monkeypatch.setattr(core, "_TARGET_BATCH_BYTES", 160_000)
    strings = [b"x" * 100_000] + [b"y" * 100] * 299
    tfrecord_path = str(tmp_path / "data.tfrecord")
    header = save(tf.data.Dataset.from_tensor_slices(strings), tfrecord_path, num_shards=3)
    # about 40,000 bytes of the first 100 records (the block 300 records in 3 shards allow),
    # which make about 112 kB
    assert 30 <= header["block_records"] <= 40, header["block_records"]
    assert_same_elements(tf.data.Dataset.from_tensor_slices(strings), load(tfrecord_path))


def test_blocks_dealt_in_turn_are_fitted_to_the_record_that_passes_a_batchs_bytes(
        tmp_path, monkeypatch):
    """The first block is fitted to the records up to and including the one that makes
    _TARGET_BATCH_BYTES (`_fit`): ten small records and then one of 200 kB make blocks of
    about 2 records, not those fitted to the ten small ones alone (M18: searchsorted's +1)."""
    monkeypatch.setattr(core, "_TARGET_BLOCK_BYTES", 40_000)
    monkeypatch.setattr(core, "_TARGET_BATCH_BYTES", 160_000)
    strings = [b"y" * 100] * 10 + [b"x" * 200_000] + [b"y" * 100] * 289
    tfrecord_path = str(tmp_path / "data.tfrecord")
    header = save(tf.data.Dataset.from_tensor_slices(strings), tfrecord_path, num_shards=3)
    assert 1 <= header["block_records"] <= 3, header["block_records"]
    assert_same_elements(tf.data.Dataset.from_tensor_slices(strings), load(tfrecord_path))



def test_shard_size_keeps_one_record_file_open_at_a_time(tmp_path, monkeypatch):
    """shard_size's promise, one file open at a time: each file is closed before the next is
    opened (M29: without the close, all stayed open until commit; thousands of shards ran
    into the limit on open files)."""
    real_writer, open_now, most = core._record_writer, set(), [0]

    class Counting:
        def __init__(self, inner, path):
            self.inner, self.path = inner, path
            open_now.add(path)
            most[0] = max(most[0], len(open_now))

        def prepare(self, records, sizes):
            return self.inner.prepare(records, sizes)

        def write(self, prepared):
            self.inner.write(prepared)

        def close(self):
            open_now.discard(self.path)
            self.inner.close()

    monkeypatch.setattr(core, "_record_writer",
                        lambda path, compression: Counting(real_writer(path, compression), path))
    dataset = tf.data.Dataset.range(200)
    path = str(tmp_path / "d.tfrecord")
    header = save(dataset, path, shard_size=300)
    assert len(header["shards"]) >= 5
    assert most[0] == 1, most[0]
    assert [int(x) for x in load(path)] == list(range(200))



def test_empty_shards_are_warned_of_where_records_and_shards_are_as_many(tmp_path):
    """As many records as shards, of a size unknown: all go to the first file, and the
    warning says so (M59: `written > len(shards)` said nothing then); with fewer records than
    shards some files are empty whatever the size, and nothing is said."""
    path = str(tmp_path / "data.tfrecord")
    unknown = tf.data.Dataset.range(4).filter(lambda i: True)
    with pytest.warns(UserWarning, match=r"3 of 4 shard files hold no records"):
        save(unknown, path, num_shards=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        save(unknown.take(3), path, num_shards=4)
    assert [int(i) for i in load(path)] == [0, 1, 2]



def test_shards_dealt_in_turn_hold_records_back_no_longer_than_a_batchs_bytes(tmp_path,
                                                                            monkeypatch):
    """Records are held back to fit the blocks only until they make _TARGET_BATCH_BYTES, then
    dealt to the writer threads (M64: held until a block's count of them, which for records
    far larger than the spec guessed, 1,024 clips of 1 MB, is a GB in memory)."""
    monkeypatch.setattr(core, "_TARGET_BLOCK_BYTES", 40_000)
    monkeypatch.setattr(core, "_TARGET_BATCH_BYTES", 160_000)
    held_after = []
    real_write = core._RecordFiles.write

    def write(self, records, sizes, first_index):
        real_write(self, records, sizes, first_index)
        held_after.append((self.bytes_written, self.held is not None))

    monkeypatch.setattr(core._RecordFiles, "write", write)
    strings = [b"x" * 50_000] * 40
    tfrecord_path = str(tmp_path / "data.tfrecord")
    header = save(tf.data.Dataset.from_tensor_slices(strings), tfrecord_path, num_shards=2,
                  elements_per_batch=2)
    assert header["block_records"] < 40
    assert all(not held for written, held in held_after if written >= 160_000), held_after
    assert_same_elements(tf.data.Dataset.from_tensor_slices(strings), load(tfrecord_path))


def test_an_old_shard_that_cannot_be_removed_is_warned_of(paths, small_blocks, monkeypatch):
    """A save with fewer shards removes the old ones; one it cannot remove (another user's
    file in a folder with the sticky bit, say: made here, as tests run as root) is named in a
    warning from the user's call, and the new dataset is in place all the same."""
    tfrecord_path, _ = paths
    save(flat_dict(), tfrecord_path, num_shards=3)
    kept = f"{tfrecord_path}-00000-of-00003"  # the first removed: the others go after it
    remove = tf.io.gfile.remove

    def refused(path):
        if path == kept:
            raise tf.errors.PermissionDeniedError(None, None, f"{path}; Operation not permitted")
        remove(path)

    monkeypatch.setattr(tf.io.gfile, "remove", refused)
    with pytest.warns(UserWarning, match=re.escape(
            f"{kept}, a file of the dataset saved there before, could not be removed "
            "(Operation not permitted); the new dataset does not use it")) as caught:
        header = save(flat_dict(7), tfrecord_path, num_shards=1)
    assert [w.filename for w in caught] == [__file__]
    left = sorted([header["shards"][0]["file"], "data.tfrecord.header.yaml", Path(kept).name])
    assert folder_contents(tfrecord_path) == left
    assert_same_elements(flat_dict(7), load(tfrecord_path))
    # Warnings turned into errors raise it once the save is done, which it does not undo
    save(flat_dict(), tfrecord_path, num_shards=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match=re.escape(f"{kept}, a file of the dataset")):
            save(flat_dict(7), tfrecord_path, num_shards=1)
    assert folder_contents(tfrecord_path) == left
    assert_same_elements(flat_dict(7), load(tfrecord_path))


# ---- remote paths -------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_ram_filesystem(ram_folder, small_blocks, layout):
    tfrecord_path = f"{ram_folder}/nested/data.tfrecord"  # the folder does not exist yet
    dataset = ragged_and_unknown_shape()
    header = save(dataset, tfrecord_path, compression="GZIP", **LAYOUTS[layout])
    names = expected_file_names("data.tfrecord", LAYOUTS[layout], header)
    assert folder_contents(tfrecord_path) == sorted(names + ["data.tfrecord.header.yaml"])
    assert_shards_match_files(tfrecord_path, header)
    assert_same_elements(dataset, load(tfrecord_path))
    assert verify(tfrecord_path)["num_records"] == NUM_ELEMENTS


def test_ram_filesystem_explicit_header_path(ram_folder):
    tfrecord_path, header_path = f"{ram_folder}/data.tfrecord", f"{ram_folder}/meta/h.yaml"
    save(flat_dict(), tfrecord_path, header_path, num_shards=2, compression="ZLIB")
    assert tf.io.gfile.exists(header_path)
    assert not tf.io.gfile.exists(tfrecord_path + ".header.yaml")
    assert_same_elements(flat_dict(), load(tfrecord_path, header_path))


# ---- parallel and shuffled reads ------------------------------------------------------------


def test_shuffle_files(paths, small_blocks):
    tfrecord_path, _ = paths
    dataset = flat_dict()
    header = save(dataset, tfrecord_path, num_shards=4)
    assert all(s["num_records"] > 0 for s in header["shards"])
    orders = []
    for seed in range(5):
        orders.append(ids_of(load(tfrecord_path, shuffle_files=True, seed=seed)))
        # The same seed gives the same first epoch; each epoch reads the files in a new order.
        shuffled = load(tfrecord_path, shuffle_files=True, seed=seed)
        assert ids_of(shuffled) == orders[-1]
        assert_same_multiset(dataset, shuffled)
    assert any(order != list(range(NUM_ELEMENTS)) for order in orders), "files were not shuffled"


def test_shuffle_files_reads_the_files_in_a_new_order_each_epoch(paths):
    """load's docstring: "a new one each epoch", for one seed too: epochs of one loaded
    dataset (each iterator, and each pass of `.repeat()`) do not all read the files in the same
    order (helper-117: a shuffle that kept its order passed every test)."""
    tfrecord_path, _ = paths
    header = save(tf.data.Dataset.range(40), tfrecord_path, num_shards=4)
    assert header["block_records"] == 10  # file i holds 10 * i ... 10 * i + 9
    loaded = load(tfrecord_path, shuffle_files=True, seed=3)

    def first_of_each_file(values):  # the order the files were read in
        return tuple(v // 10 for v in values[::10])

    epochs = {first_of_each_file([int(x) for x in loaded]) for _ in range(6)}
    assert len(epochs) > 1, epochs
    repeated = [int(x) for x in loaded.repeat(6)]
    assert sorted(repeated) == sorted(list(range(40)) * 6)
    assert len({first_of_each_file(repeated[i:i + 40]) for i in range(0, 240, 40)}) > 1


def test_the_seed_is_combined_with_the_global_seed(paths, small_blocks):
    """As the README says, and as Dataset.shuffle's seed is: the same seed gives the same order
    under the same global seed (or none), and other orders under another."""
    tfrecord_path, _ = paths
    save(flat_dict(), tfrecord_path, num_shards=4)

    def order(global_seed, seed):
        tf.random.set_seed(global_seed)
        try:
            return ids_of(load(tfrecord_path, shuffle_files=True, seed=seed))
        finally:
            tf.random.set_seed(None)  # unset again, as the other tests expect

    for global_seed in (None, 1):
        assert [order(global_seed, s) for s in range(3)] == [
            order(global_seed, s) for s in range(3)]
    assert [order(1, s) for s in range(5)] != [order(2, s) for s in range(5)]


@pytest.mark.parametrize("structure", STRUCTURES)
@pytest.mark.parametrize("layout", ["three_shards", "shard_size"])
def test_nondeterministic_read_gives_same_elements(paths, small_blocks, structure, layout):
    tfrecord_path, _ = paths
    dataset = STRUCTURES[structure]()
    save(dataset, tfrecord_path, compression="GZIP", **LAYOUTS[layout])
    assert_same_multiset(dataset, load(tfrecord_path, deterministic=False))
    assert_same_multiset(dataset, load(tfrecord_path, deterministic=False, shuffle_files=True))


@pytest.mark.parametrize("layout", ["three_shards", "shard_size"])
def test_batched_load_keeps_order_across_shards(paths, small_blocks, layout):
    tfrecord_path, _ = paths
    save(flat_dict(), tfrecord_path, **LAYOUTS[layout])
    assert_same_elements(flat_dict().batch(5), load(tfrecord_path, batch_size=5))
    assert_same_elements(flat_dict().batch(5, drop_remainder=True),
                         load(tfrecord_path, batch_size=5, drop_remainder=True))


def _elements(iterator) -> list:
    return [tf.nest.map_structure(lambda t: np.asarray(t).tolist(), e) for e in iterator]


@pytest.mark.parametrize("layout", ["one_shard", "three_shards"])
@pytest.mark.parametrize("batch_size", [None, 4])
def test_an_iterator_checkpoint_restores_the_rest_in_order(paths, tmp_path, small_blocks,
                                                           layout, batch_size):
    """As the README says: restored in a new iterator, it goes on with what was left."""
    tfrecord_path, _ = paths
    save(flat_dict(), tfrecord_path, **LAYOUTS[layout])
    everything = _elements(load(tfrecord_path, batch_size=batch_size))
    for taken in (0, 1, 3):
        iterator = iter(load(tfrecord_path, batch_size=batch_size))
        for _ in range(taken):
            next(iterator)
        saved = tf.train.Checkpoint(iterator=iterator).save(str(tmp_path / f"ckpt{taken}"))
        restored = iter(load(tfrecord_path, batch_size=batch_size))
        tf.train.Checkpoint(iterator=restored).restore(saved).assert_consumed()
        assert _elements(restored) == everything[taken:] == _elements(iterator)


@pytest.mark.parametrize("batch_size", [None, 4])
@pytest.mark.parametrize("through", ["interleave", "flat_map"])
def test_an_iterator_over_loads_in_a_datasets_function_checkpoints(paths, tmp_path, through,
                                                                   batch_size):
    """load() called in an interleave's or flat_map's function (several saved datasets read
    together): saving the iterator's checkpoint failed, "StatefulPartitionedCall is stateful",
    naming neither super_serial nor a file; load gave the call of its traced function there
    (helper-87). Now restored, it goes on with what was left."""
    tfrecord_path, _ = paths
    save(flat_dict(), tfrecord_path, num_shards=2)

    def pipeline():
        loads = tf.data.Dataset.range(3)
        if through == "interleave":
            return loads.interleave(lambda i: load(tfrecord_path, batch_size=batch_size),
                                    cycle_length=2, num_parallel_calls=2, deterministic=True)
        return loads.flat_map(lambda i: load(tfrecord_path, batch_size=batch_size))

    everything = _elements(pipeline())
    assert len(everything) == 3 * len(_elements(load(tfrecord_path, batch_size=batch_size)))
    iterator = iter(pipeline())
    for _ in range(5):
        next(iterator)
    saved = tf.train.Checkpoint(iterator=iterator).save(str(tmp_path / "ckpt"))
    restored = iter(pipeline())
    tf.train.Checkpoint(iterator=restored).restore(saved).assert_consumed()
    assert _elements(restored) == everything[5:] == _elements(iterator)


def test_symbolic_checkpoints_are_refused_past_a_files_first_block(paths, tmp_path,
                                                                  small_blocks):
    """The README's words: TensorFlow refuses symbolic checkpoints (no buffers) of a load
    once it reads past a file's first block, for the op that opens each file first; of one
    file or of several."""
    tfrecord_path, _ = paths
    options = tf.data.Options()
    options.experimental_symbolic_checkpoint = True
    for layout in ("one_shard", "three_shards"):
        header = save(flat_dict(), tfrecord_path, **LAYOUTS[layout])
        assert header["block_records"] < NUM_ELEMENTS // 3
        iterator = iter(load(tfrecord_path).with_options(options))
        checkpoint = tf.train.Checkpoint(iterator=iterator)
        with pytest.raises(tf.errors.OpError,
                           match="FixedLengthRecordDatasetV2 does not support symbolic"):
            for _ in range(NUM_ELEMENTS):
                next(iterator)
                checkpoint.save(str(tmp_path / "symbolic"))


# ---- merge(): parts saved separately (one per machine), one header over all of them ---------


def save_parts(folder, full: tf.data.Dataset, part_options: list[dict]) -> list[str]:
    """Machine i of n saves `full.shard(n, i)` as `<folder>/data.tfrecord-part<i>`."""
    parts = []
    for i, options in enumerate(part_options):
        part = f"{folder}/data.tfrecord-part{i}"
        save(full.shard(len(part_options), i), part, **options)
        parts.append(part)
    return parts


def concatenation(full: tf.data.Dataset, num_parts: int, order) -> tf.data.Dataset:
    pieces = [full.shard(num_parts, i) for i in order]
    result = pieces[0]
    for piece in pieces[1:]:
        result = result.concatenate(piece)
    return result


PART_OPTIONS = {
    "one_file_each": [{}, {}],
    "shard_size_parts": [{"shard_size": SHARD_SIZE}, {}, {"shard_size": SHARD_SIZE}],
    "gzip": [{"compression": "GZIP", "shard_size": SHARD_SIZE}, {"compression": "GZIP"}],
}


@pytest.mark.parametrize("options", PART_OPTIONS)
@pytest.mark.parametrize("reverse", [False, True], ids=["in_order", "reversed"])
def test_merge_concatenates_parts(tmp_path, small_blocks, options, reverse):
    part_options = PART_OPTIONS[options]
    full = flat_dict()
    parts = save_parts(tmp_path, full, part_options)
    before = {name: os.path.getsize(tmp_path / name) for name in os.listdir(tmp_path)}
    order = list(range(len(parts)))[::-1] if reverse else list(range(len(parts)))
    tfrecord_path = str(tmp_path / "data.tfrecord")

    header = merge([parts[i] for i in order], tfrecord_path)

    assert_same_elements(concatenation(full, len(parts), order), load(tfrecord_path))
    part_headers = [read_header(p + ".header.yaml") for p in parts]
    assert header["shards"] == [s for i in order for s in part_headers[i]["shards"]]
    assert header["num_records"] == NUM_ELEMENTS
    assert read_header(tfrecord_path + ".header.yaml") == header
    # No records copied: the folder only gains the merged header.
    after = {name: os.path.getsize(tmp_path / name) for name in os.listdir(tmp_path)}
    assert set(after) - set(before) == {"data.tfrecord.header.yaml"}
    assert all(after[name] == size for name, size in before.items())
    assert verify(tfrecord_path)["num_records"] == NUM_ELEMENTS
    assert_same_multiset(full, load(tfrecord_path, shuffle_files=True, deterministic=False))


def test_merge_explicit_header_path_on_ram(ram_folder, small_blocks):
    full = features_label()
    parts = save_parts(ram_folder, full, [{"compression": "ZLIB"}] * 3)
    header_path = f"{ram_folder}/merged.yaml"
    merge(parts, f"{ram_folder}/data.tfrecord", header_path)
    assert not tf.io.gfile.exists(f"{ram_folder}/data.tfrecord.header.yaml")
    assert_same_elements(concatenation(full, 3, range(3)),
                         load(f"{ram_folder}/data.tfrecord", header_path))


def _float64_x(element):
    return {**element, "x": tf.cast(element["x"], tf.float64)}


def _without_name(element):
    return {k: v for k, v in element.items() if k != "name"}


@pytest.mark.parametrize("change, kwargs, problem", [
    (_float64_x, {}, "features differ .*: feature 'x', dtype 'float64' against 'float32'"),
    (_without_name, {}, "features differ .*: feature 'name' is only in that one"),
    (lambda element: element, {"compression": "GZIP"}, "its compression differs from that of"),
    (lambda element: element, {"num_shards": 3}, "num_shards"),
], ids=["dtype", "missing_feature", "compression", "round_robin_shards"])
def test_merge_rejects_mismatched_part(tmp_path, small_blocks, change, kwargs, problem):
    good = str(tmp_path / "data.tfrecord-part0")
    bad = str(tmp_path / "data.tfrecord-part1")
    save(flat_dict(), good)
    save(flat_dict().map(change), bad, **kwargs)
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(SchemaError, match=re.escape(bad) + f".*({problem})"):
        merge([good, bad], str(tmp_path / "data.tfrecord"))
    assert sorted(os.listdir(tmp_path)) == before  # no header, no temporary file


def test_merge_keeps_namedtuples_and_refuses_parts_without_them(tmp_path):
    Point = collections.namedtuple("Point", "x y")
    parts = [str(tmp_path / f"data.tfrecord-part{i}") for i in range(3)]
    save(tf.data.Dataset.from_tensor_slices(Point([1, 2], [3.0, 4.0])), parts[0])
    save(tf.data.Dataset.from_tensor_slices(Point([5], [6.0])), parts[1])
    save(tf.data.Dataset.from_tensor_slices(([5], [6.0])), parts[2])  # a plain tuple
    header = merge(parts[:2], str(tmp_path / "data.tfrecord"))
    assert header["namedtuples"] == [{"path": [], "name": "Point", "fields": ["x", "y"]}]
    loaded = list(load(str(tmp_path / "data.tfrecord")))
    assert [type(e).__name__ for e in loaded] == ["Point"] * 3
    assert [int(e.x) for e in loaded] == [1, 2, 5]
    with pytest.raises(SchemaError, match="part2: its namedtuples differ from those of .*part0 "
                                          r"\(this part has none\)$"):
        merge([parts[0], parts[2]], str(tmp_path / "other.tfrecord"))


@pytest.mark.parametrize("first", [0, 1])
def test_merge_takes_the_first_parts_dict_order(tmp_path, first):
    """Parts whose dicts differ only in their keys' order merge (the README says so), and the
    merged dataset's dicts have the first part's order, each value under its own key. Nothing
    pinned this (helper-109)."""
    parts = [str(tmp_path / f"data.tfrecord-part{i}") for i in range(2)]
    save(tf.data.Dataset.from_tensors({"z": 1, "x": {"b": 2.0, "a": b"s"}}), parts[0])
    save(tf.data.Dataset.from_tensors({"x": {"a": b"t", "b": 4.0}, "z": 3}), parts[1])
    order = [first, 1 - first]
    merge([parts[i] for i in order], str(tmp_path / "data.tfrecord"))
    loaded = list(load(str(tmp_path / "data.tfrecord")))
    outer, inner = (["z", "x"], ["b", "a"]) if first == 0 else (["x", "z"], ["a", "b"])
    assert [(list(e), list(e["x"])) for e in loaded] == [(outer, inner)] * 2
    values = [(1, 2.0, b"s"), (3, 4.0, b"t")]
    assert [(int(e["z"]), float(e["x"]["b"]), e["x"]["a"].numpy()) for e in loaded] == [
        values[i] for i in order]


@pytest.mark.parametrize("first", [0, 1])
def test_merge_says_the_highest_version_of_its_parts(tmp_path, first):
    """The merged header took the first part's version: parts saying 3 and 4 merged into 4 or
    3 by their order (helper-110). Every part's reader must read it: the highest."""
    parts = [str(tmp_path / f"data.tfrecord-part{i}") for i in range(2)]
    for part in parts:
        save(tf.data.Dataset.range(2), part)
    header = Path(parts[0] + ".header.yaml")
    text = header.read_text()
    assert text.count("\nversion: 3\n") == 1
    header.write_text(text.replace("\nversion: 3\n", "\nversion: 4\n"))  # as a reader of 4 reads it
    merged = merge([parts[first], parts[1 - first]], str(tmp_path / "data.tfrecord"))
    assert merged["version"] == 4
    assert [int(x) for x in load(str(tmp_path / "data.tfrecord"))] == [0, 1, 0, 1]


@pytest.mark.parametrize("old_first", [True, False])
def test_merge_says_a_part_of_an_earlier_format_must_be_saved_again(tmp_path, old_first):
    """Format version 1 stored int8 as an Int64List, where save now writes its bytes: such a
    part and a new save of the same dataset differ in that encoding alone. The refusal said
    "encoding 'raw' against 'int64'" without the cause (helper-107)."""
    golden = GOLDEN / "v1"
    for name in ("golden.tfrecord", "golden.tfrecord.header.yaml"):
        shutil.copyfile(golden / name, tmp_path / name)
    old, new = str(tmp_path / "golden.tfrecord"), str(tmp_path / "now.tfrecord")
    golden_dataset = golden_module().golden_dataset
    save(golden_dataset(1), new)
    parts = [old, new] if old_first else [new, old]
    encodings = "'raw' against 'int64'" if old_first else "'int64' against 'raw'"
    with pytest.raises(SchemaError, match="^" + re.escape(
            f"{parts[1]}: its features differ from those of {parts[0]}: feature '0/i8', "
            f"encoding {encodings} ({old} is of format version 1, which stored it so: save it "
            "again to merge it)") + "$"):
        merge(parts, str(tmp_path / "data.tfrecord"))
    # not where the parts differ otherwise too, which saving again would not mend
    save(golden_dataset(1).map(lambda f, label: (f, tf.cast(label, tf.int32))), new)
    with pytest.raises(SchemaError, match="differ from those of .*against [^(]*$"):
        merge(parts, str(tmp_path / "data.tfrecord"))


@pytest.mark.parametrize("ours, theirs, where", [
    (lambda x: (x, None), lambda x: (x, {}), "at '1': None against an empty dict"),
    (lambda x: (x, None), lambda x: (x,), "at the element: a tuple of 2 against a tuple of 1"),
    (lambda x: (x, {"q": None}), lambda x: (x, None), "at '1': a dict of 1 key against None"),
    (lambda x: {"x": x}, lambda x: {"x": x, "n": None}, "'n' is only in that one"),
    (lambda x: {"x": x, "e": ()}, lambda x: {"x": x, "e": {}},
     "at 'e': an empty tuple against an empty dict"),
    (lambda x: {"x": x, "n": None}, lambda x: {"x": x}, "'n' is only in this part"),
    (lambda x: {"x": x, "d": {"a": None}}, lambda x: {"x": x, "d": {"b": None}},
     "'d/a' is only in this part"),
], ids=["None-{}", "longer", "dict-None", "missing key", "()-{}", "extra key", "deeper"])
def test_merge_says_where_parts_with_no_tensor_differ(tmp_path, ours, theirs, where):
    """Parts of the same features whose parts with no tensor differ were refused with "its
    structure differs" and no more (helper-111)."""
    parts = [str(tmp_path / f"part{i}") for i in range(2)]
    save(tf.data.Dataset.range(2).map(theirs), parts[0])
    save(tf.data.Dataset.range(2).map(ours), parts[1])
    with pytest.raises(SchemaError, match="^" + re.escape(
            f"{parts[1]}: its structure differs from that of {parts[0]} ({where})") + "$"):
        merge(parts, str(tmp_path / "merged"))


def test_merge_gives_no_save_again_hint_for_parts_of_one_version(tmp_path):
    """An encoding that differs between parts of one version (a hand-edited header) is not
    mended by saving again (helper-114's surviving mutant gave the hint)."""
    parts = [str(tmp_path / f"part{i}") for i in range(2)]
    for part in parts:
        save(tf.data.Dataset.range(3).map(lambda i: {"b": tf.cast(i, tf.int8)}), part)
    header = read_header(parts[1] + ".header.yaml")
    assert header["features"]["b"]["encoding"] == "raw"
    header["features"]["b"]["encoding"] = "int64"  # which an int8 may have at any version
    Path(parts[1] + ".header.yaml").write_text(yaml.safe_dump(header))
    with pytest.raises(SchemaError, match="^" + re.escape(
            f"{parts[1]}: its features differ from those of {parts[0]}: feature 'b', "
            "encoding 'int64' against 'raw'") + "$"):
        merge(parts, str(tmp_path / "merged"))


def test_merge_names_a_tensor_name_that_differs(tmp_path):
    def part(name):
        return tf.data.Dataset.from_generator(lambda: iter([[1.0, 2.0]]), output_signature=(
            tf.TensorSpec([2], tf.float32, name=name)))
    save(part("pixels"), str(tmp_path / "data.tfrecord-part0"))
    save(part(None), str(tmp_path / "data.tfrecord-part1"))
    with pytest.raises(SchemaError, match="part1: its features differ from those of .*part0: "
                                          "feature 'tensor', tensor_name None against 'pixels'"):
        merge([str(tmp_path / f"data.tfrecord-part{i}") for i in (0, 1)],
              str(tmp_path / "data.tfrecord"))


def test_merge_rejects_part_in_another_folder(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    here = str(tmp_path / "data.tfrecord-part0")
    elsewhere = str(tmp_path / "elsewhere" / "data.tfrecord-part1")
    save(flat_dict(), here)
    save(flat_dict(), elsewhere)
    with pytest.raises(SchemaError, match=re.escape(elsewhere)):
        merge([here, elsewhere], str(tmp_path / "data.tfrecord"))
    assert not (tmp_path / "data.tfrecord.header.yaml").exists()


def test_merged_dataset_matches_one_save_of_everything(tmp_path):
    """Parts of `ds.shard(n, i)` merged hold the same multiset as saving `ds` at once."""
    full = ragged_and_unknown_shape()
    parts = save_parts(tmp_path, full, [{}] * 4)
    merge(parts, str(tmp_path / "data.tfrecord"))
    assert_same_multiset(full, load(str(tmp_path / "data.tfrecord")))
    merged_ids = ids_of(load(str(tmp_path / "data.tfrecord")))
    assert merged_ids == [i for part in range(4) for i in range(part, NUM_ELEMENTS, 4)]
    np.testing.assert_array_equal(np.sort(merged_ids), np.arange(NUM_ELEMENTS))


def test_merge_with_an_empty_part(tmp_path):
    full = flat_dict()
    parts = [str(tmp_path / "data.tfrecord-part0"), str(tmp_path / "data.tfrecord-part1")]
    save(full.take(0), parts[0])  # a machine whose share was empty
    save(full, parts[1], shard_size=SHARD_SIZE)
    header = merge(parts, str(tmp_path / "data.tfrecord"))
    assert header["shards"][0] == {"file": "data.tfrecord-part0", "num_records": 0,
                                   "num_bytes": 0}
    # the empty part's block (it wrote 1) made every record be parsed by itself
    empty = read_header(f"{parts[0]}.header.yaml")["block_records"]
    assert empty == read_header(f"{parts[1]}.header.yaml")["block_records"] > 1
    assert header["block_records"] == empty
    assert_same_elements(full, load(str(tmp_path / "data.tfrecord")))


def test_merge_takes_no_block_size_from_an_empty_part(tmp_path):
    """Empty saves before this fix wrote `block_records: 1`; merged with others, every record
    of theirs was parsed by itself (70 times slower to load)."""
    full = flat_dict()
    parts = save_parts(tmp_path, full, [{}, {}])
    save(full.take(0), f"{tmp_path}/data.tfrecord-empty")
    header_path = f"{tmp_path}/data.tfrecord-empty.header.yaml"
    written = yaml.safe_load(Path(header_path).read_text())
    Path(header_path).write_text(yaml.safe_dump({**written, "block_records": 1}))
    merged = merge([parts[0], f"{tmp_path}/data.tfrecord-empty", parts[1]],
                   str(tmp_path / "data.tfrecord"))
    assert merged["block_records"] == read_header(f"{parts[0]}.header.yaml")["block_records"]


def test_saving_over_a_merged_dataset_keeps_its_parts(tmp_path):
    """The merged header lists the parts' files; replacing it must not delete them."""
    full = flat_dict()
    parts = save_parts(tmp_path, full, [{}, {"shard_size": SHARD_SIZE}])
    tfrecord_path = str(tmp_path / "data.tfrecord")
    merge(parts, tfrecord_path)
    save(features_label(), tfrecord_path, num_shards=2)
    assert_same_elements(features_label(), load(tfrecord_path))
    for i, part in enumerate(parts):
        assert_same_elements(full.shard(2, i), load(part))


def test_saving_over_a_merged_dataset_keeps_a_part_whose_name_differs_by_a_dot(tmp_path):
    """Only files named as a save to the path names them are an earlier save's, to be
    replaced: the base's '.' is a dot, not any character (helper-123: a mutant that took it
    for any refused to merge the part, as "named as a save to" the merged path, and would have
    removed its files)."""
    part, tfrecord_path = str(tmp_path / "data_tfrecord"), str(tmp_path / "data.tfrecord")
    save(tf.data.Dataset.range(5), part)
    merge([part], tfrecord_path)
    save(tf.data.Dataset.range(3), tfrecord_path)
    assert_same_elements(tf.data.Dataset.range(5), load(part))
    assert_same_elements(tf.data.Dataset.range(3), load(tfrecord_path))


@pytest.mark.parametrize("options", [{}, {"shard_size": SHARD_SIZE}])
def test_merging_one_part_where_an_earlier_save_left_records(tmp_path, options):
    """One part's merged header lists exactly that part's files, as a copy of its header
    does: beside an earlier save's records load refused it, after merge had written it."""
    full = flat_dict()
    tfrecord_path = str(tmp_path / "data.tfrecord")
    save(features_label(), tfrecord_path)  # the earlier save, with its header
    earlier = (tmp_path / "data.tfrecord.header.yaml").read_bytes()
    [part] = save_parts(tmp_path, full, [options])
    with pytest.raises(ValueError, match=re.escape(f"{tfrecord_path}: records of an earlier "
                                                   f"save are there") + ".*" + re.escape(part)):
        merge([part], tfrecord_path)
    assert (tmp_path / "data.tfrecord.header.yaml").read_bytes() == earlier
    assert_same_elements(features_label(), load(tfrecord_path))
    os.remove(tfrecord_path)  # without those records, the one part merges and loads
    merge([part], tfrecord_path)
    assert_same_elements(full, load(tfrecord_path))


def test_merge_takes_parts_nested_as_deep_as_save_writes(tmp_path):
    """256 levels, the most `save` writes, merge; the bound is not one short (helper-77's
    mutation sweep, S8)."""
    element = tf.constant([1.5])
    for _ in range(core._MAX_NESTING):
        element = {"a": element}
    parts = [str(tmp_path / f"part{i}") for i in range(2)]
    for part in parts:
        save(tf.data.Dataset.from_tensors(element), part)
    deepest = max(len(f["path"]) for f in read_header(parts[0] + ".header.yaml")[
        "features"].values())
    assert deepest == core._MAX_NESTING
    assert merge(parts, str(tmp_path / "merged"))["num_records"] == 2


def test_merge_counts_a_part_with_no_tensor_towards_the_nesting_limit(tmp_path):
    """A header that load reads (a None 381 levels deep, under its 400) made merge raise a
    bare RecursionError from PyYAML, where a tensor that deep gives merge's SchemaError
    (helper-111)."""
    parts = [str(tmp_path / f"part{i}") for i in range(2)]
    for part in parts:
        save(tf.data.Dataset.range(2).map(lambda i: (i, None)), part)
        header = Path(part + ".header.yaml")
        text = header.read_text()
        assert text.count("['0', null]") == 1
        header.write_text(text.replace("['0', null]", "['0', " + "[" * 380 + "null"
                                       + "]" * 380 + "]"))
    assert len(list(load(parts[0]))) == 2  # load reads it
    with pytest.raises(SchemaError, match=re.escape(parts[0]) + ": its element structure nests "
                                          "381 levels deep; merge writes headers of at most 256"):
        merge(parts, str(tmp_path / "merged"))
    assert sorted(os.listdir(tmp_path)) == [
        "part0", "part0.header.yaml", "part1", "part1.header.yaml"]


def test_merge_refuses_parts_nested_deeper_than_save_writes(tmp_path, monkeypatch):
    """Headers of up to 400 levels (earlier saves wrote about 330) load, but writing one that
    deep ran PyYAML out of stack: merge raised a bare RecursionError."""
    element = tf.constant([1.5])
    for _ in range(330):
        element = {"a": element}
    monkeypatch.setattr(core, "_MAX_NESTING", 330)  # as a save before the bound of 256
    monkeypatch.setattr(core, "_READ_BACK", set())
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(10_000)
    try:
        parts = [str(tmp_path / f"part{i}") for i in range(2)]
        for part in parts:
            save(tf.data.Dataset.from_tensors(element), part)
    finally:
        sys.setrecursionlimit(limit)
    monkeypatch.undo()
    with pytest.raises(SchemaError, match=re.escape(parts[0]) + ": its element structure nests "
                                          "330 levels deep; merge writes headers of at most 256"):
        merge(parts, str(tmp_path / "merged"))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "part0", "part0.header.yaml", "part1", "part1.header.yaml"]


def test_a_header_is_read_whole_up_to_its_limit(tmp_path, paths):
    """Headers were read up to 16 MiB and the rest dropped without a word: a longer one (the
    shard list of a save of many shards) failed as "expected a mapping, found None". Now
    64 MiB are read, and a longer header is refused as such."""
    tfrecord_path, header_path = paths
    full = features_label()
    save(full, tfrecord_path, header_path, num_shards=2)
    text = Path(header_path).read_bytes()
    padding = b"#" + b" " * (20 << 20) + b"\n"  # a comment, so a valid header of 20 MiB
    Path(header_path).write_bytes(padding + text)
    assert_same_elements(full, load(tfrecord_path, header_path))
    Path(header_path).write_bytes(b"#" + b" " * (64 << 20) + b"\n" + text)
    with pytest.raises(core.HeaderError, match=re.escape(
            f"{header_path}: not a valid header: larger than the 67,108,864 bytes a header "
            "may take")):
        read_header(header_path)


def test_a_header_of_more_values_than_its_limit_is_refused_before_yaml_reads_it(paths):
    """A header well under 64 MiB could hold millions of values, for each of which PyYAML
    makes an object (a list of 2 million zeros in an unknown field: 4 MB, 1 GB and 10-33 s
    to read; 64 MiB would take 16 GB). Found by helper-71."""
    tfrecord_path, header_path = paths
    save(flat_dict(), tfrecord_path, header_path, num_shards=2)
    text = Path(header_path).read_text()
    values = core._values_at_most(text.encode())
    assert values < 200  # a header of 2 shards
    Path(header_path).write_text(
        text + "comment: [" + "0," * ((core._MAX_HEADER_VALUES - values) // 2 + 1) + "0]\n")
    with pytest.raises(core.HeaderError, match=re.escape(
            f"{header_path}: not a valid header: it may hold up to 2,000,00") + r"\d values, "
            r"more than the 2,000,000 a header may hold"):
        read_header(header_path)
    Path(header_path).write_text(text + "comment: [" + "0," * 1000 + "0]\n")
    assert read_header(header_path)["num_records"] == NUM_ELEMENTS  # fields it does not know


def test_the_values_of_a_header_of_99999_record_files_are_within_the_limit(paths):
    """As save writes it: a count of its values in block style, which save does not write,
    passed, where the header save writes (each file a flow mapping, counted as 13 values)
    counted 1,300,084 values against a limit of 1,000,000 (helper-99)."""
    tfrecord_path, header_path = paths
    save(flat_dict(), tfrecord_path, header_path)
    header = core._read_header(header_path)
    header = dataclasses.replace(header, num_records=1024 * 99_999, shards=tuple(
        core._Shard(f"data.tfrecord-{i:05d}-of-99999", 1024, 123_456_789)
        for i in range(99_999)))
    text = core._header_text(header).encode()
    assert text.count(b"num_records: 1024") == 99_999
    assert core._values_at_most(text) < 0.7 * core._MAX_HEADER_VALUES
    assert core._beyond_header_limits(text, header) is None


def _yaml_nodes(node) -> int:
    if isinstance(node, yaml.ScalarNode):
        return 1
    if isinstance(node, yaml.SequenceNode):
        return 1 + sum(map(_yaml_nodes, node.value))
    return 1 + sum(_yaml_nodes(key) + _yaml_nodes(value) for key, value in node.value)


@pytest.mark.parametrize("text", [
    "- - - - 0\n- - - 1\n", "- 0\r- 1\r- 2\r", "- 0\x85- 1\u2028- 2\u2029- 3", "-\n-\n-\n",
    "- a: 0\n- b: 1\n", "? a\n? b\n? c", "{0, 1, 2}", "[? a, ? b]", "a:\n b:\n  c:\n",
    "[[[], [[]]], {}]", "[?[?[?]]]", "[?, ?x, ? y]", "-", "?",
    "a: [1, {b: 2, c: [3]}]\nd:\n- - e: f\n  - g\n", "? - 0\n: 1\n"])
def test_a_header_holds_no_more_values_than_counted(text):
    """Lines of nested `- ` entries and line ends other than "\\n" made values the count did
    not see: 2 MB of `- - ... 0` lines took a gigabyte and 17 s to read (helper-96)."""
    counted = core._values_at_most(text.encode())
    assert _yaml_nodes(yaml.compose(text, Loader=yaml.SafeLoader)) <= counted
    assert core._values_at_most(text.encode("utf-16")) == counted


@pytest.mark.parametrize("line", ["- " * 99 + "0\n", "- 0\r", "- 0\u2028"],
                         ids=["nested entries", "CR line ends", "Unicode line ends"])
@pytest.mark.parametrize("encoding", ["utf-8", "utf-16"])
def test_a_header_of_many_values_on_few_lines_is_refused_before_yaml_reads_it(
        tmp_path, monkeypatch, line, encoding):
    monkeypatch.setattr(core, "_MAX_HEADER_VALUES", 10_000)
    header_path = tmp_path / "data.tfrecord.header.yaml"
    header_path.write_bytes((line * (10_000 // line.count("-") + 1)).encode(encoding))
    with pytest.raises(core.HeaderError, match=re.escape(f"{header_path}: not a valid header: "
                                                         "it may hold up to 10,") + r"\d{3} "
                       r"values, more than the 10,000 a header may hold"):
        read_header(str(header_path))


@pytest.mark.parametrize("limit", ["_MAX_HEADER_BYTES", "_MAX_HEADER_VALUES"])
def test_a_header_exactly_at_its_limit_is_written_and_read(paths, monkeypatch, limit):
    """load reads a header of exactly as many bytes (or values) as its limits, so save writes
    one, and refuses one past them (helper-128: mutants refusing one at the limit passed)."""
    tfrecord_path, header_path = paths
    save(features_label(), tfrecord_path, header_path, num_shards=2)
    text = Path(header_path).read_bytes()
    at = len(text) if limit == "_MAX_HEADER_BYTES" else core._values_at_most(text)
    monkeypatch.setattr(core, limit, at)
    save(features_label(), tfrecord_path, header_path, num_shards=2)  # the same header again
    assert Path(header_path).read_bytes() == text
    assert_same_elements(features_label(), load(tfrecord_path, header_path))
    monkeypatch.setattr(core, limit, at - 1)
    with pytest.raises(SchemaError, match="nothing was written"):
        save(features_label(), tfrecord_path, header_path, num_shards=2)


def test_a_header_past_its_limit_is_not_written(tmp_path, paths, monkeypatch):
    """What load cannot read back, save and merge do not write: a save then failed only on
    its first load. The limit is lowered here to the size of a header of a few shards."""
    tfrecord_path, header_path = paths
    full = features_label()
    save(full, tfrecord_path, header_path, num_shards=2)
    before = sorted(p.name for p in tmp_path.iterdir())
    monkeypatch.setattr(core, "_MAX_HEADER_BYTES", Path(header_path).stat().st_size + 100)
    with pytest.raises(SchemaError, match=re.escape(
            f"{header_path}: nothing was written: the header would take ") + r"[\d,]+ bytes, "
            r"more than the [\d,]+ load reads \(its 3 features and 12 record files\)"):
        save(full, tfrecord_path, header_path, num_shards=12)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # the earlier save, as it was
    assert_same_elements(full, load(tfrecord_path, header_path))
    monkeypatch.undo()
    monkeypatch.setattr(core, "_MAX_HEADER_VALUES", core._values_at_most(
        Path(header_path).read_bytes()) + 10)
    with pytest.raises(SchemaError, match=re.escape(
            f"{header_path}: nothing was written: the header could hold up to ") + r"[\d,]+ "
            r"values, more than the [\d,]+ load reads \(its 3 features and 12 record files\)"):
        save(full, tfrecord_path, header_path, num_shards=12)
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert_same_elements(full, load(tfrecord_path, header_path))
    monkeypatch.undo()

    folder = tmp_path / "parts"
    folder.mkdir()
    parts = save_parts(folder, full, [{"shard_size": SHARD_SIZE}] * 2)
    merged_header = str(folder / "data.tfrecord.header.yaml")
    largest = max(Path(default_header).stat().st_size for default_header in
                  (f"{part}.header.yaml" for part in parts))
    monkeypatch.setattr(core, "_MAX_HEADER_BYTES", largest + 10)
    before = sorted(p.name for p in folder.iterdir())
    with pytest.raises(SchemaError, match=re.escape(
            f"{merged_header}: nothing was written: the header would take ")):
        merge(parts, str(folder / "data.tfrecord"))
    assert sorted(p.name for p in folder.iterdir()) == before


@pytest.mark.parametrize("limit", ["_MAX_HEADER_BYTES", "_MAX_HEADER_VALUES"])
def test_a_header_whose_features_pass_its_limit_is_refused_before_reading(tmp_path, paths,
                                                                         monkeypatch, limit):
    """Features alone can pass what a header may hold (30 names of 10,000 commas: 2.4 million
    values as counted now): save refused only when it wrote the header, after every element
    was read and written (helper-85). Now before it reads any."""
    tfrecord_path, header_path = paths
    read = []

    def elements():
        for i in range(3):
            read.append(i)
            yield {"a": i, "b": float(i)}

    dataset = tf.data.Dataset.from_generator(elements, output_signature={
        "a": tf.TensorSpec([], tf.int64), "b": tf.TensorSpec([], tf.float32)})
    monkeypatch.setattr(core, "_READ_BACK", set())
    monkeypatch.setattr(core, limit, 20)  # the features' part takes more
    what = "would take [\\d,]+ bytes" if limit == "_MAX_HEADER_BYTES" else (
        "could hold up to [\\d,]+ values")
    with pytest.raises(SchemaError, match=re.escape(f"{tfrecord_path}: nothing was written: the "
                                                    "header ") + what + r", more than the 20 "
                                          r"load reads \(its 2 features and 1 record files\)"):
        save(dataset, tfrecord_path, header_path)
    assert read == [] and list(tmp_path.iterdir()) == []


def test_merge_into_a_part_or_the_same_part_twice_is_refused(tmp_path):
    parts = save_parts(tmp_path, flat_dict(), [{}, {}])
    part0_header = (tmp_path / "data.tfrecord-part0.header.yaml").read_bytes()
    with pytest.raises(ValueError, match=re.escape(parts[0])):
        merge(parts, parts[0])  # would replace part 0's own header
    assert (tmp_path / "data.tfrecord-part0.header.yaml").read_bytes() == part0_header
    with pytest.raises(ValueError, match=re.escape(parts[1])):
        merge([parts[0], parts[1], parts[1]], str(tmp_path / "data.tfrecord"))
    twice = parts[1].replace("/data", "//data")  # the same part, spelled another way
    with pytest.raises(ValueError, match=re.escape(twice) + ": listed twice in part_paths"):
        merge([parts[0], parts[1], twice], str(tmp_path / "data.tfrecord"))
    assert not (tmp_path / "data.tfrecord.header.yaml").exists()


def test_merge_refuses_no_parts_and_parts_of_the_original_module(tmp_path):
    """Neither refusal had a test (helper-90): without the second, merge failed with a bare
    TypeError (an original-module header has no record counts to add up)."""
    with pytest.raises(ValueError, match=r"^merge\(\) needs at least one part$"):
        merge([], str(tmp_path / "data.tfrecord"))
    original = Path(__file__).parent / "golden" / "original-module"
    for part in ("a", "b"):
        shutil.copy(original / "images.tfrecord", tmp_path / f"{part}.tfrecord")
        shutil.copy(original / "images.header", tmp_path / f"{part}.tfrecord.header.yaml")
    assert len(list(load(str(tmp_path / "a.tfrecord")))) > 0  # a part load reads
    parts = [str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")]
    with pytest.raises(SchemaError, match=re.escape(parts[0]) + ": files of the original "
                                          "module cannot be merged$"):
        merge(parts, str(tmp_path / "data.tfrecord"))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "a.tfrecord", "a.tfrecord.header.yaml", "b.tfrecord", "b.tfrecord.header.yaml"]


@pytest.mark.parametrize("damage", ["missing", "truncated"])
def test_merge_refuses_parts_whose_records_are_not_there(tmp_path, damage):
    """It wrote a header over them, which load and verify then refused."""
    parts = save_parts(tmp_path, flat_dict(), [{}, {}])
    record_file = Path(parts[1])
    if damage == "missing":
        record_file.unlink()
    else:
        record_file.write_bytes(record_file.read_bytes()[:-1])
    with pytest.raises(CorruptDataError, match=re.escape(parts[1]) + ": "):
        merge(parts, str(tmp_path / "data.tfrecord"))
    assert not (tmp_path / "data.tfrecord.header.yaml").exists()


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_merge_parses_in_the_smallest_blocks_of_its_parts(tmp_path, order):
    """The first part's block_records was kept: small elements first made blocks of 1,024 of
    the other part's 200 kB clips (195 MiB), where that part alone parses 20 at a time."""
    def clips(start, stop, length):
        return tf.data.Dataset.range(start, stop).map(lambda i: tf.fill([length + i % 2], 0.5))

    parts = [str(tmp_path / f"data.tfrecord-part{i}") for i in range(2)]
    headers = [save(clips(0, 300, 2), parts[0]), save(clips(300, 360, 50_000), parts[1])]
    assert headers[0]["block_records"] > 10 * headers[1]["block_records"]
    listed = [parts[i] for i in order]
    merged = merge(listed, str(tmp_path / "data.tfrecord"))
    assert merged["block_records"] == headers[1]["block_records"]
    expected = clips(0, 300, 2).concatenate(clips(300, 360, 50_000))
    if order == (1, 0):
        expected = clips(300, 360, 50_000).concatenate(clips(0, 300, 2))
    assert_same_elements(expected, load(str(tmp_path / "data.tfrecord")))


def test_merge_makes_the_headers_folder_as_save_does(tmp_path):
    """It failed with TensorFlow's NotFoundError, naming its temporary file."""
    full = flat_dict()
    parts = save_parts(tmp_path, full, [{}, {}])
    header_path = str(tmp_path / "meta" / "deeper" / "data.yaml")
    merge(parts, str(tmp_path / "data.tfrecord"), header_path)
    assert_same_elements(concatenation(full, 2, range(2)),
                         load(str(tmp_path / "data.tfrecord"), header_path))


def test_a_failed_merge_leaves_no_folder_it_made(tmp_path, monkeypatch):
    parts = save_parts(tmp_path, flat_dict(), [{}, {}])

    def fails(*args):
        raise OSError("the disk is full")

    monkeypatch.setattr(core, "_write_header", fails)
    with pytest.raises(OSError, match="the disk is full"):
        merge(parts, str(tmp_path / "data.tfrecord"), str(tmp_path / "meta" / "data.yaml"))
    assert not (tmp_path / "meta").exists()


def test_merge_refuses_a_folder_at_the_header_path(tmp_path):
    """As save does; it failed in TensorFlow's rename."""
    parts = save_parts(tmp_path, flat_dict(), [{}, {}])
    (tmp_path / "meta").mkdir()
    with pytest.raises(ValueError, match="meta' is a folder; a file goes there"):
        merge(parts, str(tmp_path / "data.tfrecord"), str(tmp_path / "meta"))
    assert os.listdir(tmp_path / "meta") == []


@pytest.mark.parametrize("name_bytes, header, refused", [
    (244, None, "a file name of 256 bytes"),  # the default header's name: + .header.yaml
    (10, "h" * 256, "a file name of 256 bytes"),
    (243, None, None),  # 255 bytes: the most allowed
])
def test_merge_refuses_a_too_long_header_name_up_front(tmp_path, name_bytes, header, refused):
    """As save does: merge failed at its rename, with TensorFlow's "File name too long"
    (helper-75)."""
    parts = save_parts(tmp_path, flat_dict(), [{}, {}])
    tfrecord_path = str(tmp_path / ("d" * name_bytes))
    header_path = None if header is None else str(tmp_path / header)
    before = sorted(os.listdir(tmp_path))
    if refused:
        with pytest.raises(ValueError, match=refused + ".*longer than the 255 most filesystems"):
            merge(parts, tfrecord_path, header_path)
        assert sorted(os.listdir(tmp_path)) == before
    else:
        merge(parts, tfrecord_path, header_path)
        assert_same_elements(concatenation(flat_dict(), 2, [0, 1]), load(tfrecord_path))


@pytest.mark.parametrize("name", ["dir", "sub/", "", "."])
def test_merge_refuses_a_name_that_is_a_folder(tmp_path, monkeypatch, name):
    """As save does: merge wrote `dir.header.yaml`, `sub/.header.yaml`, `./.header.yaml` or
    `..header.yaml`, where a save to the same name is refused. Found by helper-75."""
    parts = save_parts(tmp_path, flat_dict(), [{}, {}])
    (tmp_path / "dir").mkdir()
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    with pytest.raises(ValueError, match=re.escape(repr(name)) + " (names a folder, not a "
                       "file|is a folder; a file goes there)"):
        merge([os.path.basename(p) for p in parts], name)
    with pytest.raises(ValueError, match=re.escape(repr(name))):
        save(flat_dict(), name)
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


def test_merge_refuses_a_part_whose_header_lists_another_saves_records(tmp_path):
    """A part made by copying another save's records and header under the part's name: its
    header lists the other save's file, which `load` of the part refuses, and merge listed
    that file, so the merged dataset read the other save's records. Found by helper-75."""
    other = str(tmp_path / "other.tfrecord")
    save(flat_dict(4), other)
    parts = save_parts(tmp_path, flat_dict(), [{}, {}])
    shutil.copy(other, parts[0])
    shutil.copy(f"{other}.header.yaml", f"{parts[0]}.header.yaml")
    message = (f"{parts[0]}.header.yaml: lists the record files 'other.tfrecord', not "
               f"{parts[0]}, which is there too")
    with pytest.raises(core.HeaderError, match=re.escape(message)):
        load(parts[0])
    with pytest.raises(core.HeaderError, match=re.escape(message)):
        merge(parts, str(tmp_path / "data.tfrecord"))
    assert not (tmp_path / "data.tfrecord.header.yaml").exists()


def test_merge_resolves_each_part_once(tmp_path, monkeypatch):
    """Parts listed twice were found by comparing each with every earlier one, each pair
    resolved again: 2,000 local parts took 14 s (1,000: 4.3 s). Found by helper-75."""
    parts = save_parts(tmp_path, flat_dict(60), [{}] * 60)
    calls = []
    real = os.path.realpath
    monkeypatch.setattr(os.path, "realpath", lambda *a, **k: calls.append(a) or real(*a, **k))
    merge(parts, str(tmp_path / "data.tfrecord"))
    assert len(calls) < 20 * len(parts), len(calls)  # pairwise: 60 * 59
    assert_same_elements(concatenation(flat_dict(60), 60, range(60)),
                         load(str(tmp_path / "data.tfrecord")))


def test_merge_refuses_a_fifo_at_the_header_path(tmp_path):
    """Its rename replaced the FIFO with the merged header."""
    parts = save_parts(tmp_path, flat_dict(), [{}, {}])
    with fifo_at(str(tmp_path / "meta")) as meta:
        with pytest.raises(ValueError, match="meta' is a FIFO \\(named pipe\\); a regular file "
                                             "goes there"):
            merge(parts, str(tmp_path / "data.tfrecord"), meta)
        assert stat.S_ISFIFO(os.stat(meta).st_mode)


def test_merge_refuses_what_would_lose_or_list_twice_a_parts_records(tmp_path):
    parts = save_parts(tmp_path, flat_dict(), [{}, {}])
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    merged = str(tmp_path / "data.tfrecord")
    with pytest.raises(ValueError, match="got one path"):
        merge(parts[0], merged)  # a string, not a list of them
    with pytest.raises(ValueError, match="header_path .* is one of its record files"):
        merge(parts, merged, header_path=parts[0])  # would overwrite part 0's records
    merge(parts, merged)
    with pytest.raises(SchemaError, match=r"record file 'data.tfrecord-part0' is also"):
        merge([merged, parts[0]], str(tmp_path / "again"))  # part 0 listed twice
    assert not (tmp_path / "again.header.yaml").exists()
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()
            if p.name in before} == before


def test_merge_refuses_a_header_on_a_parts_header_given_another_way(tmp_path, monkeypatch):
    """`./part.header.yaml` is part's own header too: writing the merged one there lost it."""
    monkeypatch.chdir(tmp_path)
    parts = [Path(p).name for p in save_parts(tmp_path, flat_dict(), [{}, {}])]
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(ValueError, match="would replace the part's header"):
        merge(parts, "merged", header_path=f"./{parts[0]}.header.yaml")
    with pytest.raises(ValueError, match="needs a name of its own"):
        merge(parts, f"./{parts[1]}")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_merge_refuses_a_header_where_its_records_name_would_go_and_a_parts_header_as_name(
        tmp_path):
    """As save refuses it: a header on the merged name, or one of its shards' names, which a
    later save there would write its records over (merge had put the header on `merged`
    itself). And a part's header given as the merged name is named as such (the refusal said
    that records of an earlier save were there)."""
    parts = save_parts(tmp_path, flat_dict(), [{}, {}])
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    merged = str(tmp_path / "merged")
    for header_path in (merged, f"{merged}-00000-of-00002"):
        with pytest.raises(ValueError, match=re.escape(
                f"header_path {header_path!r} is where the records of {merged!r} go")):
            merge(parts, merged, header_path)
    with pytest.raises(ValueError, match=re.escape(
            f"{parts[1]}: the merged dataset needs a name of its own; {parts[1]}.header.yaml "
            "is the part's header")):
        merge(parts, f"{parts[1]}.header.yaml")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_merge_refuses_a_header_over_records_or_on_a_folders_name(tmp_path):
    """As save does (helper-86): a header path holding another save's records, and one that
    names a folder ("headers/", which failed at the rename, naming a temporary)."""
    parts = save_parts(tmp_path, flat_dict(), [{}, {}])
    other = str(tmp_path / "other.tfrecord")
    save(flat_dict(), other, compression="GZIP")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    merged = str(tmp_path / "merged")
    with pytest.raises(ValueError, match=re.escape(
            f"header_path {other!r} holds GZIP-compressed records, which the header would "
            "replace")):
        merge(parts, merged, other)
    folder = str(tmp_path / "headers") + "/"
    with pytest.raises(ValueError, match=re.escape(f"{folder!r} names a folder, not a file")):
        merge(parts, merged, folder)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_merge_refuses_parts_named_as_the_merged_paths_own_shards(tmp_path):
    """A later save to `train` would replace or remove `train-0000i-of-00002` as its own."""
    parts = [str(tmp_path / f"train-{i:05d}-of-00002") for i in range(2)]
    for i, part in enumerate(parts):
        save(flat_dict().shard(2, i), part)
    with pytest.raises(SchemaError, match="named as a save to .*train names its own"):
        merge(parts, str(tmp_path / "train"))
    assert not (tmp_path / "train.header.yaml").exists()


def test_merge_takes_parts_given_with_a_dot_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    parts = save_parts(tmp_path, flat_dict(), [{}, {}])
    merge([f"./{Path(p).name}" for p in parts], "data.tfrecord")
    assert_same_multiset(flat_dict(), load("data.tfrecord"))


def test_ram_filesystem_one_file_over_shards(ram_folder):
    """TensorFlow's ram:// calls `data.tfrecord` a folder while its shards exist; saving one
    file there replaces them."""
    tfrecord_path = f"{ram_folder}/data.tfrecord"
    save(flat_dict(), tfrecord_path, num_shards=3)
    save(features_label(), tfrecord_path)
    assert folder_contents(tfrecord_path) == ["data.tfrecord", "data.tfrecord.header.yaml"]
    assert_same_elements(features_label(), load(tfrecord_path))


@pytest.mark.parametrize("options, fitted", [({}, True), ({"shard_size": 1 << 20}, True),
                                             ({"num_shards": 2}, False)])
def test_blocks_hold_about_4_mib_of_records_larger_than_the_spec_guessed(paths, options,
                                                                         fitted):
    """`load` parses a block at once: 1,024 records of 1 MB clips (the spec guesses 64 values
    for an unknown dim) made it hold 1 GB. Round-robin shards keep the blocks they were dealt
    (the header says how)."""
    clips = tf.data.Dataset.range(24).map(  # [None]: of a length the spec does not know
        lambda i: tf.fill([100_000 + tf.cast(i, tf.int32) * 0], tf.cast(i, tf.float32)))
    assert clips.element_spec.shape.as_list() == [None]
    header = save(clips, paths[0], **options)
    expected = (4 << 20) * 24 // sum(s["num_bytes"] for s in header["shards"])
    assert (header["block_records"] in (expected, expected + 1)) is fitted, header
    assert [float(x[0]) for x in load(paths[0])] == list(range(24))
    assert verify(paths[0])["num_records"] == 24


def test_features_difference_names_the_first_feature_that_differs():
    def features(dataset):
        return tuple(core._schema_from_spec(dataset.element_spec)[0])

    full, fewer = features(flat_dict()), features(flat_dict().map(_without_name))
    assert core._features_difference(full, fewer) == ": feature 'name' is only in this part"
    assert core._features_difference(fewer, full) == ": feature 'name' is only in that one"
    assert core._features_difference(full, full) == ""


_OUT_OF_FILES = r"""
import json, os, resource, sys
import tensorflow as tf
from super_serial import core, load, save

folder, compression = sys.argv[1], sys.argv[2] or None
path = os.path.join(folder, "data.tfrecord")
dataset = tf.data.Dataset.range(50)
save(dataset, path)  # an earlier save, which the failing one must leave as it is
open_now = len(os.listdir("/proc/self/fd"))
resource.setrlimit(resource.RLIMIT_NOFILE,
                   (open_now + 40, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
try:
    save(dataset.map(lambda x: x + 1), path, num_shards=100, compression=compression)
    error = None
except Exception as e:
    error = [type(e).__name__, getattr(e, "errno", None), str(e)]
print(json.dumps({"error": error, "files": sorted(os.listdir(folder)),
                  "loaded": [int(x) for x in load(path)], "limit": open_now + 40}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/fd and setrlimit")
@pytest.mark.parametrize("compression", ["", "GZIP"])  # super_serial's writer, TensorFlow's
def test_more_shards_than_the_process_may_open_is_a_clear_error(tmp_path, compression):
    import errno
    import json
    import subprocess

    result = subprocess.run(
        [sys.executable, "-c", _OUT_OF_FILES, str(tmp_path), compression],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    kind, number, message = report["error"]
    assert (kind, number) == ("OSError", errno.EMFILE)
    assert message.startswith(f"[Errno {errno.EMFILE}] {tmp_path / 'data.tfrecord'}: nothing was "
                              "saved: Too many open files: num_shards=100 keeps that many "
                              "record files")
    assert f"`ulimit -n`, is {report['limit']:,}" in message
    assert "shard_size=" in message
    # nothing of the failed save is left, and the earlier one loads as it was
    assert report["files"] == ["data.tfrecord", "data.tfrecord.header.yaml"]
    assert report["loaded"] == list(range(50))


def test_a_shard_that_reaches_shard_size_exactly_takes_no_more_records(tmp_path):
    """A file that reaches shard_size exactly takes no more records (helper-77's mutation sweep)."""
    dataset = tf.data.Dataset.from_tensor_slices(np.arange(6 * 4, dtype=np.float32).reshape(6, 4))
    one = str(tmp_path / "one.tfrecord")
    save(dataset, one)
    shard = read_header(one + ".header.yaml")["shards"][0]
    record = shard["num_bytes"] // shard["num_records"]  # every record the same size
    assert record * shard["num_records"] == shard["num_bytes"]
    path = str(tmp_path / "d.tfrecord")
    save(dataset, path, shard_size=2 * record)
    shards = read_header(path + ".header.yaml")["shards"]
    assert [s["num_records"] for s in shards] == [2, 2, 2]
    assert [s["num_bytes"] for s in shards] == [2 * record] * 3


def test_merge_refuses_a_part_of_two_round_robin_shards(tmp_path, small_blocks):
    """A part of two round-robin shards is refused as one of more, not merged as two files one
    after the other, which load would read in another order than the part's own, without a
    word (helper-122: only num_shards=3 was tried)."""
    good = str(tmp_path / "data.tfrecord-part0")
    two = str(tmp_path / "data.tfrecord-part1")
    save(tf.data.Dataset.range(10), good)
    header = save(tf.data.Dataset.range(100), two, num_shards=2)
    assert header["layout"] == "round_robin" and len(header["shards"]) == 2
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(SchemaError, match=re.escape(two) + ".*num_shards=2"):
        merge([good, two], str(tmp_path / "data.tfrecord"))
    assert sorted(os.listdir(tmp_path)) == before

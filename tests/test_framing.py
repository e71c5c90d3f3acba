"""save frames TFRecords itself when google-crc32c is installed: the same bytes as
tf.io.TFRecordWriter, which it falls back to otherwise."""

from __future__ import annotations

import collections
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import google_crc32c
import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_same_elements, first_batch_records, write_records
from hypothesis import given, settings
from hypothesis import strategies as st

from super_serial import core, load, save


def tfrecordwriter_bytes(records: list, path: Path) -> bytes:
    write_records(path, records)
    return path.read_bytes()


def framed_bytes(records: list, path, batches: int = 1, backwards: bool = False) -> bytes:
    """What _FramedFile writes at `path` (a local path, or a tf.io.gfile URL); `backwards`
    writes the prepared batches last first (each goes to its own offset)."""
    writer = core._FramedFile(str(path))
    step = max(1, -(-len(records) // batches))
    sizes = np.array([len(r) for r in records], np.int64)
    prepared = [writer.prepare(records[start:start + step], sizes[start:start + step])
                for start in range(0, len(records), step)]
    for batch in reversed(prepared) if backwards else prepared:
        writer.write(batch)
    writer.close()
    with tf.io.gfile.GFile(str(path), "rb") as f:
        return f.read()


def test_google_crc32c_is_the_c_implementation():
    # The framed writer is only used with it (the pure-Python one would be far slower).
    assert google_crc32c.implementation == "c"


@pytest.mark.parametrize("records", [
    [],
    [b""],
    [b"", b"", b"x"],
    [bytes(range(256)) * 200],  # 51,200 bytes
    [b"a" * n for n in range(300)],  # every length up to 299, many distinct length headers
], ids=["none", "empty", "empties", "large", "lengths"])
def test_frame_matches_tfrecordwriter(tmp_path, records):
    expected = tfrecordwriter_bytes(records, tmp_path / "reference")
    assert framed_bytes(records, tmp_path / "framed") == expected
    assert framed_bytes(records, tmp_path / "framed3", batches=3) == expected
    assert framed_bytes(records, tmp_path / "backwards", batches=3, backwards=True) == expected
    assert framed_bytes(records, f"ram://{tmp_path}/framed") == expected  # through GFile


def test_more_pieces_than_one_writev_takes(tmp_path):
    records = [bytes([i % 251]) * (i % 7) for i in range(3000)]  # 6,001 pieces
    assert 2 * len(records) + 1 > 5 * core._IOV_MAX
    expected = tfrecordwriter_bytes(records, tmp_path / "reference")
    assert framed_bytes(records, tmp_path / "framed") == expected


def test_writes_gather_about_write_bytes_a_call(tmp_path, monkeypatch):
    """Each call writes until it has _WRITE_BYTES (one piece may take it past them), the
    last what is left: no call of a whole batch, which is slow at times."""
    monkeypatch.setattr(core, "_WRITE_BYTES", 5000)
    real_pwritev, sizes = core.os.pwritev, []
    monkeypatch.setattr(core.os, "pwritev", lambda fd, buffers, offset: sizes.append(
        [len(b) for b in buffers]) or real_pwritev(fd, buffers, offset))
    records = [np.random.default_rng(i).bytes(300 * (i % 9)) for i in range(60)]
    expected = tfrecordwriter_bytes(records, tmp_path / "reference")
    assert framed_bytes(records, tmp_path / "framed") == expected
    assert len(sizes) > 1
    for call in sizes[:-1]:
        assert sum(call) >= 5000 and sum(call[:-1]) < 5000, call
    assert 0 < sum(sizes[-1]) and sum(sizes[-1][:-1]) < 5000


def test_short_writes_are_completed(tmp_path, monkeypatch):
    real_pwritev, real_pwrite, calls = core.os.pwritev, core.os.pwrite, []

    def short_pwritev(fd, buffers, offset):  # writes only part of what it is given
        calls.append("pwritev")
        data = b"".join(buffers)
        return real_pwritev(fd, [data[:max(1, len(data) // 3)]], offset)

    def short_pwrite(fd, data, offset):
        calls.append("pwrite")
        return real_pwrite(fd, bytes(data[:max(1, len(data) // 2)]), offset)

    monkeypatch.setattr(core.os, "pwritev", short_pwritev)
    monkeypatch.setattr(core.os, "pwrite", short_pwrite)
    records = [np.random.default_rng(i).bytes(1000 + i) for i in range(40)]
    expected = tfrecordwriter_bytes(records, tmp_path / "reference")
    assert framed_bytes(records, tmp_path / "framed", batches=2, backwards=True) == expected
    assert calls.count("pwritev") == 2 and calls.count("pwrite") > 2


@pytest.mark.parametrize("num_shards", [None, 2])
def test_a_full_disk_names_the_file_and_keeps_the_previous_pair(tmp_path, monkeypatch,
                                                                 num_shards):
    """os.pwritev's OSError named no file; it now names the path saved to, says nothing was
    saved, and names the temporary being written beside it; the previous files stay as they
    were."""
    tfrecord_path = str(tmp_path / "data.tfrecord")
    previous = tf.data.Dataset.from_tensor_slices({"x": np.arange(6.0)})
    save(previous, tfrecord_path, num_shards=num_shards)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    def full(fd, buffers, offset):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(core.os, "pwritev", full)
    temporary = r"'.*/\.data\.tfrecord\.[0-9a-f]{12}\.tmp\d*'"
    with pytest.raises(OSError, match=rf"^\[Errno 28\] {re.escape(tfrecord_path)}: nothing was "
                                      rf"saved: No space left on device: {temporary}$"):
        save(tf.data.Dataset.from_tensor_slices({"x": np.arange(9.0)}), tfrecord_path,
             num_shards=num_shards)
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert_same_elements(previous, load(tfrecord_path))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(st.binary(max_size=2000), max_size=40))
def test_frame_matches_tfrecordwriter_for_any_records(tmp_path_factory, records):
    folder = tmp_path_factory.mktemp("frames")
    assert framed_bytes(records, folder / "f") == tfrecordwriter_bytes(records, folder / "r")


def test_framed_records_pass_tensorflows_checksums(tmp_path):
    records = [np.random.default_rng(i).bytes(i * 37) for i in range(50)]
    path = tmp_path / "framed"
    framed_bytes(records, path, batches=4)
    read = [r.numpy() for r in tf.data.TFRecordDataset(str(path))]
    assert read == records


def test_masked_crc32c_is_tfrecords_masking():
    crcs = [0, 1, 0xFFFFFFFF, 0x12345678, google_crc32c.value(b"123456789")]
    expected = [(((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF for c in crcs]
    assert core._masked_crc32c(crcs).tolist() == expected
    assert google_crc32c.value(b"123456789") == 0xE3069283  # the CRC-32C check value


def test_length_crcs_are_crc32c_of_the_little_endian_lengths():
    lengths = np.array([0, 1, 0x7F, 0x80, 0xFF, 0x100, 2**32 - 1, 2**32, 2**63, 2**64 - 1]
                       + np.random.default_rng(0).integers(0, 2**63, 200).tolist(), np.uint64)
    expected = [google_crc32c.value(int(x).to_bytes(8, "little")) for x in lengths.tolist()]
    assert core._crc32c_u64(lengths).tolist() == expected


@pytest.mark.parametrize("elements", [
    {"id": [b"ab", b"", b"c" * 300]},  # records as bytes
    {"image": np.arange(3 * 400, dtype=np.float32).reshape(3, 400)},  # records as pieces
    {"blob": [b"x" * 1000, b"y" * 5000, b""], "n": [1, 2, 3]},  # long strings: kept as they are
], ids=["bytes", "pieces", "long strings"])
def test_encoded_sizes_are_the_records_sizes(elements):
    dataset = tf.data.Dataset.from_tensor_slices(elements)
    records, sizes = first_batch_records(dataset, 3)
    assert sizes.dtype == np.int64
    assert sizes.tolist() == [len(core._joined(r)) for r in records]


@pytest.mark.parametrize("name", ["k" * 127, "k" * 128, "é" * 100, "k" * 16_384],
                         ids=["127 bytes", "128 bytes", "200 bytes of UTF-8", "16,384 bytes"])
def test_feature_names_of_128_bytes_and_more_have_varint_key_lengths(name):
    """A FeatureEntry's key is a length-delimited field: from 128 bytes (a name of 100 'é' is
    200) its length takes a 2-byte varint, from 16,384 3 bytes. The records are the bytes
    protobuf serializes, and their sizes are right."""
    values = [1, 300, -5]
    dataset = tf.data.Dataset.from_tensor_slices({name: values})
    records, sizes = first_batch_records(dataset, 3)
    assert len(name.encode()) >= 127
    for record, size, value in zip(records, sizes.tolist(), values):
        expected = tf.train.Example(features=tf.train.Features(feature={
            name: tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))}))
        assert core._joined(record) == expected.SerializeToString(deterministic=True)
        assert size == len(core._joined(record))


def tabular(n: int) -> tf.data.Dataset:
    return tf.data.Dataset.range(n).map(lambda i: {
        "x": tf.fill([3], tf.cast(i, tf.float32)),
        "id": tf.strings.as_string(i * 7919),  # records of several lengths
    })


def ragged(n: int) -> tf.data.Dataset:
    return tf.data.Dataset.range(n).map(
        lambda i: tf.RaggedTensor.from_row_lengths(tf.range(i % 5 * 2), [i % 5, i % 5]))


def images(n: int) -> tf.data.Dataset:
    """Wide fixed-size features: records stay pieces (views into the batch) until written."""
    pixels = np.random.default_rng(n).random((n, 16, 16, 2), dtype=np.float32)
    masks = np.random.default_rng(n + 1).integers(0, 2, (n, 300), dtype=np.uint8).astype(bool)
    return tf.data.Dataset.from_tensor_slices({"image": pixels, "mask": masks,
                                               "label": np.arange(n) * 3})


DATASETS = {"tabular": (tabular, 3000), "ragged": (ragged, 200), "images": (images, 700),
            "empty": (tabular, 0)}


def test_records_with_wide_features_are_pieces_of_the_batch():
    records, _ = first_batch_records(images(4), 4)
    assert all(type(r) is tuple and len(r) > 1 for r in records)
    assert any(isinstance(piece, np.ndarray) and not piece.flags.writeable
               for piece in records[0])
    assert [tf.train.Example.FromString(core._joined(r)).features.feature["label"]
            .int64_list.value[0] for r in records] == [0, 3, 6, 9]
LAYOUTS = {"one file": {}, "3 shards": {"num_shards": 3}, "by size": {"shard_size": 20_000}}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", DATASETS)
def test_save_writes_the_same_files_either_way(tmp_path, monkeypatch, name, layout):
    make, n = DATASETS[name]
    options = LAYOUTS[layout]
    framed, fallback = tmp_path / "framed", tmp_path / "fallback"
    save(make(n), str(framed / "data.tfrecord"), **options)
    with monkeypatch.context() as patch:
        patch.setattr(core, "google_crc32c", None)
        save(make(n), str(fallback / "data.tfrecord"), **options)

    names = sorted(p.name for p in framed.iterdir())
    assert names == sorted(p.name for p in fallback.iterdir())
    assert len(names) >= 2
    for file_name in names:
        assert (framed / file_name).read_bytes() == (fallback / file_name).read_bytes(), file_name
    assert_same_elements(make(n), load(str(framed / "data.tfrecord")))


def test_one_file_is_written_by_one_thread_batch_by_batch(tmp_path, monkeypatch):
    monkeypatch.setattr(core, "_TARGET_BLOCK_BYTES", 16 << 10)  # many batches
    monkeypatch.setattr(core, "_TARGET_BATCH_BYTES", 64 << 10)
    writes, real_write = collections.Counter(), core._FramedFile.write

    def write(self, prepared):
        writes[threading.current_thread().name] += 1
        real_write(self, prepared)

    monkeypatch.setattr(core._FramedFile, "write", write)
    framed, fallback = tmp_path / "framed.tfrecord", tmp_path / "fallback.tfrecord"
    save(images(700), str(framed))
    assert list(writes) == ["super_serial-writer-0"], writes  # a second one only waits
    assert writes["super_serial-writer-0"] >= 10, writes
    monkeypatch.setattr(core, "google_crc32c", None)
    save(images(700), str(fallback))
    assert framed.read_bytes() == fallback.read_bytes()
    assert_same_elements(images(700), load(str(framed)))


class Spy:
    def __init__(self, monkeypatch):
        self.made = []
        for kind in (core._FramedFile, core._TFRecordFile):
            monkeypatch.setattr(core, kind.__name__, self.recording(kind))

    def recording(self, kind):
        def make(*args):
            self.made.append(kind.__name__)
            return kind(*args)
        return make


@pytest.mark.parametrize("compression, crc32c, expected", [
    (None, "c", "_FramedFile"),
    ("GZIP", "c", "_TFRecordFile"),
    ("ZLIB", "c", "_TFRecordFile"),
    (None, "python", "_TFRecordFile"),  # pure-Python CRC32C: slower than TensorFlow's writer
    (None, None, "_TFRecordFile"),  # google-crc32c not installed
])
def test_which_writer_save_uses(paths, monkeypatch, compression, crc32c, expected):
    spy = Spy(monkeypatch)
    if crc32c is None:
        monkeypatch.setattr(core, "google_crc32c", None)
    else:
        monkeypatch.setattr(google_crc32c, "implementation", crc32c)
    save(tabular(10), paths[0], num_shards=2, compression=compression)
    assert spy.made == [expected, expected]
    assert_same_elements(tabular(10), load(paths[0]))


def test_google_crc32c_without_its_c_code_does_not_break_the_import(tmp_path):
    """google-crc32c built without its C code (1.5.0 on Python 3.12: no wheel) warns on
    import; the core imported it, so under -W error (and this suite's filterwarnings) the
    first use of super_serial failed, for a module that save does not use then, and no test
    ran (helper-84). Here a stand-in that warns as it does."""
    (tmp_path / "google_crc32c.py").write_text(
        "import warnings\n"
        "warnings.warn('As the c extension couldn\\'t be imported, `google-crc32c` is using a "
        "pure python implementation', RuntimeWarning)\n"
        "implementation = 'python'\n")
    repo = Path(__file__).resolve().parent.parent
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c",
         "import super_serial, tensorflow as tf\n"
         "super_serial.save(tf.data.Dataset.range(3), 'data.tfrecord')\n"
         "print(super_serial.core.google_crc32c.implementation,\n"
         "      [int(x) for x in super_serial.load('data.tfrecord')])"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(repo)]),
             "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == "python [0, 1, 2]\n", result.stdout

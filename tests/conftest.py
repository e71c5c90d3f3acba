"""Shared test helpers: exact dataset comparison."""

from __future__ import annotations

import contextlib
import errno
import importlib.util
import os
import shutil
import threading
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest
import tensorflow as tf
import yaml

from super_serial import core

# Each dtype's encoding as the README's format section gives it, written out here rather than
# taken from the dtype table under test
ENCODINGS = {
    "bool": "int64", "int8": "raw", "int16": "raw", "int32": "int64", "int64": "int64",
    "uint8": "raw", "uint16": "raw", "uint32": "int64", "uint64": "raw",
    "float16": "raw", "bfloat16": "raw", "float32": "float", "float64": "raw",
    "complex64": "raw", "complex128": "raw", "string": "bytes",
    "qint8": "raw", "quint8": "raw", "qint32": "raw",
}


@contextlib.contextmanager
def fifo_at(path, rescue_after: float = 3.0):
    """A FIFO (named pipe) at `path`. A reader of it would wait for a writer forever: after
    `rescue_after` seconds, a thread opens and closes its writing end, so that such a read
    ends (with no bytes) and a test of code that reads it fails instead of hanging."""
    os.mkfifo(path)
    done = threading.Event()

    def rescue():
        if done.wait(rescue_after):
            return
        while not done.is_set():
            try:  # fails (ENXIO) until something opens it for reading
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError as e:
                if e.errno not in (errno.ENXIO, errno.ENOENT):
                    return
            time.sleep(0.05)

    thread = threading.Thread(target=rescue, daemon=True)
    thread.start()
    try:
        yield path
    finally:
        done.set()
        thread.join()


GOLDEN = Path(__file__).resolve().parent / "golden"


def golden_module():
    """tests/golden/make_golden.py as a module: `golden_dataset(version)`, `main(folder)`."""
    spec = importlib.util.spec_from_file_location("make_golden", GOLDEN / "make_golden.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reference_varint(value: int) -> bytes:
    """A non-negative integer as protobuf's varint, written out the plain way."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def first_batch_records(dataset: tf.data.Dataset, rows: int) -> tuple:
    """The records `save` encodes for the first `rows` elements of `dataset`, as
    `_encode_records` gives them (bytes, or pieces to join: `core._joined`), and their sizes."""
    features = core._schema_from_spec(dataset.element_spec)[0]
    leaves = next(iter(core._batches_for_encoding(dataset, features, rows)))
    return core._encode_records(features, leaves, rows)


def spy(monkeypatch, name: str, note=lambda *args: args, owner=core) -> list:
    """Wraps `owner.<name>` (a function of the core, by default) so that each call is noted
    (what `note` makes of its arguments) in the list returned, then made as it was."""
    calls, real = [], getattr(owner, name)

    def spied(*args):
        calls.append(note(*args))
        return real(*args)

    monkeypatch.setattr(owner, name, spied)
    return calls


def assert_same_elements(expected: tf.data.Dataset, actual: tf.data.Dataset):
    """Same element_spec, same number of elements, bit-identical values in the same order."""
    assert actual.element_spec == expected.element_spec, (
        f"element_spec differs:\n  expected {expected.element_spec}\n"
        f"  actual   {actual.element_spec}"
    )
    want, got = list(expected), list(actual)
    assert len(got) == len(want), f"{len(got)} elements, expected {len(want)}"
    for index, (a, b) in enumerate(zip(want, got)):
        tf.nest.assert_same_structure(a, b)
        for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
            assert_bit_identical(x, y, f"element {index}")


def canonical(element) -> str:
    """A comparable text form of one element, exact for every dtype used here."""
    leaves = []
    for leaf in tf.nest.flatten(element):
        if leaf is None:  # a part with no tensor
            leaves.append(None)
            continue
        if isinstance(leaf, tf.RaggedTensor):
            values = leaf.to_list()
        else:
            values = np.asarray(leaf.numpy()).tolist()
        leaves.append((leaf.dtype.name, tuple(leaf.shape), values))
    return repr(leaves)


def assert_same_multiset(expected: tf.data.Dataset, actual: tf.data.Dataset):
    assert actual.element_spec == expected.element_spec
    assert sorted(map(canonical, actual)) == sorted(map(canonical, expected))


def assert_bit_identical(x, y, where: str = ""):
    if x is None:  # a part with no tensor
        assert y is None, f"{where}: expected None, found {type(y).__name__}"
        return
    if isinstance(x, tf.SparseTensor):  # its parts, in the order they were given
        assert isinstance(y, tf.SparseTensor), f"{where}: expected a SparseTensor"
        for part in ("indices", "values", "dense_shape"):
            assert_bit_identical(getattr(x, part), getattr(y, part), f"{where} ({part})")
        return
    if isinstance(x, tf.RaggedTensor):
        assert isinstance(y, tf.RaggedTensor), f"{where}: expected a RaggedTensor"
        assert x.dtype == y.dtype and x.row_splits.dtype == y.row_splits.dtype, where
        for sx, sy in zip(x.nested_row_splits, y.nested_row_splits):
            np.testing.assert_array_equal(sx.numpy(), sy.numpy(), err_msg=where)
        x, y = x.flat_values, y.flat_values
    # NumPy's dtype alone would not tell a quantized dtype from its integers
    assert x.dtype == y.dtype, f"{where}: dtype {y.dtype.name}, expected {x.dtype.name}"
    a, b = np.asarray(x.numpy()), np.asarray(y.numpy())
    assert a.dtype == b.dtype, f"{where}: dtype {b.dtype}, expected {a.dtype}"
    assert a.shape == b.shape, f"{where}: shape {b.shape}, expected {a.shape}"
    if a.dtype == object:
        assert a.tolist() == b.tolist(), where
    else:
        assert a.tobytes() == b.tobytes(), f"{where}: values differ bitwise"


def save_pair(folder, dataset: tf.data.Dataset):
    """Saves `dataset` as folder/data.tfrecord + folder/data.header.yaml; returns the folder."""
    from super_serial import save

    save(dataset, str(folder / "data.tfrecord"), str(folder / "data.header.yaml"))
    return folder


def copy_pair(folder, paths) -> tuple[str, str]:
    """Copies the pair `save_pair` wrote in `folder` to `paths` (tfrecord, header)."""
    tfrecord_path, header_path = paths
    shutil.copyfile(folder / "data.tfrecord", tfrecord_path)
    shutil.copyfile(folder / "data.header.yaml", header_path)
    return tfrecord_path, header_path


def edit_header(header_path, change):
    """Rewrites the header at `header_path` as `change` (a function of its dict) leaves it."""
    with open(header_path) as file:
        header = yaml.safe_load(file)
    change(header)
    with open(header_path, "w") as file:
        yaml.safe_dump(header, file)


def write_records(path, records: list, compression: str = "") -> int:
    """Writes these serialized records to `path` as a TFRecord file (compressed as
    `compression` says, as TensorFlow names it); returns the file's size."""
    options = tf.io.TFRecordOptions(compression_type=compression)
    with tf.io.TFRecordWriter(str(path), options) as writer:
        for record in records:
            writer.write(record)
    return Path(path).stat().st_size


def rewrite_records(path, header_path, records: list, shard: int = 0, compression: str = ""):
    """Writes these records over `path`, shard `shard` of the save whose header is at
    `header_path`, and gives the header the file's new size: what the records hold is then all
    that tells the pair from a save."""
    size = write_records(path, records, compression)
    edit_header(header_path, lambda header: header["shards"][shard].update(num_bytes=size))


def example(features: dict) -> bytes:
    """A serialized tf.train.Example of these features, each a list (or array) of values stored
    as the original module stored them: floats in a FloatList, integers and bools in an
    Int64List, bytes in a BytesList."""
    def feature(values):
        array = np.asarray(values).ravel()
        if array.dtype.kind == "f":
            return tf.train.Feature(float_list=tf.train.FloatList(value=array.tolist()))
        if array.dtype.kind in "biu":
            integers = array.astype(np.int64).tolist()
            return tf.train.Feature(int64_list=tf.train.Int64List(value=integers))
        assert array.dtype.kind in "SO", f"no list for {array.dtype}"
        strings = np.asarray(values, dtype=object).ravel()  # as given: NumPy's "S" drops NULs
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=list(strings)))

    return tf.train.Example(features=tf.train.Features(
        feature={name: feature(values) for name, values in features.items()})).SerializeToString()


@pytest.fixture
def paths(tmp_path):
    """(tfrecord_path, header_path) in a fresh folder."""
    return str(tmp_path / "data.tfrecord"), str(tmp_path / "data.header.yaml")


@pytest.fixture(params=["CSafeLoader", "SafeLoader"])
def yaml_loader(request, monkeypatch):
    """Headers are read with libyaml's loader when PyYAML has it, else PyYAML's own (bounded
    as libyaml is: `core._SafeLoader`): both must read (and refuse) the same documents."""
    if not hasattr(yaml, request.param):  # PyYAML built without libyaml: no CSafeLoader
        pytest.skip(f"PyYAML {yaml.__version__} has no {request.param} (built without libyaml)")
    loader = core._SafeLoader if request.param == "SafeLoader" else getattr(yaml, request.param)
    monkeypatch.setattr(core, "_YAML_LOADER", loader)
    return loader

"""tf.SparseTensor components: saved as their values, indices and dense shape (format version 4),
loaded back as the same sparse tensors, element by element and in batches."""

from __future__ import annotations

import re

import numpy as np
import pytest
import tensorflow as tf
from conftest import (
    ENCODINGS,
    assert_bit_identical,
    assert_same_elements,
    edit_header,
    example,
    rewrite_records,
)
from test_roundtrip import DTYPES, _nothing_written, roundtrip, tensor

import super_serial
from super_serial import CorruptDataError, HeaderError, SchemaError, core


def sparse_elements(dtype: str, shape: list, count: int = 7, seed: int = 0) -> list:
    """`count` sparse tensors of `shape` (None dims: 1 to 4 each, varying): each with 0 to 3
    values of the dtype's awkward pool, at indices in no particular order (a repeat too)."""
    rng = np.random.default_rng(seed)
    elements = []
    for i in range(count):
        dense = [int(rng.integers(1, 5)) if d is None else d for d in shape]
        nnz = 0 if 0 in dense else i % 4
        indices = np.stack([rng.integers(0, d, nnz) for d in dense], axis=1) if nnz else (
            np.zeros([0, len(shape)], np.int64))
        if nnz == 3:
            indices[2] = indices[0]  # a SparseTensor may hold an index twice: kept as given
        values = tensor(dtype, [nnz], offset=i) if nnz else tf.zeros([0], dtype)
        elements.append(tf.SparseTensor(indices.astype(np.int64), values, dense))
    return elements


def sparse_dataset(dtype: str, shape: list, count: int = 7) -> tf.data.Dataset:
    elements = sparse_elements(dtype, shape, count)
    return tf.data.Dataset.from_generator(
        lambda: iter(elements), output_signature=tf.SparseTensorSpec(shape, tf.as_dtype(dtype)))


def assert_batches(dataset, paths, batch_size: int = 3):
    """load(batch_size=) gives what Dataset.batch gives: each batch's dense shape the largest
    of its elements'."""
    assert_same_elements(dataset.batch(batch_size),
                         super_serial.load(*paths, batch_size=batch_size))


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype(dtype, paths):
    dataset = tf.data.Dataset.zip({"s": sparse_dataset(dtype, [None, 5]),
                                   "y": tf.data.Dataset.range(7)})
    header = super_serial.save(dataset, *paths)
    assert header["version"] == (6 if tf.as_dtype(dtype).is_quantized else 4)
    assert header["features"]["s"]["sparse"] is True
    assert header["features"]["s"]["encoding"] == ENCODINGS[dtype]
    assert_same_elements(dataset, super_serial.load(*paths))
    assert_batches(dataset, paths)
    assert super_serial.verify(*paths)["num_records"] == 7  # (int ranges checked too)


SHAPES = [[6], [None], [3, None], [None, None, 2], [2, 0]]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "int64", "string", "uint8", "complex128"])
def test_shapes(shape, dtype, paths):
    dataset = sparse_dataset(dtype, shape, count=9)
    super_serial.save(dataset, *paths)
    assert_same_elements(dataset, super_serial.load(*paths))
    assert_batches(dataset, paths, batch_size=4)
    assert_batches(dataset, paths, batch_size=1)


def test_indices_keep_their_order_and_repeats(paths):
    sparse = tf.SparseTensor([[2, 1], [0, 0], [2, 1]], [1.0, 2.0, 3.0], [3, 2])
    dataset = tf.data.Dataset.from_tensors(sparse)
    super_serial.save(dataset, *paths)
    loaded = next(iter(super_serial.load(*paths)))
    assert loaded.indices.numpy().tolist() == [[2, 1], [0, 0], [2, 1]]
    assert loaded.values.numpy().tolist() == [1.0, 2.0, 3.0]


@pytest.mark.parametrize("source", ["slices", "cache", "generator", "map"])
def test_sources(source, paths, monkeypatch):
    """Rows of a sparse batch in memory, a cache, a generator, a map: each read its own way
    (in memory whole; from a function 32 at a time, the reads after the first merged by their
    bytes, `_Merger`)."""
    batch = tf.sparse.reorder(tf.SparseTensor(
        [[0, 0, 1], [0, 1, 0], [2, 1, 1], [3, 0, 0]], [1, 2, 3, 4], [5, 2, 2]))
    if source == "slices":
        dataset = tf.data.Dataset.from_tensor_slices((batch, tf.range(5)))
    elif source == "cache":
        dataset = tf.data.Dataset.from_tensor_slices((batch, tf.range(5))).cache()
    elif source == "generator":
        dataset = tf.data.Dataset.zip((sparse_dataset("int32", [None, 2], 100),
                                       tf.data.Dataset.range(100)))
    else:
        dataset = tf.data.Dataset.range(100).map(lambda i: (tf.SparseTensor(
            [[i % 3]], [tf.strings.as_string(i)], [3]), i))
    list(dataset)  # a cache filled, as it would be after a first pass
    merged = []
    concatenated = core._concatenated
    monkeypatch.setattr(core, "_concatenated", lambda reads: merged.append(len(reads)) or (
        concatenated(reads)))
    super_serial.save(dataset, *paths)
    assert (max(merged) > 1) is (source in ("generator", "map")), merged
    assert_same_elements(dataset, super_serial.load(*paths))
    assert_batches(dataset, paths, batch_size=4)


@pytest.mark.parametrize("options", [{"elements_per_batch": 2}, {"num_shards": 3},
                                     {"compression": "GZIP"}, {"shard_size": 100}], ids=str)
def test_save_options(options, tmp_path):
    dataset = tf.data.Dataset.zip((sparse_dataset("float64", [None, 3], 20),
                                   tf.data.Dataset.range(20)))
    dataset = dataset.apply(tf.data.experimental.assert_cardinality(20))  # blocks per shard
    path = str(tmp_path / "data.tfrecord")
    super_serial.save(dataset, path, **options)
    assert_same_elements(dataset, super_serial.load(path))
    assert super_serial.verify(path)["num_records"] == 20


def test_structures(paths):
    """The only component; in nested dicts and tuples; beside a list of strings (which would
    otherwise be batched by sparse_batch, over windows) and a ragged tensor."""
    sparse = sparse_dataset("string", [None])
    assert_same_elements(sparse, roundtrip(sparse, paths))
    words = tf.data.Dataset.range(7).map(lambda i: tf.strings.as_string(tf.range(i)))
    nested = tf.data.Dataset.zip(({"a": {"s": sparse, "w": words}}, (
        tf.data.Dataset.range(7), sparse_dataset("bool", [4, None]))))
    assert_same_elements(nested, roundtrip(nested.cache(), paths))
    # the list of words as ragged_batch gives it, as for any dense component of unknown shape
    assert_same_elements(nested.ragged_batch(3), super_serial.load(*paths, batch_size=3))


def test_empty_dataset_and_empty_tensors(paths):
    spec = tf.SparseTensorSpec([None, 4], tf.int16)
    empty = tf.data.Dataset.from_generator(lambda: iter([]), output_signature=spec)
    assert_same_elements(empty, roundtrip(empty, paths))
    nothing = tf.SparseTensor(tf.zeros([0, 2], tf.int64), tf.zeros([0], tf.int16), [0, 4])
    zeros = tf.data.Dataset.from_tensors(nothing).repeat(3)
    assert_same_elements(zeros, roundtrip(zeros, paths))


def test_original_dtypes_false(paths):
    """Values as the records hold them: bool as int64 in a sparse tensor; raw ones as their
    bytes, one string an element, as for every raw feature."""
    flags = tf.SparseTensor([[1]], [True], [3])
    wide = tf.SparseTensor([[0], [2]], np.array([1.5, -0.0]), [3])
    dataset = tf.data.Dataset.from_tensors({"b": flags, "f": wide})
    super_serial.save(dataset, *paths)
    loaded = super_serial.load(*paths, original_dtypes=False)
    assert loaded.element_spec == {"b": tf.SparseTensorSpec([3], tf.int64),
                                   "f": tf.TensorSpec([], tf.string)}
    element = next(iter(loaded))
    assert element["b"].values.numpy().tolist() == [1]
    assert element["b"].indices.numpy().tolist() == [[1]]
    assert element["f"].numpy() == np.array([1.5, -0.0], "<f8").tobytes()


def test_load_inside_a_tf_function(paths):
    dataset = sparse_dataset("int64", [None, 5])
    super_serial.save(dataset, *paths)

    @tf.function
    def total():
        values = tf.constant(0, tf.int64)
        for element in super_serial.load(*paths):
            values += tf.reduce_sum(element.values * tf.reduce_sum(element.indices, axis=1))
        return values

    expected = sum(int(tf.reduce_sum(e.values * tf.reduce_sum(e.indices, axis=1)))
                   for e in dataset)
    assert int(total()) == expected


@pytest.mark.parametrize("dtype", ["float32", "int32", "string", "float64"])
def test_a_stock_reader_reads_the_records(dtype, paths):
    """The format as the README gives it: values under the key (int32 as int64, float64 as
    the bytes of one entry), indices (flattened) under `<key>#indices`, the dense shape under
    `<key>#shape`."""
    dataset = sparse_dataset(dtype, [None, 5])
    super_serial.save(dataset.map(lambda s: {"x": s}), *paths)
    stored = {"float": tf.float32, "int64": tf.int64, "bytes": tf.string, "raw": tf.string}[
        ENCODINGS[dtype]]
    specs = {"x": tf.io.VarLenFeature(stored), "x#indices": tf.io.VarLenFeature(tf.int64),
             "x#shape": tf.io.FixedLenFeature([2], tf.int64)}
    records = list(tf.data.TFRecordDataset(paths[0]))
    assert len(records) == len(list(dataset)) == 7
    for want, record in zip(dataset, records):
        parsed = tf.io.parse_single_example(record, specs)
        values = parsed["x"].values
        if dtype == "float64":
            values = tf.io.decode_raw(values[0], tf.float64)
        got = tf.SparseTensor(tf.reshape(parsed["x#indices"].values, [-1, 2]),
                              tf.cast(values, want.dtype), parsed["x#shape"])
        assert_bit_identical(want, got)


def test_header_version_is_4_only_with_a_sparse_feature(tmp_path):
    """The header says the lowest version that reads it: readers of version 3 read every
    save without a sparse feature, and would misread one with it (they ignore `sparse`)."""
    plain = tf.data.Dataset.range(3)
    assert super_serial.save(plain, str(tmp_path / "a.tfrecord"))["version"] == 3
    with_sparse = tf.data.Dataset.zip((plain, sparse_dataset("int8", [2], 3)))
    assert super_serial.save(with_sparse, str(tmp_path / "b.tfrecord"))["version"] == 4


def test_merge_refuses_a_sparse_part_beside_a_dense_one(tmp_path):
    parts = [str(tmp_path / "sparse.tfrecord"), str(tmp_path / "dense.tfrecord")]
    super_serial.save(tf.data.Dataset.from_tensors(tf.SparseTensor([[1]], [1.0], [3])), parts[0])
    super_serial.save(tf.data.Dataset.from_tensors(tf.constant([0.0, 1.0, 0.0])), parts[1])
    with pytest.raises(SchemaError, match=r"feature 'tensor', sparse False against True$"):
        super_serial.merge(parts, str(tmp_path / "all.tfrecord"))


def test_merge_parts(tmp_path):
    parts = []
    for i in range(2):
        part = str(tmp_path / f"part{i}.tfrecord")
        super_serial.save(sparse_dataset("string", [None, 2], 5 + i), part)
        parts.append(part)
    header = super_serial.merge(parts, str(tmp_path / "all.tfrecord"))
    assert header["version"] == 4
    expected = sparse_dataset("string", [None, 2], 5).concatenate(
        sparse_dataset("string", [None, 2], 6))
    assert_same_elements(expected, super_serial.load(str(tmp_path / "all.tfrecord")))


# ---- what save refuses ----------------------------------------------------------------------


@pytest.mark.parametrize("sparse, words", [
    (tf.SparseTensor([[0, 3]], [1.0], [2, 3]), ["index outside its dense shape [2, 3]",
                                                "found 3"]),
    (tf.SparseTensor([[-1, 0]], [1.0], [2, 3]), ["index outside its dense shape", "found -1"]),
    (tf.SparseTensor([[0, 0]], [1.0], [2, 4]), ["dense shape [2, 4]",
                                                "its element_spec gives [None, 3]"]),
])
def test_invalid_sparse_tensors_are_refused(sparse, words, tmp_path):
    """tf.SparseTensor checks neither its indices nor (under a set_shape) its dense shape;
    load would refuse such records, so save refuses them, naming the feature."""
    good = tf.SparseTensor([[0, 0]], [1.0], [1, 3])

    def element(i):
        made = tf.cond(i > 0, lambda: sparse, lambda: good)  # a dense shape known only then
        made.set_shape([None, 3])
        return {"s": made}

    dataset = tf.data.Dataset.range(2).map(element)
    assert dataset.element_spec == {"s": tf.SparseTensorSpec([None, 3], tf.float32)}
    with pytest.raises(SchemaError) as info:
        super_serial.save(dataset, str(tmp_path / "data.tfrecord"))
    message = str(info.value)
    for word in [str(tmp_path / "data.tfrecord"), "nothing was saved", "feature 's'", *words]:
        assert word in message, f"{word!r} not in {message!r}"
    _nothing_written(tmp_path)


def test_a_negative_unknown_dim_with_no_values_is_refused(tmp_path):
    """A dense shape of a negative size in an unknown dim, with no value (so no index) to
    fall outside it: `_check_sparse`'s own check of the shapes is what refuses it."""
    def element(i):  # element 1's dense shape [-2, 3], known only when it is made
        made = tf.SparseTensor(tf.zeros([0, 2], tf.int64), tf.zeros([0]),
                               tf.stack([1 - 3 * i, tf.constant(3, tf.int64)]))
        made.set_shape([None, 3])
        return {"s": made}

    dataset = tf.data.Dataset.range(2).map(element)
    with pytest.raises(SchemaError) as info:
        super_serial.save(dataset, str(tmp_path / "data.tfrecord"))
    assert "dense shape [-2, 3]" in str(info.value)


@pytest.mark.parametrize("index, found", [([0, 3], 3), ([-1, 0], -1), ([2, 0], 2)])
def test_an_index_outside_the_one_dense_shape_is_refused(index, found, tmp_path):
    """Where every element of a batch has the same dense shape, save checks the indices
    against it at once (their least and largest): an index outside it is still found and
    named, in any dim."""
    dataset = tf.data.Dataset.from_generator(
        lambda: (tf.SparseTensor([[0, 0], at], [1.0, 2.0], [2, 3]) for at in ([1, 2], index)),
        output_signature=tf.SparseTensorSpec([2, 3], tf.float32))
    with pytest.raises(SchemaError) as info:
        super_serial.save(dataset, str(tmp_path / "data.tfrecord"))
    message = str(info.value)
    for word in [str(tmp_path / "data.tfrecord"), "feature", "index outside its dense shape "
                 "[2, 3]", f"found {found}"]:
        assert word in message, f"{word!r} not in {message!r}"
    _nothing_written(tmp_path)


# ---- headers and records that do not fit ----------------------------------------------------


@pytest.mark.parametrize("change, problem", [
    (lambda h: h.update(version=3), "field 'features.s.sparse': sparse features need format "
                                    "version 4; the header says 3"),
    (lambda h: h["features"]["s"].update(sparse=1), "field 'features.s.sparse': expected"),
    (lambda h: h["features"]["s"].update(ragged_rank=0),
     "field 'features.s.ragged_rank': a sparse feature has none"),
    (lambda h: h["features"]["s"].update(shape=[]),
     "field 'features.s.shape': a sparse feature needs a rank of 1 or more"),
])
def test_header_validation(change, problem, paths):
    super_serial.save(tf.data.Dataset.from_tensors({"s": tf.SparseTensor([[1]], [2], [3])}),
                      *paths)
    edit_header(paths[1], change)
    with pytest.raises(HeaderError, match="^" + paths[1] + ": " + problem.replace(
            "[", r"\[").replace("]", r"\]")):
        super_serial.read_header(paths[1])


def test_a_large_dense_shape_is_valid(paths):
    """A sparse tensor's records hold its values only: its dims may pass what a record holds
    (a hashed feature space), where a dense feature's may not."""
    vocabulary = 2**40
    dataset = tf.data.Dataset.from_tensors(tf.SparseTensor([[vocabulary - 1]], [1.0],
                                                           [vocabulary]))
    assert_same_elements(dataset, roundtrip(dataset, paths))
    edit_header(paths[1], lambda h: h["features"][core.BARE_TENSOR_NAME].pop("sparse"))
    with pytest.raises(HeaderError, match="has a dim larger than a record can hold"):
        super_serial.read_header(paths[1])
    edit_header(paths[1], lambda h: h["features"][core.BARE_TENSOR_NAME].update(
        sparse=True, shape=[2**63]))
    with pytest.raises(HeaderError, match=r"\[9223372036854775808\] has a dim larger than int64"):
        super_serial.read_header(paths[1])


def _write_records(paths, examples):
    """Replaces the records with these Examples of Int64Lists; the header given their size."""
    rewrite_records(*paths, [
        example({key: np.array(value, np.int64) for key, value in features.items()})
        for features in examples])


@pytest.mark.parametrize("indices, shape, problem", [
    ([0, 1, 1], [2, 3], "the number of indices is not 2 for each value, found 3"),
    ([0, 3], [2, 3], "an index lies outside its dense shape, found 3"),
    ([0, -1], [2, 3], "an index lies outside its dense shape, found -1"),
    # int64's least, which the check took for "every index fits" (helper-121)
    ([0, -2**63], [2, 3], "an index lies outside its dense shape, found -9223372036854775808"),
    ([0, 1], [2, 4], "a stored shape does not fit [None, 3], found 4"),
])
def test_records_that_do_not_fit_are_corrupt(indices, shape, problem, paths):
    """Records whose indices or dense shape do not fit the header fail load's checks, named
    by file and feature, and verify's."""
    dataset = tf.data.Dataset.from_generator(
        lambda: iter([tf.SparseTensor([[0, 1]], tf.constant([7], tf.int64), [1, 3])] * 2),
        output_signature=tf.SparseTensorSpec([None, 3], tf.int64))
    super_serial.save(dataset, *paths)
    good = {"tensor": [7], "tensor#indices": [0, 1], "tensor#shape": [1, 3]}
    _write_records(paths, [good, {"tensor": [7], "tensor#indices": indices,
                                  "tensor#shape": shape}])
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        list(super_serial.load(*paths))
    for word in [paths[0], "record 1: feature \\'tensor\\'", problem]:  # quotes escaped
        assert word in info.value.message, f"{word!r} not in {info.value.message!r}"
    with pytest.raises(CorruptDataError, match=(
            f"^{re.escape(paths[0])}: record 1: feature 'tensor': {re.escape(problem)}$")):
        super_serial.verify(*paths)
    _write_records(paths, [good, good])  # records that fit load
    assert len(list(super_serial.load(*paths))) == 2


@pytest.mark.parametrize("dtype, value, words", [
    ("int32", 2**40, "does not fit int32"),
    ("uint32", -1, "does not fit uint32"),
    ("bool", 2, "does not fit bool"),
])
def test_verify_checks_that_sparse_integers_fit_their_dtype(dtype, value, words, paths):
    """Sparse values stored as int64 for a narrower dtype must fit it (a hand-made record
    could hold any int64): `verify` checks, as for dense features."""
    dataset = tf.data.Dataset.from_tensors(tf.SparseTensor([[1]], tf.ones([1], dtype), [3]))
    super_serial.save(dataset, *paths)
    assert super_serial.verify(*paths)["num_records"] == 1
    _write_records(paths, [{"tensor": [value], "tensor#indices": [1], "tensor#shape": [3]}])
    with pytest.raises(CorruptDataError, match=(
            f"^{re.escape(paths[0])}: feature 'tensor': a value {words} \\(.+\\), found "
            f"{value}$")):
        super_serial.verify(*paths)


@pytest.mark.parametrize("key, value", [("row_splits_dtype", "int32"),
                                        ("tensor_name", "s")])
def test_a_sparse_feature_with_row_splits_or_a_tensor_name_is_a_header_error(paths, key, value):
    """A sparse feature with row splits or a tensor name is refused naming the field, not read
    with it dropped (helper-122: only ragged_rank was tried)."""
    super_serial.save(tf.data.Dataset.from_tensors({"s": tf.SparseTensor([[1]], [2], [3])}),
                      *paths)
    edit_header(paths[1], lambda h: h["features"]["s"].update({key: value}))
    with pytest.raises(HeaderError, match="^" + re.escape(
            f"{paths[1]}: field 'features.s.{key}': a sparse feature has none")):
        super_serial.read_header(paths[1])

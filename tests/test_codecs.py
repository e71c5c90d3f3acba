"""Property tests of the codecs: any array of any supported dtype and shape round-trips exactly."""

from __future__ import annotations

import tempfile
import unittest.mock
from pathlib import Path

import hypothesis.extra.numpy as hnp
import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_bit_identical, first_batch_records, reference_varint, spy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import super_serial
from super_serial import core


def examples(n: int):
    """Each example saves and loads a dataset (~0.2 s), so keep the counts modest."""
    return settings(max_examples=n, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# dtype name -> numpy dtype the random bits are viewed as
NUMERIC = {
    "bool": np.bool_,
    "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
    "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64,
    "float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32,
    "float64": np.float64, "complex64": np.complex64, "complex128": np.complex128,
}

# The quantized dtypes tf.data batches -> the dtype whose bits they are made of (TensorFlow
# makes them by a bitcast only); from_generator makes none of them
QUANTIZED = {"qint8": "int8", "quint8": "uint8", "qint32": "int32"}

shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)


@st.composite
def arrays_of_bits(draw, dtype: str, shape) -> np.ndarray:
    """An array whose bytes are arbitrary (every NaN payload, subnormal...), bools 0/1."""
    if dtype == "bool":
        return draw(hnp.arrays(np.bool_, shape))
    view = np.dtype(NUMERIC[dtype])
    count = int(np.prod(shape, dtype=np.int64))
    raw = draw(st.binary(min_size=count * view.itemsize, max_size=count * view.itemsize))
    return np.frombuffer(raw, view).reshape(shape).copy()


@st.composite
def string_arrays(draw, shape) -> np.ndarray:
    count = int(np.prod(shape, dtype=np.int64))
    values = draw(st.lists(st.binary(max_size=12), min_size=count, max_size=count))
    out = np.empty(count, object)
    out[:] = values
    return out.reshape(shape)


def _tensor(array: np.ndarray, dtype: str) -> tf.Tensor:
    if dtype == "string":
        return tf.constant(array, tf.string) if array.size else tf.zeros(array.shape, tf.string)
    if dtype in QUANTIZED:
        return tf.bitcast(tf.constant(array), tf.as_dtype(dtype))
    return tf.constant(array)


def _roundtrip(dataset: tf.data.Dataset, **save_kwargs) -> list:
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "data.tfrecord")
        super_serial.save(dataset, path, **save_kwargs)
        loaded = super_serial.load(path)
        assert loaded.element_spec == dataset.element_spec
        return list(loaded)


def _assert_same(expected: tf.data.Dataset, got: list):
    want = list(expected)
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(want, got)):
        for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
            assert_bit_identical(x, y, f"element {i}")


# --------------------------------------------------------------------------------------------
# save/load round trips
# --------------------------------------------------------------------------------------------


@examples(30)
@given(st.data(), st.sampled_from(sorted(NUMERIC) + sorted(QUANTIZED)), shapes, st.integers(1, 3))
def test_fixed_shape_arrays_roundtrip(data, dtype, shape, n):
    batch = data.draw(arrays_of_bits(QUANTIZED.get(dtype, dtype), (n, *shape)), label="batch")
    dataset = tf.data.Dataset.from_tensor_slices({"x": _tensor(batch, dtype)})
    _assert_same(dataset, _roundtrip(dataset))


@examples(20)
@given(st.data(), st.sampled_from(sorted(NUMERIC) + ["string"]), st.integers(1, 3),
       st.integers(1, 3))
def test_unknown_shape_arrays_roundtrip(data, dtype, rank, n):
    elements = []
    for i in range(n):
        shape = data.draw(hnp.array_shapes(min_dims=rank, max_dims=rank, min_side=0,
                                           max_side=3), label=f"shape {i}")
        draw = string_arrays(shape) if dtype == "string" else arrays_of_bits(dtype, shape)
        elements.append(data.draw(draw, label=f"element {i}"))
    spec = tf.TensorSpec([None] * rank, tf.as_dtype(dtype))
    dataset = tf.data.Dataset.from_generator(lambda: iter(elements), output_signature=spec)
    _assert_same(dataset, _roundtrip(dataset))


@examples(15)
@given(st.data(), shapes, st.integers(1, 3))
def test_string_arrays_roundtrip(data, shape, n):
    batch = data.draw(string_arrays((n, *shape)), label="batch")
    dataset = tf.data.Dataset.from_tensor_slices(_tensor(batch, "string"))
    got = _roundtrip(dataset)
    as_lists = lambda x: np.array(x, dtype=object).tolist()  # noqa: E731 (bytes for scalars)
    assert [as_lists(g.numpy()) for g in got] == [as_lists(b) for b in batch]


ragged_rows = st.lists(st.lists(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=3),
                                max_size=3), min_size=1, max_size=4)


@examples(15)
@given(st.data(), ragged_rows, st.sampled_from(["int8", "int64", "uint64", "float16", "bfloat16",
                                                "float32", "float64", "complex128", "string",
                                                "bool"]),
       st.sampled_from([tf.int32, tf.int64]))
def test_ragged_roundtrip(data, rows, dtype, splits):
    structure = tf.ragged.constant(rows, tf.int64, ragged_rank=2, row_splits_dtype=splits)
    count = int(structure.flat_values.shape[0])
    if dtype == "string":
        flat = data.draw(string_arrays((count,)), label="flat")
    else:
        flat = data.draw(arrays_of_bits(dtype, (count,)), label="flat")
    batch = structure.with_flat_values(_tensor(flat, dtype))
    dataset = tf.data.Dataset.from_tensor_slices({"r": batch})
    _assert_same(dataset, _roundtrip(dataset))


@examples(30)
@given(st.data(), st.sampled_from(["uint8", "int16", "int64", "float32", "float64", "string"]),
       st.sampled_from([tf.int32, tf.int64]), st.integers(1, 3))
def test_ragged_with_uniform_and_zero_dims_roundtrip(data, dtype, splits, n):
    """Ragged elements whose dims may be uniform (of 0 rows too), with inner dims that may be
    0: any ragged_rank, any row splits dtype; element-wise and in batches of 2."""
    rank = data.draw(st.integers(1, 2), label="ragged_rank")
    dims = data.draw(st.lists(st.one_of(st.none(), st.integers(0, 3)), min_size=rank + 1,
                              max_size=rank + 1), label="dims")  # None: ragged
    inner = data.draw(st.lists(st.integers(0, 2), max_size=2), label="inner dims")
    lengths, rows = [], n  # each level's row lengths, the batch's (element rows) first
    for d in dims:
        level = [d] * rows if d is not None else data.draw(
            st.lists(st.integers(0, 3), min_size=rows, max_size=rows), label="row lengths")
        lengths.append(level)
        rows = sum(level)
    shape = (rows, *inner)
    flat = data.draw(string_arrays(shape) if dtype == "string" else arrays_of_bits(dtype, shape),
                     label="values")
    batch = _tensor(flat, dtype)
    for d, level in zip(reversed(dims), reversed(lengths)):
        if d is None:
            batch = tf.RaggedTensor.from_row_lengths(batch, tf.constant(level, splits))
        else:  # rows given: a length of 0 cannot tell them
            batch = tf.RaggedTensor.from_uniform_row_length(
                batch, tf.constant(d, splits), nrows=tf.constant(len(level), splits))
    dataset = tf.data.Dataset.from_tensor_slices({"r": batch})
    assert dataset.element_spec["r"] == tf.RaggedTensorSpec([*dims, *inner], tf.as_dtype(dtype),
                                                            rank, splits)
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "data.tfrecord")
        super_serial.save(dataset, path)
        loaded = super_serial.load(path)
        assert loaded.element_spec == dataset.element_spec
        _assert_same(dataset, list(loaded))
        batches = super_serial.load(path, batch_size=2)
        assert batches.element_spec == dataset.ragged_batch(2).element_spec
        _assert_same(dataset.ragged_batch(2), list(batches))


@examples(8)
@given(st.data(), st.sampled_from(["GZIP", "ZLIB"]), st.sampled_from(["float64", "int8"]))
def test_compressed_roundtrip(data, compression, dtype):
    batch = data.draw(arrays_of_bits(dtype, (3, 2)), label="batch")
    dataset = tf.data.Dataset.from_tensor_slices(_tensor(batch, dtype))
    _assert_same(dataset, _roundtrip(dataset, compression=compression))


# --------------------------------------------------------------------------------------------
# The private encoders against simple reference implementations
# --------------------------------------------------------------------------------------------


edge_uint64 = st.sampled_from([0, 1, 0x7F, 0x80, 0x3FFF, 0x4000, 2**32, 2**56 - 1, 2**56,
                               2**63 - 1, 2**63, 2**64 - 1])
uint64_values = st.one_of(edge_uint64, st.integers(0, 2**64 - 1),
                          st.integers(0, 2**7 * 3).map(lambda v: v * 131))


@settings(max_examples=200, deadline=None)
@given(st.lists(uint64_values, max_size=40))
def test_varints_match_reference(values):
    data, lengths = core._varints(np.array(values, np.uint64))
    expected = [reference_varint(v) for v in values]
    assert np.asarray(data).astype(np.uint8).tobytes() == b"".join(expected)
    assert np.asarray(lengths).tolist() == [len(e) for e in expected]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=20))
def test_varints_of_negative_int64_are_ten_bytes(values):
    """Int64List stores negative values as their two's complement: always 10 bytes."""
    data, lengths = core._varints(np.array(values, np.int64).view(np.uint64))
    expected = [reference_varint(v % 2**64) for v in values]
    assert np.asarray(data).astype(np.uint8).tobytes() == b"".join(expected)
    assert all(n == 10 for v, n in zip(values, np.asarray(lengths).tolist()) if v < 0)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                        "uint64"]).flatmap(
    lambda name: hnp.arrays(np.dtype(name), st.integers(0, 30))))
def test_varints_of_any_int_dtype(values):
    """The varints of any integer (or bool) array are those of its values as int64."""
    data, lengths = core._varints(values)
    expected = [reference_varint(int(v) % 2**64) for v in values.tolist()]
    assert np.asarray(data).astype(np.uint8).tobytes() == b"".join(expected)
    assert np.asarray(lengths).tolist() == [len(e) for e in expected]


@pytest.mark.parametrize("dtype", ["int64", "uint16", "int32"])
def test_varints_below_the_table_size_are_looked_up(monkeypatch, dtype):
    """Values below `_VARINT_TABLE` (every one of them, across slices) take their varints from
    `_varint_table`, the same bytes as the reference; from `_VARINT_TABLE` up, words are built."""
    monkeypatch.setattr(core, "_TABLE_SLICE", 1000)
    built = spy(monkeypatch, "_word_varints", lambda values, most: most)
    values = np.arange(core._VARINT_TABLE, dtype=dtype)[::-1]
    data, lengths = core._varints(values)
    expected = [reference_varint(v) for v in values.tolist()]
    assert np.asarray(data).tobytes() == b"".join(expected)
    assert np.asarray(lengths).tolist() == [len(e) for e in expected]
    assert built == []
    if np.iinfo(dtype).max >= core._VARINT_TABLE:
        over = np.array([0, core._VARINT_TABLE, 300], dtype)
        data, _ = core._varints(over)
        assert np.asarray(data).tobytes() == b"".join(map(reference_varint, over.tolist()))
        assert built == [3]


def _varint_lengths(dtype: str) -> list:
    """The varint lengths the values of an integer dtype take (10: negative ones)."""
    info = np.iinfo(dtype)
    return ([n for n in range(1, 11) if 1 << 7 * (n - 1) <= info.max]
            + ([10] if info.min < 0 else []))


@pytest.mark.parametrize("dtype, most", [(dtype, most)
                                         for dtype in ["int64", "uint64", "int32", "uint32"]
                                         for most in _varint_lengths(dtype)])
def test_varints_of_every_length_across_slices(monkeypatch, dtype, most):
    """Up to 8 bytes, varints are built a word each (`_word_varints`: 4-byte words up to 4,
    8-byte ones up to 8), a slice of the values at a time; 9 and 10 bytes byte by byte. Every
    length up to the longest, at both ends of its range and between, across slice boundaries."""
    monkeypatch.setattr(core, "_VARINT_SLICE", 7)
    info = np.iinfo(dtype)
    values = []
    for n in range(1, min(most, 9) + 1):
        low = 1 << 7 * (n - 1) if n > 1 else 0
        high = min((1 << 7 * n) - 1, int(info.max))
        if low <= high:
            values += [low, high, (low + high) // 2]
    if most == 10:  # negative, or from 2**63
        values += [-1, int(info.min)] if info.min < 0 else [2**63, 2**64 - 1]
    values = np.array((values * 3)[:40], dtype)
    data, lengths = core._varints(values)
    expected = [reference_varint(int(v) % 2**64) for v in values.tolist()]
    assert np.asarray(data).tobytes() == b"".join(expected)
    assert np.asarray(lengths).tolist() == [len(e) for e in expected]
    assert max(lengths) == most


@pytest.mark.parametrize("dtype, most", [(dtype, most)
                                         for dtype in ["int64", "uint64", "int32", "uint32"]
                                         for most in _varint_lengths(dtype) if most >= 3])
def test_varints_of_one_length_are_laid_out_at_once(monkeypatch, dtype, most):
    """Values whose varints all take as many bytes, from 3 (timestamps, negative numbers, ids
    of a narrow range), are laid out byte column by byte column (`_uniform_varints`), a slice
    at a time: the same bytes as the reference, at both ends of the length's range, across
    slice boundaries. One shorter value among them, or values below `_VARINT_TABLE`, go the
    other ways."""
    monkeypatch.setattr(core, "_UNIFORM_SLICE", 7)
    uniform = spy(monkeypatch, "_uniform_varints", lambda values, most: most)
    info = np.iinfo(dtype)
    if most == 10:  # negative, or from 2**63
        ends = ([-1, int(info.min), int(info.min) // 3] if info.min < 0
                else [2**63, 2**64 - 1, 2**63 + 1])
    else:
        low, high = 1 << 7 * (most - 1), min((1 << 7 * most) - 1, int(info.max))
        ends = [low, high, (low + high) // 2]
    values = np.array((ends * 7)[:20], dtype)
    for shorter in (False, True):
        if shorter:
            values[11] = 0x80  # two bytes
        uniform.clear()
        data, lengths = core._varints(values)
        expected = [reference_varint(int(v) % 2**64) for v in values.tolist()]
        assert np.asarray(data).tobytes() == b"".join(expected)
        assert np.asarray(lengths).tolist() == [len(e) for e in expected]
        assert uniform == ([] if shorter else [most])


def test_varints_below_the_table_are_not_laid_out_at_once(monkeypatch):
    """Values that all take 3 bytes but stay below `_VARINT_TABLE` are looked up in the table."""
    called = spy(monkeypatch, "_uniform_varints")
    values = np.arange(1 << 14, core._VARINT_TABLE, 997, dtype=np.int64)
    data, _ = core._varints(values)
    assert np.asarray(data).tobytes() == b"".join(map(reference_varint, values.tolist()))
    assert called == []


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.integers(0, 10), max_size=3), max_size=6))
def test_group_rows_sums_each_rows_item_lengths(rows):
    """Rows of items, empty ones among them (first, between, last): each row's byte count is
    the sum of its items' lengths."""
    item_lengths = np.array([n for row in rows for n in row], np.uint8)
    splits = np.cumsum([0] + [len(row) for row in rows])
    column = core._group_rows(np.zeros(int(item_lengths.sum()), np.uint8), item_lengths,
                              splits, len(rows))
    assert column.lengths.tolist() == [sum(row) for row in rows]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 10), max_size=6), st.integers(1, 10), st.booleans())
def test_group_rows_of_one_length_counts_each_rows_items(counts, size, equal_shares):
    """Item lengths that are one value broadcast (`_one_each`: bools, integers below 128,
    varints of one length) give each row its count of items times that value, as the same
    lengths summed item by item do; rows given by splits or as equal shares."""
    if equal_shares:
        counts = [counts[0]] * len(counts) if counts else []
    rows, items = len(counts), sum(counts)
    splits = None if equal_shares else np.cumsum([0] + counts)
    data = np.zeros(items * size, np.uint8)
    one = core._group_rows(data, core._one_each(items, size), splits, rows)
    summed = core._group_rows(data, np.full(items, size, np.uint8), splits, rows)
    assert one.lengths.tolist() == summed.lengths.tolist() == [n * size for n in counts]


@pytest.mark.parametrize("count, size", [(6553, 10), (6554, 10), (257, 255), (258, 255),
                                         (1, 255)])
def test_group_rows_sums_rows_past_uint16_in_a_wider_dtype(count, size):
    """Varint lengths (uint8) of rows whose sum can pass 65,535 (the longest row times the
    longest item) are summed in uint32, not wrapped in uint16; a row of 258 items of 255 bytes
    passes it, one of 6,553 items of 10 does not. The items differ, so that the lengths are
    summed item by item (not `_one_each`'s count times the length)."""
    item_lengths = np.full(count + 2, size, np.uint8)
    item_lengths[:2] = 1  # a short first row, then the long one
    splits = np.array([0, 2, count + 2])
    column = core._group_rows(item_lengths[:0], item_lengths, splits, 2)
    assert column.lengths.tolist() == [2, count * size]


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64"])
@pytest.mark.parametrize("case", ["empty", "zero", "positive", "largest", "minus one",
                                  "least", "mixed"])
def test_unsigned_gives_int64s_twos_complement_and_the_largest(dtype, case):
    """Signed integers become the unsigned ints their varints encode: of their own width
    where none is negative, else int64's two's complement (10-byte varints); with the largest
    of those, which decides the varints' lengths."""
    info = np.iinfo(dtype)
    values = np.array({"empty": [], "zero": [0, 0], "positive": [3, 100, 1],
                       "largest": [info.max, 0], "minus one": [5, -1], "least": [info.min, 7],
                       "mixed": [info.min, -1, 0, info.max, 300 % info.max]}[case], dtype)
    unsigned, top = core._unsigned(values)
    expected = [int(v) % 2**64 for v in values.tolist()]
    assert unsigned.tolist() == expected
    assert top == max(expected, default=0)
    negative = any(v < 0 for v in values.tolist())
    assert unsigned.dtype == (np.uint64 if negative else np.dtype(f"u{info.bits // 8}"))


def test_group_rows_sums_a_row_past_uint32_in_int64():
    """A row of varint lengths (uint8) whose sum passes 2**32: summed without wrapping, where
    rows too short for that are summed in uint32."""
    item_lengths = np.full((1 << 32) // 255 + 2, 255, np.uint8)
    splits = np.array([0, 1, item_lengths.size])
    column = core._group_rows(item_lengths[:0], item_lengths, splits, 2)
    assert column.lengths.tolist() == [255, 255 * (item_lengths.size - 1)]
    assert column.lengths[1] > 1 << 32


def _slow_example(features, element) -> tf.train.Example:
    """The tf.train.Example of one element, built with the protobuf API."""
    def to_list(encoding, values):
        if encoding == "bytes":  # as objects: NumPy's bytes dtype drops trailing NULs
            return tf.train.Feature(bytes_list=tf.train.BytesList(
                value=np.asarray(values, object).ravel().tolist()))
        values = np.asarray(values)
        if encoding == "int64":
            return tf.train.Feature(int64_list=tf.train.Int64List(
                value=values.astype(np.int64).ravel().tolist()))
        if encoding == "float":
            return tf.train.Feature(float_list=tf.train.FloatList(
                value=values.astype(np.float32).ravel().tolist()))
        little = values.astype(values.dtype.newbyteorder("<"))
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[little.tobytes()]))

    out = {}
    for feature, leaf in zip(features, tf.nest.flatten(element, expand_composites=False)):
        if isinstance(leaf, tf.RaggedTensor):
            out[feature.name] = to_list(feature.encoding, leaf.flat_values.numpy())
            for level, splits in enumerate(leaf.nested_row_splits):
                out[f"{feature.name}#row_lengths_{level}"] = to_list("int64", np.diff(splits))
        else:
            out[feature.name] = to_list(feature.encoding, leaf.numpy())
            if None in feature.shape:
                out[f"{feature.name}#shape"] = to_list("int64", np.array(leaf.shape))
    return tf.train.Example(features=tf.train.Features(feature=out))


finite_f32 = hnp.arrays(np.float32, st.integers(0, 4),
                        elements=st.floats(width=32, allow_nan=False))


@pytest.mark.parametrize("sliced", [(core._SLICED, core._SLICED_TOTAL), (0, 0)])
@examples(15)
@given(st.data(), st.integers(1, 4))
def test_encode_records_matches_protobuf(sliced, data, n):
    """`_encode_records` output parses to the same Example as the slow protobuf build, also
    with every narrow piece of varying length sliced a row as bytes (`_sliced`)."""
    def column(kind):
        if kind == "f32":
            return [data.draw(hnp.arrays(np.float32, 2, elements=st.floats(width=32,
                                                                             allow_nan=False)))
                    for _ in range(n)]
        if kind == "var":
            return [data.draw(finite_f32) for _ in range(n)]
        if kind == "wide":  # wide enough to be joined straight from the batch's buffer
            return [data.draw(arrays_of_bits("float64", (40,))) for _ in range(n)]
        if kind == "long":  # varying length, wide on average: views into the batch too
            return [data.draw(hnp.arrays(np.float32, st.integers(0, 160), elements=st.floats(
                width=32, allow_nan=False))) for _ in range(n)]
        if kind == "text":  # long strings of varying length
            return [np.array(data.draw(st.binary(min_size=200, max_size=600)), object)
                    for _ in range(n)]
        if kind == "str":
            return [data.draw(string_arrays((2,))) for _ in range(n)]
        return [data.draw(arrays_of_bits(kind, (2,))) for _ in range(n)]

    kinds = {"a_int8": "int8", "b_i64": "int64", "c_u64": "uint64", "d_f64": "float64",
             "e_bool": "bool", "f_f32": "f32", "g_str": "str", "h_var": "var", "i_b16": "bfloat16",
             "k_wide": "wide", "l_long": "long", "m_text": "text"}
    columns = {name: column(kind) for name, kind in kinds.items()}
    element_rows = st.lists(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=3), max_size=3)
    rows = data.draw(st.lists(element_rows, min_size=n, max_size=n), label="ragged")
    ragged = [tf.RaggedTensor.from_row_lengths(
        tf.constant([v for row in r for v in row], tf.int64),
        tf.constant([len(row) for row in r], tf.int64)) for r in rows]
    elements = [{**{name: columns[name][i] for name in columns}, "j_rag": ragged[i]}
                for i in range(n)]
    spec = {name: tf.TensorSpec({"var": [None], "wide": [40], "long": [None], "text": []}.get(
                                    kind, [2]),
                                {"f32": tf.float32, "var": tf.float32, "str": tf.string,
                                 "wide": tf.float64, "long": tf.float32,
                                 "text": tf.string}.get(kind) or tf.as_dtype(kind))
            for name, kind in kinds.items()}
    spec["j_rag"] = tf.RaggedTensorSpec([None, None], tf.int64, 1)
    dataset = tf.data.Dataset.from_generator(lambda: iter(elements), output_signature=spec)

    features = core._schema_from_spec(dataset.element_spec)[0]
    records = []
    with unittest.mock.patch.object(core, "_SLICED", sliced[0]), \
            unittest.mock.patch.object(core, "_SLICED_TOTAL", sliced[1]):
        for leaves in core._batches_for_encoding(dataset, features, 8):
            rows_in_batch = core._rows(leaves[0])
            encoded, sizes = core._encode_records(features, leaves, rows_in_batch)
            records += map(core._joined, encoded)
            assert sizes.tolist() == [len(r) for r in records[-len(encoded):]]
    assert len(records) == n
    for record, element in zip(records, dataset):
        assert tf.train.Example.FromString(record) == _slow_example(features, element)


@pytest.mark.parametrize("sizes", [[128], [128, 5, 127], [128, 128], [127, 129], [16_384, 3]])
def test_lengths_of_exactly_128_take_two_varint_bytes(sizes):
    """`_varint_col`: lengths up to 127 are a byte each; a length of 128 (a string of 128
    bytes, a list message of 128) takes 2 bytes, 80 01, even where it is the largest."""
    col = core._varint_col(np.array(sizes, np.int64))
    rows = core._cut(col.data.tobytes() if not col.fixed else col.data.reshape(-1).tobytes(),
                     col.row_lengths(len(sizes)))
    expected = [tf.train.Int64List(value=[n]).SerializeToString()[2:] for n in sizes]
    assert [bytes(r) for r in rows] == expected


@pytest.mark.parametrize("length", [126, 127, 128, 129])
def test_strings_of_128_bytes_are_the_bytes_protobuf_writes(length):
    """One string a row of 128 bytes (none longer): its BytesList entry's length is 80 01.
    Also a list of them, and a float list whose message is 128 bytes."""
    strings = [b"s" * length, b"t" * (length - 1), b""]
    floats = np.arange(3 * (length // 4), dtype=np.float32).reshape(3, -1)
    dataset = tf.data.Dataset.from_tensor_slices(
        {"one": strings, "two": [[s, s] for s in strings], "f": floats})
    records, sizes = first_batch_records(dataset, 3)
    for i, (record, size) in enumerate(zip(records, sizes.tolist())):
        expected = tf.train.Example(features=tf.train.Features(feature={
            "one": tf.train.Feature(bytes_list=tf.train.BytesList(value=[strings[i]])),
            "two": tf.train.Feature(bytes_list=tf.train.BytesList(value=[strings[i]] * 2)),
            "f": tf.train.Feature(float_list=tf.train.FloatList(value=floats[i].tolist())),
        }))
        assert core._joined(record) == expected.SerializeToString(deterministic=True)
        assert size == len(core._joined(record))


@pytest.mark.parametrize("lists", [1, 3, 10])
def test_lists_of_a_few_dozen_values_are_sliced_where_they_make_much_of_a_record(
        tmp_path, monkeypatch, lists):
    """Fields of varying length of `_SLICED` to `_WIDE` bytes a row, `_SLICED_TOTAL` bytes a
    record together, are sliced a row as bytes and joined into records (`_sliced`): records
    as protobuf writes them, read back bit-exactly. One list of 1-40 float32 (82 bytes a row)
    is too little and stays in one buffer."""
    seen = []

    def spy(pieces, rows):
        seen.append(len(real(pieces, rows)))
        return real(pieces, rows)

    real = core._sliced
    monkeypatch.setattr(core, "_sliced", spy)
    rng = np.random.default_rng(lists)
    elements = [{**{f"l{k}": rng.standard_normal(1 + (i + k) % 40).astype(np.float32)
                    for k in range(lists)}, "label": np.int64(i)} for i in range(300)]
    dataset = tf.data.Dataset.from_generator(
        lambda: iter(elements), output_signature={
            **{f"l{k}": tf.TensorSpec([None], tf.float32) for k in range(lists)},
            "label": tf.TensorSpec([], tf.int64)})
    path = str(tmp_path / "lists.tfrecord")
    super_serial.save(dataset, path)
    assert seen and all(n == (lists if lists > 1 else 0) for n in seen), seen
    features = core._schema_from_spec(dataset.element_spec)[0]
    records = [r.numpy() for r in tf.data.TFRecordDataset(path)]
    assert [tf.train.Example.FromString(r) for r in records] == [
        _slow_example(features, element) for element in dataset]
    _assert_same(dataset, list(super_serial.load(path)))


def _row_bytes(pieces: list, rows: int) -> list:
    data, offsets = core._concat(pieces, rows)
    data = np.asarray(data).tobytes()
    return [data[a:b] for a, b in zip(offsets.tolist(), offsets[1:].tolist())]


@st.composite
def columns(draw):
    """Columns of a few rows as `_concat` takes them: fixed ones (a constant broadcast to every
    row, or rows of 0-3 bytes) and ones of varying length, from empty rows to rows of 300 and
    700 bytes, so that pieces are placed each way (scattered, by a mask, row by row)."""
    rows = draw(st.integers(1, 6))
    pieces = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["const", "fixed", "varying"]))
        if kind == "const":
            pieces.append(core._const(draw(st.binary(min_size=1, max_size=3)), rows))
        elif kind == "fixed":
            width = draw(st.integers(0, 3))
            data = draw(st.binary(min_size=rows * width, max_size=rows * width))
            pieces.append(core._Col(np.frombuffer(data, np.uint8).reshape(rows, width)))
        else:
            lengths = draw(st.lists(st.sampled_from([0, 1, 2, 300, 700]), min_size=rows,
                                    max_size=rows))
            data = draw(st.binary(min_size=sum(lengths), max_size=sum(lengths)))
            pieces.append(core._Col(np.frombuffer(data, np.uint8), np.array(lengths, np.int64)))
    return pieces, rows


@pytest.mark.parametrize("masked_bytes", [256, 1 << 40])  # pieces placed by masks, or none
@pytest.mark.parametrize("int32_positions", [0, core._INT32_POSITIONS])  # int64 or int32 index
@examples(100)
@given(case=columns())
def test_concat_gives_each_row_its_pieces_in_order(masked_bytes, int32_positions, case):
    """`_concat` joins runs of fixed pieces, places large pieces that make much of the output
    by a mask of the bytes they own, and the others by an index (`_byte_index`): each row's
    bytes are its pieces' bytes for that row, in order."""
    pieces, rows = case
    with unittest.mock.patch.object(core, "_MASKED_BYTES", masked_bytes), \
            unittest.mock.patch.object(core, "_INT32_POSITIONS", int32_positions):
        got = _row_bytes(pieces, rows)
    expected = [b""] * rows
    for piece in pieces:
        if piece.fixed:
            cut = [np.asarray(piece.data[i]).tobytes() for i in range(rows)]
        else:
            ends = np.cumsum(piece.lengths).tolist()
            data = piece.data.tobytes()
            cut = [data[a:b] for a, b in zip([0] + ends, ends)]
        expected = [row + part for row, part in zip(expected, cut)]
    assert got == expected




@st.composite
def list_rows(draw, dtype: str):
    """Rows of values (some empty), as a flat array and its row splits; None for rows that are
    all as long as each other, as for fixed shapes."""
    rows = draw(st.integers(1, 6))
    if draw(st.booleans()):
        counts = [draw(st.integers(0, 40))] * rows
        fixed = True
    else:
        counts = draw(st.lists(st.integers(0, 40), min_size=rows, max_size=rows))
        fixed = False
    total = sum(counts)
    flat = (draw(string_arrays((total,))) if dtype == "string"
            else draw(arrays_of_bits(dtype, (total,))))
    splits = None if fixed else np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return flat, splits, rows


@examples(120)
@given(st.data())
def test_tensorflow_lists_are_the_bytes_numpy_writes(data):
    """Long lists of strings are encoded by TensorFlow's encode_proto: byte for byte what the
    Python encoder writes, or golden files would change."""
    flat, splits, rows = data.draw(list_rows("string"))
    expected = _row_bytes(core._encode_list("bytes", flat.reshape(-1), splits, rows), rows)
    got = _row_bytes([core._tf_lists(_tensor(flat, "string"), splits, rows)], rows)
    assert got == expected


@pytest.mark.parametrize("rows, width", [(1, 0), (3, 0), (2, 5)])
def test_tensorflow_lists_of_a_fixed_width_are_the_bytes_python_writes(rows, width):
    """The matrix path (fixed shapes), no columns included: every row an empty BytesList."""
    flat = np.array([b"w%d" % i for i in range(rows * width)], object)
    expected = _row_bytes(core._encode_list("bytes", flat, None, rows), rows)
    got = _row_bytes([core._tf_lists(_tensor(flat, "string"), None, rows)], rows)
    assert got == expected


def test_long_lists_are_those_tensorflow_encodes():
    """At least _TF_LIST_STRINGS strings a row on average, and none more than twice as long as
    the average (encode_proto pads every row to the longest)."""
    long = core._TF_LIST_STRINGS
    values = tf.zeros([4 * long], tf.string)
    assert core._long_lists(values, None, 4)
    assert not core._long_lists(values[:-1], None, 4)
    assert core._long_lists(values, np.array([0, long, 2 * long, 3 * long, 4 * long]), 4)
    assert not core._long_lists(values, np.array([0, 0, 0, 0, 4 * long]), 4)  # 4x
    assert not core._long_lists(values[:0], None, 0)


@settings(max_examples=150, deadline=None)
@given(st.lists(uint64_values, min_size=1, max_size=60), st.sampled_from(["uint64", "uint32"]))
def test_tensorflow_varints_are_the_bytes_numpy_writes(values, dtype):
    """`_proto_varints` (one Int64List by encode_proto) gives every varint as the reference
    does, also of the two's complement of negative int64 (from 2**63) and of uint32."""
    values = np.array([v % 2**32 if dtype == "uint32" else v for v in values], dtype)
    expected = b"".join(reference_varint(v) for v in values.tolist())
    assert core._proto_varints(values, len(expected)).tobytes() == expected


@pytest.mark.parametrize("count", [2, 3, 1000])
def test_integers_from_the_table_size_go_through_tensorflow(monkeypatch, count):
    """From `_PROTO_VALUES` values a batch, integers from `_VARINT_TABLE` up whose varints
    differ in length are encoded by encode_proto; fewer, or values all in the table or all of
    one length, by NumPy. The bytes are the same either way."""
    monkeypatch.setattr(core, "_PROTO_VALUES", 3)
    calls = spy(monkeypatch, "_proto_varints", lambda values, size: values.size)
    rng = np.random.default_rng(count)
    cases = {"mixed": rng.integers(-2**63, 2**63 - 1, count, np.int64),
             "from the table": np.arange(count) % 2 * core._VARINT_TABLE,
             "in the table": np.arange(count) % core._VARINT_TABLE,
             "of one length": np.arange(count) + core._VARINT_TABLE}
    for name, values in cases.items():
        calls.clear()
        data, lengths = core._varints(values)
        expected = [reference_varint(int(v) % 2**64) for v in values.tolist()]
        assert np.asarray(data).tobytes() == b"".join(expected), name
        assert np.asarray(lengths).tolist() == [len(e) for e in expected], name
        through = count >= 3 and name in ("mixed", "from the table")
        assert calls == ([count] if through else []), name


@examples(10)
@given(st.data(), st.sampled_from(["int32", "int64", "uint32", "string"]))
def test_long_lists_roundtrip(data, dtype):
    """Fixed and unknown shapes whose lists TensorFlow encodes: long lists of strings, and
    integers when a batch holds `_PROTO_VALUES` of them (lowered here)."""
    long = core._TF_LIST_STRINGS if dtype == "string" else 64
    batch = data.draw(string_arrays((3, 2 * long)) if dtype == "string"
                      else arrays_of_bits(dtype, (3, 2 * long)), label="batch")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(core, "_PROTO_VALUES", 2)
        fixed = tf.data.Dataset.from_tensor_slices(_tensor(batch, dtype))
        _assert_same(fixed, _roundtrip(fixed))
        varying = tf.data.Dataset.from_generator(
            lambda: (row[:len(row) - i] for i, row in enumerate(batch)),
            output_signature=tf.TensorSpec([None], tf.as_dtype(dtype))).cache()
        _assert_same(varying, _roundtrip(varying))  # strings by sparse_batch, numbers as rows
        # beside another component (strings by sparse_batch over windows), and ragged
        labelled = tf.data.Dataset.zip(varying, tf.data.Dataset.range(3))
        _assert_same(labelled, _roundtrip(labelled))
        rows = tf.RaggedTensor.from_row_lengths(tf.reshape(_tensor(batch, dtype), [-1]),
                                                [long, long, 0, 2 * long, long, long])
        ragged = tf.data.Dataset.from_tensor_slices(
            tf.RaggedTensor.from_row_lengths(rows, [2, 2, 2]))
        _assert_same(ragged, _roundtrip(ragged))


def test_large_integers_go_through_tensorflow_on_every_path(monkeypatch, tmp_path):
    """Fixed shapes, lists of unknown length (alone or beside another component), ragged and
    sparse components all hand integers from `_VARINT_TABLE` up whose varints differ in length
    to `_proto_varints` once a batch holds `_PROTO_VALUES` of them (lowered here), and to
    NumPy fewer, those whose values all have their varints in `_varint_table`, and those whose
    varints all have one length (`_uniform_varints`)."""
    monkeypatch.setattr(core, "_PROTO_VALUES", 100)
    calls = spy(monkeypatch, "_proto_varints", lambda values, size: size)
    batch = np.arange(3 * 128).reshape(3, 128) * 1000  # to 2**19 (and negative)
    batch[0, 0] = -1
    varying = tf.data.Dataset.from_generator(
        lambda: (row[:len(row) - i] for i, row in enumerate(batch)),
        output_signature=tf.TensorSpec([None], tf.int64))
    rows = tf.RaggedTensor.from_row_lengths(tf.reshape(batch, [-1]), [64, 64, 0, 128, 64, 64])
    datasets = {
        "fixed": tf.data.Dataset.from_tensor_slices(batch),
        "lists": varying,
        "lists beside another": tf.data.Dataset.zip(varying, tf.data.Dataset.range(3)),
        "ragged": tf.data.Dataset.from_tensor_slices(
            tf.RaggedTensor.from_row_lengths(rows, [2, 2, 2])),
        "sparse": tf.data.Dataset.from_tensor_slices(tf.sparse.from_dense(batch)),
        "few": tf.data.Dataset.from_tensor_slices(batch[:, :30]),
        "fixed, in the table": tf.data.Dataset.from_tensor_slices(batch % core._VARINT_TABLE),
        "lists, in the table": varying.map(lambda row: row % core._VARINT_TABLE),
        "fixed, of one length": tf.data.Dataset.from_tensor_slices(batch + 2**60),
        "ragged, of one length": tf.data.Dataset.from_tensor_slices(
            tf.RaggedTensor.from_row_lengths(-rows - 2, [2, 2, 2])),
    }
    for name, dataset in datasets.items():
        calls.clear()
        super_serial.save(dataset, str(tmp_path / f"{name}.tfrecord"))
        numpy = name == "few" or "in the table" in name or "of one length" in name
        assert (calls == []) if numpy else calls, name
        _assert_same(dataset, list(super_serial.load(str(tmp_path / f"{name}.tfrecord"))))


def test_long_strings_are_written_as_they_are(monkeypatch, tmp_path):
    """One string a row, `_LONG_STRING` bytes or more on average (encoded images, say): the
    records take the strings themselves (`_Strings`) instead of a copy of them all joined, and
    are the Examples protobuf writes. Lengths cross the varint boundaries; some strings are
    empty, one ends in NULs."""
    made = []

    class Spy(core._Strings):
        __slots__ = ()

        def __init__(self, data, lengths):
            made.append(len(data))
            super().__init__(data, lengths)

    monkeypatch.setattr(core, "_Strings", Spy)
    rng = np.random.default_rng(5)
    strings = [rng.bytes(n) for n in (0, 127, 128, 16383, 16384, 300, 0)] + [b"jpeg\x00\x00"]
    dataset = tf.data.Dataset.from_tensor_slices(
        {"image": np.array(strings, object), "label": np.arange(len(strings))})
    path = str(tmp_path / "long.tfrecord")
    super_serial.save(dataset, path)
    assert made == [len(strings)]
    features = core._schema_from_spec(dataset.element_spec)[0]
    records = [r.numpy() for r in tf.data.TFRecordDataset(path)]
    assert [tf.train.Example.FromString(r) for r in records] == [
        _slow_example(features, element) for element in dataset]
    _assert_same(dataset, list(super_serial.load(path)))

    made.clear()  # short on average: joined into one buffer as before
    long = core._LONG_STRING
    short = tf.data.Dataset.from_tensor_slices(  # just short of it on average
        np.array([b"a" * (4 * long - 4)] + [b"b"] * 3, object))
    super_serial.save(short, str(tmp_path / "short.tfrecord"))
    assert made == []
    _assert_same(short, list(super_serial.load(str(tmp_path / "short.tfrecord"))))


@examples(150)
@given(st.data())
def test_lists_of_long_strings_are_the_bytes_of_joined_ones(data):
    """Lists of strings `_LONG_STRING` bytes long on average are written as the strings
    themselves, each after its field header (`_string_lists`): every record the bytes that
    joining them all into one buffer gives. Empty rows and strings, lengths across the varint
    boundaries, fixed and varying numbers a row."""
    rows = data.draw(st.integers(1, 5), label="rows")
    sizes = st.sampled_from([0, 1, 127, 128, 300, 16384])
    fixed = data.draw(st.booleans(), label="fixed")
    row = st.lists(sizes, max_size=4)
    if fixed:
        width = data.draw(st.integers(1, 4), label="width")
        row = st.lists(sizes, min_size=width, max_size=width)
    table = [data.draw(row, label=f"row {i}") for i in range(rows)]
    rng = np.random.default_rng(len(table))
    strings = np.empty(sum(map(len, table)), object)
    strings[:] = [rng.bytes(n) for row in table for n in row]
    splits = None if fixed else np.cumsum([0] + [len(row) for row in table]).astype(np.int64)

    def record_bytes(long_string):
        with unittest.mock.patch.object(core, "_LONG_STRING", long_string):
            pieces = core._encode_list("bytes", strings, splits, rows)
        return [core._joined(r) for r in core._records(pieces, rows)], pieces

    joined, _ = record_bytes(1 << 40)  # never long: one buffer
    written, pieces = record_bytes(1)
    assert written == joined
    # long on average (`_LONG_STRING` is 1 here), and not one string a row (`_Strings`)
    if sum(map(len, strings)) >= strings.size > 0 and (splits is not None
                                                       or strings.size != rows):
        assert [type(p) for p in pieces] == [core._StringLists]


def test_a_list_of_long_strings_before_one_long_string_a_row_is_laid_out(tmp_path):
    """Keys in order: a list of long strings (`_StringLists`, a tuple of pieces a row), then
    one long string a row (`_Strings`). Each record is laid out flat, the bytes protobuf
    writes, and the pair round-trips."""
    lists = [[b"a" * 300, b"b" * 200], [b"c" * 150, b"d" * 400]]
    ones = [b"e" * 500, b"f" * 129]
    dataset = tf.data.Dataset.from_tensor_slices({"a_lists": lists, "b_one": ones})
    records, sizes = first_batch_records(dataset, 2)
    for i, record in enumerate(records):
        assert all(type(part) is not tuple for part in record)
        expected = tf.train.Example(features=tf.train.Features(feature={
            "a_lists": tf.train.Feature(bytes_list=tf.train.BytesList(value=lists[i])),
            "b_one": tf.train.Feature(bytes_list=tf.train.BytesList(value=[ones[i]]))}))
        assert core._joined(record) == expected.SerializeToString(deterministic=True)
    path = str(tmp_path / "data.tfrecord")
    super_serial.save(dataset, path)
    got = list(super_serial.load(path))
    assert [g["a_lists"].numpy().tolist() for g in got] == lists
    assert [g["b_one"].numpy() for g in got] == ones


def test_lists_of_long_strings_roundtrip(monkeypatch, tmp_path):
    """Lists of long strings (varying, fixed, ragged, beside an image and an id) are written
    as they are, in records that are the Examples protobuf writes, and load back, sharded and
    compressed too; encode_proto, which copies them four times, gets none of them."""
    made = spy(monkeypatch, "_string_lists", lambda strings, *rest: len(strings))
    encoded = spy(monkeypatch, "_tf_lists")
    rng = np.random.default_rng(6)
    blob = rng.bytes(40_000)

    def words(i):  # 0-9 strings of 0-16,384 bytes, some empty
        return np.array([blob[j:j + (j * 4099 + i) % 16_385] for j in range(i % 10)], object)

    varying = tf.data.Dataset.from_generator(
        lambda: (words(i) for i in range(24)), output_signature=tf.TensorSpec([None], tf.string))
    datasets = {
        "varying": varying,
        "fixed": tf.data.Dataset.from_tensor_slices(
            np.array([[blob[i:i + 300], b"", blob[:i * 50]] for i in range(24)], object)),
        "ragged": tf.data.Dataset.from_tensor_slices(tf.ragged.constant(
            [[[blob[:400 + i]] * (j % 3) for j in range(i % 4)] for i in range(24)], tf.string)),
        "beside": tf.data.Dataset.zip({
            "words": varying, "image": tf.data.Dataset.from_tensor_slices(
                np.arange(24 * 64, dtype=np.float32).reshape(24, 8, 8)),
            "id": tf.data.Dataset.range(24).map(tf.strings.as_string)}),
    }
    for name, dataset in datasets.items():
        for options in ({}, {"shard_size": 50_000, "compression": "GZIP"}):
            made.clear()
            path = str(tmp_path / f"{name}{len(options)}.tfrecord")
            super_serial.save(dataset, path, **options)
            assert made and not encoded, name
            _assert_same(dataset, list(super_serial.load(path)))
        features = core._schema_from_spec(dataset.element_spec)[0]
        records = [r.numpy() for r in tf.data.TFRecordDataset(str(tmp_path / f"{name}0.tfrecord"))]
        assert [tf.train.Example.FromString(r) for r in records] == [
            _slow_example(features, element) for element in dataset], name


def test_lists_of_short_strings_go_through_tensorflow():
    """encode_proto takes long lists of strings that are short on average (`_long_lists`),
    and leaves lists of strings `_LONG_STRING` bytes long on average to `_string_lists`."""
    count = 4 * core._TF_LIST_STRINGS
    short = tf.constant([b"x" * (core._LONG_STRING - 1)] * count)
    assert core._long_lists(short, None, 4)
    assert not core._long_lists(tf.constant([b"x" * core._LONG_STRING] * count), None, 4)


def test_group_rows_sums_a_row_of_exactly_65536_bytes():
    """A row whose varints take exactly 65,536 bytes, one past uint16, keeps its length
    (helper-77's mutation sweep)."""
    count, size = 4096, 16  # the longest row times the longest item: exactly 1 << 16
    item_lengths = np.full(count + 2, size, np.uint8)
    item_lengths[:2] = 1  # items differ: summed item by item, not by `_one_each`
    splits = np.array([0, 2, count + 2])
    column = core._group_rows(item_lengths[:0], item_lengths, splits, 2)
    assert column.lengths.tolist() == [2, 1 << 16]

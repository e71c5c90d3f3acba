"""Files written by super_serial are tf.train.Example TFRecords that stock TensorFlow reads."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_same_elements, reference_varint, rewrite_records

import super_serial

N = 5


def _flat_dataset() -> tf.data.Dataset:
    rng = np.random.default_rng(0)
    return tf.data.Dataset.from_tensor_slices({
        "image": rng.standard_normal((N, 4, 3)).astype(np.float32),
        "score": np.array([0.5, -0.0, np.inf, 1e-45, 3.25], np.float32),
        "label": np.array([0, -1, 2**63 - 1, -(2**63), 7], np.int64),
        "ids": rng.integers(-(2**40), 2**40, (N, 3)).astype(np.int64),
        "name": [b"a", b"", b"\x00\xff", "é".encode(), b"long" * 40],
        "tags": np.array([[b"x", b"y"]] * N, object),
    })


FIXED = {
    "image": ([4, 3], tf.float32),
    "score": ([], tf.float32),
    "label": ([], tf.int64),
    "ids": ([3], tf.int64),
    "name": ([], tf.string),
    "tags": ([2], tf.string),
}


@pytest.fixture
def saved(paths):
    tfrecord, header = paths
    super_serial.save(_flat_dataset(), tfrecord, header)
    return tfrecord, header


def test_stock_parse_single_example(saved):
    tfrecord, _ = saved
    description = {k: tf.io.FixedLenFeature(shape, dtype) for k, (shape, dtype) in FIXED.items()}
    stock = tf.data.TFRecordDataset(tfrecord).map(
        lambda record: tf.io.parse_single_example(record, description))
    assert_same_elements(_flat_dataset(), stock)


def test_stock_parse_example_batched(saved):
    tfrecord, _ = saved
    description = {k: tf.io.FixedLenFeature(shape, dtype) for k, (shape, dtype) in FIXED.items()}
    stock = tf.data.TFRecordDataset(tfrecord).batch(2).map(
        lambda records: tf.io.parse_example(records, description))
    assert_same_elements(_flat_dataset().batch(2), stock)


def test_example_protos_use_the_header_encodings(saved):
    tfrecord, header_path = saved
    header = super_serial.read_header(header_path)
    kind = {"float": "float_list", "int64": "int64_list", "bytes": "bytes_list",
            "raw": "bytes_list"}
    records = [r.numpy() for r in tf.data.TFRecordDataset(tfrecord)]
    assert len(records) == N == header["num_records"]
    expected = list(_flat_dataset())
    for record, element in zip(records, expected):
        example = tf.train.Example.FromString(record)
        assert sorted(example.features.feature) == sorted(header["features"]) == sorted(FIXED)
        for name, feature in example.features.feature.items():
            assert feature.WhichOneof("kind") == kind[header["features"][name]["encoding"]]
            want = np.array(element[name].numpy()).ravel()
            got = getattr(feature, feature.WhichOneof("kind")).value
            if want.dtype == np.float32:
                assert np.array(got, np.float32).tobytes() == want.tobytes(), name
            else:
                assert list(got) == want.tolist(), name
    assert {n: f["encoding"] for n, f in header["features"].items()} == {
        "image": "float", "score": "float", "label": "int64", "ids": "int64", "name": "bytes",
        "tags": "bytes"}


def test_narrow_ints_and_bool_read_as_int64(paths):
    tfrecord, header = paths
    dataset = tf.data.Dataset.from_tensor_slices({
        "i32": np.array([-(2**31), 2**31 - 1, 0], np.int32),
        "u32": np.array([2**32 - 1, 0, 1], np.uint32), "flag": [True, False, True]})
    super_serial.save(dataset, tfrecord, header)
    description = {k: tf.io.FixedLenFeature([], tf.int64) for k in ("i32", "u32", "flag")}
    stock = list(tf.data.TFRecordDataset(tfrecord).map(
        lambda r: tf.io.parse_single_example(r, description)))
    assert [{k: int(v) for k, v in element.items()} for element in stock] == [
        {"i32": -(2**31), "u32": 2**32 - 1, "flag": 1}, {"i32": 2**31 - 1, "u32": 0, "flag": 0},
        {"i32": 0, "u32": 1, "flag": 1}]


@pytest.mark.parametrize("unsigned, signed", [(np.uint8, np.int8), (np.uint16, np.int16)])
def test_8_and_16_bit_ints_are_raw_bytes_for_decode_raw(paths, unsigned, signed):
    """uint8 (an image, say) and int8 are stored one byte a value, as the TensorFlow tutorials
    store images, and uint16 and int16 (a depth map, audio) two (since format version 3):
    `decode_raw` reads them."""
    tfrecord, header = paths
    top, low = np.iinfo(unsigned).max, np.iinfo(signed).min
    image = np.array([[[0, top], [128, 7]], [[1, 2], [3, 4]]], unsigned)
    small = np.array([[low, -low - 1, -1], [0, 1, 2]], signed)
    super_serial.save(tf.data.Dataset.from_tensor_slices({"image": image, "small": small}),
                      tfrecord, header)
    features = super_serial.read_header(header)["features"]
    assert [features[k]["encoding"] for k in ("image", "small")] == ["raw", "raw"]

    def parse(record):
        raw = tf.io.parse_single_example(record, {k: tf.io.FixedLenFeature([], tf.string)
                                                  for k in ("image", "small")})
        return (tf.reshape(tf.io.decode_raw(raw["image"], tf.as_dtype(unsigned)), [2, 2]),
                tf.io.decode_raw(raw["small"], tf.as_dtype(signed)))

    got = list(tf.data.TFRecordDataset(tfrecord).map(parse))
    assert np.stack([g[0].numpy() for g in got]).tobytes() == image.tobytes()
    assert np.stack([g[1].numpy() for g in got]).tobytes() == small.tobytes()
    for i, record in enumerate(tf.data.TFRecordDataset(tfrecord).as_numpy_iterator()):
        feature = tf.train.Example.FromString(record).features.feature
        assert feature["image"].bytes_list.value == [image[i].tobytes()]
        assert feature["small"].bytes_list.value == [small[i].tobytes()]


def test_raw_float64_with_decode_raw(paths):
    """A raw feature is one BytesList entry of little-endian values, row-major."""
    tfrecord, header = paths
    values = np.array([[0.1, 1e300, -0.0], [5e-324, np.inf, 1 / 3]], np.float64)
    super_serial.save(tf.data.Dataset.from_tensor_slices({"x": values}), tfrecord, header)
    assert super_serial.read_header(header)["features"]["x"]["encoding"] == "raw"

    def parse(record):
        raw = tf.io.parse_single_example(record, {"x": tf.io.FixedLenFeature([], tf.string)})
        return tf.io.decode_raw(raw["x"], tf.float64, little_endian=True)

    got = np.stack([x.numpy() for x in tf.data.TFRecordDataset(tfrecord).map(parse)])
    assert got.tobytes() == values.tobytes()


def test_unknown_shape_and_ragged_with_stock_features(paths):
    """Unknown-shape parts store `<name>#shape`; ragged ones `<name>#row_lengths_<k>`."""
    tfrecord, header = paths
    shapes = [(2, 3), (0, 3), (1, 3)]
    unknown = tf.data.Dataset.from_generator(
        lambda: iter([np.arange(np.prod(s), dtype=np.float32).reshape(s) for s in shapes]),
        output_signature=tf.TensorSpec([None, 3], tf.float32))
    ragged = tf.data.Dataset.from_tensor_slices(
        tf.ragged.constant([[[1, 2], []], [], [[3], [4, 5]]], tf.int64))
    dataset = tf.data.Dataset.zip({"m": unknown, "r": ragged})
    super_serial.save(dataset, tfrecord, header)

    description = {
        "m": tf.io.VarLenFeature(tf.float32),
        "m#shape": tf.io.FixedLenFeature([2], tf.int64),
        "r": tf.io.RaggedFeature(tf.int64, value_key="r", row_splits_dtype=tf.int64, partitions=[
            tf.io.RaggedFeature.RowLengths("r#row_lengths_0")]),
    }

    def parse(record):
        parsed = tf.io.parse_single_example(record, description)
        m = tf.reshape(tf.sparse.to_dense(parsed["m"]), parsed["m#shape"])
        return {"m": tf.ensure_shape(m, [None, 3]), "r": parsed["r"]}

    stock = tf.data.TFRecordDataset(tfrecord).map(parse)
    assert_same_elements(dataset, stock)


@pytest.mark.parametrize("rows, keys", [
    ([[1, 2, 3], [4]], ["t", "t#shape"]),  # RaggedTensorSpec([None], ragged_rank=0)
    ([[[1, 2]], [[3, 4], [5, 6]]], ["t", "t#shape"]),  # [None, 2]
])
def test_ragged_rank_0_is_stored_as_a_tensor_of_its_shape(paths, rows, keys):
    """A ragged component of ragged rank 0 (a ragged tensor's rows, sliced) has no row
    lengths: its values and, where a dim is unknown, `<key>#shape` (README, Records)."""
    tfrecord, header = paths
    dataset = tf.data.Dataset.from_tensor_slices(
        {"t": tf.ragged.constant(rows, tf.int64, ragged_rank=1)})
    assert dataset.element_spec["t"].ragged_rank == 0
    super_serial.save(dataset, tfrecord, header)
    width = [len(rows[0][0])] if isinstance(rows[0][0], list) else []
    description = {"t": tf.io.VarLenFeature(tf.int64),
                   "t#shape": tf.io.FixedLenFeature([1 + len(width)], tf.int64)}
    for record, row in zip(tf.data.TFRecordDataset(tfrecord).as_numpy_iterator(), rows):
        assert sorted(tf.train.Example.FromString(record).features.feature) == keys
        parsed = tf.io.parse_single_example(record, description)
        assert parsed["t#shape"].numpy().tolist() == [len(row)] + width
        np.testing.assert_array_equal(parsed["t"].values.numpy(), np.ravel(row))


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field, its tag and length as the shortest varints."""
    return reference_varint(number << 3 | 2) + reference_varint(len(payload)) + payload


def test_records_are_protobufs_bytes_but_for_empty_number_lists(paths):
    """Each record is the bytes protobuf serializes its Example to, with keys in byte order:
    lists of each encoding, short and long strings one a row (an empty one too). An empty
    FloatList or Int64List alone differs: it keeps its packed field, of length 0 (0a 00),
    which protobuf leaves out and every parser reads as no values (README, Records)."""
    tfrecord, header = paths
    lengths = [0, 3, 0, 1, 5, 0]

    def element(i):
        n = lengths[i]
        return {"f": np.arange(n, dtype=np.float32) - 1.5, "i": np.arange(n) * -(2**40),
                "u8": np.arange(n, dtype=np.uint8), "s": np.array([b"w%d" % j for j in range(n)]),
                "b": n % 2 == 0, "x": np.full(2, i, np.float32),
                "name": b"n" * (i * 7 % 20), "image": bytes(range(i, 200 + i))}

    signature = {"f": tf.TensorSpec([None], tf.float32), "i": tf.TensorSpec([None], tf.int64),
                 "u8": tf.TensorSpec([None], tf.uint8), "s": tf.TensorSpec([None], tf.string),
                 "b": tf.TensorSpec([], tf.bool), "x": tf.TensorSpec([2], tf.float32),
                 "name": tf.TensorSpec([], tf.string), "image": tf.TensorSpec([], tf.string)}
    dataset = tf.data.Dataset.zip((
        tf.data.Dataset.from_generator(lambda: map(element, range(len(lengths))),
                                       output_signature=signature),
        tf.data.Dataset.from_tensor_slices(tf.ragged.constant(
            [[[1, 2], []], [], [[3]], [[], []], [[4, 5, 6]], []], tf.int64))))
    super_serial.save(dataset, tfrecord, header)

    empty_lists = 0
    for record in tf.data.TFRecordDataset(tfrecord).as_numpy_iterator():
        features = tf.train.Example.FromString(record).features.feature
        entries = []
        for key in sorted(features, key=str.encode):
            feature = features[key]
            expected = feature.SerializeToString()
            kind = feature.WhichOneof("kind")
            if kind in ("float_list", "int64_list") and not getattr(feature, kind).value:
                empty_lists += 1
                expected = expected[:1] + b"\x02\x0a\x00"  # the Feature's tag, then the list
            entries.append(_field(1, _field(1, key.encode()) + _field(2, expected)))
        assert record == _field(1, b"".join(entries))  # Example{features: Features{feature}}
    # f and i in the 3 rows of none; the ragged part's row lengths of its 2 elements of no rows,
    # and its values of those and of [[], []]
    assert empty_lists == 3 + 3 + 2 + 3


@pytest.mark.parametrize("where", ["example", "feature", "list", "features"])
def test_unknown_fields_load_but_in_the_features_message(paths, where):
    """Another writer's unknown fields load where TensorFlow's parser skips them: in the
    Example, a Feature and a list. Beside the Features message's map it refuses the record:
    iterating fails, and verify names the record as one TensorFlow cannot parse (it said "not
    a valid tf.train.Example", which it is; helper-79)."""
    tfrecord, header = paths
    super_serial.save(tf.data.Dataset.from_tensor_slices({"b": [[1, 2], [3, 300]]}), tfrecord,
                      header)
    unknown = {where: _field(7, b"abc")}

    def record(values: list) -> bytes:
        listed = _field(1, b"".join(reference_varint(v) for v in values)) + unknown.get(
            "list", b"")
        feature = _field(3, listed) + unknown.get("feature", b"")
        features = _field(1, _field(1, b"b") + _field(2, feature)) + unknown.get("features", b"")
        return _field(1, features) + unknown.get("example", b"")

    assert tf.train.Example.FromString(record([1, 2])).features.feature["b"].int64_list.value \
        == [1, 2]  # valid protobuf, whatever the place
    rewrite_records(tfrecord, header, [record([1, 2]), record([3, 300])])
    if where != "features":
        assert [e["b"].numpy().tolist() for e in super_serial.load(tfrecord, header)] == [
            [1, 2], [3, 300]]
        assert super_serial.verify(tfrecord, header)["num_records"] == 2
        return
    with pytest.raises(tf.errors.InvalidArgumentError):
        list(super_serial.load(tfrecord, header))
    with pytest.raises(super_serial.CorruptDataError,
                       match=f"^{tfrecord}: record 0 is not a tf.train.Example TensorFlow can "
                             "parse$"):
        super_serial.verify(tfrecord, header)

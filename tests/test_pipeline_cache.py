"""Loads of the same schema and options share one pipeline, traced once per process.

Sharing must never mix up what belongs to one load: file paths, record counts, options.
"""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import yaml
from conftest import assert_same_elements
from tensorflow.python.eager import context  # the thread's options for calls of functions

import super_serial
from super_serial import core


def dataset(n: int, key: str = "x") -> tf.data.Dataset:
    values = np.arange(n * 3, dtype=np.float64).reshape(n, 3)
    return tf.data.Dataset.from_tensor_slices({key: values, "id": np.arange(n)})


def pipelines_for(tfrecord_path, header_path=None) -> list:
    header = core._read_header(str(header_path or super_serial.default_header_path(
        str(tfrecord_path))))
    return [p for p in core._PIPELINES.values() if p.decoder.features == header.features
            and p.decoder.block_records == header.block_records]


def one_device_functions(pipeline) -> list:
    library = pipeline.function.graph.as_graph_def().library.function
    return [f for f in library if f.attr["experimental_ints_on_device"].b]


def test_files_of_one_schema_share_a_pipeline_and_keep_their_own_paths_and_counts(tmp_path):
    small, large = tmp_path / "small.tfrecord", tmp_path / "large.tfrecord"
    super_serial.save(dataset(5), small)
    super_serial.save(dataset(40), large)
    header = yaml.safe_load(Path(str(large) + ".header.yaml").read_text())
    assert header["block_records"] == yaml.safe_load(
        Path(str(small) + ".header.yaml").read_text())["block_records"]

    assert_same_elements(dataset(5), super_serial.load(small))
    assert_same_elements(dataset(40), super_serial.load(large))

    assert len(pipelines_for(small)) == 1, "one pipeline for both loads"
    pipeline = pipelines_for(small)[0]
    function = pipeline.function
    assert_same_elements(dataset(40), super_serial.load(large))
    assert pipelines_for(large) == [pipeline], "a new pipeline"
    assert pipeline.function is function, "traced again"


def test_a_shared_pipeline_names_the_file_being_read(tmp_path):
    good, bad, other = (tmp_path / n for n in ("good.tfrecord", "bad.tfrecord", "o.tfrecord"))
    super_serial.save(dataset(30), good)
    super_serial.save(dataset(30), bad)
    super_serial.save(dataset(20), other)
    assert_same_elements(dataset(30), super_serial.load(good))  # the pipeline exists now
    # bad's header keeps saying 30 records; its file now holds 20 (same schema, size patched).
    bad.write_bytes(other.read_bytes())
    header_path = Path(str(bad) + ".header.yaml")
    header = yaml.safe_load(header_path.read_text())
    header["shards"][0]["num_bytes"] = bad.stat().st_size
    header_path.write_text(yaml.safe_dump(header, sort_keys=False))

    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        list(super_serial.load(bad))
    assert (f"{bad}: the header says 30 records, but only 20 could be read from it"
            in info.value.message)
    assert str(good) not in info.value.message
    assert_same_elements(dataset(30), super_serial.load(good))  # still fine


def test_options_get_their_own_pipelines(paths):
    super_serial.save(dataset(6), paths[0], paths[1])
    original = super_serial.load(paths[0], paths[1])
    stored = super_serial.load(paths[0], paths[1], original_dtypes=False)
    batched = super_serial.load(paths[0], paths[1], batch_size=4)

    assert original.element_spec["x"].dtype == tf.float64
    assert stored.element_spec["x"].dtype == tf.string  # raw float64 bytes
    assert batched.element_spec["x"].shape.as_list() == [None, 3]
    assert_same_elements(dataset(6), original)
    assert_same_elements(dataset(6).batch(4), batched)
    assert [e["x"].numpy() for e in stored.take(1)] == [np.arange(3.0).tobytes()]
    assert len(pipelines_for(*paths)) == 3


def test_pipelines_kept_are_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(core, "_PIPELINES", core._PIPELINES.__class__())
    monkeypatch.setattr(core, "_PIPELINES_KEPT", 2)
    files = []
    for key in ("a", "b", "c"):  # three schemas
        files.append(tmp_path / f"{key}.tfrecord")
        super_serial.save(dataset(3, key), files[-1])
        assert_same_elements(dataset(3, key), super_serial.load(files[-1]))

    assert len(core._PIPELINES) == 2
    assert pipelines_for(files[0]) == [], "the least recently used is dropped"
    assert len(pipelines_for(files[1])) == len(pipelines_for(files[2])) == 1


def test_loads_in_a_graph_share_a_pipeline_of_their_own_without_one_device_marks(paths,
                                                                                 monkeypatch):
    """Eager loads share a pipeline whose functions are marked one-device; loads in a graph (a
    tf.function here, or a tf.data function) share another whose functions are not: marked
    ones broke loads inside a flat_map's function (test_roundtrip). That one builds the
    dataset in the graph, where a call of a traced function could not be checkpointed
    (test_shards)."""
    super_serial.save(dataset(8), paths[0], paths[1])

    def total():
        return super_serial.load(paths[0], paths[1]).reduce(
            tf.constant(0, tf.int64), lambda acc, e: acc + e["id"])

    monkeypatch.setattr(core, "_PIPELINES", core._PIPELINES.__class__())  # other tests' loads
    traced = tf.function(total)
    assert int(traced()) == sum(range(8))
    [in_graph] = pipelines_for(paths[0], paths[1])
    assert in_graph.reading.in_graph and in_graph.function is None
    graph = traced.get_concrete_function().graph.as_graph_def()
    assert "ParseExampleV2" in {n.op for f in graph.library.function for n in f.node_def}
    assert [f for f in graph.library.function if f.attr["experimental_ints_on_device"].b] == []
    assert_same_elements(dataset(8), super_serial.load(paths[0], paths[1]))
    [eager] = [p for p in pipelines_for(paths[0], paths[1]) if p is not in_graph]
    assert not eager.reading.in_graph and one_device_functions(eager)
    assert int(tf.function(total)()) == int(total()) == sum(range(8))
    assert pipelines_for(paths[0], paths[1]) == [in_graph, eager], "each kind shared"


def test_shuffled_files_are_read_by_a_pipeline_built_for_the_load(tmp_path):
    path = tmp_path / "shuffled.tfrecord"
    super_serial.save(dataset(12, "shuffled"), path, num_shards=3)
    loaded = super_serial.load(path, shuffle_files=True, seed=3)
    assert pipelines_for(path) == [], "a shuffle's seeds are drawn per load: not kept"
    assert sorted(int(e["id"]) for e in loaded) == list(range(12))


def test_block_decoding_is_a_one_device_function(paths):
    """tf.data's own map functions are instantiated for several devices, which runs grappler
    over them each time an iterator is made; the mark makes it one device, without grappler."""
    super_serial.save(dataset(5, "marked"), paths[0], paths[1])
    assert_same_elements(dataset(5, "marked"), super_serial.load(paths[0], paths[1]))
    [pipeline] = pipelines_for(*paths)
    marked = one_device_functions(pipeline)
    assert len(marked) == 1
    assert any(node.op == "ParseExampleV2" for node in marked[0].node_def)


def test_block_decoding_checks_every_feature_with_one_assertion(tmp_path):
    """Each op of block decoding costs again every time an iterator is made: the checks of all
    features (raw byte counts, stored shapes, row lengths) share one assertion, beside the one
    on the block's record count."""
    path = tmp_path / "checked.tfrecord"
    varying = tf.data.Dataset.from_generator(
        lambda: (np.zeros([i % 3, 2], np.float64) for i in range(6)),
        output_signature=tf.TensorSpec([None, 2], tf.float64))
    ds = tf.data.Dataset.zip({"u8": tf.data.Dataset.from_tensor_slices(np.zeros([6, 4], np.uint8)),
                              "var": varying, "rag": tf.data.Dataset.from_tensor_slices(
                                  tf.ragged.constant([[[1]], [[2, 3], []]] * 3, tf.int64))})
    super_serial.save(ds, path)
    assert_same_elements(ds, super_serial.load(path))
    [pipeline] = pipelines_for(path)
    [decode] = [f for f in one_device_functions(pipeline)
                if any(node.op == "ParseExampleV2" for node in f.node_def)]
    asserts = [node for node in decode.node_def if node.op == "Assert"]
    assert len(asserts) == 2, [node.name for node in asserts]  # 6 when each check had its own


def test_reading_shards_is_a_one_device_function_too(tmp_path):
    path = tmp_path / "sharded.tfrecord"
    super_serial.save(dataset(30, "sharded"), path, num_shards=3)
    assert_same_elements(dataset(30, "sharded"), super_serial.load(path))
    [pipeline] = pipelines_for(path)
    marked = one_device_functions(pipeline)
    ops = [{node.op for node in f.node_def} for f in marked]
    assert len(marked) == 2
    assert any("ParseExampleV2" in o for o in ops), "block decoding"
    assert any("TFRecordDataset" in o for o in ops), "a shard's blocks"


def test_elements_are_finished_by_an_inline_map_that_nothing_fuses_with(paths):
    """tf.data's own map hands each element (and each op) to other threads, about 20 us an
    element on 2 cores: the per-element map runs inline, map_parallelization is kept off it,
    and the op after it is not a batch or map that tf.data could fuse it with."""
    unknown = tf.data.Dataset.from_generator(
        lambda: (np.zeros((2, i), np.float32) for i in range(4)),
        output_signature=tf.TensorSpec([2, None], tf.float32))
    data = tf.data.Dataset.zip({"inline": unknown, "id": tf.data.Dataset.range(4)})
    super_serial.save(data, *paths)
    assert_same_elements(data, super_serial.load(*paths))
    [pipeline] = pipelines_for(*paths)
    nodes = pipeline.function.graph.as_graph_def().node
    [node] = [n for n in nodes if n.op == "MapDataset" and n.attr["force_synchronous"].b]
    assert not node.attr["use_inter_op_parallelism"].b
    [finish] = [f for f in one_device_functions(pipeline)
                if f.signature.name == node.attr["f"].func.name]
    assert {n.op for n in finish.node_def} >= {"Reshape", "RaggedTensorFromVariant"}
    [after] = [n for n in nodes if n.input and n.input[0].split(":")[0] == node.name]
    assert after.op == "AssertCardinalityDataset"


@pytest.mark.filterwarnings("ignore:.*shard files hold no records")  # small, unknown size
@pytest.mark.parametrize("batch_size, drop_remainder", [(None, False), (3, False), (3, True),
                                                        (10, False), (10, True)])
@pytest.mark.parametrize("schema", ["fixed", "unknown-first", "unknown-inner"])
@pytest.mark.parametrize("num_shards", [1, 2])
def test_loads_know_their_size(schema, batch_size, drop_remainder, num_shards, tmp_path):
    shapes = {"fixed": lambda i: (3,), "unknown-first": lambda i: (i % 3, 2),
              "unknown-inner": lambda i: (2, i % 3)}[schema]
    spec = {"fixed": [3], "unknown-first": [None, 2], "unknown-inner": [2, None]}[schema]
    data = tf.data.Dataset.from_generator(
        lambda: (np.full(shapes(i), i, np.float64) for i in range(7)),
        output_signature=tf.TensorSpec(spec, tf.float64))
    path = tmp_path / f"{schema}.tfrecord"
    super_serial.save(data, path, num_shards=num_shards)
    for shuffle_files in (False, True):
        loaded = super_serial.load(path, batch_size=batch_size, drop_remainder=drop_remainder,
                                   shuffle_files=shuffle_files)
        expected = len(list(data if batch_size is None else data.ragged_batch(
            batch_size, drop_remainder=drop_remainder)))
        assert int(loaded.cardinality()) == len(list(loaded)) == expected


@pytest.mark.parametrize("batch_size", [2**62, 2**63 - 1])
def test_huge_batch_sizes_give_one_batch(batch_size, paths):
    """The batch count is rounded up without `size + batch_size - 1`, which overflowed."""
    super_serial.save(tf.data.Dataset.range(50), *paths)
    loaded = super_serial.load(*paths, batch_size=batch_size)
    assert int(loaded.cardinality()) == 1
    assert [b.numpy().tolist() for b in loaded] == [list(range(50))]


def test_blocks_with_ragged_parts_are_unbatched_without_a_map(paths):
    """Dataset.unbatch maps each block again to re-encode its ragged parts, with a tf.data
    function that grappler optimizes for every iterator: blocks come encoded instead."""
    ragged = tf.ragged.constant([[[1], []], [[2, 3]], [], [[4]]], tf.int64)
    data = tf.data.Dataset.from_tensor_slices({"unbatched": ragged, "x": np.arange(4.0)})
    assert data.element_spec["unbatched"].ragged_rank == 1
    super_serial.save(data, *paths)
    assert_same_elements(data, super_serial.load(*paths))
    [pipeline] = pipelines_for(*paths)
    ops = [n.op for n in pipeline.function.graph.as_graph_def().node]
    assert "UnbatchDataset" in ops
    assert not [op for op in ops if op in ("MapDataset", "ParallelMapDataset")], ops


def repeated_constants(function) -> list:
    """The constants of a function's graph (a FunctionDef) that repeat another: the same
    dtype and value, made under the same control dependencies."""
    seen, repeated = set(), []
    for node in function.node_def:
        if node.op == "Const":
            key = (node.attr["dtype"].SerializeToString(),
                   node.attr["value"].SerializeToString(deterministic=True),
                   frozenset(i for i in node.input if i.startswith("^")))
            if key in seen:
                repeated.append(node.name)
            seen.add(key)
    return repeated


def test_each_constant_is_made_once_in_loads_functions(tmp_path):
    """TensorFlow's tracing makes a constant for each use of a value (the strides of each
    slice, say), and tf.data makes load's functions again for each new dataset, at a cost for
    each node: 138 of the demo's 179 block-decoding constants repeated another."""
    path = tmp_path / "kinds.tfrecord"
    ds = tf.data.Dataset.zip({
        "u8": tf.data.Dataset.from_tensor_slices(np.arange(24, dtype=np.uint8).reshape(6, 4)),
        "var": tf.data.Dataset.from_generator(
            lambda: (np.full([i % 3, 2], i, np.float64) for i in range(6)),
            output_signature=tf.TensorSpec([None, 2], tf.float64)),
        "rag": tf.data.Dataset.from_tensor_slices(
            tf.ragged.constant([[[1]], [[2, 3], []]] * 3, tf.int64)),
        "bag": tf.data.Dataset.from_generator(
            lambda: (tf.SparseTensor(np.full([i % 2, 1], i % 4, np.int64),
                                     np.ones([i % 2], np.float32), [4]) for i in range(6)),
            output_signature=tf.SparseTensorSpec([4], tf.float32))})
    ds = ds.apply(tf.data.experimental.assert_cardinality(6))
    super_serial.save(ds, path, num_shards=2)
    assert_same_elements(ds, super_serial.load(path))
    [pipeline] = pipelines_for(path)
    functions = one_device_functions(pipeline)
    assert len(functions) == 3  # a shard's blocks, block decoding, the finishing map
    for function in functions:
        assert not repeated_constants(function), function.signature.name
    # and the function that builds the pipeline, traced for the first load of a schema: 31
    # constants for the benchmark's images, 13 of them distinct
    assert not repeated_constants(pipeline.function.function_def)


def test_constants_are_shared_only_under_the_same_control_dependencies():
    def fn(x):
        check = tf.debugging.assert_positive(x)
        first = x[1:] * 2 + x[:-1] * 2
        with tf.control_dependencies([check]):
            waiting = x[1:] + 2 + x[:-1] * 2
        return first, waiting

    function = core._one_device_trace(fn, [tf.TensorSpec([None], tf.int64)])
    ops = function.graph.get_operations()
    twos = [op for op in ops if op.type == "Const" and op.get_attr("value").int64_val == [2]]
    assert sorted(len(op.control_inputs) for op in twos) == [0, 1]
    assert not repeated_constants(function.function_def)

    def run(x):  # as tf.data calls it: a one-device function does not run eagerly
        structure = (tf.TensorSpec([None], tf.int64),) * 2
        mapped = core._map_inline(tf.data.Dataset.from_tensors(x), function, structure)
        return mapped.get_single_element()

    first, waiting = run(tf.constant([1, 2, 5], tf.int64))
    assert first.numpy().tolist() == [6, 14] and waiting.numpy().tolist() == [6, 11]
    with pytest.raises(tf.errors.InvalidArgumentError):
        run(tf.constant([1, -2], tf.int64))


def call_options_config():
    """This thread's options for eager calls of functions: the ConfigProto grappler takes."""
    return tf.compat.v1.ConfigProto.FromString(
        context.context().function_call_options.config_proto_serialized)


def test_the_pipeline_is_called_without_grappler_and_with_the_callers_other_options(paths,
                                                                                       monkeypatch):
    """Grappler's rewrites of the function that builds load's dataset leave the dataset as it
    was, and took 30 of the 45 ms of its first call: it is called with grappler's meta
    optimizer off, and the thread's other options (`operation_timeout_in_ms` here) as they
    were, which are back after the call."""
    super_serial.save(dataset(7, "plain"), *paths)
    assert_same_elements(dataset(7, "plain"), super_serial.load(*paths))
    [pipeline] = pipelines_for(*paths)
    traced, seen = pipeline.function, []

    def spy(*args):
        config = call_options_config()
        seen.append((config.graph_options.rewrite_options.disable_meta_optimizer,
                     config.operation_timeout_in_ms))
        return traced(*args)

    monkeypatch.setattr(pipeline, "function", spy)
    eager = context.context()
    before = eager.function_call_options
    callers = context.FunctionCallOptions(
        before.executor_type, tf.compat.v1.ConfigProto(operation_timeout_in_ms=98765))
    eager.function_call_options = callers
    try:
        loaded = super_serial.load(*paths)
        assert eager.function_call_options is callers
    finally:
        eager.function_call_options = before
    assert seen == [(True, 98765)]
    assert_same_elements(dataset(7, "plain"), loaded)
    assert not call_options_config().graph_options.rewrite_options.disable_meta_optimizer


def test_a_call_without_grappler_that_fails_puts_the_callers_options_back():
    before = context.context().function_call_options

    def fails():
        assert call_options_config().graph_options.rewrite_options.disable_meta_optimizer
        raise ValueError("the call failed")

    with pytest.raises(ValueError, match="the call failed"):
        core._without_grappler(fails)
    assert context.context().function_call_options is before


def test_a_call_without_grappler_is_a_plain_call_where_tensorflow_lacks_its_options(
        monkeypatch):
    monkeypatch.delattr(context, "FunctionCallOptions")
    assert core._without_grappler(lambda *args: args, 1, 2) == (1, 2)


def test_sparse_block_decoding_checks_indices_in_few_ops(paths):
    """A sparse feature's indices are checked against its dense shapes with one op giving
    each index's record and place, and a segment max: `value_rowids()` and a ragged
    `reduce_max` took 152 of the 296 ops of its block decoding, each paid again every time
    an iterator is made."""
    bags = tf.data.Dataset.from_generator(
        lambda: (tf.SparseTensor(np.full([i % 2, 1], i % 4, np.int64),
                                 np.ones([i % 2], np.float32), [4]) for i in range(6)),
        output_signature=tf.SparseTensorSpec([4], tf.float32))
    super_serial.save(bags, *paths)
    assert_same_elements(bags, super_serial.load(*paths))
    [pipeline] = pipelines_for(*paths)
    [decode] = [f for f in one_device_functions(pipeline)
                if any(node.op == "ParseExampleV2" for node in f.node_def)]
    ops = [node.op for node in decode.node_def]
    assert "RaggedTensorToSparse" in ops and "UnsortedSegmentMax" in ops
    assert len(ops) < 160, collections.Counter(ops).most_common(10)


@pytest.mark.parametrize("deterministic", [True, False])
@pytest.mark.parametrize("layout", ["round_robin", "sequential"])
def test_deterministic_false_lets_reads_and_blocks_come_in_any_order(layout, deterministic,
                                                                       tmp_path):
    """With deterministic=False the files are read at once, and blocks decoded, in whichever
    order is fastest (README): the tests of it compared multisets of elements, which an
    in-order read gives too, so the option could have done nothing (helper-90). Files of a
    `shard_size` save are read one after another unless order does not matter."""
    path = tmp_path / "data.tfrecord"
    super_serial.save(dataset(100), path,
                      **({"num_shards": 2} if layout == "round_robin" else {"shard_size": 500}))
    header = yaml.safe_load(Path(str(path) + ".header.yaml").read_text())
    assert header["layout"] == layout and len(header["shards"]) > 1
    loaded = super_serial.load(path, deterministic=deterministic)
    assert sorted(int(e["id"]) for e in loaded) == list(range(100))
    [pipeline] = [p for p in pipelines_for(path) if p.reading.deterministic == deterministic]
    nodes = pipeline.function.graph.as_graph_def().node
    said = b"true" if deterministic else b"false"
    maps = [n for n in nodes if n.op == "ParallelMapDatasetV2"]
    assert maps and all(n.attr["deterministic"].s == said for n in maps)
    [interleave] = [n for n in nodes if "Interleave" in n.op]
    if layout == "sequential" and deterministic:
        assert interleave.op == "InterleaveDataset"
    else:
        assert interleave.op == "ParallelInterleaveDatasetV4"
        assert interleave.attr["deterministic"].s == said


@pytest.mark.parametrize("compression", ["GZIP", "ZLIB"])
def test_loads_of_one_schema_compressed_and_not_in_one_process(tmp_path, compression):
    """Pipelines are shared by loads of one schema; a compressed save and an uncompressed one
    of the same data each read as saved (helper-117: a cache that left compression out of its
    key passed every test)."""
    dataset = tf.data.Dataset.from_tensor_slices({"x": np.arange(12, dtype=np.float32)})
    plain, packed = str(tmp_path / "plain.tfrecord"), str(tmp_path / "packed.tfrecord")
    super_serial.save(dataset, plain)
    super_serial.save(dataset, packed, compression=compression)
    for path in (plain, packed, plain):
        assert [float(e["x"]) for e in super_serial.load(path)] == list(range(12))

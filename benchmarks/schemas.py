"""super_serial against tf.data.Dataset.save/load on schemas beyond bench.py's two workloads.

Each schema (ragged, mixed dtypes, float64, dense components of unknown shape, short int16
clips, long lists of integers (token ids, timestamps, random hashes) and strings, small string
matrices, long strings, sparse tensors) is saved by both and loaded by both, alternately in
one process; a load iterates ``.batch(512)``, or ``.padded_batch(512)`` where dense shapes
vary: batch's equivalent for them, with no function for each element.
(``.ragged_batch(512)`` maps every element with a tf.data map, 20-40 us an element on 2 cores,
both sides alike: it would measure itself more than the loaders.) Prints medians and the ratios
super_serial / tf.data (<= 1.0 is better), also for ``load(..., batch_size=512)`` against what
gives the same batches: ``tf.data.Dataset.load`` with ``.batch(512)``, or
``.ragged_batch(512)`` where dense shapes vary. Each repeat rotates which of them goes first.
Each timed operation starts after a pause of
``--settle`` seconds, and each save writes where nothing is (the last one's files removed
before the clock), as in bench.py.

Usage::

    python benchmarks/schemas.py                 # 20,000 elements per schema, 7 runs
    python benchmarks/schemas.py --elements 100 --repeats 1
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import super_serial  # noqa: E402


def schemas(n: int) -> dict:
    """name -> (dataset, whether its dense shapes vary); cached, so the source costs little."""
    rng = np.random.default_rng(0)

    def varying(spec_shape, shape_of, dtype=tf.float32, values=None) -> tf.data.Dataset:
        values = values or (lambda i, shape: np.zeros(shape, np.float32))
        return tf.data.Dataset.from_generator(
            lambda: (values(i, shape_of(i)) for i in range(n)),
            output_signature=tf.TensorSpec(spec_shape, dtype))

    def tokens(i, shape):  # token ids: small non-negative integers, 1 to 3 varint bytes
        return np.random.default_rng(i).integers(0, 30_000, shape)

    blob = rng.bytes(201_000)

    def bag_of_words(i):  # 1 to 99 of 30,000 word ids, sorted, with a weight each
        ids = np.sort(np.random.default_rng(i).choice(30_000, 1 + i * 7919 % 99, replace=False))
        return tf.SparseTensor(ids[:, None], np.full(len(ids), 0.5, np.float32), [30_000])

    def words(i, shape):
        return np.array([b"word%d" % (j * i % 5000) for j in range(shape[0])], object)

    made = {
        '{"x": float64[3], "r": ragged int64 [None]}': (tf.data.Dataset.from_tensor_slices(
            {"x": rng.random((n, 3)),
             "r": tf.ragged.constant([[1] * (i % 5) for i in range(n)], tf.int64)}), False),
        "(uint8[4], string, float16)": (tf.data.Dataset.from_tensor_slices((
            rng.integers(0, 5, (n, 4)).astype(np.uint8),
            np.array([b"x" * (i % 7) for i in range(n)]),
            rng.random(n).astype(np.float16))), False),
        '{"v": float64[16]}': (tf.data.Dataset.from_tensor_slices({"v": rng.random((n, 16))}),
                               False),
        "float32 [None, 2]": (varying([None, 2], lambda i: (i % 3 + 1, 2)), True),
        "float32 [2, None]": (varying([2, None], lambda i: (2, i % 3 + 1)), True),
        # larger elements, fewer of them (n / 8): about 500 values, and about 4,000
        "float32 [None] (about 500 values)": (
            varying([None], lambda i: (i * 7919 % 1000 + 1,)).take(n // 8), True),
        "float32 [None, 64] (about 64 rows)": (
            varying([None, 64], lambda i: (i * 7919 % 128 + 1, 64)).take(n // 8), True),
        # short audio clips: 1-5,000 int16 samples, stored raw (n / 8)
        "int16 [None] (1-5,000 samples)": (varying(
            [None], lambda i: (1 + i * 7919 % 5000,), tf.int16,
            lambda i, shape: np.random.default_rng(i).integers(-2**15, 2**15, shape, np.int16)
        ).take(n // 8), True),
        # integers are Int64List varints and strings BytesList entries: encoded value by value
        "int64 [None] (about 500 token ids)": (
            varying([None], lambda i: (i * 7919 % 1000 + 1,), tf.int64, tokens).take(n // 8),
            True),
        # the same lists beside a string id: read in windows, a batch for each component
        '{"id": string, "tokens": int64 [None]}': (
            varying([None], lambda i: (i * 7919 % 1000 + 1,), tf.int64, tokens).take(n // 8)
            .enumerate().map(lambda i, t: {"id": tf.strings.as_string(i), "tokens": t}),
            True),
        "int64 [128] (token ids)": (tf.data.Dataset.from_tensor_slices(
            rng.integers(0, 30_000, (n // 8, 128))), False),
        # large integers: varints of one length (9 bytes), and of mixed lengths (9 and 10)
        "int64 [128] (timestamps in ns)": (tf.data.Dataset.from_tensor_slices(
            1_700_000_000_000_000_000 + rng.integers(0, 10**15, (n // 8, 128))), False),
        "int64 [None] (1-200 random 64-bit hashes)": (varying(
            [None], lambda i: (1 + i * 7919 % 200,), tf.int64,
            lambda i, shape: np.random.default_rng(i).integers(-2**63, 2**63 - 1, shape,
                                                              np.int64)).take(n // 8), True),
        "string [None] (about 50 words)": (
            varying([None], lambda i: (i * 7919 % 100 + 1,), tf.string, words).take(n // 8),
            True),
        # small elements of two unknown dims (n / 10): a few sentences of a few words each
        "string [None, None] (1-3 x 1-3 words)": (
            varying([None, None], lambda i: (i % 3 + 1, i * 7919 % 3 + 1), tf.string,
                    lambda i, shape: np.array([[b"word%d" % ((i + j) % 5000)] * shape[1]
                                               for j in range(shape[0])], object)
                    ).take(n // 10), True),
        # decoded images of varying size (n / 40 of them, about 250 x 300 x 3: 225 kB)
        "uint8 [None, None, 3] (decoded images)": (varying(
            [None, None, 3], lambda i: (200 + i * 7919 % 100, 250 + i * 104729 % 100, 3),
            tf.uint8, lambda i, shape: np.random.default_rng(i).integers(0, 256, shape, np.uint8),
        ).take(max(1, n // 40)), True),
        # one long string an element, as encoded images are stored (n / 40 of them)
        "string, about 150 KB (encoded images)": (tf.data.Dataset.from_generator(
            lambda: (blob[i % 1000:i % 1000 + 100_000 + i * 7919 % 100_000]
                     for i in range(max(1, n // 40))),
            output_signature=tf.TensorSpec([], tf.string)), False),
        # bags of words as tf.SparseTensor (n / 8): batch gives each batch's largest shape
        "sparse float32 [30000] (about 50 values)": (tf.data.Dataset.from_generator(
            lambda: (bag_of_words(i) for i in range(n // 8)),
            output_signature=tf.SparseTensorSpec([30_000], tf.float32)), False),
    }
    return {name: (dataset.cache(), varies) for name, (dataset, varies) in made.items()}


def iterate(dataset, varying: bool) -> int:
    """Reads every batch; the number of elements read."""
    count = 0
    for batch in dataset.padded_batch(512) if varying else dataset.batch(512):
        count += _rows(batch)
    return count


def _rows(batch) -> int:
    leaf = tf.nest.flatten(batch)[0]
    if isinstance(leaf, tf.SparseTensor):
        return int(leaf.dense_shape[0])
    return int(leaf.nrows()) if isinstance(leaf, tf.RaggedTensor) else int(leaf.shape[0])


def check(dataset, loaded) -> None:
    """Every element loaded is the element saved, value for value (untimed)."""
    count, missing = 0, object()
    for want, got in itertools.zip_longest(dataset, loaded, fillvalue=missing):
        if want is missing or got is missing:  # one pass, which also finds a short one
            raise RuntimeError("the loaded dataset has another number of elements")
        for a, b in zip(tf.nest.flatten(want), tf.nest.flatten(got)):
            # a batch of dense rows of varying shape comes as ragged, and its rows so
            a, b = (x.to_tensor() if isinstance(x, tf.RaggedTensor) and not isinstance(
                y, tf.RaggedTensor) else x for x, y in ((a, b), (b, a)))
            a, b = tf.nest.flatten(a, expand_composites=True), tf.nest.flatten(
                b, expand_composites=True)
            if len(a) != len(b) or any(x.dtype != y.dtype or not np.array_equal(x, y)
                                       for x, y in zip(a, b)):
                raise RuntimeError(f"element {count} loaded differs from the one saved")
        count += 1


def measure(dataset, varying: bool, work: Path, repeats: int, settle: float = 0.0) -> dict:
    """Median seconds of each operation, the contenders alternating within each repeat, each
    after a pause of `settle` seconds."""
    ours, theirs = str(work / "data.tfrecord"), str(work / "tfdata")
    count = iterate(dataset, varying)  # fill the cache

    def counted(read):  # each timed load reads every element, or the run stops
        def run():
            read_now = read()
            if read_now != count:
                raise RuntimeError(f"a load read {read_now} elements of {count}")
        return run

    def remove_ours():
        for path in (ours, super_serial.default_header_path(ours)):
            if os.path.exists(path):
                os.remove(path)

    # Each save writes where nothing is, as in bench.py: what was there before is removed
    # before the clock starts (`fresh`), for both.
    fresh = {"save super_serial": remove_ours,
             "save tf.data": lambda: shutil.rmtree(theirs, ignore_errors=True)}
    runs = {
        "save super_serial": lambda: super_serial.save(dataset, ours),
        "save tf.data": lambda: dataset.save(theirs),
        "load super_serial": counted(lambda: iterate(super_serial.load(ours), varying)),
        "load tf.data": counted(lambda: iterate(tf.data.Dataset.load(theirs), varying)),
        "load batch_size=512": counted(
            lambda: sum(_rows(b) for b in super_serial.load(ours, batch_size=512))),
    }
    if varying:  # the same batches as load(batch_size=512)
        runs["load tf.data ragged_batch"] = counted(lambda: sum(
            _rows(b) for b in tf.data.Dataset.load(theirs).ragged_batch(512)))
    times: dict = {name: [] for name in runs}
    for name, run in runs.items():  # once untimed: traces and first-time costs out of the way
        fresh.get(name, lambda: None)()
        run()
    check(dataset, super_serial.load(ours))  # and the data checked, value for value
    check(dataset, super_serial.load(ours, batch_size=512).unbatch())
    saves = [name for name in runs if name.startswith("save ")]
    loads = [name for name in runs if name not in saves]
    for repeat in range(repeats):
        # Who goes first rotates, the saves before the loads that read them: in a fixed
        # order super_serial's save always came after the last repeat's loads, and
        # tf.data's always right after super_serial's
        order = [names[repeat % len(names):] + names[:repeat % len(names)]
                 for names in (saves, loads)]
        for name in order[0] + order[1]:
            run = runs[name]
            fresh.get(name, lambda: None)()
            time.sleep(settle)
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--elements", type=int, default=20_000, help="per schema")
    parser.add_argument("--repeats", type=int, default=7, help="runs per operation")
    parser.add_argument("--settle", type=float, default=0.1,
                        help="seconds to pause before each timed run (default: 0.1)")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.elements < 40:
        parser.error("--repeats must be >= 1 and --elements >= 40 (some schemas take an "
                     "eighth or a fortieth of them)")
    print(f"{args.elements:,} elements per schema, medians of {args.repeats} runs, "
          f"tensorflow {tf.__version__}, {os.cpu_count()} cpus, {args.settle:g} s pauses")
    header = ("schema", "save", "load", "load(batch_size=512)")
    print(f"{header[0]:46s} {header[1]:>6s} {header[2]:>6s} {header[3]:>21s}")
    for name, (dataset, varying) in schemas(args.elements).items():
        work = Path(tempfile.mkdtemp(prefix="schemas-"))
        try:
            m = measure(dataset, varying, work, args.repeats, args.settle)
        finally:
            shutil.rmtree(work)
        save = m["save super_serial"] / m["save tf.data"]
        load = m["load super_serial"] / m["load tf.data"]
        batched = m["load batch_size=512"] / m.get("load tf.data ragged_batch",
                                                   m["load tf.data"])
        print(f"{name:46s} {save:6.2f} {load:6.2f} {batched:21.2f}")
    print("ratios: super_serial median / tf.data median (<= 1.0 is better); load(batch_size=512) "
          "against tf.data's load\nwith .batch(512), or .ragged_batch(512) where dense shapes "
          "vary: the same batches")


if __name__ == "__main__":
    main()

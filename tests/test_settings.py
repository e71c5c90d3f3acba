"""save, load and verify under global settings a program may have switched on before them:
TensorFlow's NumPy behaviour, its check of numerics, TensorFlow 1's graph mode (helper-98).
Each runs in a fresh process, as none of them can be switched back off for the rest of the
suite (the pipelines load traces are kept for each schema)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

ELEMENTS = r'''
import numpy as np, tensorflow as tf
import super_serial

def elements():
    """Every kind of component, and integers at their dtypes' bounds."""
    for i in range(5):
        yield {"u32": np.array([0, 2**32 - 1, i], np.uint32), "i8": np.int8(-128 + i),
               "u64": np.uint64(2**64 - 1 - i), "i64": np.int64(-2**63 + i),
               "flag": np.bool_(i % 2), "f16": np.float16(i / 3),
               "unknown": np.arange(i, dtype=np.int32), "text": b"\x00\xff" * i,
               "ragged": tf.ragged.constant([[i], [i, i + 1]], dtype=tf.int64),
               "sparse": tf.SparseTensor([[0, i]], [float(i)], [1, 5])}

SPEC = {"u32": tf.TensorSpec([3], tf.uint32), "i8": tf.TensorSpec([], tf.int8),
        "u64": tf.TensorSpec([], tf.uint64), "i64": tf.TensorSpec([], tf.int64),
        "flag": tf.TensorSpec([], tf.bool), "f16": tf.TensorSpec([], tf.float16),
        "unknown": tf.TensorSpec([None], tf.int32), "text": tf.TensorSpec([], tf.string),
        "ragged": tf.RaggedTensorSpec([2, None], tf.int64, ragged_rank=1),
        "sparse": tf.SparseTensorSpec([1, 5], tf.float32)}

def same(a, b):
    a, b = tf.nest.flatten(a, expand_composites=True), tf.nest.flatten(b, expand_composites=True)
    def value(x):  # the bytes of numbers (NaN payloads, -0.0), the strings themselves
        return np.asarray(x.numpy()).tolist() if x.dtype == tf.string else x.numpy().tobytes()
    return len(a) == len(b) and all(x.dtype == y.dtype and x.shape == y.shape
                                    and value(x) == value(y) for x, y in zip(a, b))
'''

NUMPY_BEHAVIOUR = ELEMENTS + r'''
import sys
tf.experimental.numpy.experimental_enable_numpy_behavior(dtype_conversion_mode=sys.argv[2])
path = sys.argv[1] + "/data.tfrecord"
dataset = tf.data.Dataset.from_generator(elements, output_signature=SPEC)
super_serial.save(dataset, path, num_shards=2)
expected = list(dataset)
assert all(map(same, super_serial.load(path), expected)), "element-wise"
assert all(map(same, super_serial.load(path, batch_size=2), dataset.ragged_batch(2))), "batched"

@tf.function
def total():  # a load inside a tf.function
    return super_serial.load(path).reduce(np.int64(0), lambda n, e: n + e["i64"] - e["i64"] + 1)

assert int(total()) == 5, "in a tf.function"
assert super_serial.verify(path)["num_records"] == 5
print("ok")
'''


def run(script: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True,
                          text=True, timeout=300, env=env)


@pytest.mark.parametrize("mode", ["all", "safe", "legacy"])
def test_numpy_behaviour(tmp_path, mode):
    """In modes "all" and "safe", TensorFlow refuses a Python int past int32 ("OverflowError:
    Python int 9223372036854775807 too large to convert to np.int32"): load's int64 bounds
    were Python ints, and every load and verify failed, where tf.data's own load works."""
    result = run(NUMPY_BEHAVIOUR, str(tmp_path), mode)
    assert result.returncode == 0 and result.stdout == "ok\n", result.stderr[-3000:]


CHECK_NUMERICS = ELEMENTS + r'''
import sys
path = sys.argv[1] + "/data.tfrecord"
super_serial.save(tf.data.Dataset.from_tensor_slices({"x": [1.0, np.nan, np.inf]}), path)
tf.debugging.enable_check_numerics()
try:
    super_serial.verify(path)
except super_serial.SuperSerialError as error:
    print("refused:", type(error).__name__)
except tf.errors.InvalidArgumentError as error:
    print("TensorFlow:", "Detected Infinity or NaN" in error.message)
'''


def test_verify_passes_on_what_check_numerics_finds_as_it_is(tmp_path):
    """With `tf.debugging.enable_check_numerics()`, the NaN of a record verify parses raised
    TensorFlow's error, which verify gave as CorruptDataError: the files, which are whole,
    called corrupt. It is the program's own error now, as a load (or tf.data's) raises."""
    result = run(CHECK_NUMERICS, str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == "TensorFlow: True\n"


GRAPH_MODE = ELEMENTS + r'''
import sys
path = sys.argv[1] + "/data.tfrecord"
super_serial.save(tf.data.Dataset.from_generator(elements, output_signature=SPEC), path)
tf.compat.v1.disable_eager_execution()
for name, call in (("save", lambda: super_serial.save(tf.data.Dataset.range(3), path)),
                   ("verify", lambda: super_serial.verify(path))):
    try:
        call()
    except super_serial.SuperSerialError as error:
        print(name, error)
element = tf.compat.v1.data.make_one_shot_iterator(super_serial.load(path)).get_next()
with tf.compat.v1.Session() as session:
    print("loaded", [int(session.run(element)["i64"]) + 2**63 for _ in range(5)])
'''


def test_save_and_verify_say_that_eager_execution_was_turned_off(tmp_path):
    """They said "call it outside" a tf.function or graph, where there is no outside. The
    load in a TensorFlow 1 session they point to is taken here too."""
    result = run(GRAPH_MODE, str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    turned_off = ("() needs TensorFlow 2's eager execution, which is off here: call it outside "
                  "any graph, where the program has not turned it off "
                  "(tf.compat.v1.disable_eager_execution() or disable_v2_behavior()); load() "
                  "works in a graph")
    assert result.stdout.splitlines() == [f"save save{turned_off}", f"verify verify{turned_off}",
                                          "loaded [0, 1, 2, 3, 4]"]

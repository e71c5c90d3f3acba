"""Fuzz: mutated headers and records give super_serial or TensorFlow errors, never a crash or hang.

Everything that runs TensorFlow on a fuzzed input runs in a worker subprocess, so that a crash of
the interpreter (a segfault in a kernel) fails the test with the input that caused it instead of
killing the test run.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import yaml
from conftest import write_records
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from super_serial import SuperSerialError, read_header, save

REPO_ROOT = Path(__file__).resolve().parent.parent
N = 12
FUZZ = settings(
    deadline=None,
    database=None,  # nothing written into the repository
    derandomize=True,  # the same inputs on every run: a failure is never a fluke
    # No shrinking: shrinking a crash restarts the worker (and TensorFlow) at every step.
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                           HealthCheck.data_too_large],
)
OK_ITERATION = ("ok", "tf:", "super_serial:")  # outcomes iteration may have


def dataset() -> tf.data.Dataset:
    ids = np.arange(N)
    ragged = tf.ragged.constant([[[j] * (j % 3) for j in range(i % 4)] for i in ids],
                                dtype=tf.int32, ragged_rank=2)
    ds = tf.data.Dataset.from_tensor_slices({
        "x": np.stack([ids, -ids], axis=1).astype(np.float32),
        "y": ids.astype(np.int64) * 1_000_003,
        "z": ids / 7,
        "s": [f"s{i}".encode() * i for i in ids],
        "r": ragged,
    })
    return ds.map(lambda d: {**d, "v": tf.fill([d["y"] % 5, 2], tf.cast(d["y"], tf.int16))})


# ---- the worker ------------------------------------------------------------------------------

WORKER = textwrap.dedent(r"""
    import json, sys, traceback
    import tensorflow as tf
    import super_serial

    def outcome(error):
        if isinstance(error, super_serial.SuperSerialError):
            return "super_serial:" + type(error).__name__, str(error)[:500]
        if isinstance(error, tf.errors.OpError):
            return "tf:" + type(error).__name__, error.message[-500:]
        if isinstance(error, UnicodeDecodeError) and "tensorflow" in traceback.format_exc():
            # TensorFlow's own parse error quotes the undecodable record bytes and then fails
            # to decode its message: still an error raised, never wrong data.
            return "tf:UnicodeDecodeError", str(error)[:500]
        return "other:" + type(error).__name__, traceback.format_exc()[-3000:]

    print("ready", flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        tfrecord, header = request["tfrecord"], request["header"]
        out = {}
        try:
            dataset = super_serial.load(tfrecord, header)
            out["load"] = "ok"
        except Exception as e:
            out["load"], out["load_message"] = outcome(e)
        if out["load"] == "ok":
            count, misshaped = 0, []
            try:
                for element in dataset.take(request["limit"]):
                    for spec, value in zip(tf.nest.flatten(dataset.element_spec),
                                           tf.nest.flatten(element)):
                        if not spec.is_compatible_with(value):
                            misshaped.append(f"{value.shape} for {spec}")
                    count += 1
                out["iterate"] = "ok"
            except Exception as e:
                out["iterate"], out["iterate_message"] = outcome(e)
            out["count"], out["misshaped"] = count, misshaped[:3]
            try:
                out["verified"] = super_serial.verify(tfrecord, header)["num_records"]
                out["verify"] = "ok"
            except Exception as e:
                out["verify"], out["verify_message"] = outcome(e)
        print(json.dumps(out), flush=True)
""")


class Worker:
    """A subprocess that loads, iterates and verifies the pairs it is sent, one at a time."""

    def __init__(self, log: Path):
        self.log = log
        self.process = None
        self.crashes = 0

    def start(self):
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(REPO_ROOT)}
        self.stderr = open(self.log, "ab")
        self.process = subprocess.Popen(
            [sys.executable, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.stderr, env=env, text=True, bufsize=1)
        assert self.readline(timeout=120) == "ready\n", "the fuzz worker did not start"

    def readline(self, timeout: float) -> str:
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        if not ready:
            self.stop()
            raise AssertionError(f"the input made super_serial hang for over {timeout} s")
        line = self.process.stdout.readline()
        if not line:
            code = self.process.wait()
            self.close()
            self.crashes += 1
            tail = self.log.read_bytes()[-1500:].decode(errors="replace")
            name = signal.Signals(-code).name if code < 0 else f"exit status {code}"
            raise AssertionError(f"the input crashed the interpreter ({name}):\n{tail}")
        return line

    def ask(self, tfrecord_path, header_path, limit: int = 10_000) -> dict:
        if self.process is None:
            self.start()
        request = {"tfrecord": str(tfrecord_path), "header": str(header_path), "limit": limit}
        try:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            pass  # it died after its last answer: readline reports how
        return json.loads(self.readline(timeout=60))

    def stop(self):
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.close()

    def close(self):
        self.process.stdin.close()
        self.process.stdout.close()
        self.process = None
        self.stderr.close()


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    w = Worker(tmp_path_factory.mktemp("worker") / "stderr.log")
    yield w
    w.stop()


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """Good saves: plain, GZIP, and three shards; each in its own folder."""
    out = {}
    for name, options in {"plain": {}, "gzip": {"compression": "GZIP"},
                          "shards": {"num_shards": 3}}.items():
        folder = tmp_path_factory.mktemp(name)
        save(dataset(), str(folder / "data.tfrecord"), str(folder / "data.header.yaml"),
             **options)
        out[name] = folder
    return out


def copy_pair(source: Path, target: Path) -> tuple[Path, Path]:
    target.mkdir(parents=True, exist_ok=True)
    for item in target.iterdir():
        item.unlink()
    for item in source.iterdir():
        shutil.copyfile(item, target / item.name)
    return target / "data.tfrecord", target / "data.header.yaml"


def test_worker_reports_a_good_pair(worker, pristine):
    result = worker.ask(pristine["plain"] / "data.tfrecord", pristine["plain"] / "data.header.yaml")
    assert result == {"load": "ok", "iterate": "ok", "count": N, "misshaped": [],
                      "verify": "ok", "verified": N}


def check_worker_result(result: dict, expected_count: int | None):
    """Outcomes a fuzzed pair may have: errors of super_serial or TensorFlow, or every element."""
    assert result["load"] == "ok" or result["load"].startswith("super_serial:"), result
    if result["load"] != "ok":
        return
    assert result["iterate"].startswith(OK_ITERATION), result
    assert result["verify"] in ("ok", "super_serial:CorruptDataError"), result
    if result["iterate"] == "ok":
        assert not result["misshaped"], result
        if expected_count is not None:
            assert result["count"] == expected_count, f"elements lost silently: {result}"
    # verify reads every record as load does: both succeed, or both fail.
    assert (result["iterate"] == "ok") == (result["verify"] == "ok"), result
    if result["verify"] == "ok":
        assert result["verified"] == result["count"], result


# ---- (a) mutated headers -----------------------------------------------------------------------

FIELD_NAMES = ["format", "version", "features", "structure", "num_records", "shards",
               "compression", "block_records", "layout", "file", "num_bytes", "dtype",
               "dtype_enum", "shape", "encoding", "path", "ragged_rank", "row_splits_dtype",
               "x", "y", "z", "s", "r", "v", "v#shape", "r#row_lengths_0"]
INTERESTING = [None, True, False, 0, 1, -1, 2, 3, 62, 1024, 2**16, 2**31 - 1, 2**31, 2**40,
               2**63 - 1, 2**63, 2**64, -(2**63), 0.5, float("inf"), float("nan"), "",
               "super_serial", "float32", "float64", "int8", "string", "uint64", "bool",
               "complex64", "int64", "float", "bytes", "raw", "GZIP", "ZLIB", "sequential",
               "round_robin", "data.tfrecord", "data.header.yaml", "..", "/", "x", "y",
               [], {}, [None], [0], [2], [2**40], [None, None], [0, 2**62], ["x"], [0, "x"]]
json_values = st.recursive(
    st.sampled_from(INTERESTING) | st.integers(-(2**66), 2**66) | st.text(max_size=8)
    | st.floats(allow_nan=True),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(FIELD_NAMES) | st.text(max_size=4), inner, max_size=4),
    max_leaves=8,
)


def locations(node, prefix=()) -> list[tuple]:
    """Every key path into a nested dict/list."""
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += locations(value, prefix + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += locations(value, prefix + (i,))
    return out


def apply_edit(header, location, operation, value):
    if not location:
        return value if operation == "replace" else header
    parent = header
    for key in location[:-1]:
        parent = parent[key]
    key = location[-1]
    if operation == "delete":
        del parent[key]
    elif operation == "replace":
        parent[key] = value
    elif operation == "insert" and isinstance(parent[key], dict):
        parent[key][str(value)[:6] if not isinstance(value, str) else value] = value
    elif operation == "insert" and isinstance(parent[key], list):
        parent[key].append(value)
    return header


class NoAliasDumper(yaml.SafeDumper):
    """Writes values that appear twice in full instead of as YAML aliases."""

    def ignore_aliases(self, data):
        return True


@st.composite
def mutated_header_text(draw, base_headers):
    header = json.loads(json.dumps(draw(st.sampled_from(base_headers))))
    for _ in range(draw(st.integers(1, 4))):
        places = locations(header) if isinstance(header, (dict, list)) else [()]
        location = places[draw(st.integers(0, len(places) - 1))]
        operation = draw(st.sampled_from(["delete", "replace", "replace", "insert"]))
        header = apply_edit(header, location, operation, draw(json_values))
    text = yaml.dump(header, Dumper=NoAliasDumper, allow_unicode=True)
    for _ in range(draw(st.integers(0, 2))):  # edits of the text itself
        position = draw(st.integers(0, len(text)))
        cut = draw(st.integers(0, 3))
        text = text[:position] + draw(st.text(max_size=4)) + text[position + cut:]
    if draw(st.integers(0, 19)) == 0:
        text = draw(st.text(max_size=200))
    return text


class Timeout(Exception):
    pass


def alarm(seconds):
    def handler(signum, frame):
        raise Timeout(f"no answer in {seconds} s")

    signal.signal(signal.SIGALRM, handler)
    signal.alarm(seconds)


def base_headers(pristine) -> list:
    v1 = yaml.safe_load((pristine["plain"] / "data.header.yaml").read_text())
    sharded = yaml.safe_load((pristine["shards"] / "data.header.yaml").read_text())
    legacy = {"x": {"shape": [2], "dtype": 1}, "y": {"shape": [], "dtype": 9}}
    return [v1, sharded, legacy]


@pytest.fixture(scope="module")
def headers(pristine):
    return base_headers(pristine)


def test_mutated_headers(worker, pristine, headers, tmp_path):
    tfrecord_path, header_path = copy_pair(pristine["plain"], tmp_path / "pair")
    shard_source = pristine["shards"]
    for item in shard_source.iterdir():  # the shards too, so that sharded headers find files
        if item.name != "data.header.yaml":
            shutil.copyfile(item, tmp_path / "pair" / item.name)

    @settings(FUZZ, max_examples=150)
    @given(text=mutated_header_text(headers))
    def run(text):
        header_path.write_text(text)
        alarm(20)
        try:
            read_header(header_path)
        except SuperSerialError:
            pass
        finally:
            signal.alarm(0)
        check_worker_result(worker.ask(tfrecord_path, header_path, limit=100), None)

    run()


# ---- (b) mutated record files --------------------------------------------------------------------


def frames(data: bytes) -> list[bytes]:
    """The payloads of an uncompressed TFRecord file."""
    out, offset = [], 0
    while offset < len(data):
        (length,) = struct.unpack("<Q", data[offset : offset + 8])
        out.append(data[offset + 12 : offset + 12 + length])
        offset += 16 + length
    return out


def mutate_bytes(draw, data: bytes) -> bytes:
    data = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate"]))
        position = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "flip" and data:
            data[position] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and data:
            data[position] = draw(st.integers(0, 255))
        elif kind == "insert":
            data[position:position] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del data[position : position + draw(st.integers(1, 8))]
        elif kind == "truncate":
            del data[position:]
    return bytes(data)


def set_sizes(header_path: Path, tfrecord_folder: Path):
    """Patches each shard's num_bytes to the file's size, so that only the content is wrong."""
    header = yaml.safe_load(header_path.read_text())
    for shard in header["shards"]:
        shard["num_bytes"] = (tfrecord_folder / shard["file"]).stat().st_size
    header_path.write_text(yaml.safe_dump(header))


@pytest.mark.parametrize("source", ["plain", "gzip", "shards"])
def test_mutated_record_bytes(worker, pristine, tmp_path, source):
    """Random byte edits anywhere in a record file (its size fixed up in the header, or not)."""
    tfrecord_path, header_path = copy_pair(pristine[source], tmp_path / "pair")
    header = yaml.safe_load(header_path.read_text())
    victims = [s["file"] for s in header["shards"] if s["num_bytes"]]
    original = {name: (pristine[source] / name).read_bytes() for name in victims}

    @settings(FUZZ, max_examples={"plain": 15, "gzip": 12, "shards": 8}[source])
    @given(data=st.data())
    def run(data):
        copy_pair(pristine[source], tmp_path / "pair")
        name = data.draw(st.sampled_from(victims))
        mutated = mutate_bytes(data.draw, original[name])
        (tmp_path / "pair" / name).write_bytes(mutated)
        if data.draw(st.booleans()):
            set_sizes(header_path, tmp_path / "pair")
        result = worker.ask(tfrecord_path, header_path)
        check_worker_result(result, N)
        if mutated != original[name] and result["load"] == "ok" and source != "gzip":
            # Any change to an uncompressed TFRecord frame breaks a checksum.
            assert result["iterate"] != "ok", f"a changed file loaded without error: {result}"

    run()


def test_mutated_payloads_with_valid_checksums(worker, pristine, tmp_path):
    """Edits inside records whose frames are rewritten, so that checksums pass and the bytes
    reach the parser: every element comes out with its declared shape, or an error is raised."""
    tfrecord_path, header_path = copy_pair(pristine["plain"], tmp_path / "pair")
    payloads = frames((pristine["plain"] / "data.tfrecord").read_bytes())
    assert len(payloads) == N

    @settings(FUZZ, max_examples=20)
    @given(data=st.data())
    def run(data):
        mutated = list(payloads)
        for _ in range(data.draw(st.integers(1, 3))):
            index = data.draw(st.integers(0, N - 1))
            mutated[index] = mutate_bytes(data.draw, mutated[index])
        write_records(tfrecord_path, mutated)
        set_sizes(header_path, tfrecord_path.parent)
        check_worker_result(worker.ask(tfrecord_path, header_path), N)

    run()


# ---- (c) random bytes as records -----------------------------------------------------------------

protobuf_ish = st.one_of(
    st.binary(max_size=64),
    # Example{features{feature{key: <name>, value: <random>}}} with a real key name.
    st.tuples(st.sampled_from([b"x", b"y", b"z", b"s", b"v", b"v#shape", b"r#row_lengths_0"]),
              st.binary(max_size=24)).map(
        lambda kv: (lambda entry: b"\x0a" + bytes([len(entry) + 2]) + b"\x0a"
                    + bytes([len(entry)]) + entry)(
            b"\x0a" + bytes([len(kv[0])]) + kv[0] + b"\x12" + bytes([len(kv[1])]) + kv[1])),
)


def test_random_records(worker, pristine, tmp_path):
    """Random (and protobuf-like) records under a valid header with matching counts and sizes."""
    tfrecord_path, header_path = copy_pair(pristine["plain"], tmp_path / "pair")
    template = yaml.safe_load(header_path.read_text())

    @settings(FUZZ, max_examples=25)
    @given(records=st.lists(protobuf_ish, min_size=0, max_size=5))
    def run(records):
        write_records(tfrecord_path, records)
        header = json.loads(json.dumps(template))
        header["num_records"] = len(records)
        header["shards"][0].update(num_records=len(records),
                                   num_bytes=tfrecord_path.stat().st_size)
        header_path.write_text(yaml.safe_dump(header))
        check_worker_result(worker.ask(tfrecord_path, header_path), len(records))

    run()


def test_worker_reports_a_crash(worker, pristine):
    """The harness itself: a crash of the worker fails the test that sent the input (run last,
    so that no other test pays for the restart)."""
    worker.ask(pristine["plain"] / "data.tfrecord", pristine["plain"] / "data.header.yaml")
    worker.process.send_signal(signal.SIGSEGV)
    with pytest.raises(AssertionError, match=r"crashed the interpreter \(SIGSEGV\)"):
        worker.ask(pristine["plain"] / "data.tfrecord", pristine["plain"] / "data.header.yaml")

"""Multi-worker training: with the FILE auto-shard policy each worker reads only its own shards."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf
from tensorflow.python.distribute import input_ops  # what experimental_distribute_dataset uses

from super_serial import load, save

REPO_ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).resolve().parent / "multiworker_worker.py"
NUM_WORKERS = 2
NUM_SHARDS = 4
WORKER_TIMEOUT = 240  # seconds, for the whole two-process run


def tiny_dataset(n: int) -> tf.data.Dataset:
    return tf.data.Dataset.range(n).map(
        lambda i: {"id": i, "x": tf.fill([2], tf.cast(i % 7, tf.float32) / 7)})


def ids_per_file(tfrecord_path: str, header: dict) -> list[set[int]]:
    """The ids in each shard file, read with plain tf.data (independent of `load`)."""
    folder = os.path.dirname(tfrecord_path)
    spec = {"id": tf.io.FixedLenFeature([], tf.int64)}
    out = []
    for shard in header["shards"]:
        records = tf.data.TFRecordDataset(os.path.join(folder, shard["file"]),
                                          compression_type=header["compression"] or "")
        out.append({int(tf.io.parse_single_example(r, spec)["id"]) for r in records})
    return out


def expected_worker_ids(files: list[set[int]], worker: int) -> set[int]:
    """FILE sharding: worker w of n reads files w, w + n, w + 2n, ..."""
    return set().union(*files[worker::NUM_WORKERS])


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def run_workers(tfrecord_path: str, global_batch_size: int) -> list[dict]:
    cluster = {"worker": [f"127.0.0.1:{port}" for port in free_ports(NUM_WORKERS)]}
    processes = []
    try:
        for index in range(NUM_WORKERS):
            env = {
                **os.environ,
                "TF_CONFIG": json.dumps({"cluster": cluster,
                                         "task": {"type": "worker", "index": index}}),
                "TF_CPP_MIN_LOG_LEVEL": "2",
                "CUDA_VISIBLE_DEVICES": "",
                "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
            }
            processes.append(subprocess.Popen(
                [sys.executable, str(WORKER), tfrecord_path, str(global_batch_size)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                cwd=REPO_ROOT))
        results = []
        for index, process in enumerate(processes):
            stdout, stderr = process.communicate(timeout=WORKER_TIMEOUT)
            assert process.returncode == 0, f"worker {index} failed:\n{stderr[-4000:]}"
            lines = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
            assert len(lines) == 1, f"worker {index} printed no result:\n{stdout[-2000:]}"
            results.append(json.loads(lines[0][len("RESULT "):]))
        return results
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.communicate()


def test_multi_worker_mirrored_strategy_reads_own_shards(tmp_path):
    tfrecord_path = str(tmp_path / "data.tfrecord")
    # Enough records that every one of the 4 round-robin shards holds some blocks.
    header = save(tiny_dataset(4 * 1024 + 100), tfrecord_path, num_shards=NUM_SHARDS)
    files = ids_per_file(tfrecord_path, header)
    assert all(files), f"a shard is empty: {[len(f) for f in files]}"
    all_ids = set(range(header["num_records"]))

    results = sorted(run_workers(tfrecord_path, global_batch_size=64), key=lambda r: r["task"])

    assert [r["task"] for r in results] == list(range(NUM_WORKERS))
    for worker, result in enumerate(results):
        assert result["num_replicas_in_sync"] == NUM_WORKERS
        assert result["steps"] == 2
        for key in ("ids", "shuffled_ids"):
            seen = result[key]
            assert len(seen) == len(set(seen)), f"worker {worker} saw an element twice ({key})"
            assert set(seen) == expected_worker_ids(files, worker), (
                f"worker {worker} did not read exactly its files {worker}::{NUM_WORKERS} ({key})")
    for key in ("ids", "shuffled_ids"):
        assert not set(results[0][key]) & set(results[1][key]), f"workers overlap ({key})"
        assert set(results[0][key]) | set(results[1][key]) == all_ids, key
    # The gradient was all-reduced: both workers trained the same, non-zero weight.
    assert results[0]["weight"] == results[1]["weight"] != 0.0


# ---- the same FILE auto-sharding, in one process ----------------------------------------------


def file_policy() -> tf.data.Options:
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.FILE
    return options


@pytest.mark.parametrize("save_options", [{"num_shards": 4}, {"shard_size": 200}],
                         ids=["round_robin", "shard_size"])
@pytest.mark.parametrize("load_options", [
    {}, {"batch_size": 3}, {"shuffle_files": True}, {"shuffle_files": True, "seed": 1},
    {"deterministic": False},
], ids=["default", "batched", "shuffled", "shuffled_seeded", "nondeterministic"])
def test_file_auto_shard_gives_each_worker_its_files(paths, monkeypatch, save_options,
                                                     load_options):
    monkeypatch.setattr("super_serial.core._TARGET_BLOCK_BYTES", 200)  # blocks of 4 records
    tfrecord_path, _ = paths
    header = save(tiny_dataset(40), tfrecord_path, **save_options)
    files = ids_per_file(tfrecord_path, header)
    assert len(files) >= NUM_SHARDS and all(files), [len(f) for f in files]
    seen = []
    for worker in range(NUM_WORKERS):
        dataset = load(tfrecord_path, **load_options).with_options(file_policy())
        sharded = input_ops.auto_shard_dataset(dataset, NUM_WORKERS, worker)
        ids = [int(i) for element in sharded for i in tf.reshape(element["id"], [-1])]
        assert sorted(ids) == sorted(expected_worker_ids(files, worker))
        seen.append(set(ids))
    assert not seen[0] & seen[1]
    assert seen[0] | seen[1] == set(range(40))


def test_file_auto_shard_needs_as_many_files_as_workers(paths):
    tfrecord_path, _ = paths
    save(tiny_dataset(10), tfrecord_path, num_shards=2)
    dataset = load(tfrecord_path).with_options(file_policy())
    sharded = input_ops.auto_shard_dataset(dataset, 3, 0)
    with pytest.raises(tf.errors.InvalidArgumentError, match="FILE based sharding"):
        list(sharded)


@pytest.mark.parametrize("load_options", [{}, {"shuffle_files": True}, {"batch_size": 2},
                                          {"shuffle_files": True, "seed": 3, "batch_size": 2}])
def test_auto_shard_of_one_file_falls_back_to_data(paths, load_options):
    """AUTO shards one file by its elements (DATA), as for `load()`; with `shuffle_files=True`,
    which does nothing for one file, load made a list of files, which AUTO shards by file:
    "Could not apply FILE based sharding: the dataset only has 1 file(s)". Found by
    helper-73."""
    tfrecord_path, _ = paths
    save(tiny_dataset(10), tfrecord_path)
    seen = []
    for worker in range(NUM_WORKERS):
        sharded = input_ops.auto_shard_dataset(load(tfrecord_path, **load_options),
                                               NUM_WORKERS, worker)
        seen.append([int(i) for element in sharded for i in tf.reshape(element["id"], [-1])])
    if "batch_size" in load_options:  # whole batches, dealt in turn
        assert seen == [[0, 1, 4, 5, 8, 9], [2, 3, 6, 7]]
    else:
        assert seen == [[0, 2, 4, 6, 8], [1, 3, 5, 7, 9]]


@pytest.mark.parametrize("drop_remainder", [False, True])
@pytest.mark.parametrize("saved", [{}, {"num_shards": 3}])
def test_batch_size_holds_under_a_one_replica_strategy(tmp_path, saved, drop_remainder):
    """tf.distribute's data-sharding rewrite turns a `rebatch` into the legacy one, which kept
    one replica's batches as large as the blocks parsed (50 here): the batch sizes asked for
    must come out, as they do from `load(...).batch(8)`."""
    tfrecord_path = str(tmp_path / "data.tfrecord")
    save(tiny_dataset(50), tfrecord_path, **saved)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    expected = [8] * 6 + ([] if drop_remainder else [2])
    for dataset in (load(tfrecord_path).batch(8, drop_remainder),
                    load(tfrecord_path, batch_size=8, drop_remainder=drop_remainder)):
        batches = list(strategy.experimental_distribute_dataset(dataset))
        assert [int(b["id"].shape[0]) for b in batches] == expected
        assert [int(i) for b in batches for i in b["id"]] == list(range(sum(expected)))


@pytest.fixture(scope="module")
def data_service():
    """A tf.data service in this process: a dispatcher and NUM_WORKERS workers."""
    service = tf.data.experimental.service
    dispatcher = service.DispatchServer()
    address = dispatcher.target.split("://")[1]
    workers = [service.WorkerServer(service.WorkerConfig(dispatcher_address=address))
               for _ in range(NUM_WORKERS)]
    yield dispatcher.target
    for worker in workers:
        worker.stop()
    dispatcher.stop()


def served_ids(dataset, target: str, **options) -> list[int]:
    served = dataset.apply(tf.data.experimental.service.distribute(service=target, **options))
    return sorted(int(i) for element in served for i in tf.reshape(element["id"], [-1]))


@pytest.mark.parametrize("num_shards", [None, NUM_SHARDS])
def test_the_tf_data_service_as_the_readme_says(tmp_path, data_service, num_shards):
    """README, Multi-worker training: each worker's whole copy (parallel_epochs) works;
    dynamic sharding (distributed_epoch) is refused by TensorFlow, with messages that name
    load's own ops (found by helper-58; `tf.data.Dataset.load`'s datasets are refused too)."""
    n, path = 40, str(tmp_path / "data.tfrecord")
    save(tiny_dataset(n), path, num_shards=num_shards)
    assert served_ids(load(path), data_service, processing_mode="parallel_epochs") == sorted(
        list(range(n)) * NUM_WORKERS)
    with pytest.raises(tf.errors.OpError, match=(
            "expected to contain 40 elements but contained only" if num_shards else
            "Cannot create split providers for dataset of type FixedLengthRecordDataset")):
        served_ids(load(path), data_service, processing_mode="distributed_epoch")

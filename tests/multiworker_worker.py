"""One worker of the MultiWorkerMirroredStrategy test (tests/test_multiworker.py).

Run with TF_CONFIG set: `python multiworker_worker.py TFRECORD_PATH GLOBAL_BATCH_SIZE`. Loads the
dataset with the FILE auto-shard policy, distributes it, trains two steps of a one-variable model
whose gradients are all-reduced across the workers, reads the rest of its share, then does the
same read with `shuffle_files=True`. Prints one line: `RESULT {json}` with the ids it saw.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

from super_serial import load  # noqa: E402

TRAIN_STEPS = 2


def file_sharded(dataset: tf.data.Dataset) -> tf.data.Dataset:
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.FILE
    return dataset.with_options(options)


def local_ids(strategy, per_replica) -> list[int]:
    return [i for t in strategy.experimental_local_results(per_replica) for i in t.numpy().tolist()]


def main(tfrecord_path: str, global_batch_size: int):
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        weight = tf.Variable(0.0)

    @tf.function
    def train_step(batch):
        def replica_step(element):
            x = tf.cast(element["x"], tf.float32)
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((weight * x - 1.0) ** 2)
            gradient = tape.gradient(loss, weight)
            gradient = tf.distribute.get_replica_context().all_reduce("MEAN", gradient)
            weight.assign_sub(0.01 * gradient)
            return element["id"]

        return strategy.run(replica_step, args=(batch,))

    dataset = file_sharded(load(tfrecord_path, batch_size=global_batch_size))
    ids, steps = [], 0
    for batch in strategy.experimental_distribute_dataset(dataset):
        if steps < TRAIN_STEPS:
            ids += local_ids(strategy, train_step(batch))
            steps += 1
        else:
            ids += local_ids(strategy, batch["id"])

    shuffled = file_sharded(load(tfrecord_path, shuffle_files=True).batch(global_batch_size))
    shuffled_ids = []
    for batch in strategy.experimental_distribute_dataset(shuffled):
        shuffled_ids += local_ids(strategy, batch["id"])

    result = {
        "task": strategy.cluster_resolver.task_id,
        "num_replicas_in_sync": strategy.num_replicas_in_sync,
        "steps": steps,
        "weight": float(weight.numpy()),
        "ids": ids,
        "shuffled_ids": shuffled_ids,
    }
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))

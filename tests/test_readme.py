"""The README's examples, run: its Python blocks, its sample header and its command-line session.

Each example is found by its text in README.md, so that changing the README without the code,
or the code without the README, fails here."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_same_elements, assert_same_multiset, canonical

import super_serial
from super_serial import cli

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def fenced(language: str) -> list[str]:
    """The README's fenced blocks of `language` ("" for those that name none), in order."""
    return re.findall(rf"^```{language}\n(.*?)^```$", README, re.M | re.S)


def python_block(marker: str) -> str:
    """The one Python block of the README that holds `marker`."""
    found = [block for block in fenced("python") if marker in block]
    assert len(found) == 1, f"{len(found)} Python blocks of README.md hold {marker!r}"
    return found[0]


def run_block(code: str, namespace: dict) -> dict:
    exec(compile(code, "README.md", "exec"), namespace)
    return namespace


# The marker of each Python block, and the test that runs it (or why none does)
PYTHON_BLOCKS = {
    'super_serial.save(dataset, "data.tfrecord")': "test_the_first_example",
    'header = super_serial.save(ds, "train.tfrecord")': "test_the_usage_example",
    "num_shards=64": "test_the_shards_example",
    "shuffle_files=True": "test_the_loading_example",
    "options.autotune.enabled = False": "test_the_options_example",
    "MultiWorkerMirroredStrategy()": None,  # TF_CONFIG on each machine: test_multiworker.py
    "super_serial.merge(": "test_the_merge_example",
}


def test_each_python_block_is_run_here_or_said_why_not():
    blocks = fenced("python")
    markers = [[m for m in PYTHON_BLOCKS if m in block] for block in blocks]
    assert all(len(m) == 1 for m in markers), [b.splitlines()[0] for b in blocks]
    assert sorted(m[0] for m in markers) == sorted(PYTHON_BLOCKS)
    tests = {name for name in PYTHON_BLOCKS.values() if name}
    assert tests <= set(globals()), tests - set(globals())


def test_the_first_example(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    original = tf.data.Dataset.from_tensor_slices({"x": np.arange(5.0), "s": list("abcde")})

    namespace = run_block(python_block('super_serial.save(dataset, "data.tfrecord")'),
                          {"dataset": original})

    assert (tmp_path / "data.tfrecord.header.yaml").is_file()  # "records + data.tfrecord..."
    assert_same_elements(original, namespace["dataset"])


def test_the_usage_example(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    images = rng.random((6, 64, 64, 3), dtype=np.float32)
    token_lists = [list(range(n)) for n in (3, 0, 5, 1, 2, 4)]
    labels = np.arange(6, dtype=np.int32)
    stand_ins = {"images": images, "token_lists": token_lists, "labels": labels}
    code = python_block('header = super_serial.save(ds, "train.tfrecord")')
    original = run_block(code[:code.index("header = ")], dict(stand_ins))["ds"]  # built so

    namespace = run_block(code, dict(stand_ins))

    assert namespace["header"]["num_records"] == 6
    assert_same_elements(original, namespace["ds"])
    assert_same_elements(original, namespace["val"])
    assert (tmp_path / "headers" / "val.yaml").is_file()
    assert_same_elements(original.batch(256), namespace["batches"])
    raw = next(iter(namespace["raw"]))  # "int64/float32/string"
    assert raw[1].dtype == tf.int64 and raw[0]["tokens"].dtype == tf.int64
    assert raw[0]["image"].dtype == tf.float32


def test_the_shards_example(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    ds = tf.data.Dataset.range(5000).map(lambda i: {"id": i, "x": tf.fill([7], i)})

    run_block(python_block("num_shards=64"), {"super_serial": super_serial, "ds": ds})

    shards = sorted(p.name for p in (tmp_path / "shards").iterdir())
    assert shards[0] == "train.tfrecord-00000-of-00064" and len(shards) == 65  # and the header
    assert_same_elements(ds, super_serial.load("shards/train.tfrecord"))
    assert_same_elements(ds, super_serial.load("big/train.tfrecord"))
    assert super_serial.read_header("big/train.tfrecord.header.yaml")["compression"] == "ZLIB"
    # The progress line as the example's last comment shows it, numbers aside
    line = re.split(r"[\r\n]", capsys.readouterr().err.strip())[-1]
    shown = python_block("num_shards=64").rstrip().splitlines()[-1].removeprefix("# ")
    number = r"\d[\d,.]*"
    assert re.sub(number, "N", line) == re.sub(number, "N", shown), (line, shown)
    assert "5,000/5,000 elements" in line


@pytest.fixture
def train(tmp_path, monkeypatch):
    """train.tfrecord in four shards, in the current folder, and its dataset."""
    monkeypatch.chdir(tmp_path)
    ds = tf.data.Dataset.range(600).map(lambda i: (tf.fill([3], i), tf.strings.as_string(i)))
    super_serial.save(ds, "train.tfrecord", num_shards=4)
    return ds


def test_the_loading_example(train):
    namespace = {"super_serial": super_serial}
    lines = python_block("shuffle_files=True").splitlines()
    assert len(lines) == 4

    run_block(lines[0], namespace)  # "shards and compression from the header"
    assert_same_elements(train, namespace["ds"])
    run_block(lines[1], namespace)  # "batched fast path, order kept"
    assert_same_elements(train.batch(256), namespace["ds"])
    run_block(lines[2], namespace)  # "new file order each epoch"
    epochs = [list(namespace["ds"]) for _ in range(5)]
    for epoch in epochs:
        assert sorted(map(canonical, epoch)) == sorted(map(canonical, train))
    firsts = [int(epoch[0][0][0]) for epoch in epochs]
    assert len(set(firsts)) > 1, firsts  # seed 0: the same orders each run, 5 of 4 files
    run_block(lines[3], namespace)  # "whatever order is fastest"
    assert_same_multiset(train, namespace["ds"])


def test_the_options_example(train):
    namespace = run_block(python_block("options.autotune.enabled = False"), {
        "tf": tf, "super_serial": super_serial})

    assert namespace["ds"].options().autotune.enabled is False
    assert_same_elements(train, namespace["ds"])


@pytest.mark.parametrize("where", ["local", "ram"])
def test_the_merge_example(tmp_path, where):
    """Each machine's part saved, then merged into one dataset: part 0's elements, then part
    1's. The block's gs://bucket is a local folder, or TensorFlow's in-memory filesystem."""
    folder = str(tmp_path) if where == "local" else f"ram://readme-{uuid.uuid4().hex}"
    code = python_block("super_serial.merge(").replace("gs://bucket", folder)
    each_machine, once = code.split("# Once every part is written, anywhere:\n")
    full_ds = tf.data.Dataset.range(50).map(lambda i: {"i": i, "s": tf.strings.as_string(i)})
    namespace = {"super_serial": super_serial, "full_ds": full_ds, "n": 2}

    for i in range(2):
        run_block(each_machine, {**namespace, "i": i})
    run_block(once, namespace)

    assert_same_elements(full_ds.shard(2, 0).concatenate(full_ds.shard(2, 1)), namespace["ds"])


def test_the_sample_header_is_what_save_writes(tmp_path):
    """The header the Format section shows: the benchmark's images workload (2,000 float32
    images of 64x64x3 and a label below 128, whose varint is one byte)."""
    (sample,) = [block for block in fenced("yaml") if "num_records: 2000" in block]
    dataset = tf.data.Dataset.range(2000).map(
        lambda i: {"image": tf.zeros([64, 64, 3]), "label": i % 10})

    super_serial.save(dataset, tmp_path / "data.tfrecord")

    assert (tmp_path / "data.tfrecord.header.yaml").read_text(encoding="utf-8") == sample


def session() -> list[tuple[str, str]]:
    """The README's command-line session: (command, what it shows) for each `$ ` line."""
    (block,) = [b for b in fenced("") if b.startswith("$ super-serial inspect")]
    steps = re.split(r"^\$ ", block, flags=re.M)[1:]
    pairs = [step.split("\n", 1) for step in steps]
    return [(command, shown.rstrip("\n") + "\n") for command, shown in pairs]  # blank lines apart


@pytest.fixture
def demo_files(tmp_path, monkeypatch):
    """The demo's files in data/, as `super-serial demo data` keeps them, and a copy in bad/
    with the middle byte of its first shard flipped ("one byte flipped")."""
    monkeypatch.chdir(tmp_path)
    super_serial.save(cli._demo_dataset(), "data/demo.tfrecord", num_shards=cli.DEMO_SHARDS,
                      compression=cli.DEMO_COMPRESSION)
    (tmp_path / "bad").mkdir()
    for file in (tmp_path / "data").iterdir():
        (tmp_path / "bad" / file.name).write_bytes(file.read_bytes())
    first = tmp_path / "bad" / "demo.tfrecord-00000-of-00002"
    data = bytearray(first.read_bytes())
    data[len(data) // 2] ^= 0xFF
    first.write_bytes(bytes(data))


def test_the_command_line_session(demo_files, capsys):
    """Every command of the session, and what it shows: exactly, but for timings and speeds.
    The shards' sizes are those of TensorFlow's zlib (the same on 2.18 and 2.21)."""
    steps = session()
    commands = [command.split("  #")[0].split() for command, _ in steps]
    assert [c[:2] for c in commands] == [["super-serial", "inspect"], ["super-serial", "verify"],
                                         ["super-serial", "verify"], ["echo", "$?"],
                                         ["super-serial", "head"]]
    number = r"\d+\.\d+"  # seconds and MB/s; counts and sizes are compared as they are
    status = None
    for argv, (_, shown) in zip(commands, steps):
        if argv[0] == "echo":
            assert shown == f"{status}\n"
            continue
        if "verify" in argv and argv[2].startswith("data/"):
            argv = [*argv, "--progress"]  # "a progress bar on stderr", as on a terminal
        status = cli.main(argv[1:])
        out, err = capsys.readouterr()
        err = [line for line in re.split(r"[\r\n]", err) if line]
        if argv[2].startswith("bad/"):
            assert status == 1 and out == ""
            assert [*err, ""] == shown.split("\n")
        elif "verify" in argv:
            assert status == 0 and err
            assert re.sub(number, "N", f"{err[-1]}\n{out}") == re.sub(number, "N", shown)
        else:
            assert status == 0 and err == []
            assert out == shown


"""The command line, run through its entry points: `python -m super_serial` and `super-serial`."""

from __future__ import annotations

import collections
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from conftest import GOLDEN, rewrite_records

import super_serial
from super_serial import cli

CONSOLE_SCRIPT = Path(sys.executable).parent / "super-serial"
ELEMENTS = 200


def run(*args: str, script: bool = False, timeout: float = 120) -> subprocess.CompletedProcess:
    """Runs the command line in a fresh process and returns its exit code and output.

    The environment is the user's, without TF_CPP_MIN_LOG_LEVEL: the tool itself must keep
    TensorFlow's start-up lines off stderr."""
    command = [str(CONSOLE_SCRIPT)] if script else [sys.executable, "-m", "super_serial"]
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run([*command, *args], capture_output=True, timeout=timeout, env=env)
    # Decoded here rather than with text=True, which would turn a progress bar's "\r" into "\n".
    result.stdout, result.stderr = result.stdout.decode(), result.stderr.decode()
    return result


def error_lines(result: subprocess.CompletedProcess) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("super-serial: error:")]


def assert_fails_naming(result: subprocess.CompletedProcess, name: str):
    """Exit 1, one error line naming `name`, no traceback, nothing on stdout."""
    assert result.returncode == 1, result.stderr
    lines = error_lines(result)
    assert len(lines) == 1 and name in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    """A small dataset in two populated shards: fixed, unknown-length, string, ragged, nested."""
    rng = np.random.default_rng(0)
    lengths = rng.integers(0, 6, ELEMENTS)
    images = rng.integers(0, 256, (ELEMENTS, 48, 48, 3), dtype=np.uint8)

    def generate():
        for i in range(ELEMENTS):
            yield {
                "image": images[i],
                "label": np.int64(i),
                "tokens": np.arange(lengths[i], dtype=np.int32),
                "meta": {"name": f"element {i} ".encode() * 10,
                         "words": tf.RaggedTensor.from_row_lengths(
                             np.arange(lengths[i] * 2, dtype=np.int64), [lengths[i]] * 2)},
            }

    signature = {
        "image": tf.TensorSpec([48, 48, 3], tf.uint8),
        "label": tf.TensorSpec([], tf.int64),
        "tokens": tf.TensorSpec([None], tf.int32),
        "meta": {"name": tf.TensorSpec([], tf.string),
                 "words": tf.RaggedTensorSpec([2, None], tf.int64, ragged_rank=1)},
    }
    path = tmp_path_factory.mktemp("saved") / "data.tfrecord"
    dataset = tf.data.Dataset.from_generator(generate, output_signature=signature)
    # A known size lets save size its blocks so that both shards get records.
    dataset = dataset.apply(tf.data.experimental.assert_cardinality(ELEMENTS))
    header = super_serial.save(dataset, path, num_shards=2)
    assert [s["num_records"] > 0 for s in header["shards"]] == [True, True], header["shards"]
    return path


@pytest.fixture
def scratch(saved, tmp_path) -> Path:
    """A private copy of the saved dataset, for tests that damage it."""
    for file in saved.parent.iterdir():
        shutil.copy(file, tmp_path / file.name)
    return tmp_path / saved.name


def shard(path: Path, index: int) -> Path:
    return path.parent / f"{path.name}-{index:05d}-of-00002"


# ---- demo ---------------------------------------------------------------------------------


def test_demo_round_trips_and_compares_with_tf_data(tmp_path):
    result = run("demo", str(tmp_path / "demo dir"), script=True)  # hints quote the space

    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "format: super_serial" in out  # the header file text
    assert re.search(r"^feature +dtype +shape +encoding +ragged rank$", out, re.M)  # inspect
    assert "identical: yes" in out
    ratio = re.search(r"^ratio super_serial / tf\.data +([\d.]+) +([\d.]+) +([\d.]+)$", out, re.M)
    assert ratio and all(float(r) > 0 for r in ratio.groups()), out
    for name in ("super_serial", "tf.data.Dataset"):  # first (cold) runs beside warm medians
        assert re.search(rf"^{re.escape(name)}, first run +[\d.]+ +[\d.]+ +[\d,]+$", out, re.M)
        assert re.search(rf"^{re.escape(name)}, median of 5 +[\d.]+ +[\d.]+$", out, re.M), out
    kept = sorted(p.name for p in (tmp_path / "demo dir").iterdir())
    assert kept == ["demo.tfrecord-00000-of-00002", "demo.tfrecord-00001-of-00002",
                    "demo.tfrecord.header.yaml"]
    quoted = shlex.quote(str(tmp_path / "demo dir" / "demo.tfrecord"))
    assert f"$ super-serial inspect {quoted}\n" in out
    assert out.rstrip().endswith(f"try: super-serial head {quoted} -n 2")


def test_a_demo_that_fails_to_save_removes_the_folders_it_made(tmp_path, monkeypatch, capsys):
    """`demo DIR` on a full disk left DIR behind, empty; a folder that was there stays."""
    def full(*args, **kwargs):
        raise OSError(28, "No space left on device (simulated)")

    monkeypatch.setattr(super_serial, "save", full)
    (tmp_path / "there").mkdir()
    assert cli.main(["demo", str(tmp_path / "there" / "new" / "sub")]) == 1
    assert "No space left on device (simulated)" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["there"]
    assert list((tmp_path / "there").iterdir()) == []


def test_the_demo_saves_into_a_remote_folder(monkeypatch, capsys):
    """`demo ram://DIR` saved, then failed reading the header it had written with Python's
    `open` (helper-83); gs:// would too."""
    monkeypatch.setattr(cli, "_time_tf_data", lambda dataset: (_ for _ in ()).throw(
        tf.errors.ResourceExhaustedError(None, None, "timings skipped for the test")))
    folder = f"ram://demo-{uuid.uuid4().hex}"
    assert cli.main(["demo", folder]) == 0
    out = capsys.readouterr().out
    assert f"wrote {folder}/demo.tfrecord.header.yaml:\n\n# super_serial header: " in out
    assert "identical: yes" in out
    assert sorted(tf.io.gfile.listdir(folder)) == [
        "demo.tfrecord-00000-of-00002", "demo.tfrecord-00001-of-00002",
        "demo.tfrecord.header.yaml"]


def test_a_demo_that_save_refuses_says_why_as_an_expected_error(tmp_path, capsys):
    """save's ValueError (a folder where the records go) was called "an unexpected error; run
    with --debug for the traceback" (helper-86)."""
    (tmp_path / "demo.tfrecord").mkdir()
    assert cli.main(["demo", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err == (f"super-serial: error: {str(tmp_path / 'demo.tfrecord')!r} is a folder; a "
                   "file goes there\n")


def test_the_demo_stands_where_its_timings_cannot_be_written(tmp_path, monkeypatch, capsys):
    """The timings against tf.data save in temporary folders: where those fail (a full
    TMPDIR), the demo, saved and checked, says so and exits 0, where it exited 1 naming only
    tf.data's snapshot file."""
    def full(dataset):
        raise tf.errors.ResourceExhaustedError(None, None, "snapshot: No space left on device")

    monkeypatch.setattr(cli, "_time_tf_data", full)
    assert cli.main(["demo", str(tmp_path / "kept")]) == 0
    out, err = capsys.readouterr()
    assert "identical: yes" in out
    assert "Timings against tf.data.Dataset skipped" in err and "snapshot: No space left" in err
    assert out.rstrip().endswith("-n 2")
    assert len(list((tmp_path / "kept").iterdir())) == 3


def test_the_folder_the_demo_keeps_is_named_on_one_line(tmp_path, capsys):
    """A folder named with a line break or an escape was printed as it is: its name over two
    lines, and the escape sent to the terminal. The command to try quotes it as bash's
    $'...', which bash reads back as the folder's name."""
    folder = str(tmp_path / "a\nb\x1b[31m'c")
    assert cli._kept(folder, folder + "/demo.tfrecord", True) == 0
    out = capsys.readouterr().out
    assert out == (f"\nFiles kept in {tmp_path}/a\\x0ab\\x1b[31m'c; try: super-serial head "
                   f"$'{tmp_path}/a\\x0ab\\x1b[31m\\x27c/demo.tfrecord' -n 2\n")
    word = out.split(" head ")[1].rsplit(" -n", 1)[0]
    echoed = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True)
    assert echoed.stdout.decode() == folder + "/demo.tfrecord"


@pytest.mark.parametrize("interrupted", [False, True])
def test_the_demo_says_its_files_are_deleted_once_they_are(
        tmp_path, monkeypatch, capsys, interrupted):
    """`demo` said "The demo files are deleted now" before it deleted them, and a Ctrl-C then,
    or during the removal, left its temporary folder (1.7 MB) behind (helper-91). After one,
    the removal finishes, and the Ctrl-C still ends the command."""
    def full(dataset):  # the timings skipped, for time
        raise tf.errors.ResourceExhaustedError(None, None, "skipped for the test")

    real_rmtree = shutil.rmtree
    printed = []  # what the demo had printed, at each removal

    def rmtree(path, *args, **kwargs):
        printed.append(capsys.readouterr().out)
        if interrupted and len(printed) == 1:
            raise KeyboardInterrupt  # a Ctrl-C during the removal
        real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the demo's folder goes
    monkeypatch.setattr(cli, "_time_tf_data", full)
    monkeypatch.setattr(shutil, "rmtree", rmtree)
    status = cli.main(["demo"])
    out, err = capsys.readouterr()

    assert list(tmp_path.glob("super_serial_demo_*")) == []  # (autograph's files may be there)
    assert "identical: yes" in printed[0] and "deleted" not in printed[0]
    if interrupted:
        assert (status, out, err) == (130, "", "super-serial: interrupted\n")
    else:
        assert (status, out) == (0, "\nThe demo files are deleted now; to keep them: "
                                    "super-serial demo DIR\n")


def test_demo_names_the_feature_that_differs():
    """The demo's check of the round trip (its own feature names from the header now, where
    they were worked out again from the element)."""
    import tensorflow as tf

    def element(label):
        score = tf.stack([tf.cast(label, tf.float64), tf.constant(0.5, tf.float64)])
        return {"objects": {"bbox": tf.zeros([2, 4]), "score": score},
                "label": tf.constant(1, tf.int64)}

    saved = tf.data.Dataset.range(4).map(lambda i: element(0.25))
    changed = tf.data.Dataset.range(4).map(
        lambda i: element(tf.where(i == 2, 0.75, 0.25)))
    names = ["label", "objects/bbox", "objects/score"]
    assert cli._difference(saved, saved, names) is None
    assert cli._difference(saved, changed, names) == "element 2, feature 'objects/score' differs"
    assert cli._difference(saved, saved.take(3), names) == "fewer elements than saved (3 match)"


@pytest.mark.parametrize("other", [
    ([[1]], [2.0], [3]),  # another value
    ([[2]], [1.0], [3]),  # another index
    ([[1]], [1.0], [4]),  # another dense shape
])
def test_demo_compares_sparse_components_part_by_part(other):
    def dataset(indices, values, dense_shape):  # dense shapes known when run: one spec for all
        return tf.data.Dataset.from_tensors((indices, values, dense_shape)).map(
            lambda i, v, d: {"k": tf.SparseTensor(tf.cast(i, tf.int64), v, tf.cast(d, tf.int64))})

    saved = dataset([[1]], [1.0], [3])
    assert saved.element_spec == dataset(*other).element_spec
    assert cli._difference(saved, saved, ["k"]) is None
    assert cli._difference(saved, dataset(*other), ["k"]) == "element 0, feature 'k' differs"


# ---- inspect ------------------------------------------------------------------------------


def test_inspect_prints_schema_structure_and_shards(saved):
    result = run("inspect", str(saved))

    assert result.returncode == 0, result.stderr
    out = result.stdout
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.strip()}
    assert rows["image"] == ["uint8", "[48,", "48,", "3]", "raw", "-"]
    assert rows["label"] == ["int64", "[]", "int64", "-"]
    assert rows["tokens"] == ["int32", "[None]", "int64", "-"]
    assert rows["meta/name"] == ["string", "[]", "bytes", "-"]
    assert rows["meta/words"] == ["int64", "[2,", "None]", "ragged", "int64", "1"]
    assert "structure: {image, label, tokens, meta: {name, words}}" in out  # the dict's order
    assert f"{ELEMENTS} records" in out and "compression none" in out and "version 3" in out
    header = super_serial.read_header(super_serial.default_header_path(saved))
    for s in header["shards"]:
        assert rows[s["file"]] == [f"{s['num_records']:,}", f"{s['num_bytes']:,}"]
    assert rows["total"][0] == f"{ELEMENTS:,}"


def test_inspect_json_is_the_header_for_scripts(saved):
    result = run("inspect", str(saved), "--header", str(saved) + ".header.yaml", "--json")

    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["num_records"] == ELEMENTS and info["version"] == 3
    assert info["compression"] is None and info["format"] == "super_serial"
    features = {f["name"]: f for f in info["features"]}
    assert list(features) == ["image", "label", "meta/name", "meta/words", "tokens"]
    assert features["tokens"]["shape"] == [None] and features["tokens"]["dtype"] == "int32"
    assert features["meta/words"]["path"] == ["meta", "words"]
    assert features["meta/words"]["ragged_rank"] == 1
    assert info["structure"]["meta"] == {"name": "meta/name", "words": "meta/words"}
    assert [s["file"] for s in info["shards"]] == [shard(saved, 0).name, shard(saved, 1).name]
    assert sum(s["num_records"] for s in info["shards"]) == ELEMENTS
    assert info["num_bytes"] == sum(shard(saved, i).stat().st_size for i in range(2))


def test_inspect_and_head_tell_ragged_rank_0_from_dense(tmp_path):
    """A tf.RaggedTensor of ragged rank 0 (`tf.ragged.constant` of flat lists, sliced) and a
    dense tensor of the same shape load back as different specs: inspect's table, its JSON
    and head each say which is which."""
    path = str(tmp_path / "rank0.tfrecord")
    dense = tf.data.Dataset.from_generator(
        lambda: (np.arange(i + 1, dtype=np.int32) for i in range(2)),
        output_signature=tf.TensorSpec([None], tf.int32))
    super_serial.save(tf.data.Dataset.zip({
        "rag": tf.data.Dataset.from_tensor_slices(tf.ragged.constant([[1], [2, 3]])),
        "dense": dense}), path)
    assert super_serial.load(path).element_spec["rag"].ragged_rank == 0

    result = run("inspect", path)
    assert result.returncode == 0, result.stderr
    assert re.search(r"^dense +int32 +\[None\] +int64 +-$", result.stdout, re.M), result.stdout
    assert re.search(r"^rag +int32 +\[None\] ragged +int64 +0$", result.stdout, re.M)
    result = run("inspect", path, "--json")
    features = {f["name"]: f for f in json.loads(result.stdout)["features"]}
    assert [features["dense"][k] for k in ("ragged", "ragged_rank", "row_splits_dtype")] == [
        False, None, None]
    assert [features["rag"][k] for k in ("ragged", "ragged_rank", "row_splits_dtype")] == [
        True, 0, "int64"]
    result = run("head", path, "-n", "1")
    assert re.search(r"^  dense +int32\[1\] +\[0\]$", result.stdout, re.M), result.stdout
    assert re.search(r"^  rag +int32\[1\] ragged +\[1\]$", result.stdout, re.M)


def test_inspect_shows_tensor_names_where_the_header_has_them(tmp_path):
    """tf.TensorSpec names (from_generator's output_signature keeps them) are a column of
    inspect's table, quoted, and a field of its JSON; a feature without one shows "-"."""
    path = str(tmp_path / "named.tfrecord")
    super_serial.save(tf.data.Dataset.from_generator(
        lambda: iter([{"x": np.float32(i), "y": i, "z": b"a b"} for i in range(3)]),
        output_signature={"x": tf.TensorSpec([], tf.float32, name="my x"),
                          "y": tf.TensorSpec([], tf.int64),
                          "z": tf.TensorSpec([], tf.string, name="")}), path)
    named = str(tmp_path / "unicode.tfrecord")  # printable: as it is (helper-76), not \u65e5
    super_serial.save(tf.data.Dataset.from_generator(
        lambda: iter([{"a": 1, "b": 2}]),
        output_signature={"a": tf.TensorSpec([], tf.int64, name="日本"),
                          "b": tf.TensorSpec([], tf.int64, name="a\u2028b")}), named)

    result = run("inspect", named)
    assert result.returncode == 0, result.stderr
    assert next(line for line in result.stdout.splitlines()
                if line.startswith("a ")).endswith('-  "日本"'), result.stdout
    assert next(line for line in result.stdout.splitlines()
                if line.startswith("b ")).endswith('-  "a\\u2028b"'), result.stdout

    result = run("inspect", path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert re.search(r"^feature +dtype +shape +encoding +ragged rank +tensor name$",
                     result.stdout, re.M), result.stdout
    assert next(line for line in lines if line.startswith("x ")).endswith('-  "my x"')
    assert next(line for line in lines if line.startswith("y ")).endswith("-  -")
    assert next(line for line in lines if line.startswith("z ")).endswith('-  ""')
    info = json.loads(run("inspect", path, "--json").stdout)
    assert [f["tensor_name"] for f in info["features"]] == ["my x", None, ""]


def test_inspect_shows_namedtuples_by_name_and_field(tmp_path):
    """A namedtuple of the element shows as `Name(field=...)` in inspect's structure, and its
    entry in the JSON; a header without one has no such entry."""
    Point = collections.namedtuple("Point", "x y")
    path = str(tmp_path / "points.tfrecord")
    super_serial.save(tf.data.Dataset.from_tensor_slices(
        ({"p": Point([1, 2], [3.0, 4.0])}, [5, 6])), path)
    result = run("inspect", path)
    assert result.returncode == 0, result.stderr
    assert "\nstructure: ({p: Point(x=0/p/0, y=0/p/1)}, 1)\n" in result.stdout, result.stdout
    assert "version 5;" in result.stdout
    info = json.loads(run("inspect", path, "--json").stdout)
    assert info["namedtuples"] == [{"path": [0, "p"], "name": "Point", "fields": ["x", "y"]}]
    super_serial.save(tf.data.Dataset.from_tensor_slices(([1, 2], [5, 6])), path)
    assert "namedtuples" not in json.loads(run("inspect", path, "--json").stdout)


def test_inspect_and_head_show_parts_with_no_tensor(tmp_path):
    """None, {}, () and a namedtuple of no fields show in inspect's structure as the element
    holds them; head lists each tensor under its own name (it took the tensors after a None
    for the ones before it, and failed on the None: "'NoneType' object has no attribute
    'numpy'")."""
    Nothing = collections.namedtuple("Nothing", "")
    path = str(tmp_path / "parts.tfrecord")
    super_serial.save(tf.data.Dataset.from_tensor_slices(([1, 2], [5.5, 6.5])).map(
        lambda a, b: {"n": None, "a": a, "e": {}, "t": (None, Nothing(), ()), "b": b}), path)
    result = run("inspect", path)
    assert result.returncode == 0, result.stderr
    assert "\nstructure: {n: None, a, e: {}, t: (None, Nothing(), ()), b}\n" in result.stdout
    assert "version 7;" in result.stdout
    info = json.loads(run("inspect", path, "--json").stdout)
    assert info["structure"] == {"n": None, "a": "a", "e": {}, "t": [None, [], []], "b": "b"}
    result = run("head", path, "-n", "1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["element 0", "  a  int32    1", "  b  float32  5.5"]


def test_head_names_the_tensors_after_a_none(tmp_path):
    """The test above has its Nones after its tensors in flatten order, where a head that
    kept them would still name every tensor rightly (helper-114's surviving mutant)."""
    path = str(tmp_path / "parts.tfrecord")
    super_serial.save(tf.data.Dataset.from_tensor_slices(([1, 2], [5.5, 6.5])).map(
        lambda a, b: (None, a, {}, b)), path)
    result = run("head", path, "-n", "1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["element 0", "  1  int32    1", "  3  float32  5.5"]


def test_inspect_and_head_show_sparse_components(tmp_path):
    """A sparse feature's shape is marked so in inspect's table and its JSON; head gives each
    element's dense shape, indices and values."""
    path = str(tmp_path / "sparse.tfrecord")
    super_serial.save(tf.data.Dataset.from_generator(
        lambda: iter([{"s": tf.SparseTensor([[1, 2], [0, 0]], [2.5, -1.0], [2, 3]), "y": 7}]),
        output_signature={"s": tf.SparseTensorSpec([None, 3], tf.float32),
                          "y": tf.TensorSpec([], tf.int32)}), path)
    result = run("inspect", path)
    assert result.returncode == 0, result.stderr
    assert re.search(r"^s +float32 +\[None, 3\] sparse +float +-$", result.stdout, re.M)
    assert re.search(r"^y +int32 +\[\] +int64 +-$", result.stdout, re.M)
    assert "version 4;" in result.stdout
    info = json.loads(run("inspect", path, "--json").stdout)
    assert [f["sparse"] for f in info["features"]] == [True, False]
    result = run("head", path)
    assert result.returncode == 0, result.stderr
    assert re.search(r"^  s +float32\[2, 3\] sparse\n +indices \[\[1 2\], \[0 0\]\]\n"
                     r" +values \[ 2\.5 -1\. *\]$", result.stdout, re.M), result.stdout


def test_inspect_shows_a_single_tensor_and_a_one_tuple(tmp_path, capsys):
    """A dataset of one tensor is named as such, with its feature; a tuple of one keeps its
    comma (helper-125's mutants of each passed)."""
    single, one = str(tmp_path / "single.tfrecord"), str(tmp_path / "one.tfrecord")
    super_serial.save(tf.data.Dataset.range(2), single)
    super_serial.save(tf.data.Dataset.range(2).map(lambda x: (x,)), one)
    assert cli.main(["inspect", single]) == 0
    assert "\nstructure: a single tensor, feature 'tensor'\n" in capsys.readouterr().out
    assert cli.main(["inspect", one]) == 0
    assert "\nstructure: (0,)\n" in capsys.readouterr().out


def test_inspect_quotes_a_name_with_an_apostrophe(tmp_path, capsys):
    path = str(tmp_path / "q.tfrecord")
    super_serial.save(tf.data.Dataset.from_tensors({"it's": 1}), path)
    assert cli.main(["inspect", path]) == 0
    assert "structure: {\"it's\"}" in capsys.readouterr().out


def test_counts_of_zero_are_plural(tmp_path, capsys):
    path = str(tmp_path / "empty.tfrecord")
    super_serial.save(tf.data.Dataset.range(0), path)
    assert cli.main(["inspect", path]) == 0
    assert "; 0 records; " in capsys.readouterr().out
    assert cli.main(["verify", path]) == 0
    assert "OK: 1 file, 0 records, " in capsys.readouterr().out
    assert cli.main(["head", path]) == 0
    assert capsys.readouterr().out == "(0 elements in all)\n"


def test_inspect_counts_shards_and_totals_them_only_when_several(tmp_path, capsys):
    """"2 shards", not "2 shard", and a total row under two or more shards only (helper-126's
    M40 and M41)."""
    for num_shards in (1, 2):
        path = str(tmp_path / f"{num_shards}.tfrecord")
        super_serial.save(tf.data.Dataset.range(6), path, num_shards=num_shards)
        assert cli.main(["inspect", path]) == 0
        out = capsys.readouterr().out
        if num_shards == 1:
            assert re.search(r"\n1\.tfrecord +6 +\d+\n$", out) and "\ntotal " not in out, out
        else:
            assert "\n2 shards, layout " in out and re.search(r"\ntotal +6 +\d+\n$", out), out


def test_inspect_shows_counts_the_original_modules_header_lacks_as_unknown(capsys):
    """Its header gives no record count or sizes: "?", not 0 (N05)."""
    golden = GOLDEN / "original-module"
    assert cli.main(["inspect", str(golden / "images.tfrecord"),
                     "--header", str(golden / "images.header")]) == 0
    out = capsys.readouterr().out
    assert "; ? records; " in out, out
    assert re.search(r"^images\.tfrecord +\? +\?$", out, re.M), out


# ---- verify -------------------------------------------------------------------------------


def test_verify_ok(saved):
    result = run("verify", str(saved), script=True)

    assert result.returncode == 0, result.stderr
    total = sum(shard(saved, i).stat().st_size for i in range(2))
    assert f"OK: 2 files, {ELEMENTS} records, {total:,} bytes" in result.stdout
    assert str(shard(saved, 1)) in result.stdout


def test_verify_counts_the_records_of_an_original_module_file(capsys):
    """Its header holds no counts: the table showed "?" beside "OK: ... 10 records"."""
    from test_golden import ORIGINAL

    path = str(ORIGINAL / "images.tfrecord")
    assert cli.main(["verify", path, "--header", str(ORIGINAL / "images.header"),
                     "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert re.search(rf"^{re.escape(path)} +10 +12,540$", out, re.M), out
    assert "OK: 1 file, 10 records, 12,540 bytes" in out


def test_verify_prints_nothing_on_stderr_when_all_is_well(saved):
    # No progress bar when stderr is not a terminal, and no TensorFlow start-up lines.
    result = run("verify", str(saved))

    assert result.returncode == 0 and result.stderr == "", result.stderr


def test_verify_progress_bar(saved):
    result = run("verify", str(saved), "--progress")

    assert result.returncode == 0, result.stderr
    updates = result.stderr.rstrip("\n").split("\r")
    assert updates[0] == "" and result.stderr.endswith("\n"), result.stderr
    total = sum(shard(saved, i).stat().st_size for i in range(2))
    assert re.fullmatch(rf"super_serial: verify \[#{{20}}\] 100% {ELEMENTS}/{ELEMENTS} records  "
                        rf"{total / 1e6:.1f} MB  [0-9.,]+ MB/s", updates[-1]), updates[-1]
    assert "OK: 2 files" in result.stdout and "super_serial: verify" not in result.stdout


def test_verify_refuses_progress_and_no_progress_together(saved):
    result = run("verify", str(saved), "--progress", "--no-progress")

    assert result.returncode == 2 and "not allowed with argument" in result.stderr


def test_verify_names_a_file_with_a_flipped_byte(scratch):
    target = shard(scratch, 0)
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size: only the checksums can tell
    target.write_bytes(bytes(data))

    assert_fails_naming(run("verify", str(scratch)), str(target))


def test_verify_names_a_truncated_file(scratch):
    target = shard(scratch, 1)
    target.write_bytes(target.read_bytes()[:-100])

    assert_fails_naming(run("verify", str(scratch)), str(target))


def test_verify_names_a_missing_record_file(scratch):
    shard(scratch, 1).unlink()

    assert_fails_naming(run("verify", str(scratch)), str(shard(scratch, 1)))


def test_verify_names_the_record_and_feature_that_do_not_match_the_header(saved, tmp_path):
    header = Path(str(saved) + ".header.yaml").read_text()
    edited = tmp_path / "edited.header.yaml"
    edited.write_text(header.replace("shape: [48, 48, 3]", "shape: [48, 48, 2]"))

    result = run("verify", str(saved), "--header", str(edited))

    # The uint8 image is raw: its byte count is checked per block of records, which names the
    # file, the first record that fails (each does here) and the feature.
    assert_fails_naming(result, f"{shard(saved, 0)}: record 0: feature 'image'")
    assert "expected 4608 bytes of uint8 per record, found 6912" in error_lines(result)[0]


def test_verify_no_progress_prints_nothing_on_stderr(tmp_path, capsys):
    path = str(tmp_path / "d.tfrecord")
    super_serial.save(tf.data.Dataset.range(3), path)
    assert cli.main(["verify", path, "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and "OK: 1 file, 3 records" in captured.out


def test_verify_right_aligns_the_record_counts(tmp_path, capsys):
    """The records column is right-aligned under its title, as the bytes one (M69)."""
    path = str(tmp_path / "a.tfrecord")
    super_serial.save(tf.data.Dataset.range(6), path, num_shards=2)
    assert cli.main(["verify", path]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^.*-00000-of-00002 {8}3  +\d+$", out, re.M), out


# ---- head ---------------------------------------------------------------------------------


def test_head_prints_the_first_elements(saved):
    result = run("head", str(saved), "-n", "2")

    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert re.findall(r"^element \d+$", out, re.M) == ["element 0", "element 1"]
    assert re.search(r"^  label +int64 +0$", out, re.M)
    assert re.search(r"^  meta/name +string +b'element 0 element 0 .*\.\.\.\(100 bytes\)$", out,
                     re.M)
    assert re.search(r"^  image +uint8\[48, 48, 3\]$", out, re.M)
    assert "..." in out and len(out.splitlines()) < 40  # the image is summarized


@pytest.mark.parametrize("record", [
    b"\n\xa1\x01\n\t\n\x01r\x12\x04\x1a\x02\n",  # 161 bytes promised, 12 given: not UTF-8
    b'{"note": "' + b"a" * 5_000 + b'"}',  # a JSON line: UTF-8
], ids=["undecodable", "json"])
@pytest.mark.parametrize("command", [["head", "-n", str(ELEMENTS)], ["verify"]])
def test_a_record_that_is_no_example_is_named_with_its_shard(scratch, command, record):
    """head failed with "UnicodeDecodeError ... (an unexpected error)" (TensorFlow's message
    quotes the record's bytes: tensorflow#5676), verify with the dataset's path, no file.
    Where the record is UTF-8 text, both gave TensorFlow's "Could not parse example input",
    which quotes the record whole (5,000 bytes here) and names no file. Found by helper-72."""
    second = shard(scratch, 1)
    records = list(tf.data.TFRecordDataset(str(second)).as_numpy_iterator())
    records[0] = record
    rewrite_records(second, scratch.parent / f"{scratch.name}.header.yaml", records, shard=1)

    result = run(command[0], str(scratch), *command[1:])

    assert result.returncode == 1
    assert error_lines(result) == [
        f"super-serial: error: {second}: record 0 is not a tf.train.Example TensorFlow "
        "can parse"], result.stderr


def test_head_of_records_that_do_not_match_their_header_names_the_feature(tmp_path, capsys):
    """Only records TensorFlow cannot parse at all are "not a tf.train.Example"; values that do
    not fit the header's shape get TensorFlow's words, which name the feature (no test ran
    `head` on them: helper-108's mutant)."""
    path = tmp_path / "a.tfrecord"
    super_serial.save(tf.data.Dataset.from_tensor_slices({"x": np.ones([3, 2], np.float32)}),
                      str(path))
    header = tmp_path / "a.tfrecord.header.yaml"
    text = header.read_text()
    assert text.count("shape: [2]") == 1
    header.write_text(text.replace("shape: [2]", "shape: [3]"))
    assert cli.main(["head", str(path)]) == 1
    err = capsys.readouterr().err
    assert "Key: x" in err and "Number of float values != expected" in err, err
    assert "not a tf.train.Example" not in err, err


def test_the_demo_hints_a_path_the_shell_takes_as_one_argument():
    assert cli._shell_word("/tmp/demo dir/demo.tfrecord") == "'/tmp/demo dir/demo.tfrecord'"
    assert cli._shell_word("-d/demo.tfrecord") == "./-d/demo.tfrecord"  # not an option
    assert cli._shell_word("out/demo.tfrecord") == "out/demo.tfrecord"
    # A backslash beside a line break: bash reads back the same path (helper-108's mutant)
    for path in ["/tmp/a\\b\nc/demo.tfrecord", "/tmp/a\\x41 'q'\t/demo.tfrecord"]:
        word = cli._shell_word(path)
        echoed = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True,
                                check=True).stdout
        assert echoed == path.encode(), (word, echoed)


def test_names_that_would_not_read_as_one_are_quoted(tmp_path, capsys):
    """Keys with a line break or tab, empty ones and ones with spaces at an end were printed
    as they are: a broken table, a blank cell, `{,  sp, ...}`."""
    keys = ["", " sp", "new\nline", "tab\tx", "a, b", "plain/name", "日本語", "日\u2028本"]
    path = str(tmp_path / "keys.tfrecord")
    super_serial.save(tf.data.Dataset.from_tensors({k: i for i, k in enumerate(keys)}), path)
    assert cli.main(["inspect", path]) == 0
    out = capsys.readouterr().out
    assert "format super_serial version 3; 1 record; compression none" in out
    quoted = ['""', '" sp"', '"a, b"', '"new\\nline"', "plain/name", '"tab\\tx"',
              '"\\u65e5\\u2028\\u672c"', "日本語"]  # in sorted order
    in_order = [quoted[i] for i in (0, 1, 3, 5, 2, 4, 7, 6)]  # as the dict has them
    assert f"structure: {{{', '.join(in_order)}}}" in out, out
    assert re.findall(r"^(\S.*?) +int32 +\[\] +int64 +-$", out, re.M) == quoted, out
    assert cli.main(["head", path]) == 0
    out = capsys.readouterr().out
    assert re.findall(r"^  (\S.*?) +int32  \d$", out, re.M) == quoted, out


def test_head_prints_ragged_quantized_values_as_numbers(tmp_path, capsys):
    """A ragged qint32 row was printed as records of NumPy's dtype for it, `[[(  5,) (-7,)],
    []]`: now as the numbers they are."""
    path = str(tmp_path / "q.tfrecord")
    values = tf.bitcast(tf.constant([5, -7, 9], tf.int32), tf.qint32)
    super_serial.save(tf.data.Dataset.from_tensor_slices(
        tf.RaggedTensor.from_row_lengths(values, [2, 0, 1])).batch(2), path)
    assert cli.main(["head", path]) == 0
    out = capsys.readouterr().out
    assert re.findall(r"^  tensor +(.*)$", out, re.M) == [
        "qint32[2, None] ragged  [[ 5 -7], []]", "qint32[1, None] ragged  [[9]]"], out


def head_lines(tmp_path, capsys, element) -> list:
    """The lines `head` prints for a dataset of this one element."""
    path = str(tmp_path / "d.tfrecord")
    super_serial.save(tf.data.Dataset.from_tensors(element), path)
    assert cli.main(["head", path]) == 0
    return capsys.readouterr().out.splitlines()


def test_head_prints_five_elements_by_default(tmp_path, capsys):
    path = str(tmp_path / "d.tfrecord")
    super_serial.save(tf.data.Dataset.range(7), path)
    assert cli.main(["head", path]) == 0
    out = capsys.readouterr().out
    assert re.findall(r"^element (\d+)$", out, re.M) == ["0", "1", "2", "3", "4"]
    assert "in all" not in out


def test_head_prints_infinities_as_inf(tmp_path, capsys):
    """head sets the text of infinities (and NaN) itself, whatever the process's NumPy print
    options (helper-125: a mutant's infstr passed)."""
    out = "\n".join(head_lines(tmp_path, capsys, {"v": np.array([-np.inf, np.inf, np.nan])}))
    assert re.search(r"^  v +float64\[3\] +\[-inf  inf  nan\]$", out, re.M), out


def test_head_shortens_strings_longer_than_40_bytes_only(tmp_path, capsys):
    out = "\n".join(head_lines(tmp_path, capsys, {"a": b"x" * 40, "b": b"y" * 1041}))
    assert re.search(r"^  a +string +b'x{40}'$", out, re.M), out
    assert re.search(r"^  b +string +b'y{40}'\.\.\.\(1,041 bytes\)$", out, re.M), out


def test_head_shortens_long_ragged_dimensions_to_three_rows_at_each_end(tmp_path, capsys):
    out = "\n".join(head_lines(tmp_path, capsys, {
        "r": tf.ragged.constant([[i] for i in range(8)]),
        "s": tf.ragged.constant([[i] for i in range(6)])}))
    assert re.search(r"^  r +int32\[8, None\] ragged +\[\[0\], \[1\], \[2\], \.\.\., "
                     r"\[5\], \[6\], \[7\]\]$", out, re.M), out
    assert re.search(r"^  s +int32\[6, None\] ragged +\[\[0\], \[1\], \[2\], \[3\], "
                     r"\[4\], \[5\]\]$", out, re.M), out


def test_head_says_one_element_in_the_singular(tmp_path, capsys):
    """"(1 element in all)" (M72)."""
    assert head_lines(tmp_path, capsys, np.int64(0))[-1] == "(1 element in all)"


def test_head_aligns_the_values_after_kinds_of_different_lengths(tmp_path, capsys):
    """The kind column is padded: values start in one column (M73)."""
    path = str(tmp_path / "d.tfrecord")
    super_serial.save(tf.data.Dataset.from_tensors({"a": np.int64(7),
                                                    "b": np.array([1.5, 2.5], np.float32)}), path)
    assert cli.main(["head", path]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:3] == ["  a  int64       7", "  b  float32[2]  [1.5 2.5]"], lines


def test_head_indents_a_multi_line_value_past_the_name_column(tmp_path, capsys):
    """The lines of a sparse or 2-D value start two columns past where the kind does (M74)."""
    path = str(tmp_path / "d.tfrecord")
    super_serial.save(tf.data.Dataset.from_tensors(
        {"name": tf.SparseTensor([[1]], [2.5], [3])}), path)
    assert cli.main(["head", path]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:4] == ["  name  float32[3] sparse", "        indices [[1]]",
                          "        values [2.5]"], lines


def test_head_pads_the_name_of_a_multi_line_value(tmp_path, capsys):
    """A sparse value's name is padded to the name column like the others' (N12)."""
    lines = head_lines(tmp_path, capsys, {"a": tf.SparseTensor([[1]], [2.5], [3]),
                                          "bbb": np.int64(7)})
    assert lines[1:5] == ["  a    float32[3] sparse", "       indices [[1]]",
                          "       values [2.5]", "  bbb  int64              7"], lines


def test_head_prints_ragged_float32_values_as_float32(tmp_path, capsys):
    """A ragged float32 value prints 0.1 as 0.1, not as the float64 it widens to in a Python
    list, 0.10000000149011612 (M78)."""
    path = str(tmp_path / "d.tfrecord")
    super_serial.save(tf.data.Dataset.from_tensors(
        {"r": tf.ragged.constant([[0.1], [0.2, 0.3]], dtype=tf.float32)}), path)
    assert cli.main(["head", path]) == 0
    out = capsys.readouterr().out
    assert "ragged  [[0.1], [0.2 0.3]]\n" in out, out


def test_head_drops_the_blank_lines_between_the_blocks_of_a_3d_array(tmp_path, capsys):
    """NumPy puts a blank line between the 2-D blocks of a 3-D array (M82)."""
    lines = head_lines(tmp_path, capsys, {"x": np.arange(8).reshape(2, 2, 2)})
    assert lines == ["element 0", "  x  int64[2, 2, 2]", "     [[[0 1]", "       [2 3]]",
                     "      [[4 5]", "       [6 7]]]", "(1 element in all)"], lines


def test_head_shortens_arrays_of_more_than_16_values(tmp_path, capsys):
    """17 values and more are shortened to three at each end (M85)."""
    lines = head_lines(tmp_path, capsys, {"x": np.arange(17)})
    assert lines[1] == "  x  int64[17]  [ 0  1  2 ... 14 15 16]", lines
    lines = head_lines(tmp_path, capsys, {"x": np.arange(16)})
    assert lines[1] == "  x  int64[16]  [ 0  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15]", lines


def test_head_keeps_a_value_of_88_columns_on_one_line(tmp_path, capsys):
    """The value's text wraps past 88 columns, not 80 (M86)."""
    lines = head_lines(tmp_path, capsys, {"x": np.full(14, 12345)})
    assert lines[1] == "  x  int64[14]  [" + " ".join(["12345"] * 14) + "]", lines


def test_head_prints_a_long_ragged_row_on_one_line(tmp_path, capsys):
    """A ragged value is one line, however long its rows (M97), its values one space apart:
    where NumPy had wrapped the row, the line break and the next line's indent made two
    spaces (helper-126)."""
    lines = head_lines(tmp_path, capsys, {"r": tf.ragged.constant([[12345678] * 14, [1]])})
    assert lines[1] == "  r  int32[2, None] ragged  [[" + " ".join(["12345678"] * 14) + "], [1]]", (
        lines)


def test_head_shortens_long_strings_in_an_array_too(tmp_path, capsys):
    """Not only a scalar string: each long string of an array is cut to 40 bytes (N14)."""
    lines = head_lines(tmp_path, capsys, {"s": np.array([b"a" * 41, b"b"])})
    assert lines[1] == "  s  string[2]  [b'" + "a" * 40 + "'...(41 bytes) b'b']", lines


# ---- usage and errors ---------------------------------------------------------------------


def test_bad_usage_exits_2():
    result = run("head", "data.tfrecord", "-n", "0")

    assert result.returncode == 2
    assert "usage: super-serial head" in result.stderr and "Traceback" not in result.stderr
    assert "argument -n/--num: expected a positive integer below 2**63, got 0" in result.stderr


@pytest.mark.parametrize("argv, problem", [
    (["head", "x", "-n", str(2**63)],  # failed in tf.data's take, as an unexpected error
     "argument -n/--num: expected a positive integer below 2**63, got 9223372036854775808"),
    (["inspect", "/tmp/\udcff.tfrecord"],  # a non-UTF-8 name as Python holds it
     "argument PATH: b'/tmp/\\xff.tfrecord' is not valid UTF-8, which TensorFlow needs"),
    (["verify", "x", "--header", "h\udcff"], "argument --header: b'h\\xff' is not valid UTF-8"),
    (["demo", "out\udcff"], "argument DIR: b'out\\xff' is not valid UTF-8"),
    (["demo", ""], "argument DIR: an empty path names no file or folder"),  # saved into "."
    (["inspect", ""], "argument PATH: an empty path names no file or folder"),
    (["verify", "x", "--header", ""], "argument --header: an empty path names no file"),
])
def test_arguments_tensorflow_cannot_take_are_usage_errors(argv, problem, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)

    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: super-serial") and problem in err, err


@pytest.mark.parametrize("argv", [[], ["frobnicate"], ["verify"], ["head", "x", "-n", "two"]])
def test_bad_usage_in_process(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)

    assert exit_info.value.code == 2
    assert capsys.readouterr().err.startswith("usage: super-serial")


@pytest.mark.parametrize("raised, status, stderr", [
    ("ImportError('broken install')", 1, [
        "fake start-up line",
        "super-serial: error: import failed: broken install (run with --debug for the traceback)"]),
    ("KeyboardInterrupt", 130, ["super-serial: interrupted"]),  # a Ctrl-C needs no log lines
])
def test_held_back_start_up_lines_are_shown_when_tensorflow_fails_to_import(
        tmp_path, raised, status, stderr):
    fake = tmp_path / "tensorflow"
    fake.mkdir()
    (fake / "__init__.py").write_text(
        f"import os\nos.write(2, b'fake start-up line\\n')\nraise {raised}\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}

    result = subprocess.run([sys.executable, "-m", "super_serial", "inspect", "x"],
                            capture_output=True, text=True, timeout=60, env=env)

    assert result.returncode == status
    assert result.stderr.splitlines() == stderr, result.stderr


def buffered_env() -> dict:
    """The user's environment as a shell usually has it: stdout block-buffered into a pipe or
    file (PYTHONUNBUFFERED, which hid the failures below, unset)."""
    return {k: v for k, v in os.environ.items()
            if k not in ("TF_CPP_MIN_LOG_LEVEL", "PYTHONUNBUFFERED")}


@pytest.mark.parametrize("command", [["inspect"], ["inspect", "--json"], ["head", "-n", "1"],
                                     ["verify"], ["head", "-n", str(ELEMENTS)]])
def test_output_into_a_closed_pipe_exits_1_quietly(saved, command):
    """As README says (`... | head -1`): the output, flushed only at exit, went to a closed
    pipe after main had returned: "Exception ignored ... BrokenPipeError", exit status 120.
    The last command's output passes stdout's buffer, so the pipe's error comes while it
    prints, not at the flush (a mutant exiting 0 then passed, helper-125)."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone before anything is written
    try:
        result = subprocess.run([sys.executable, "-m", "super_serial", command[0], str(saved),
                                 *command[1:]], stdout=write_end, stderr=subprocess.PIPE,
                                env=buffered_env(), timeout=120)
    finally:
        os.close(write_end)
    assert result.returncode == 1, result.stderr
    assert result.stderr.decode() == ""


def test_help_and_a_ctrl_c_flush_their_output_too(saved, tmp_path):
    """`--help | true` exited 120 (argparse's output was flushed at exit), and so did a Ctrl-C
    with output still buffered for a closed pipe. Unbuffered (`python -u`), --help meets the
    closed pipe while argparse writes, and exits so too (helper-126: a mutant exiting 0
    there passed)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    interrupting = tmp_path / "interrupting.py"
    interrupting.write_text(
        "import sys\nfrom super_serial import cli\nreal = cli._inspect\n"
        "def inspect(args):\n    real(args)\n    raise KeyboardInterrupt\n"
        f"cli._inspect = inspect\nsys.exit(cli.main(['inspect', {str(saved)!r}]))\n")
    try:
        for command, status, stderr in [(["-m", "super_serial", "--help"], 1, ""),
                                        (["-u", "-m", "super_serial", "--help"], 1, ""),
                                        ([str(interrupting)], 130, "super-serial: interrupted\n")]:
            result = subprocess.run([sys.executable, *command], stdout=write_end,
                                    stderr=subprocess.PIPE, env=buffered_env(), timeout=120)
            assert (result.returncode, result.stderr.decode()) == (status, stderr), command
    finally:
        os.close(write_end)


@pytest.mark.parametrize("command", [["verify"], ["--help"]])
def test_a_closed_stdout_is_no_error(saved, command):
    """Started with stdout closed (`>&-`), Python has no sys.stdout: flushing it raised an
    AttributeError with a traceback."""
    argv = [*command, str(saved)] if command != ["--help"] else command
    result = subprocess.run([sys.executable, "-m", "super_serial", *argv],
                            stderr=subprocess.PIPE, env=buffered_env(), timeout=120,
                            preexec_fn=lambda: os.close(1))
    assert result.returncode == 0 and "Traceback" not in result.stderr.decode()
    if command == ["verify"]:
        assert result.stderr.decode() == ""  # (argparse writes --help to stderr then)


def test_a_closed_stderr_is_no_error(saved, tmp_path, capsys):
    """Started with stderr closed (`2>&-`), Python has no sys.stderr: every command failed,
    exit 1, with "AttributeError: 'NoneType' object has no attribute 'flush'" printed to
    stdout, into the data (helper-91)."""
    def closed_stderr_run(*argv):
        return subprocess.run([sys.executable, "-m", "super_serial", *argv],
                              stdout=subprocess.PIPE, env=buffered_env(), timeout=120,
                              preexec_fn=lambda: os.close(2))

    result = closed_stderr_run("inspect", str(saved))

    assert cli.main(["inspect", str(saved)]) == 0
    assert (result.returncode, result.stdout.decode()) == (0, capsys.readouterr().out)
    result = closed_stderr_run("inspect", str(tmp_path / "none.tfrecord"))
    assert (result.returncode, result.stdout) == (1, b"")  # its error line: nowhere to go


@pytest.mark.parametrize("command, line", [("inspect", "structure: {x, \\u65e5\\u672c}"),
                                           ("head", "  \\u65e5\\u672c  int32  2")])
def test_what_stdout_cannot_encode_is_written_escaped(tmp_path, command, line):
    """Into an ASCII stdout (PYTHONIOENCODING, a cp1252 console), a feature named 日本
    stopped the output half-way: "super-serial: error: 'ascii' codec can't encode ...", exit
    1, as if the data were bad (helper-91)."""
    path = str(tmp_path / "wide.tfrecord")
    super_serial.save(tf.data.Dataset.from_tensors({"x": 1, "日本": 2}), path)

    result = subprocess.run([sys.executable, "-m", "super_serial", command, path],
                            capture_output=True, timeout=120,
                            env={**buffered_env(), "PYTHONIOENCODING": "ascii"})

    assert (result.returncode, result.stderr.decode()) == (0, "")
    assert line in result.stdout.decode("ascii").splitlines()


def test_main_gives_stdout_back_as_it_was(tmp_path, monkeypatch):
    """main() set stdout's errors handler to backslashreplace and left it so: run in-process,
    the caller's own print("日本") into an ASCII stdout wrote \\u65e5\\u672c from then on
    (helper-118)."""
    path = str(tmp_path / "日本.tfrecord")
    super_serial.save(tf.data.Dataset.from_tensors({"日本": 1}), path)
    for argv, status in ((["inspect", path], 0), (["inspect", path + "x"], 1)):
        stdout = io.TextIOWrapper(io.BytesIO(), encoding="ascii", errors="strict")
        monkeypatch.setattr(sys, "stdout", stdout)
        assert cli.main(argv) == status
        assert sys.stdout is stdout and stdout.errors == "strict"
        if status == 0:  # escaped while main() ran
            assert "\\u65e5\\u672c" in stdout.buffer.getvalue().decode()


def test_a_utf8_path_is_taken_in_an_ascii_locale(tmp_path):
    """Python decodes the arguments with the locale's encoding: in an ASCII one (LC_ALL=C
    without UTF-8 mode), a UTF-8 name came as surrogates, and was refused as "not valid
    UTF-8" (helper-91). A name that is not UTF-8 still is."""
    env = {**buffered_env(), "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    path = tmp_path / "é" / "a.tfrecord"
    path.parent.mkdir()
    super_serial.save(tf.data.Dataset.range(3), str(path))

    result = subprocess.run([sys.executable, "-m", "super_serial", "inspect", str(path)],
                            capture_output=True, timeout=120, env=env)

    assert (result.returncode, result.stderr.decode()) == (0, "")
    lines = result.stdout.decode("ascii").splitlines()
    assert "; 3 records; " in lines[1], lines
    # the path as typed, not the surrogates Python held (helper-125)
    assert lines[0].startswith(str(path).replace("é", "\\xe9") + "  (header "), lines[0]
    result = subprocess.run([sys.executable, "-m", "super_serial", "verify",
                             str(tmp_path / "\udcff.tfrecord")],
                            capture_output=True, timeout=120, env=env)
    assert result.returncode == 2
    assert b"\\xff.tfrecord' is not valid UTF-8, which TensorFlow needs" in result.stderr


ASCII_LOCALE_SCRIPT = """
import os, sys, tensorflow as tf, super_serial
folder = sys.argv[1]  # its UTF-8 bytes held as surrogates, in this locale
print(sorted(int(x) for x in super_serial.load(folder + "/a.tfrecord")))
os.chdir(folder)  # a relative path, in a working folder whose name os.getcwd() gives so
print(sorted(int(x) for x in super_serial.load("a.tfrecord")),
      super_serial.verify("a.tfrecord")["num_records"])
for call in (lambda: super_serial.save(tf.data.Dataset.range(2), folder + "/b.tfrecord"),
             lambda: super_serial.merge([folder + "/a.tfrecord"], folder + "/m.tfrecord")):
    try:
        call()
    except ValueError as error:
        print(ascii(str(error)))
missing = os.path.dirname(folder) + "/\\u00fc.tfrecord"  # a name this locale cannot give
for call in (super_serial.load, super_serial.verify):
    try:
        call(missing)
    except super_serial.HeaderError as error:
        print(ascii(str(error)))
"""


def test_paths_in_an_ascii_locale(tmp_path):
    """With UTF-8 mode off in an ASCII locale, a path from sys.argv (UTF-8 bytes, held as
    surrogates) was refused as "not valid UTF-8", and save and merge of a path that is not
    ASCII failed with a UnicodeEncodeError naming no file (helper-106); a relative path in
    such a working folder failed in load and verify with TensorFlow's words, naming nothing
    (helper-110). load takes the paths; save and merge, whose own file operations cannot name
    the file, say so and what to do. (A script that lives in such a folder still fails in
    TensorFlow's own tf.function, which cannot take its file name.)"""
    env = {**buffered_env(), "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    folder = tmp_path / "é"
    folder.mkdir()
    super_serial.save(tf.data.Dataset.range(3), str(folder / "a.tfrecord"))
    result = subprocess.run([sys.executable, "-c", ASCII_LOCALE_SCRIPT, str(folder)],
                            capture_output=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    lines = result.stdout.decode("ascii").splitlines()
    assert lines[:2] == ["[0, 1, 2]", "[0, 1, 2] 3"]
    for line, name in zip(lines[2:], ["b.tfrecord", "m.tfrecord"]):
        assert line.startswith("\"'") and f"\\xe9/{name}'" in line, line
        assert line.endswith(": Python's file system encoding (ascii) cannot name this file as "
                             "TensorFlow does (UTF-8); run Python in UTF-8 mode (PYTHONUTF8=1 "
                             "or python -X utf8)\""), line
    # load and verify of a missing file of a name Python cannot give here: a
    # UnicodeEncodeError naming nothing, from resolving the path (helper-133)
    assert lines[4:] == [f"'{tmp_path}/\\xfc.tfrecord.header.yaml: header file not found'"] * 2
    assert sorted(p.name for p in folder.iterdir()) == ["a.tfrecord", "a.tfrecord.header.yaml"]


def test_control_characters_in_a_message_are_escaped():
    """TensorFlow quotes a bad record's bytes in its messages: an escape sequence reached
    the terminal as it was."""
    from super_serial import core

    error = core.CorruptDataError("x.tfrecord: could not parse '\x1b[31mred\x00'")
    assert cli._describe(error) == "x.tfrecord: could not parse '\\x1b[31mred\\x00'"


@pytest.mark.parametrize("missing", ["header", "shard", "--header"])
def test_a_newline_in_a_path_is_shown_escaped_in_an_error(tmp_path, capsys, missing):
    """An error's lines are joined into one, and a newline in the path given showed as a
    space: the path in the message was not the file's. The header's path given by --header
    too (helper-125)."""
    folder = tmp_path / "two\nlines"
    folder.mkdir()
    tfrecord_path = str(folder / "data")
    super_serial.save(tf.data.Dataset.range(6), tfrecord_path, num_shards=2)
    options = []
    if missing == "--header":
        gone = str(folder / "other.header.yaml")
        options = ["--header", gone]
    else:
        gone = tfrecord_path + (".header.yaml" if missing == "header" else "-00001-of-00002")
        os.remove(gone)

    assert cli.main(["verify", tfrecord_path, *options]) == 1
    err = capsys.readouterr().err
    shown = gone.replace("\n", "\\x0a")
    assert err.startswith(f"super-serial: error: {shown}: "), err
    assert err.count("\n") == 1, err


def test_control_characters_in_a_path_are_shown_escaped(tmp_path, capsys):
    """`inspect` and `verify` printed a folder's name as it was: an escape sequence in it
    reached the terminal, a newline split the table's rows (helper-83). Errors escaped it."""
    folder = tmp_path / "esc\x1b[31mred\nline"
    tfrecord_path = str(folder / "data")
    super_serial.save(tf.data.Dataset.range(6), tfrecord_path, num_shards=2)
    shown = str(folder).replace("\x1b", "\\x1b").replace("\n", "\\x0a") + "/data"
    assert cli.main(["inspect", tfrecord_path]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{shown}  (header {shown}.header.yaml)\n"), out
    assert cli.main(["verify", tfrecord_path]) == 0
    out = capsys.readouterr().out
    assert re.search(rf"^{re.escape(shown)}-00001-of-00002 +3 +\d+$", out, re.M), out
    assert f" match {shown}.header.yaml (" in out
    assert "\x1b" not in out


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs Linux's /dev/full")
@pytest.mark.parametrize("command", [["inspect"], ["head", "-n", "100"]])
@pytest.mark.parametrize("unbuffered", [False, True])
def test_output_onto_a_full_disk_is_one_error_line(saved, command, unbuffered):
    """Where the disk filled while the command printed (more output than the buffer holds,
    or PYTHONUNBUFFERED), the line was the bare OSError, naming nothing."""
    env = {**buffered_env(), "PYTHONUNBUFFERED": "1"} if unbuffered else buffered_env()
    with open("/dev/full", "wb") as full:
        result = subprocess.run(
            [sys.executable, "-m", "super_serial", command[0], str(saved), *command[1:]],
            stdout=full, stderr=subprocess.PIPE, env=env, timeout=120)
    assert result.returncode == 1
    assert result.stderr.decode().splitlines() == [
        "super-serial: error: standard output: No space left on device"]


@pytest.mark.parametrize("error, raised", [
    (OSError(28, "No space left on device"), cli._OutputError),
    (BrokenPipeError(32, "Broken pipe"), BrokenPipeError)])
def test_a_flush_that_fails_is_told_as_a_write_that_fails(error, raised):
    """Output held in a buffer fails at the flush, not at the write: that flush's error is
    the full disk's one line too (every command's output met it at a write first)."""
    class Held(io.StringIO):
        def flush(self):
            raise error

    output = cli._GuardedOutput(Held())
    assert output.write("held") == 4
    with pytest.raises(raised, match="No space left on device|Broken pipe"):
        output.flush()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs Linux's /dev/full")
@pytest.mark.parametrize("command", [["--help"], ["verify", "--help"]])
@pytest.mark.parametrize("unbuffered", [False, True])
def test_help_onto_a_full_disk_is_one_error_line(command, unbuffered):
    """argparse drops an error writing its help: --help exited 0 with nothing written."""
    env = {**buffered_env(), "PYTHONUNBUFFERED": "1"} if unbuffered else buffered_env()
    with open("/dev/full", "wb") as full:
        result = subprocess.run([sys.executable, "-m", "super_serial", *command],
                                stdout=full, stderr=subprocess.PIPE, env=env, timeout=120)
    assert (result.returncode, result.stderr.decode().splitlines()) == (
        1, ["super-serial: error: standard output: No space left on device"])


@pytest.mark.parametrize("command", ["inspect", "head", "verify"])
@pytest.mark.parametrize("given", ["header", "shard"])
def test_a_header_or_a_shard_for_the_records_path_names_the_path_meant(saved, command, given):
    """`verify` said which path was meant (as `load` does); `inspect` and `head` only that
    no header was found beside it."""
    if given == "header":
        path, what = f"{saved}.header.yaml", "a header"
    else:
        path, what = f"{saved}-00001-of-00002", "one shard of a save"
    assert_fails_naming(run(command, path),
                        f"{path} is {what}: give the records' path, {saved}")


def test_debug_shows_the_traceback(tmp_path):
    # Without --debug, every failure above is one line and no traceback (assert_fails_naming).
    result = run("--debug", "verify", str(tmp_path / "none.tfrecord"))

    assert result.returncode == 1
    assert "Traceback (most recent call last)" in result.stderr
    assert "HeaderError" in result.stderr
    assert error_lines(result)[-1].endswith("none.tfrecord.header.yaml: header file not found")


def test_the_lines_of_an_error_are_joined_with_a_space():
    """A message of several lines is shown as one, its lines apart (M28)."""
    assert cli._describe(ValueError("first line\n  second line\n\n")) == "first line second line"


def test_a_delete_character_in_a_path_is_shown_escaped(tmp_path, capsys):
    """DEL (0x7f) is a control character too (M29)."""
    missing = str(tmp_path / "a\x7fb.tfrecord")
    assert cli.main(["inspect", missing]) == 1
    err = capsys.readouterr().err
    assert "\x7f" not in err and "a\\x7fb.tfrecord" in err, err


def test_tensorflows_errors_are_shown_without_their_op_decorations(tmp_path, capsys):
    """An error of TensorFlow's that reaches the command (values that do not fit the header's
    shape, met by `head`) is shown as one line without "{{function_node ...}}" or
    "[Op:IteratorGetNext]" (M31)."""
    path = tmp_path / "a.tfrecord"
    super_serial.save(tf.data.Dataset.from_tensor_slices({"x": np.ones([3, 2], np.float32)}),
                      str(path))
    header = tmp_path / "a.tfrecord.header.yaml"
    header.write_text(header.read_text().replace("shape: [2]", "shape: [3]"))
    assert cli.main(["head", str(path)]) == 1
    err = capsys.readouterr().err
    assert "Key: x" in err, err
    assert "[Op:" not in err and "function_node" not in err, err


# ---- help (in-process: argparse alone, no TensorFlow work) --------------------------------


@pytest.mark.parametrize("command", [[], ["demo"], ["inspect"], ["verify"], ["head"]])
def test_help_describes_every_command(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main([*command, "--help"])

    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: super-serial {' '.join(command)}".rstrip())
    if not command:
        for name in ("demo", "inspect", "verify", "head"):
            assert re.search(rf"^    {name} +\S", out, re.M), name
        # as the README says them, and main returns them
        assert "0 ok, 1 bad data or missing files, 2 wrong usage, 130 after Ctrl-C" in " ".join(
            out.split())
    assert "--debug" in out


@pytest.mark.parametrize("argv", [["--debug", "inspect", "x"], ["inspect", "x", "--debug"]])
def test_debug_goes_before_or_after_the_command(argv):
    assert cli._parser().parse_args(argv).debug is True
    assert cli._parser().parse_args(["inspect", "x"]).debug is False


def test_wide_characters_keep_the_columns_aligned(tmp_path, capsys):
    """Names in East Asian wide characters take two columns each in a terminal: padded by
    their length, the columns after them came out of line."""
    keys = ["ab", "日本語", "é", "e\u0301x"]  # ASCII, wide, narrow, with a combining accent
    assert [cli._width(k) for k in keys] == [2, 6, 1, 2]
    path = str(tmp_path / "wide.tfrecord")
    super_serial.save(tf.data.Dataset.from_tensors({k: i for i, k in enumerate(keys)}), path)

    def columns(out, pattern):  # where each matching line's dtype starts, in columns
        lines = [line for line in out.splitlines() if re.search(pattern, line)]
        assert len(lines) == len(keys), out
        return {cli._width(line[:line.index("int32")]) for line in lines}

    assert cli.main(["inspect", path]) == 0
    assert len(columns(capsys.readouterr().out, r"int32 +\[\] +int64")) == 1
    assert cli.main(["head", path]) == 0
    assert len(columns(capsys.readouterr().out, r"int32  \d$")) == 1


def test_marks_with_no_combining_class_take_no_column(tmp_path, capsys):
    """A nonspacing mark was counted as a column unless it had a combining class: Thai's ชื่อ
    ("name"; its vowel above has none) and Devanagari's कुल put the columns after them one to
    the left (helper-118)."""
    keys = ["ab", "ชื่อ", "कुल", "x\u20ddy", "\u1100\u1161"]  # an enclosing mark; jamo of 가
    assert [cli._width(k) for k in keys] == [2, 2, 2, 2, 2]
    path = str(tmp_path / "marks.tfrecord")
    super_serial.save(tf.data.Dataset.from_tensors({k: i for i, k in enumerate(keys)}), path)
    assert cli.main(["inspect", path]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if " int64 " in line]
    assert {cli._width(line[:line.index("int32")]) for line in lines} == {len("feature  ")}
    assert cli.main(["head", path]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "int32" in line]
    assert len(lines) == len(keys)
    assert {cli._width(line[:line.index("int32")]) for line in lines} == {len("  ab  ")}


def test_format_characters_take_no_column_but_those_terminals_show():
    """Format characters take no column (zero width space, word joiner, BOM), and neither does
    the Hangul vowel filler or a jamo of Jungseong Extended-B; the soft hyphen and the Arabic
    number signs take one, as glibc's wcwidth gives them (helper-121)."""
    assert cli._width("a\u200bb") == 2
    assert cli._width("x\u2060y\ufeff") == 2
    assert cli._width("\u1100\u1160") == 2
    assert cli._width("\u1100\ud7b0") == 2
    assert cli._width("co\u00adop") == 5
    assert cli._width("\u0600") == 1


def test_the_arabic_end_of_ayah_takes_a_column():
    """U+06DD, a format character that stands before a number, is shown in a column (M53)."""
    assert cli._width("\u06dd") == 1
    assert cli._width("\u0600\u06dd\u070f\u08e2\u00ad") == 5


def test_fullwidth_characters_and_final_jamo():
    """East Asian Fullwidth characters take two columns, as Wide ones do; a final consonant
    (U+11A8-U+11FF) joins the syllable its jamo make (helper-125)."""
    assert cli._width("\uff21\uff22") == 4  # ＡＢ
    assert cli._width("x\u3000y") == 4  # the ideographic space
    assert cli._width("\u1100\u1161\u11a8") == 2
    assert cli._width("\u1100\u1161\u11ff") == 2


def test_inspect_does_not_claim_a_layout_for_the_original_modules_header(capsys):
    """Its header has no layout or block size; `inspect` showed load's defaults as if it had
    ("layout sequential, 256 records per block")."""
    golden = GOLDEN / "original-module"
    assert cli.main(["inspect", str(golden / "images.tfrecord"),
                     "--header", str(golden / "images.header")]) == 0
    out = capsys.readouterr().out
    assert "version 0 (original super_serial module)" in out
    assert ("\n1 file; no layout or block size in this header (load reads it in blocks of "
            "at most 256)\n") in out
    assert "layout sequential" not in out and "per block" not in out
    # --json: no counts or sizes where the header has none (helper-77's mutation sweep, X5)
    assert cli.main(["inspect", str(golden / "images.tfrecord"),
                     "--header", str(golden / "images.header"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["version"] == 0 and info["num_records"] is None and info["num_bytes"] is None
    assert info["shards"] == [{"file": "images.tfrecord", "num_records": None,
                               "num_bytes": None}]


@pytest.mark.parametrize("command", ["inspect", "verify", "head"])
def test_the_original_modules_header_beside_the_records_is_hinted(command, tmp_path, capsys):
    """The original module's files are X.tfrecord and X.header (its own example names them
    so): `inspect X.tfrecord` said only that X.tfrecord.header.yaml was not found
    (helper-118)."""
    golden = GOLDEN / "original-module"
    for name in ("images.tfrecord", "images.header"):
        shutil.copy(golden / name, tmp_path / name)
    assert cli.main([command, str(tmp_path / "images.tfrecord")]) == 1
    err = capsys.readouterr().err
    assert err == (f"super-serial: error: {tmp_path / 'images.tfrecord.header.yaml'}: header "
                   f"file not found; {tmp_path / 'images.header'} is there, as the original "
                   "super_serial module named headers: give it as the header path "
                   "(header_path, or --header)\n"), err


@pytest.mark.parametrize("records, header, hinted", [
    ("images.rec", "images.rec.header", True),  # not named .tfrecord: PATH.header
    ("images.tfrecord", "images.tfrecord.header", True),
    ("images.tfrecord", "images.header/", False),  # a folder of that name
    ("images.tfrecord", "other.header", False),
])
def test_which_original_module_headers_are_hinted(records, header, hinted, tmp_path):
    """The hint names an original-module header beside the records only where one is there,
    as X.header or PATH.header, and a file."""
    golden = GOLDEN / "original-module"
    shutil.copy(golden / "images.tfrecord", tmp_path / records)
    if header.endswith("/"):
        (tmp_path / header).mkdir()
    else:
        shutil.copy(golden / "images.header", tmp_path / header)
    with pytest.raises(super_serial.HeaderError) as info:
        super_serial.load(str(tmp_path / records))
    message = str(info.value)
    assert message.startswith(f"{tmp_path / records}.header.yaml: header file not found"), message
    assert (f"; {tmp_path / header.rstrip('/')} is there, as the original super_serial module "
            "named headers" in message) == hinted, message


@pytest.mark.parametrize("command", ["inspect", "verify", "head"])
def test_a_header_of_other_records_beside_the_path_is_refused_by_every_command(
        command, tmp_path, capsys):
    """`inspect` showed the other save's schema and shards under the path's name, and exited
    0, where `verify` and `head` (and `load`) refuse the pair."""
    super_serial.save(tf.data.Dataset.range(3), str(tmp_path / "a.tfrecord"))
    super_serial.save(tf.data.Dataset.from_tensor_slices([1.5, 2.5]),
                      str(tmp_path / "b.tfrecord"))

    assert cli.main([command, str(tmp_path / "a.tfrecord"),
                     "--header", str(tmp_path / "b.tfrecord.header.yaml")]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert ("lists the record files 'b.tfrecord', not " + str(tmp_path / "a.tfrecord")
            + ", which is there too") in captured.err


def test_head_shows_floats_in_full(tmp_path, capsys):
    """NumPy's default 8 digits showed two float64 timestamps 0.333 s apart, and 1.0 beside
    the next float64 up, as the same value (helper-76)."""
    path = str(tmp_path / "floats.tfrecord")
    super_serial.save(tf.data.Dataset.from_tensors({
        "t": np.array([1733500000.123, 1733500000.456]), "a": np.float64(1.0),
        "b": np.nextafter(1.0, 2.0), "h": np.float32(1 / 3)}), path)
    assert cli.main(["head", path]) == 0
    out = capsys.readouterr().out
    assert "[1.733500000123e+09 1.733500000456e+09]" in out
    assert re.search(r"^  b +float64 +1\.0000000000000002$", out, re.M), out
    assert re.search(r"^  h +float32 +0\.33333334$", out, re.M), out


def test_head_prints_as_it_does_whatever_numpy_print_options_the_process_has(
        tmp_path, capsys):
    """main() run in a process with other NumPy print options (a notebook's suppress=True)
    printed by them: 1e-300 as a line of 300 zeros, every value with a "+" (helper-118)."""
    path = str(tmp_path / "floats.tfrecord")
    super_serial.save(tf.data.Dataset.from_tensors({
        "v": np.array([1e-300, 0.5, np.nan]), "s": np.float64(1e-7),
        "m": np.array([[1e-5, 1.0], [2.5, -np.inf]], np.float32)}), path)
    assert cli.main(["head", path]) == 0
    expected = capsys.readouterr().out
    assert "[1.e-300 5.e-001     nan]" in expected, expected
    for options in [{"suppress": True}, {"sign": "+"}, {"legacy": "1.13"},
                    {"precision": 2, "floatmode": "fixed", "nanstr": "NaN", "infstr": "Inf"}]:
        with np.printoptions(**options):
            assert cli.main(["head", path]) == 0
        assert capsys.readouterr().out == expected, options


def test_head_aligns_the_wrapped_values_of_a_sparse_component(tmp_path, capsys):
    """Sparse values too long for one line wrap under their first value, past "values [",
    as NumPy aligns a wrapped array under its opening bracket (helper-76: they stood 7
    columns to the left)."""
    path = str(tmp_path / "sparse.tfrecord")
    values = np.arange(40) + 0.1234567891234567
    super_serial.save(tf.data.Dataset.from_tensors(
        tf.SparseTensor([[i] for i in range(40)], values, [100])), path)
    assert cli.main(["head", path]) == 0
    lines = capsys.readouterr().out.splitlines()
    first = next(i for i, line in enumerate(lines) if line.lstrip().startswith("values ["))
    opening = lines[first].index("[")
    assert lines[first + 1][:opening + 1].strip() == "", lines
    assert lines[first + 1][opening + 1:opening + 3] == "37", lines


def test_head_does_not_claim_a_total_when_it_stopped_at_n(tmp_path, capsys):
    """head says how many elements there are in all only where it ran out before N
    (helper-77's mutation sweep)."""
    path = str(tmp_path / "d.tfrecord")
    super_serial.save(tf.data.Dataset.range(3), path)
    assert cli.main(["head", path, "-n", "2"]) == 0
    out = capsys.readouterr().out
    assert "element 1" in out and "element 2" not in out
    assert "in all" not in out
    assert cli.main(["head", path, "-n", "5"]) == 0
    assert "(3 elements in all)" in capsys.readouterr().out

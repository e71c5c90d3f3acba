"""Atomic saves: a failed or killed save leaves the previous pair byte-identical and loadable."""

from __future__ import annotations

import collections
import hashlib
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time
import types
import uuid
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_same_elements, fifo_at

from super_serial import (
    CorruptDataError,
    SuperSerialError,
    cli,
    core,
    load,
    merge,
    read_header,
    save,
    verify,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
WIDTH = 4096  # float32 values per element: ~16 KiB records, so a save writes in several batches
TEMP_NAME = re.compile(r"^\.(?P<name>.+)\.(?P<token>[0-9a-f]+)\.tmp[0-9a-z.]*$")


def wide(n: int, offset: float = 0.0) -> tf.data.Dataset:
    ids = tf.range(n, dtype=tf.int64)
    values = tf.cast(ids[:, None] * WIDTH + tf.range(WIDTH, dtype=tf.int64)[None], tf.float32)
    return tf.data.Dataset.from_tensor_slices({"id": ids, "x": values + offset})


def failing_generator(n: int, fail_at: int) -> tf.data.Dataset:
    """`n` wide elements, but the generator raises when asked for element `fail_at`."""

    def generate():
        for i in range(n):
            if i == fail_at:
                raise RuntimeError(f"boom at {i}")
            yield {"id": np.int64(i), "x": np.full(WIDTH, i, np.float32)}

    signature = {"id": tf.TensorSpec([], tf.int64), "x": tf.TensorSpec([WIDTH], tf.float32)}
    return tf.data.Dataset.from_generator(generate, output_signature=signature)


def snapshot(folder) -> dict:
    """{file name: sha256 of its bytes} of every file in the folder."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(Path(folder).iterdir())}


def temporaries(folder) -> list[str]:
    return sorted(name for name in os.listdir(folder) if TEMP_NAME.match(name))


class CountingWriter:
    """Wraps the record writer save uses (framed or tf.io.TFRecordWriter); raises OSError
    instead of writing the batch that holds record `fail_after` (if given), after `delay`
    seconds, setting the event `failed` (if given) as it does."""

    instances: list = []

    def __init__(self, inner, path, *, fail_after=None, delay=0.0, failed=None):
        self.inner = inner
        self.path = path
        self.records = 0
        self.fail_after, self.delay, self.failed = fail_after, delay, failed
        CountingWriter.instances.append(self)

    def prepare(self, records, sizes):
        return self.inner.prepare(records, sizes), len(records)

    def write(self, prepared):
        payload, count = prepared
        if self.fail_after is not None and self.records + count > self.fail_after:
            time.sleep(self.delay)
            if self.failed is not None:
                self.failed.set()
            raise OSError(28, "No space left on device (simulated)", self.path)
        self.inner.write(payload)
        self.records += count

    def close(self):
        self.inner.close()


REAL_WRITER = core._record_writer


@pytest.fixture(params=["framed", "tf.io.TFRecordWriter"])
def counting_writer(request, monkeypatch):
    """Installs CountingWriter around save's record writer (either kind); yields a setter for
    fail_after."""
    CountingWriter.instances = []
    settings = {"fail_after": None, "kind": core._FramedFile}
    if request.param != "framed":
        monkeypatch.setattr(core, "google_crc32c", None)
        settings["kind"] = core._TFRecordFile

    def make(path, compression):
        return CountingWriter(REAL_WRITER(path, compression), path,
                              fail_after=settings["fail_after"])

    monkeypatch.setattr(core, "_record_writer", make)
    return settings


class GoodPair(tuple):
    """(tfrecord_path, header_path, dataset, folder snapshot), shown briefly in failures."""

    def __repr__(self):
        return f"GoodPair({self[0]!r})"


@pytest.fixture
def good_pair(paths):
    """A good saved pair at `paths`."""
    tfrecord_path, header_path = paths
    dataset = wide(40, offset=0.5)
    save(dataset, tfrecord_path, header_path)
    return GoodPair((tfrecord_path, header_path, dataset, snapshot(Path(tfrecord_path).parent)))


def assert_previous_pair_intact(good_pair):
    tfrecord_path, header_path, dataset, before = good_pair
    after = snapshot(Path(tfrecord_path).parent)
    assert sorted(after) == sorted(before), f"folder holds {sorted(after)}, not {sorted(before)}"
    for name in before:
        assert after[name] == before[name], f"{name} changed"
    assert_same_elements(dataset, load(tfrecord_path, header_path))
    assert verify(tfrecord_path, header_path)["num_records"] == 40


# ---- (a) the dataset fails part-way ----------------------------------------------------------


def test_failing_dataset_keeps_previous_pair(good_pair, counting_writer):
    tfrecord_path, header_path, _, _ = good_pair
    # 3000 elements are 48 MiB, several of the batches that save encodes at once.
    with pytest.raises((tf.errors.OpError, RuntimeError), match="boom at 3000"):
        save(failing_generator(3100, fail_at=3000), tfrecord_path, header_path)
    written = sum(w.records for w in CountingWriter.instances)
    assert written > 0, "no record was written before the failure: raise fail_at"
    assert all(TEMP_NAME.match(Path(w.path).name) for w in CountingWriter.instances)
    assert_previous_pair_intact(good_pair)


def test_a_failing_save_removes_the_folders_it_made(tmp_path):
    kept = tmp_path / "kept"
    kept.mkdir()
    tfrecord_path = str(tmp_path / "new" / "deeper" / "data.tfrecord")
    header_path = str(kept / "elsewhere" / "data.header.yaml")
    with pytest.raises((tf.errors.OpError, RuntimeError), match="boom at 500"):
        save(failing_generator(600, fail_at=500), tfrecord_path, header_path, num_shards=2)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["kept"]
    save(wide(3), tfrecord_path, header_path)  # made again, and kept, when the save works
    assert_same_elements(wide(3), load(tfrecord_path, header_path))


def three_shards(folder) -> tuple[str, tf.data.Dataset, dict]:
    """A dataset saved in 3 shards in `folder`: (tfrecord_path, dataset, folder snapshot)."""
    tfrecord_path = str(folder / "data.tfrecord")
    dataset = wide(30)
    save(dataset, tfrecord_path, num_shards=3)
    return tfrecord_path, dataset, snapshot(folder)


def test_failing_dataset_with_shards_keeps_previous_pair(tmp_path):
    tfrecord_path, dataset, before = three_shards(tmp_path)
    with pytest.raises((tf.errors.OpError, RuntimeError), match="boom at 500"):
        save(failing_generator(600, fail_at=500), tfrecord_path, num_shards=2)
    assert snapshot(tmp_path) == before
    assert_same_elements(dataset, load(tfrecord_path))


def test_failing_first_save_leaves_nothing(paths):
    tfrecord_path, header_path = paths
    with pytest.raises((tf.errors.OpError, RuntimeError), match="boom at 3"):
        save(failing_generator(10, fail_at=3), tfrecord_path, header_path)
    assert os.listdir(Path(tfrecord_path).parent) == []


# ---- (b) the process is killed mid-save ------------------------------------------------------

KILLED_SAVE = textwrap.dedent("""
    import sys, time
    import numpy as np
    import tensorflow as tf
    import super_serial

    tfrecord_path, header_path, marker, width = sys.argv[1:4] + [int(sys.argv[4])]

    def generate():
        for i in range(10**9):
            if i == 4000:
                open(marker, "w").close()  # 64 MiB, several batches, went to the writer
            if i >= 4000:
                time.sleep(0.05)
            yield {"id": np.int64(i), "x": np.full(width, -i, np.float32)}

    signature = {"id": tf.TensorSpec([], tf.int64), "x": tf.TensorSpec([width], tf.float32)}
    super_serial.save(tf.data.Dataset.from_generator(generate, output_signature=signature),
                      tfrecord_path, header_path)
    print("the save finished, but it should have been killed first")
""")


def test_killed_save_keeps_previous_pair(good_pair, tmp_path_factory):
    tfrecord_path, header_path, dataset, before = good_pair
    folder = Path(tfrecord_path).parent
    marker = tmp_path_factory.mktemp("marker") / "writing"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(REPO_ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-c", KILLED_SAVE, tfrecord_path, header_path, str(marker), str(WIDTH)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        def writing() -> bool:  # some records have reached the temporary file
            return marker.exists() and any(os.path.getsize(folder / n) for n in temporaries(folder))

        while not writing():
            assert process.poll() is None, process.communicate()[1].decode()[-2000:]
            assert time.monotonic() < deadline, "the save never started writing"
            time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGKILL)
        process.communicate()
    assert process.returncode == -signal.SIGKILL

    leftovers = temporaries(folder)
    assert leftovers, "the killed save left no temporary file: it was not killed mid-save"
    for name in leftovers:
        assert TEMP_NAME.match(name).group("name") == Path(tfrecord_path).name
    [records, claim] = sorted(leftovers, key=lambda name: name.endswith(".claim"))
    assert os.path.getsize(folder / records) > 0, "no record reached the temporary file"
    assert claim.endswith(".tmp.claim") and os.path.getsize(folder / claim) == 0
    # Everything but the leftovers is exactly as before; the leftovers are not taken for data.
    after = snapshot(folder)
    assert {k: v for k, v in after.items() if k not in leftovers} == before
    assert_same_elements(dataset, load(tfrecord_path, header_path))
    assert verify(tfrecord_path, header_path)["files"] == [tfrecord_path]
    assert read_header(header_path)["shards"][0]["file"] == Path(tfrecord_path).name

    # A later save over the same paths works despite the leftovers, and removes them: no
    # process holds the killed save's claim any more.
    replacement = wide(7, offset=9.0)
    save(replacement, tfrecord_path, header_path)
    assert_same_elements(replacement, load(tfrecord_path, header_path))
    assert temporaries(folder) == []


# ---- (c) a write or rename fails -------------------------------------------------------------


@pytest.mark.parametrize("fail_after", [0, 1, 300])
def test_write_error_keeps_previous_pair(good_pair, counting_writer, fail_after):
    tfrecord_path, header_path, _, _ = good_pair
    counting_writer["fail_after"] = fail_after
    with pytest.raises(OSError, match="No space left on device"):
        save(wide(400, offset=2.0), tfrecord_path, header_path)
    assert CountingWriter.instances, "save did not use the record writer"
    assert all(type(w.inner) is counting_writer["kind"] for w in CountingWriter.instances)
    assert_previous_pair_intact(good_pair)


@pytest.mark.parametrize("kwargs", [{}, {"num_shards": 2}, {"shard_size": 4000}])
def test_a_failing_write_names_the_save_and_its_temporary(good_pair, counting_writer, kwargs):
    """A full disk while writing: the error names the path saved to and says nothing was
    saved, where it named only a hidden temporary; the temporary's name is kept in it."""
    tfrecord_path, header_path, _, _ = good_pair
    counting_writer["fail_after"] = 0
    with pytest.raises(OSError) as caught:
        save(wide(400, offset=2.0), tfrecord_path, header_path, **kwargs)
    assert caught.value.errno == 28
    assert caught.value.strerror == (f"{tfrecord_path}: nothing was saved: "
                                     "No space left on device (simulated)")
    assert TEMP_NAME.match(Path(caught.value.filename).name)
    assert_previous_pair_intact(good_pair)


@pytest.mark.parametrize("kwargs", [{}, {"num_shards": 2}, {"shard_size": 4000}])
def test_a_write_that_fails_after_the_last_batch_was_queued_fails_the_save(good_pair, monkeypatch,
                                                                            kwargs):
    """The writer threads' last error is raised once they have stopped, not before: a slow
    last write that fails (a full disk on a slow device) was committed as if written, its
    header listing records its file does not hold, and the previous pair gone (M25: commit's
    _raise_pending before _stop_threads)."""
    tfrecord_path, header_path, _, _ = good_pair
    monkeypatch.setattr(core, "_record_writer", lambda path, compression: CountingWriter(
        REAL_WRITER(path, compression), path, fail_after=0, delay=0.5))  # writing at the commit
    with pytest.raises(OSError, match="No space left on device"):
        save(wide(40, offset=2.0), tfrecord_path, header_path, **kwargs)
    assert_previous_pair_intact(good_pair)


def test_a_write_error_raised_while_batches_are_still_coming_names_the_save(good_pair,
                                                                             monkeypatch):
    """A writer thread's error met by the next batch's write (not by the commit) names the
    save too: "<path>: nothing was saved: ..." (M54: only errors met while committing got
    those words; the message then named only a hidden temporary)."""
    tfrecord_path, header_path, _, _ = good_pair
    failed = threading.Event()

    def generate():  # the second batch only once the first one's write has failed
        for i in range(40):
            if i == 10:
                failed.wait(10)
            yield {"id": np.int64(i), "x": np.full(8, i, np.float32)}

    signature = {"id": tf.TensorSpec([], tf.int64), "x": tf.TensorSpec([8], tf.float32)}
    monkeypatch.setattr(core, "_record_writer", lambda path, compression: CountingWriter(
        REAL_WRITER(path, compression), path, fail_after=0, failed=failed))
    with pytest.raises(OSError) as caught:
        save(tf.data.Dataset.from_generator(generate, output_signature=signature),
             tfrecord_path, header_path, elements_per_batch=10)
    assert caught.value.errno == 28
    assert caught.value.strerror == (f"{tfrecord_path}: nothing was saved: "
                                     "No space left on device (simulated)")
    assert_previous_pair_intact(good_pair)


def _open_files() -> list:
    """What this process's file descriptors are open on (Linux's /proc)."""
    return [os.path.realpath(fd) for fd in Path("/proc/self/fd").iterdir()]


@pytest.mark.skipif(not (os.path.exists("/dev/full") and os.path.isdir("/proc/self/fd")),
                    reason="needs Linux's /dev/full and /proc")
@pytest.mark.parametrize("compression", ["GZIP", "ZLIB"])
def test_a_compressed_save_failing_on_a_full_disk_lets_go_of_its_file(good_pair, monkeypatch,
                                                                      compression):
    """tf.io.TFRecordWriter's records go to /dev/full, where every flush fails as on a full
    disk. A compressed writer whose close fails so keeps its file open (a second close lets
    it go): a save that failed on a full disk held its removed temporary, and with it the
    space the disk lacked, until the error was collected."""
    tfrecord_path, header_path, _, _ = good_pair
    monkeypatch.setattr(core, "_record_writer",
                        lambda path, compression: core._TFRecordFile("/dev/full", compression))
    with pytest.raises(tf.errors.ResourceExhaustedError) as caught:
        save(wide(400, offset=2.0), tfrecord_path, header_path, compression=compression)
    assert str(caught.value.message).startswith(f"{tfrecord_path}: nothing was saved: ")
    assert "No space left on device" in str(caught.value.message)
    assert "/dev/full" not in _open_files()
    assert_previous_pair_intact(good_pair)


def test_a_tensorflow_write_error_names_the_save(good_pair, monkeypatch):
    """tf.io.TFRecordWriter's errors (it writes compressed files) name the save too, as the
    same kind of error."""
    tfrecord_path, header_path, _, _ = good_pair

    class Failing:
        def __init__(self, path, compression):
            self.path = path

        def prepare(self, records, sizes):
            return records

        def write(self, records):
            raise tf.errors.ResourceExhaustedError(
                None, None, f"{self.path}; No space left on device")

        def close(self):
            pass

    monkeypatch.setattr(core, "_record_writer", Failing)
    with pytest.raises(tf.errors.ResourceExhaustedError) as caught:
        save(wide(400), tfrecord_path, header_path, compression="GZIP")
    message = caught.value.message
    assert message.startswith(f"{tfrecord_path}: nothing was saved: ")
    assert message.endswith("; No space left on device")
    assert TEMP_NAME.match(Path(message.split(": ")[-1].split(";")[0]).name)
    assert_previous_pair_intact(good_pair)


def test_a_record_file_that_cannot_be_made_names_the_save(good_pair, monkeypatch):
    tfrecord_path, header_path, _, _ = good_pair

    def refuse(path, compression):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(core, "_record_writer", refuse)
    with pytest.raises(PermissionError, match=re.escape(
            f"{tfrecord_path}: nothing was saved: Permission denied")):
        save(wide(10), tfrecord_path, header_path)
    assert_previous_pair_intact(good_pair)


def test_other_errors_while_writing_are_raised_as_they_are(good_pair, monkeypatch):
    """Only errors about the save's temporaries are reworded."""
    tfrecord_path, header_path, _, _ = good_pair

    def refuse(path, compression):
        raise OSError(28, "No space left on device", "/somewhere/else")

    monkeypatch.setattr(core, "_record_writer", refuse)
    with pytest.raises(OSError) as caught:
        save(wide(10), tfrecord_path, header_path)
    assert caught.value.strerror == "No space left on device"
    assert_previous_pair_intact(good_pair)


@pytest.mark.parametrize("tensorflow_error", [False, True])
def test_a_merge_whose_header_cannot_be_written_names_it(tmp_path, monkeypatch,
                                                         tensorflow_error):
    """TensorFlow writes the header (GFile): a full disk gives its error; an OSError where a
    filesystem's own code raises one."""
    parts = [str(tmp_path / f"part{i}.tfrecord") for i in range(2)]
    for part in parts:
        save(wide(5), part)
    header_path = str(tmp_path / "all.header.yaml")

    def full(path, header, final):
        if tensorflow_error:
            raise tf.errors.ResourceExhaustedError(None, None, f"{path}; No space left on device")
        raise OSError(28, "No space left on device", path)

    monkeypatch.setattr(core, "_write_header", full)
    with pytest.raises((OSError, tf.errors.ResourceExhaustedError)) as caught:
        merge(parts, str(tmp_path / "all.tfrecord"), header_path)
    what = f"{header_path}: nothing was merged: "
    if tensorflow_error:
        assert type(caught.value) is tf.errors.ResourceExhaustedError
        assert caught.value.message.startswith(what)
        temporary = caught.value.message[len(what):].split(";")[0]
    else:
        assert caught.value.strerror == f"{what}No space left on device"
        temporary = caught.value.filename
    assert TEMP_NAME.match(Path(temporary).name)
    assert sorted(os.listdir(tmp_path)) == sorted(
        name for part in parts for name in (Path(part).name, Path(part).name + ".header.yaml"))


def test_a_merge_whose_header_cannot_be_replaced_names_the_header(tmp_path, monkeypatch):
    """Another user's header in a folder with the sticky bit: TensorFlow's error named the
    merge's temporary, removed by then, not the header it may not replace (helper-134;
    test_permissions.py has this as another user, where it can run)."""
    parts = [str(tmp_path / f"part{i}.tfrecord") for i in range(2)]
    for part in parts:
        save(wide(5), part)
    header_path = str(tmp_path / "all.header.yaml")

    def refused(source, destination, overwrite=False):
        raise tf.errors.PermissionDeniedError(None, None, f"{source}; Operation not permitted")

    monkeypatch.setattr(tf.io.gfile, "rename", refused)
    with pytest.raises(tf.errors.PermissionDeniedError) as caught:
        merge(parts, str(tmp_path / "all.tfrecord"), header_path)
    assert caught.value.message == (
        f"{header_path}: nothing was merged: {header_path}; Operation not permitted")
    assert sorted(os.listdir(tmp_path)) == sorted(
        name for part in parts for name in (Path(part).name, Path(part).name + ".header.yaml"))


def test_write_error_in_one_shard_keeps_previous_shards(tmp_path, counting_writer):
    tfrecord_path, dataset, before = three_shards(tmp_path)
    counting_writer["fail_after"] = 100
    with pytest.raises(OSError, match="No space left on device"):
        save(wide(800, offset=1.0), tfrecord_path, num_shards=2)
    assert snapshot(tmp_path) == before
    assert_same_elements(dataset, load(tfrecord_path))


def failing_rename(monkeypatch, should_fail):
    """Makes the first rename for which should_fail(src, dst) holds raise (later ones work, so
    that a save can put back what it moved)."""
    real_rename = tf.io.gfile.rename
    calls = []
    failed = []

    def rename(src, dst, overwrite=False):
        calls.append((src, dst))
        if not failed and should_fail(str(src), str(dst)):
            failed.append((src, dst))
            raise tf.errors.PermissionDeniedError(None, None, f"{dst}: rename refused (simulated)")
        return real_rename(src, dst, overwrite)

    monkeypatch.setattr(tf.io.gfile, "rename", rename)
    return calls


def test_header_rename_error_keeps_previous_pair(good_pair, monkeypatch):
    """The header goes last; if it cannot be put in place, the new records must not stay."""
    tfrecord_path, header_path, _, _ = good_pair
    calls = failing_rename(monkeypatch, lambda src, dst: dst == header_path)
    with pytest.raises(tf.errors.PermissionDeniedError, match="rename refused"):
        save(wide(12, offset=3.0), tfrecord_path, header_path)
    assert any(dst == header_path for _, dst in calls), f"renames: {calls}"
    monkeypatch.undo()
    assert_previous_pair_intact(good_pair)


def test_shard_rename_error_keeps_previous_shards(tmp_path, monkeypatch):
    tfrecord_path, dataset, before = three_shards(tmp_path)
    second = f"{tfrecord_path}-00001-of-00003"
    failing_rename(monkeypatch, lambda src, dst: dst == second)
    with pytest.raises(tf.errors.PermissionDeniedError, match="rename refused"):
        save(wide(30, offset=5.0), tfrecord_path, num_shards=3)
    monkeypatch.undo()
    assert snapshot(tmp_path) == before
    assert_same_elements(dataset, load(tfrecord_path))


def test_an_old_file_that_cannot_be_moved_aside_fails_the_save_by_name(tmp_path, monkeypatch):
    """TensorFlow's error for a rename names only its source, here an old shard, as if that
    were at fault: the error says now that nothing was saved."""
    tfrecord_path, dataset, before = three_shards(tmp_path)
    second = f"{tfrecord_path}-00001-of-00003"
    real_rename = tf.io.gfile.rename

    def rename(src, dst, overwrite=False):
        if str(src) == second:
            raise tf.errors.ResourceExhaustedError(None, None, f"{src}; No space left on device")
        return real_rename(src, dst, overwrite)

    monkeypatch.setattr(tf.io.gfile, "rename", rename)
    with pytest.raises(tf.errors.ResourceExhaustedError) as caught:
        save(wide(30, offset=5.0), tfrecord_path, num_shards=3)
    assert caught.value.message == (f"{tfrecord_path}: nothing was saved: {second}; "
                                    "No space left on device")
    monkeypatch.undo()
    assert snapshot(tmp_path) == before
    assert_same_elements(dataset, load(tfrecord_path))


def test_a_failed_move_aside_in_a_folder_that_cannot_be_listed(tmp_path, monkeypatch):
    """In a folder one may write in but not list (mode 1733, and a header that another user
    owns), the old header's move aside failed, and the rollback, which could not list the
    folder, took it as made: the error said a backup that was never made could not be put
    back (helper-104, as a user other than root; here the listing and the rename fail as
    they did there)."""
    tfrecord_path, header_path = str(tmp_path / "a.tfrecord"), str(tmp_path / "a.header.yaml")
    save(wide(6), tfrecord_path, header_path)
    before = snapshot(tmp_path)
    real_listdir, real_rename = tf.io.gfile.listdir, tf.io.gfile.rename

    def listdir(path):
        if Path(str(path)) == tmp_path:
            raise tf.errors.PermissionDeniedError(None, None, f"{path}; Permission denied")
        return real_listdir(path)

    def rename(src, dst, overwrite=False):
        if str(src) == header_path:
            raise tf.errors.PermissionDeniedError(None, None, f"{src}; Operation not permitted")
        return real_rename(src, dst, overwrite)

    monkeypatch.setattr(tf.io.gfile, "listdir", listdir)
    monkeypatch.setattr(tf.io.gfile, "rename", rename)
    with pytest.raises(tf.errors.PermissionDeniedError, match="^" + re.escape(
            f"{tfrecord_path}: nothing was saved: {header_path}; Operation not permitted")):
        save(wide(4), tfrecord_path, header_path)
    monkeypatch.undo()
    assert snapshot(tmp_path) == before


def test_old_files_that_cannot_be_put_back_are_named(tmp_path, monkeypatch):
    """On a full disk the renames back can fail too (a folder's listing grows for the old
    names). The new temporaries are removed before them, to make room, and an old file still
    not put back is named with where it lies, so that it can be renamed back by hand; a bare
    error for the first rename left the dataset unloadable with no word of it."""
    tfrecord_path, dataset, before = three_shards(tmp_path)
    first, third = (f"{tfrecord_path}-0000{i}-of-00003" for i in (0, 2))
    real_rename = tf.io.gfile.rename
    temporaries_at_put_back = []

    def rename(src, dst, overwrite=False):
        src, dst = str(src), str(dst)
        if src.endswith(".tmp.old"):  # putting an old file back
            # the save's claim (empty, `_claimed`) goes last, once nothing of the save is left
            temporaries_at_put_back.append(sorted(
                n for n in os.listdir(tmp_path)
                if TEMP_NAME.match(n) and not n.endswith((".old", ".claim"))))
            if dst == first:
                raise tf.errors.ResourceExhaustedError(None, None, f"{src}; No space left")
        elif dst == third:  # the new third shard into place
            raise tf.errors.ResourceExhaustedError(None, None, f"{src}; No space left")
        return real_rename(src, dst, overwrite)

    monkeypatch.setattr(tf.io.gfile, "rename", rename)
    with pytest.raises(SuperSerialError) as caught:
        save(wide(30, offset=5.0), tfrecord_path, num_shards=3)
    monkeypatch.undo()
    assert temporaries_at_put_back and not any(temporaries_at_put_back)
    [backup] = [n for n in os.listdir(tmp_path) if n.endswith(".tmp.old")]
    message = str(caught.value)
    assert message.startswith(f"{tmp_path}: a save failed (")
    assert "could not put back 1 of the files there before" in message
    assert message.endswith(f"renamed back (before saving there again: a save may remove "
                            f"them): {tmp_path / backup} back to {Path(first).name}")
    with pytest.raises(CorruptDataError, match="00000-of-00003"):
        load(tfrecord_path)
    os.rename(tmp_path / backup, first)  # as the message says
    assert snapshot(tmp_path) == before
    assert_same_elements(dataset, load(tfrecord_path))


@pytest.mark.parametrize("merging", [False, True])
def test_a_folder_that_cannot_be_made_leaves_none_and_names_the_save(tmp_path, monkeypatch,
                                                                      merging):
    """The folders made before it (two levels, removed each before its parent) are removed
    (makedirs made them all in one call, and a failure left them), and the error says
    nothing was saved (merged)."""
    parts = [str(tmp_path / f"part{i}.tfrecord") for i in range(2)]
    for part in parts:
        save(wide(5), part)
    before = sorted(os.listdir(tmp_path))
    real_makedirs = tf.io.gfile.makedirs

    def makedirs(path):
        if str(path).endswith("sub"):
            raise tf.errors.ResourceExhaustedError(None, None, f"{path}; No space left")
        return real_makedirs(path)

    monkeypatch.setattr(tf.io.gfile, "makedirs", makedirs)
    target = str(tmp_path / "new" / "deeper" / "sub" / "all.tfrecord")
    with pytest.raises(tf.errors.ResourceExhaustedError) as caught:
        if merging:
            merge(parts, str(tmp_path / "all.tfrecord"), target)
        else:
            save(wide(3), target)
    what = f"{target}: nothing was {'merged' if merging else 'saved'}"
    assert caught.value.message == f"{what}: {tmp_path / 'new' / 'deeper' / 'sub'}; No space left"
    assert sorted(os.listdir(tmp_path)) == before


def interrupted_rename(monkeypatch, n: int):
    """Makes the n-th rename happen and then raise KeyboardInterrupt, as a Ctrl-C during its
    system call is raised once the call returns; returns the renames' destinations."""
    real_rename, done = tf.io.gfile.rename, []

    def rename(src, dst, overwrite=False):
        real_rename(src, dst, overwrite)
        done.append(dst)
        if len(done) == n:
            raise KeyboardInterrupt

    monkeypatch.setattr(tf.io.gfile, "rename", rename)
    return done


# A 3-shard dataset saved over with 3 shards: 4 files aside, then 4 new ones (the header
# last); with 12: the old header aside, then 13 new files
RENAMES = [(3, n) for n in range(1, 9)] + [(12, n) for n in (1, 2, 5, 13)]


@pytest.mark.parametrize("where", ["local", "ram"])
@pytest.mark.parametrize("num_shards, n", RENAMES)
def test_a_ctrl_c_during_a_rename_keeps_previous_pair(tmp_path, monkeypatch, where, num_shards,
                                                      n):
    """The rename was listed for the rollback only once it returned: a Ctrl-C during the old
    header's move aside left no header (load refused the folder), and one during a shard's
    rename left that new shard beside the old dataset. ram:// says any prefix of a file's name
    exists (`.tmp1` while `.tmp10` is there): the rollback looks for names in the listing."""
    folder = str(tmp_path) if where == "local" else f"ram://ctrl-c-{uuid.uuid4().hex}"
    tfrecord_path = f"{folder}/data.tfrecord"
    save(wide(30), tfrecord_path, num_shards=3)
    before = ram_snapshot(folder)
    done = interrupted_rename(monkeypatch, n)
    with pytest.raises(KeyboardInterrupt):
        save(wide(30, offset=5.0), tfrecord_path, num_shards=num_shards)
    monkeypatch.undo()
    assert len(done) >= n
    assert ram_snapshot(folder) == before
    assert_same_elements(wide(30), load(tfrecord_path))


def _claim_descriptor(descriptor: int, removed: bool = False) -> bool:
    """Whether a descriptor is of a save's claim (`removed`: once its file is removed, as a
    save releases it; a save also opens other saves' claims to test their locks)."""
    try:
        link = os.readlink(f"/proc/self/fd/{descriptor}")
    except OSError:
        return False
    return link.endswith(".tmp.claim (deleted)" if removed else ".tmp.claim")


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names descriptors by /proc")
def test_a_ctrl_c_as_the_claim_closes_is_raised_once_the_save_is_done(tmp_path, monkeypatch):
    """The claim is released last; a Ctrl-C met as its close returned made the abort close
    the same number again: the save raised OSError (EBADF) instead of KeyboardInterrupt, and
    a descriptor another thread had opened by then would have been closed under it."""
    tfrecord_path = str(tmp_path / "data.tfrecord")
    save(wide(30), tfrecord_path)
    real_close = core.os.close

    def close(descriptor):
        claim = _claim_descriptor(descriptor, removed=True)
        real_close(descriptor)
        if claim:
            raise KeyboardInterrupt

    monkeypatch.setattr(core.os, "close", close)
    with pytest.raises(KeyboardInterrupt) as caught:
        save(wide(30, offset=5.0), tfrecord_path)
    monkeypatch.undo()
    assert caught.value.__context__ is None
    assert temporaries(tmp_path) == []
    assert_same_elements(wide(30, offset=5.0), load(tfrecord_path))


@pytest.mark.skipif(core.fcntl is None, reason="saves claim their temporaries with flock")
def test_a_ctrl_c_as_the_claim_is_locked_leaves_no_claim(tmp_path, monkeypatch):
    """The claim's file and descriptor (and its lock) were left where a Ctrl-C came as its
    lock was taken: no later save in the process removed that claim, held by a live lock."""
    tfrecord_path = str(tmp_path / "data.tfrecord")
    save(wide(30), tfrecord_path)
    before = snapshot(tmp_path)
    real_flock = core.fcntl.flock

    def flock(descriptor, operation):
        real_flock(descriptor, operation)
        if _claim_descriptor(descriptor):
            raise KeyboardInterrupt

    monkeypatch.setattr(core.fcntl, "flock", flock)
    with pytest.raises(KeyboardInterrupt):
        save(wide(30, offset=5.0), tfrecord_path)
    monkeypatch.undo()
    assert snapshot(tmp_path) == before
    assert not any(_claim_descriptor(int(d)) for d in os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("listing", ["fails", "has a name that is not UTF-8"])
@pytest.mark.parametrize("n", [1, 4, 5, 8])  # 4 files aside, then 4 new ones
def test_a_rollback_goes_on_where_the_folder_cannot_be_listed(tmp_path, monkeypatch, listing,
                                                             n):
    """The rename under way is looked for in the folder's listing: an error there (a
    transient one on gs://, or TensorFlow's UnicodeDecodeError for a name that is not UTF-8)
    escaped the rollback, or counted as "not moved", leaving the old header aside."""
    tfrecord_path, dataset, before = three_shards(tmp_path)
    if listing == "fails":
        def listdir(path):
            raise tf.errors.UnavailableError(None, None, "listing failed (simulated)")
        monkeypatch.setattr(tf.io.gfile, "listdir", listdir)
    else:
        stray = os.path.join(os.fsencode(tmp_path), b"notes\xff.txt")
        open(stray, "wb").close()
        before = snapshot(tmp_path)
    interrupted_rename(monkeypatch, n)
    with pytest.raises(KeyboardInterrupt):
        save(wide(30, offset=5.0), tfrecord_path, num_shards=3)
    monkeypatch.undo()
    assert snapshot(tmp_path) == before
    assert_same_elements(dataset, load(tfrecord_path))


def test_a_missing_header_is_named_beside_a_name_that_is_not_utf8(tmp_path):
    """Looking for a save's moved-aside header, load listed the folder and let TensorFlow's
    UnicodeDecodeError out instead of its HeaderError."""
    tfrecord_path = str(tmp_path / "data.tfrecord")
    save(wide(3), tfrecord_path)
    os.remove(tfrecord_path + ".header.yaml")
    open(os.path.join(os.fsencode(tmp_path), b"notes\xff.txt"), "wb").close()
    with pytest.raises(core.HeaderError, match="header file not found"):
        load(tfrecord_path)


@pytest.mark.parametrize("n", [2, 4, 13])
def test_a_failed_rename_on_ram_keeps_previous_pair(monkeypatch, n):
    """A rollback that asked ram:// whether `.tmp1` was still there (it says so while
    `.tmp10` is) left a new shard beside the old dataset."""
    tfrecord_path = f"ram://failed-rename-{uuid.uuid4().hex}/data.tfrecord"
    save(wide(30), tfrecord_path, num_shards=3)
    folder = tfrecord_path.rpartition("/")[0]
    before = ram_snapshot(folder)
    failing_rename(monkeypatch, lambda src, dst, calls=[]: calls.append(dst) or len(calls) == n)
    with pytest.raises(tf.errors.PermissionDeniedError, match="rename refused"):
        save(wide(30, offset=5.0), tfrecord_path, num_shards=12)
    monkeypatch.undo()
    assert ram_snapshot(folder) == before
    assert_same_elements(wide(30), load(tfrecord_path))


@pytest.mark.parametrize("num_shards", [1, 3])
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_long_names_keep_their_backups_apart(tmp_path, monkeypatch, num_shards, n):
    """A 235-byte name and its header's (247) were both cut to the same temporary name, so
    moving the records aside replaced the old header's backup: a failed save then left the old
    records' bytes at the header path and nothing else (and a killed one lost the header)."""
    tfrecord_path = str(tmp_path / ("a" * 226 + ".tfrecord"))
    save(wide(20), tfrecord_path, num_shards=num_shards)
    before = snapshot(tmp_path)
    destinations = [str(tmp_path / name) for name in before]
    backups = {core._temp_name(d, "0123456789ab", ".old") for d in destinations}
    assert len(backups) == len(destinations) and all(len(Path(b).name) <= 255 for b in backups)
    failing_rename(monkeypatch, lambda src, dst, calls=[]: calls.append(dst) or len(calls) == n)
    with pytest.raises(tf.errors.PermissionDeniedError, match="rename refused"):
        save(wide(10, offset=5.0), tfrecord_path, num_shards=num_shards)
    monkeypatch.undo()
    assert snapshot(tmp_path) == before
    assert_same_elements(wide(20), load(tfrecord_path))


def test_a_load_during_a_saves_renames_waits_for_the_new_header(tmp_path, monkeypatch):
    """A reader in another process (a thread here) that comes while a save puts its files in
    place, its old header moved aside and its new one not yet renamed, waits for the new one
    and loads the new dataset; it was refused ("header file not found")."""
    tfrecord_path = str(tmp_path / "data.tfrecord")
    save(wide(10), tfrecord_path)
    real_rename, readers = tf.io.gfile.rename, []

    def load_all():
        try:
            readers.append(list(load(tfrecord_path).as_numpy_iterator()))
        except Exception as error:  # noqa: BLE001 - handed to the test's thread
            readers.append(error)

    def rename_then_read(src, dst, overwrite=False):
        real_rename(src, dst, overwrite)
        if src.endswith(".header.yaml") and not readers:  # the old header, moved aside
            reader = threading.Thread(target=load_all)
            reader.start()
            time.sleep(0.3)  # the reader looks, and finds no header
            assert reader.is_alive(), readers  # waiting, not refused
            rename_then_read.reader = reader

    monkeypatch.setattr(tf.io.gfile, "rename", rename_then_read)
    save(wide(20, offset=1.0), tfrecord_path)
    monkeypatch.undo()
    rename_then_read.reader.join(timeout=30)
    [elements] = readers
    assert not isinstance(elements, Exception), elements
    expected = list(wide(20, offset=1.0).as_numpy_iterator())
    assert len(elements) == 20
    for got, want in zip(elements, expected):
        np.testing.assert_array_equal(got["x"], want["x"])


def test_a_header_put_in_place_between_two_looks_is_read(tmp_path, monkeypatch):
    """The save renames its header into place, and removes the temporaries, after a reader
    found it missing and before it lists the folder: the reader finds no save under way, and
    looks once more."""
    tfrecord_path = str(tmp_path / "data.tfrecord")
    header_path = tfrecord_path + ".header.yaml"
    save(wide(5), tfrecord_path)
    aside = core._temp_name(header_path, "0123456789ab")
    os.rename(header_path, aside)
    real_exists = tf.io.gfile.exists

    def exists_then_placed(path):
        found = real_exists(path)
        if path == header_path and not found:
            os.rename(aside, header_path)  # the save, just after this look
        return found

    monkeypatch.setattr(tf.io.gfile, "exists", exists_then_placed)
    loaded = load(tfrecord_path)
    monkeypatch.undo()
    assert_same_elements(wide(5), loaded)


def test_a_header_moved_aside_after_it_was_found_is_waited_for(tmp_path, monkeypatch):
    """A save moves the old header aside between a reader's look and its opening the file
    (which TensorFlow then refuses, "not found"), and puts its new one in place 0.1 s later:
    the reader waits for it as for one it found missing."""
    tfrecord_path = str(tmp_path / "data.tfrecord")
    header_path = tfrecord_path + ".header.yaml"
    save(wide(5), tfrecord_path)
    aside = core._temp_name(header_path, "0123456789ab", ".old")
    real_exists, placer = tf.io.gfile.exists, []

    def found_then_moved(path):
        found = real_exists(path)
        if path == header_path and found and not placer:
            os.rename(header_path, aside)
            placer.append(threading.Timer(0.1, os.rename, (aside, header_path)))
            placer[0].start()
        return found

    monkeypatch.setattr(tf.io.gfile, "exists", found_then_moved)
    loaded = load(tfrecord_path)
    monkeypatch.undo()
    placer[0].join()
    assert_same_elements(wide(5), loaded)


def test_a_load_whose_files_a_save_replaces_after_its_header_was_read_loads_the_new_ones(
        tmp_path, monkeypatch):
    """A save moves the old files aside after a reader read the header and before it checked
    the files, and puts new ones in place 0.1 s later (the same schema and sizes: a header
    identical to the old one). The reader reads the header again, waits for it, and loads
    the new dataset; it was refused ("record file not found")."""
    tfrecord_path = str(tmp_path / "data.tfrecord")
    header_path = tfrecord_path + ".header.yaml"
    save(wide(10), tfrecord_path)
    newer = tmp_path / "newer"
    newer.mkdir()
    save(wide(10, offset=1.0), str(newer / "data.tfrecord"))
    assert (newer / "data.tfrecord.header.yaml").read_bytes() == Path(header_path).read_bytes()
    real_stat, placer = tf.io.gfile.stat, []

    def stat_as_a_save_begins(path):
        if path == tfrecord_path and not placer:
            aside = [core._temp_name(p, "0123456789ab", ".old") for p in (header_path, path)]
            os.rename(header_path, aside[0])
            os.rename(path, aside[1])

            def place():
                os.rename(newer / "data.tfrecord", tfrecord_path)
                os.rename(newer / "data.tfrecord.header.yaml", header_path)
                for old in aside:
                    os.remove(old)

            placer.append(threading.Timer(0.1, place))
            placer[0].start()
        return real_stat(path)

    monkeypatch.setattr(tf.io.gfile, "stat", stat_as_a_save_begins)
    loaded = load(tfrecord_path)
    monkeypatch.undo()
    placer[0].join()
    assert_same_elements(wide(10, offset=1.0), loaded)


@pytest.mark.parametrize("left", [".old", ""])
def test_a_save_killed_while_putting_its_files_in_place_is_waited_for_then_named(
        tmp_path, monkeypatch, left):
    """Its header's temporary (the old one moved aside, or its new one not yet renamed) stays:
    a reader waits `_PLACING_WAIT` for the header, then says what is there."""
    monkeypatch.setattr(core, "_PLACING_WAIT", 0.2)
    tfrecord_path = str(tmp_path / "data.tfrecord")
    header_path = tfrecord_path + ".header.yaml"
    save(wide(3), tfrecord_path)
    os.rename(header_path, core._temp_name(header_path, "0123456789ab", left))
    began = time.monotonic()
    with pytest.raises(core.HeaderError) as refused:
        load(tfrecord_path)
    assert time.monotonic() - began >= 0.2
    message = str(refused.value)
    assert message.startswith(f"{header_path}: header file not found; a save there is still "
                              "putting its files in place after 0.2 s (try again in a moment), "
                              "or was interrupted while it did: then "), message
    if left:
        assert "the previous files are beside it as hidden '.<name>.<token>.tmp.old'" in message
        assert message.endswith("rename them back to recover that dataset, before saving "
                                "there again: a save may remove them)"), message
    else:
        assert "its new header was not put in place (it is beside it as a hidden " \
               "'.<name>.<token>.tmp')" in message


def test_a_header_that_is_there_but_does_not_open_is_refused_at_once(tmp_path):
    """A socket at the header's path: TensorFlow says "not found" as it opens it, as for a
    header moved aside by a save, but nothing of a save is beside it; looked at once more,
    it is refused with TensorFlow's reason, not waited for and called missing."""
    tfrecord_path = str(tmp_path / "data.tfrecord")
    save(wide(3), tfrecord_path)
    header_path = tfrecord_path + ".header.yaml"
    os.remove(header_path)
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(header_path)
        began = time.monotonic()
        with pytest.raises(core.HeaderError) as refused:
            load(tfrecord_path)
        assert time.monotonic() - began < 1.0
    assert str(refused.value) == f"{header_path}: a socket, not a header file", refused.value


def _save_after_first_header_read(monkeypatch, tfrecord_path, dataset):
    """Saves `dataset` at `tfrecord_path` right after the first header read that follows, as
    a save in another process could between a reader's reads."""
    real_read, saved = core._read_header, []

    def read_then_save(*args, **kwargs):
        header = real_read(*args, **kwargs)
        if not saved:
            saved.append(True)
            save(dataset, tfrecord_path, num_shards=2)
        return header

    monkeypatch.setattr(core, "_read_header", read_then_save)
    return saved


@pytest.mark.parametrize("compression", [None, "GZIP"])
def test_verify_reports_on_the_one_header_whose_records_it_checked(tmp_path, monkeypatch,
                                                                     compression):
    """A save lands after verify's first read of the header: its count, files and header are
    all of one save; it read the header twice, and gave the new count beside the old header
    and files, or failed on the old files with GZIP."""
    tfrecord_path = str(tmp_path / "data.tfrecord")
    save(wide(40), tfrecord_path, num_shards=3, compression=compression)
    saved = _save_after_first_header_read(monkeypatch, tfrecord_path, wide(7, offset=1.0))
    summary = verify(tfrecord_path)
    monkeypatch.undo()
    assert saved
    assert summary["num_records"] == summary["header"]["num_records"] == 7
    assert [Path(f).name for f in summary["files"]] == [
        s["file"] for s in summary["header"]["shards"]]
    assert all(Path(f).exists() for f in summary["files"])


def test_head_names_the_features_of_the_header_whose_records_it_shows(tmp_path, monkeypatch,
                                                                      capsys):
    tfrecord_path = str(tmp_path / "data.tfrecord")
    save(tf.data.Dataset.from_tensor_slices({"label": [b"png1"], "score": [7]}), tfrecord_path)
    _save_after_first_header_read(
        monkeypatch, tfrecord_path,
        tf.data.Dataset.from_tensor_slices({"name": [b"cat"], "weight": [2.5]}))
    assert cli.main(["head", tfrecord_path]) == 0
    monkeypatch.undo()
    out = capsys.readouterr().out
    assert re.search(r"^  name +string +b'cat'$", out, re.M), out
    assert re.search(r"^  weight +float32 +2.5$", out, re.M), out


def test_a_missing_header_with_no_save_under_way_is_not_waited_for(tmp_path, monkeypatch):
    """Only a header's temporaries make a reader wait: another dataset's, or none, do not."""
    monkeypatch.setattr(core, "_PLACING_WAIT", 5.0)
    tfrecord_path = str(tmp_path / "data.tfrecord")
    save(wide(3), tfrecord_path)
    os.rename(tfrecord_path + ".header.yaml",
              core._temp_name(str(tmp_path / "other.tfrecord.header.yaml"), "0123456789ab"))
    began = time.monotonic()
    with pytest.raises(core.HeaderError, match=r"header file not found$"):
        load(tfrecord_path)
    assert time.monotonic() - began < 2.0


def test_an_interrupted_save_is_named_for_headers_of_long_names(tmp_path, monkeypatch):
    """_temp_name cuts long names short; the hint after a kill among the renames finds the old
    header moved aside all the same."""
    monkeypatch.setattr(core, "_PLACING_WAIT", 0.05)
    tfrecord_path = str(tmp_path / "data.tfrecord")
    header_path = str(tmp_path / ("h" * 240 + ".yaml"))  # its temporaries' names are cut
    save(wide(3), tfrecord_path, header_path)
    aside = core._temp_name(header_path, "0123456789ab", ".old")
    assert len(Path(aside).name) == 255 and ".yaml" not in Path(aside).name  # cut short
    os.rename(header_path, aside)  # as a save killed after moving the old header aside
    with pytest.raises(core.HeaderError, match="or was interrupted while it did"):
        load(tfrecord_path, header_path)
    os.rename(aside, str(tmp_path / ".other.yaml.0123456789ab.tmp.old"))  # another's
    with pytest.raises(core.HeaderError) as refused:
        load(tfrecord_path, header_path)
    assert "or was interrupted while it did" not in str(refused.value)


@pytest.mark.parametrize("failing", ["super_serial-writer-0", "super_serial-writer-1"])
def test_a_writer_thread_that_cannot_start_leaves_nothing(tmp_path, monkeypatch, failing):
    """As when the process may start no more threads: the error is the thread's, and the
    temporaries are closed and removed."""
    real_start = threading.Thread.start

    def start(thread):
        if thread.name == failing:
            raise RuntimeError("can't start new thread")
        return real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    with pytest.raises(RuntimeError, match="can't start new thread"):
        save(wide(10), str(tmp_path / "data.tfrecord"), num_shards=2)
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []
    assert not [t for t in threading.enumerate() if t.name.startswith("super_serial-writer")]
    if Path("/proc/self/fd").is_dir():  # Linux: no descriptor left open on the folder
        targets = _open_files()
        assert not [t for t in targets if t.startswith(str(tmp_path))], targets


def test_renames_put_header_last(paths, monkeypatch):
    tfrecord_path, header_path = paths
    calls = failing_rename(monkeypatch, lambda src, dst: False)
    save(wide(30), tfrecord_path, header_path, num_shards=3)
    destinations = [dst for _, dst in calls]
    assert destinations[-1] == header_path
    assert sorted(destinations[:-1]) == [f"{tfrecord_path}-{i:05d}-of-00003" for i in range(3)]
    for src, _ in calls:
        assert TEMP_NAME.match(Path(src).name), f"{src} is not a temporary name"
        assert Path(src).parent == Path(tfrecord_path).parent, "temporaries must sit beside"


def test_a_save_killed_between_its_renames_never_pairs_old_records_with_new(tmp_path,
                                                                           monkeypatch):
    """Records of the same sizes, so only the header could tell old from new: wherever among
    the renames a kill lands, the folder it leaves loads the old dataset or the new one, or is
    refused (no header) with the previous files all still there; never a mix of the two."""
    live = tmp_path / "live"
    live.mkdir()
    tfrecord_path = str(live / "data.tfrecord")
    old, new = wide(30, offset=1.0), wide(30, offset=2.0)
    save(old, tfrecord_path, num_shards=3)
    previous = {p.name: p.read_bytes() for p in live.iterdir()}
    states = []  # the folder as a kill just before each rename would leave it
    real_rename = tf.io.gfile.rename

    def rename(src, dst, overwrite=False):
        states.append({p.name: p.read_bytes() for p in live.iterdir()})
        return real_rename(src, dst, overwrite)

    monkeypatch.setattr(tf.io.gfile, "rename", rename)
    save(new, tfrecord_path, num_shards=3)
    monkeypatch.undo()
    assert len(states) == 8  # 4 files moved aside, 4 put in place
    states.append({p.name: p.read_bytes() for p in live.iterdir()})  # the save done
    outcomes = []
    for i, state in enumerate(states):
        folder = tmp_path / f"killed-before-rename-{i}"
        folder.mkdir()
        for name, data in state.items():
            (folder / name).write_bytes(data)
        try:
            loaded = load(str(folder / "data.tfrecord"))
        except core.HeaderError as e:
            assert "or was interrupted while it did" in str(e), str(e)
            assert set(previous.values()) <= set(state.values()), "a previous file is lost"
            outcomes.append("refused")
            continue
        outcome = "old" if i == 0 else "new"
        assert_same_elements(old if outcome == "old" else new, loaded)
        outcomes.append(outcome)
    assert outcomes == ["old"] + ["refused"] * 7 + ["new"]


# ---- (d) overwriting ---------------------------------------------------------------------------


def test_overwrite_with_another_dataset(good_pair):
    tfrecord_path, header_path, _, _ = good_pair
    replacement = tf.data.Dataset.from_tensor_slices({"name": [b"a", b"bc", b""]})
    save(replacement, tfrecord_path, header_path)
    assert_same_elements(replacement, load(tfrecord_path, header_path))
    assert sorted(os.listdir(Path(tfrecord_path).parent)) == ["data.header.yaml", "data.tfrecord"]


@pytest.mark.parametrize("first, second", [(4, 2), (3, 1), (1, 3), (2, 2)])
def test_fewer_shards_leave_no_stale_files(tmp_path, first, second):
    tfrecord_path = str(tmp_path / "data.tfrecord")
    save(wide(20), tfrecord_path, num_shards=first)
    replacement = wide(9, offset=4.0)
    header = save(replacement, tfrecord_path, num_shards=second)
    expected = {s["file"] for s in header["shards"]} | {"data.tfrecord.header.yaml"}
    assert set(os.listdir(tmp_path)) == expected
    assert len(header["shards"]) == second
    assert_same_elements(replacement, load(tfrecord_path))


@pytest.mark.parametrize("listable", [True, False])
def test_old_shards_of_a_header_that_cannot_be_read_are_named_as_left(tmp_path, monkeypatch,
                                                                      listable):
    """The old header another user may not read (in a folder one may write in: replaced as
    any file there) lists shards that cannot be known, so none is removed; the save said
    nothing of them, files of no header left for good (helper-134; test_permissions.py has
    this as another user, where it can run). Root reads every file: its refusal is made."""
    tfrecord_path = str(tmp_path / "data.tfrecord")
    header_path = tfrecord_path + ".header.yaml"
    save(wide(40), tfrecord_path, num_shards=4)
    refused, read = core._refusal, core._read_header
    monkeypatch.setattr(core, "_refusal", lambda path: "Permission denied" if path == header_path
                        else refused(path))

    def unreadable(path, *args):
        if path == header_path:
            raise core.HeaderError(f"{path}: cannot read header: Permission denied")
        return read(path, *args)

    monkeypatch.setattr(core, "_read_header", unreadable)
    if not listable:
        monkeypatch.setattr(tf.io.gfile, "listdir", lambda path: (_ for _ in ()).throw(
            tf.errors.PermissionDeniedError(None, None, f"{path}; Permission denied")))
    with pytest.warns(UserWarning) as caught:
        save(wide(9, offset=4.0), tfrecord_path, num_shards=2)
    monkeypatch.undo()
    left = [f"{tfrecord_path}-0000{i}-of-00004" for i in range(4)]
    named = (f"{left[0]}, {left[1]}, {left[2]} and 1 more" if listable
             else "any it listed (the folder cannot be listed)")
    assert [str(w.message) for w in caught] == [
        f"save {header_path}: the header saved there before could not be read (Permission "
        f"denied), so the record files it listed could not be known, and were left: {named}; "
        "the new dataset does not use them"]
    assert sorted(os.listdir(tmp_path)) == sorted(
        [os.path.basename(path) for path in left] + ["data.tfrecord.header.yaml"]
        + [f"data.tfrecord-0000{i}-of-00002" for i in range(2)])
    assert_same_elements(wide(9, offset=4.0), load(tfrecord_path))


def test_an_unreadable_header_elsewhere_names_no_file_of_the_default_headers_dataset(
        tmp_path, monkeypatch):
    """A save with a header path of its own, where the records' default header is there,
    removes no file beside the records whatever the old header listed (they are the default
    header's): an old header there that cannot be read named the default header's files as
    left over, which a user would then delete (helper-137)."""
    tfrecord_path = str(tmp_path / "data.tfrecord")
    other = str(tmp_path / "other.header.yaml")
    save(wide(30), tfrecord_path, num_shards=3)
    save(wide(10), str(tmp_path / "x.tfrecord"), other)
    refusal = core._refusal
    monkeypatch.setattr(core, "_refusal", lambda path: "Permission denied" if path == other
                        else refusal(path))
    save(wide(5, offset=1.0), tfrecord_path, other, num_shards=2)  # a warning fails the suite
    monkeypatch.undo()
    assert_same_elements(wide(30), load(tfrecord_path))  # the default header's, intact
    assert_same_elements(wide(5, offset=1.0), load(tfrecord_path, other))


def test_overwrite_removes_only_its_own_shards(tmp_path):
    """Re-using a header path for another record path must not delete the first one's data."""
    header_path = str(tmp_path / "shared.header.yaml")
    first = str(tmp_path / "first.tfrecord")
    second = str(tmp_path / "second.tfrecord")
    save(wide(5), first, header_path)
    first_bytes = Path(first).read_bytes()
    save(wide(6), second, header_path)
    assert Path(first).exists(), "saving second.tfrecord deleted first.tfrecord"
    assert Path(first).read_bytes() == first_bytes


def test_a_header_from_another_folder_deletes_no_shards_here(tmp_path):
    """A header names its shards but not their folder: reusing the header path of records saved
    elsewhere must not make a save delete the shards of that name here, which belong to the
    dataset whose header sits beside them."""
    here, there, meta = (tmp_path / name for name in ("here", "there", "meta"))
    for folder in (here, there, meta):
        folder.mkdir()
    kept = str(here / "data.tfrecord")
    save(wide(30), kept, num_shards=3)
    before = snapshot(here)
    save(wide(30, offset=2.0), str(there / "data.tfrecord"), str(meta / "h.yaml"), num_shards=3)
    header = save(wide(5, offset=3.0), kept, str(meta / "h.yaml"))  # one file, over `kept`'s name
    assert {n: b for n, b in snapshot(here).items() if n.endswith("-of-00003")} == {
        n: b for n, b in before.items() if n.endswith("-of-00003")}
    assert_same_elements(wide(30), load(kept))
    assert_same_elements(wide(5, offset=3.0), load(kept, str(meta / "h.yaml")))
    assert [s["file"] for s in header["shards"]] == ["data.tfrecord"]


@pytest.mark.parametrize("resized", [False, True])
def test_a_custom_header_removes_its_own_stale_shards_only(tmp_path, resized):
    """With no default header beside the records, a custom header's old shards are its own when
    they have the sizes it lists: a smaller save removes them; one of another size stays."""
    tfrecord_path, header_path = str(tmp_path / "data.tfrecord"), str(tmp_path / "meta.yaml")
    save(wide(30), tfrecord_path, header_path, num_shards=3)
    last = tmp_path / "data.tfrecord-00002-of-00003"
    if resized:  # as files of another dataset, not those the header describes
        last.write_bytes(last.read_bytes() + b"x")
    header = save(wide(5, offset=3.0), tfrecord_path, header_path)
    left = {"data.tfrecord", "meta.yaml"} | ({last.name} if resized else set())
    assert set(os.listdir(tmp_path)) == left
    assert_same_elements(wide(5, offset=3.0), load(tfrecord_path, header_path))
    assert header["num_records"] == 5


def test_overwrite_never_deletes_unrelated_files(paths):
    """An edited old header listing some other file must not make the next save delete it."""
    tfrecord_path, header_path = paths
    folder = Path(tfrecord_path).parent
    save(wide(5), tfrecord_path, header_path)
    notes = folder / "notes.txt"
    notes.write_text("precious")
    text = Path(header_path).read_text().replace("file: data.tfrecord", "file: notes.txt")
    Path(header_path).write_text(text)
    save(wide(6), tfrecord_path, header_path)
    assert notes.exists() and notes.read_text() == "precious"


# ---- (e) tf.io.gfile paths -------------------------------------------------------------------


def ram_snapshot(folder: str) -> dict:
    out = {}
    for name in sorted(tf.io.gfile.listdir(folder)):
        with tf.io.gfile.GFile(f"{folder}/{name}", "rb") as f:
            out[name] = hashlib.sha256(f.read()).hexdigest()
    return out


@pytest.mark.parametrize("layout", [{}, {"num_shards": 3}])
def test_ram_filesystem(layout):
    folder = f"ram://atomic-{uuid.uuid4().hex}"
    tfrecord_path = f"{folder}/sub/data.tfrecord"
    dataset = wide(25, offset=1.5)
    save(dataset, tfrecord_path, **layout)
    assert_same_elements(dataset, load(tfrecord_path))
    assert verify(tfrecord_path)["num_records"] == 25
    # Overwrite, then fail a save: the ram:// pair stays, no temporaries are left.
    replacement = wide(11, offset=2.5)
    save(replacement, tfrecord_path, **layout)
    before = ram_snapshot(f"{folder}/sub")
    with pytest.raises((tf.errors.OpError, RuntimeError), match="boom at 300"):
        save(failing_generator(400, fail_at=300), tfrecord_path, **layout)
    after = ram_snapshot(f"{folder}/sub")
    assert after == before
    assert not [n for n in after if TEMP_NAME.match(n)]
    assert_same_elements(replacement, load(tfrecord_path))


def test_ram_filesystem_top_level(tmp_path, monkeypatch):
    """`ram://name` has no folder to make: nothing appears in the working directory (the
    filesystem's root once became a local folder `ram:`), and a save killed among its renames
    is still named."""
    monkeypatch.chdir(tmp_path)
    tfrecord_path = f"ram://top-{uuid.uuid4().hex}.tfrecord"
    header_path = core.default_header_path(tfrecord_path)
    dataset = wide(3)
    save(dataset, tfrecord_path)
    assert_same_elements(dataset, load(tfrecord_path))
    with pytest.raises((tf.errors.OpError, RuntimeError), match="boom at 300"):
        save(failing_generator(400, fail_at=300), tfrecord_path)
    assert_same_elements(dataset, load(tfrecord_path))
    assert list(tmp_path.iterdir()) == []
    aside = core._temp_name(header_path, "0123456789ab", ".old")
    tf.io.gfile.rename(header_path, aside)  # as a save killed after moving the old header aside
    with pytest.raises(core.HeaderError, match="or was interrupted while it did"):
        load(tfrecord_path, header_path)
    tf.io.gfile.remove(aside)
    tf.io.gfile.remove(tfrecord_path)  # leaves the filesystem as it was



# ---- paths that would land on each other or on a folder ----------------------------------


@pytest.mark.parametrize("name_bytes, header, layout, refused", [
    (250, None, {}, "a file name of 262 bytes"),  # the default header's name: + .header.yaml
    (250, "h.yaml", {"num_shards": 2}, "a file name of 265 bytes \\(its shards: "),
    (250, "h.yaml", {"shard_size": 100}, "a file name of 265 bytes \\(its shards: "),
    (240, "h.yaml", {"num_shards": 2}, None),  # 255 bytes: the most allowed
    (250, "h.yaml", {}, None),
])
def test_too_long_file_names_are_refused_before_writing(tmp_path, name_bytes, header, layout,
                                                         refused):
    """Found only by the renames at the end, after every record was written, they were."""
    tfrecord_path = str(tmp_path / ("d" * name_bytes))
    header_path = None if header is None else str(tmp_path / header)
    if refused:
        with pytest.raises(ValueError, match=refused + ".*longer than the 255 most filesystems"):
            save(wide(4), tfrecord_path, header_path, **layout)
        assert os.listdir(tmp_path) == []
    else:
        save(wide(4), tfrecord_path, header_path, **layout)
        assert_same_elements(wide(4), load(tfrecord_path, header_path))


@pytest.mark.parametrize("header_name", ["data.tfrecord", "data.tfrecord-00001-of-00003",
                                         "./data.tfrecord"])
def test_header_on_the_records_is_refused(tmp_path, header_name, monkeypatch):
    """The header would overwrite the records (or a shard a smaller save then removes)."""
    monkeypatch.chdir(tmp_path)
    tfrecord_path, dataset, before = three_shards(tmp_path)
    with pytest.raises(ValueError, match="is where the records of .* go"):
        save(dataset, "data.tfrecord", header_name)
    assert snapshot(tmp_path) == before
    assert_same_elements(dataset, load(tfrecord_path))


@pytest.mark.parametrize("compression", [None, "GZIP"])
def test_a_header_over_another_saves_records_is_refused(tmp_path, compression):
    """save(ds, "y.tfrecord", "good.tfrecord"), the paths mixed up, replaced good's records
    with y's header and succeeded (helper-86). A header file over a header is still
    replaced, as documented."""
    good = str(tmp_path / "good.tfrecord")
    save(wide(3), good, compression=compression)
    before = snapshot(tmp_path)
    kind = "GZIP-compressed records" if compression else "TFRecord records"
    with pytest.raises(ValueError, match=re.escape(
            f"header_path {good!r} holds {kind}, which the header would replace")):
        save(wide(2), str(tmp_path / "y.tfrecord"), good)
    assert snapshot(tmp_path) == before
    assert_same_elements(wide(3), load(good))


def test_a_header_path_that_names_a_folder_is_refused_up_front(tmp_path):
    """`save(ds, "a.tfrecord", "headers/")` failed only at the header's rename, after all the
    writing, naming a temporary ("headers/..4099b0a6c3f3.tmp; Directory not empty";
    helper-86)."""
    for header_path in (f"{tmp_path}/headers/", f"{tmp_path}/sub/."):
        with pytest.raises(ValueError, match=re.escape(
                f"{header_path!r} names a folder, not a file: give the header's file name")):
            save(wide(3), str(tmp_path / "a.tfrecord"), header_path)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("which", ["records", "header"])
def test_a_folder_in_the_way_is_refused_and_kept(tmp_path, which):
    tfrecord_path, header_path = str(tmp_path / "data.tfrecord"), str(tmp_path / "h.yaml")
    folder = Path(tfrecord_path if which == "records" else header_path)
    folder.mkdir()
    (folder / "precious.txt").write_text("user data")
    with pytest.raises(ValueError, match="is a folder"):
        save(wide(3), tfrecord_path, header_path)
    assert sorted(os.listdir(tmp_path)) == [folder.name]
    assert (folder / "precious.txt").read_text() == "user data"


@pytest.mark.parametrize("which", ["records", "header", "shard"])
def test_a_fifo_in_the_way_is_refused_and_kept(tmp_path, which):
    """The save's rename replaced it with a regular file, without an error; at the header's
    path, reading it (for the shards of the save it replaces) waited for a writer forever."""
    tfrecord_path, header_path = str(tmp_path / "data.tfrecord"), str(tmp_path / "h.yaml")
    where = {"records": tfrecord_path, "header": header_path,
             "shard": tfrecord_path + "-00001-of-00002"}[which]
    with fifo_at(where):
        began = time.monotonic()
        with pytest.raises(ValueError, match=re.escape(f"{where!r} is a FIFO (named pipe); a "
                                                       "regular file goes there")):
            save(wide(3), tfrecord_path, header_path, num_shards=2 if which == "shard" else None)
        assert time.monotonic() - began < 2.0
        assert os.listdir(tmp_path) == [Path(where).name]
        assert stat.S_ISFIFO(os.stat(where).st_mode)


def test_a_link_to_a_device_in_the_way_is_refused_and_kept(tmp_path):
    """A header path linked to /dev/null: the rename would have replaced the link (and, given
    /dev/null itself, the system's)."""
    tfrecord_path, header_path = str(tmp_path / "data.tfrecord"), tmp_path / "h.yaml"
    header_path.symlink_to(os.devnull)
    with pytest.raises(ValueError, match="h.yaml' is a character device; a regular file goes "
                                         "there"):
        save(wide(3), tfrecord_path, str(header_path))
    assert os.listdir(tmp_path) == ["h.yaml"] and os.readlink(header_path) == os.devnull


def test_a_folder_at_a_shard_size_shards_name_is_named(tmp_path):
    """shard_size's shards are named once written: a folder at one of the names was found by
    the rename, as TensorFlow's FailedPreconditionError naming a hidden temporary ("<temp>;
    Is a directory"). The previous dataset stays, and no temporary."""
    tfrecord_path = str(tmp_path / "data.tfrecord")
    save(wide(6), tfrecord_path)
    before = snapshot(tmp_path)
    folder = tmp_path / "data.tfrecord-00001-of-00003"
    folder.mkdir()
    with pytest.raises(ValueError, match=re.escape(f"{str(folder)!r} is a folder; a file goes "
                                                   "there")):
        save(wide(6, offset=1.0), tfrecord_path, shard_size=20_000)  # three files of two
    assert os.listdir(folder) == []
    folder.rmdir()
    assert snapshot(tmp_path) == before
    assert_same_elements(wide(6), load(tfrecord_path))
    save(wide(6, offset=1.0), tfrecord_path, shard_size=20_000)  # which makes three files
    assert len(read_header(tfrecord_path + ".header.yaml")["shards"]) == 3


def test_a_folder_at_a_shards_name_is_refused_before_writing(tmp_path):
    """It failed after every record was written, naming the temporary it could not rename."""
    tfrecord_path = str(tmp_path / "data.tfrecord")
    (tmp_path / "data.tfrecord-00001-of-00002").mkdir()
    with pytest.raises(ValueError, match="data.tfrecord-00001-of-00002' is a folder"):
        save(wide(3), tfrecord_path, num_shards=2)
    assert os.listdir(tmp_path) == ["data.tfrecord-00001-of-00002"]


def test_a_loaded_dataset_saved_over_its_own_files(tmp_path):
    """As the README says: it works (the old files are read while the new ones are written
    beside them), and the loaded dataset then reads the new files: files that are gone, ..."""
    tfrecord_path = str(tmp_path / "data.tfrecord")
    save(wide(30), tfrecord_path)
    loaded = load(tfrecord_path)
    save(loaded, tfrecord_path, num_shards=2)  # data.tfrecord is replaced by two shards
    assert_same_elements(wide(30), load(tfrecord_path))
    with pytest.raises(tf.errors.NotFoundError, match="data.tfrecord"):
        list(loaded)


def test_a_loaded_dataset_reads_what_a_save_over_its_files_wrote(tmp_path):
    """... the new records where the files' names and counts are the same (the README said
    NotFoundError for every case), and a count that changed is named with the file."""
    tfrecord_path = str(tmp_path / "data.tfrecord")
    save(tf.data.Dataset.range(5), tfrecord_path)
    loaded = load(tfrecord_path)
    save(loaded.map(lambda x: x + 100), tfrecord_path)
    assert [int(x) for x in loaded] == [100, 101, 102, 103, 104]
    save(loaded.take(3), tfrecord_path)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=re.escape(f"{tfrecord_path}: the header says 5 records, but only 3 "
                                       "could be read from it")):
        list(loaded)


def test_header_folder_is_made(tmp_path):
    tfrecord_path, header_path = str(tmp_path / "data.tfrecord"), str(tmp_path / "a/b/h.yaml")
    save(wide(3), tfrecord_path, header_path)
    assert_same_elements(wide(3), load(tfrecord_path, header_path))


def test_longest_file_names_save(tmp_path):
    """Temporary names, longer than the final ones, are cut short to fit the 255-byte limit."""
    tfrecord_path = str(tmp_path / ("é" * 120))  # 240 bytes; its header's name 252
    save(wide(3), tfrecord_path, num_shards=1)
    assert_same_elements(wide(3), load(tfrecord_path))
    assert temporaries(tmp_path) == []


def test_failing_to_open_a_shard_removes_those_opened(tmp_path, monkeypatch):
    """Too many files open, say, on the fourth of six: the three made go again."""
    tfrecord_path, dataset, before = three_shards(tmp_path)
    opened = []
    real = core._record_writer

    def record_writer(path, compression):
        if len(opened) == 3:
            raise OSError(24, "Too many open files (simulated)", path)
        opened.append(path)
        return real(path, compression)

    monkeypatch.setattr(core, "_record_writer", record_writer)
    with pytest.raises(OSError, match="Too many open files"):
        save(dataset, tfrecord_path, num_shards=6)
    assert len(opened) == 3
    assert snapshot(tmp_path) == before


def test_abort_stops_writer_threads_that_missed_a_wake_up(tmp_path):
    """A KeyboardInterrupt in the main thread's put can lose the wake-up of a writer thread
    waiting for work; abort must still stop it rather than wait forever."""
    files = core._RecordFiles(str(tmp_path / "data.tfrecord"), 2, None, None, 8)
    threads = list(files._threads)
    for q in files._queues:
        q.not_empty.notify = lambda n=1: None  # every wake-up lost from here on
        q.put(None)  # as an interrupted commit may leave it
    done = threading.Event()
    threading.Thread(target=lambda: (files.abort(), done.set()), daemon=True).start()
    assert done.wait(10), "abort waited for writer threads that were never woken"
    assert threads and not any(t.is_alive() for t in threads)
    assert temporaries(tmp_path) == []


def test_abort_writes_none_of_the_batches_still_queued(tmp_path, monkeypatch):
    """A failed save's abort stops its writer threads without writing what is still queued
    (up to two batches, 32 MiB, a thread) into files it removes anyway (M66: abort without
    `_aborted` wrote them all first)."""
    release, writes = threading.Event(), []

    class Blocking:
        def __init__(self, path, compression):
            pass

        def prepare(self, records, sizes):
            return records

        def write(self, prepared):
            writes.append(len(prepared))
            release.wait(10)

        def close(self):
            pass

    monkeypatch.setattr(core, "_record_writer", Blocking)
    files = core._RecordFiles(str(tmp_path / "data.tfrecord"), 1, None, None, 8)
    sizes = np.array([1], np.int64)
    files.write([b"a"], sizes, 0)  # taken by the thread, which blocks in its write
    while not writes:
        time.sleep(0.01)
    files.write([b"b"], sizes, 1)
    files.write([b"c"], sizes, 2)  # two queued
    aborting = threading.Thread(target=files.abort, daemon=True)
    aborting.start()
    deadline = time.monotonic() + 10
    while not files._aborted and time.monotonic() < deadline:  # abort has begun
        time.sleep(0.01)
    release.set()
    aborting.join(10)
    assert not aborting.is_alive()
    assert writes == [1], writes


def started(function, *args, **kwargs) -> tuple[threading.Thread, list]:
    """`function(*args, **kwargs)` running in a new thread, and the list that will hold its
    exception if it raises one. A daemon: a thread that hangs fails its test, not the run."""
    errors: list = []

    def run():
        try:
            function(*args, **kwargs)
        except BaseException as e:  # noqa: BLE001 - the test reports it
            errors.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, errors


@pytest.fixture
def lock_asked(monkeypatch):
    """Events set as the first, second, ... call of `_commit_lock` is made (the lock asked
    for, not yet taken), and `lock`, the real `_commit_lock`, for a test to hold it."""
    asked = [threading.Event() for _ in range(4)]
    real, calls = core._commit_lock, iter(asked)

    def commit_lock(*folders):
        next(calls).set()
        return real(*folders)

    monkeypatch.setattr(core, "_commit_lock", commit_lock)
    return types.SimpleNamespace(asked=asked, lock=real)


def test_two_saves_to_one_path_put_their_files_in_place_one_after_the_other(tmp_path,
                                                                              monkeypatch,
                                                                              lock_asked):
    """Two saves to one path at once: the second's renames wait until the first's are done
    (a lock of the folder), so the files are then all the second's. Their renames overlapped
    before, and one save's header could end up beside the other's records."""
    tfrecord_path = str(tmp_path / "data.tfrecord")
    placing, overlapped = [], []
    first_placing, go_on = threading.Event(), threading.Event()
    real = core._move_into_place

    def move_into_place(moves, token):
        overlapped.extend(placing)
        placing.append(token)
        if len(placing) == 1 and not first_placing.is_set():  # the first save waits here
            first_placing.set()
            go_on.wait(30)
        try:
            return real(moves, token)
        finally:
            placing.remove(token)

    monkeypatch.setattr(core, "_move_into_place", move_into_place)
    first, first_errors = started(save, wide(4), tfrecord_path)
    assert first_placing.wait(60)
    second, second_errors = started(save, wide(9, offset=1.0), tfrecord_path, num_shards=3)
    assert lock_asked.asked[1].wait(60)  # the second save asks for the lock
    time.sleep(1.0)  # time to reach its renames, were it not held
    held = second.is_alive() and not overlapped
    go_on.set()
    first.join(60)
    second.join(60)

    errors = first_errors + second_errors
    assert held and not overlapped and not errors, (overlapped, errors)
    assert sorted(os.listdir(tmp_path)) == [
        f"data.tfrecord-0000{i}-of-00003" for i in range(3)] + ["data.tfrecord.header.yaml"]
    assert_same_elements(wide(9, offset=1.0), load(tfrecord_path))


def test_a_folder_that_cannot_be_locked_is_saved_to_as_before(tmp_path, monkeypatch):
    """Without flock (Windows), or where the folder does not open (no read permission), a save
    goes on without the lock."""
    monkeypatch.setattr(core, "fcntl", None)
    save(wide(3), str(tmp_path / "a.tfrecord"))
    assert_same_elements(wide(3), load(str(tmp_path / "a.tfrecord")))
    monkeypatch.undo()

    real_open = os.open

    def refused(path, flags, *args, **kwargs):
        if os.path.isdir(path):
            raise PermissionError(13, "Permission denied (simulated)", path)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(core.os, "open", refused)
    save(wide(5), str(tmp_path / "b.tfrecord"))
    monkeypatch.undo()
    assert_same_elements(wide(5), load(str(tmp_path / "b.tfrecord")))


@pytest.mark.parametrize("command", ["save", "merge"])
def test_a_save_or_a_merge_waits_while_the_folder_is_locked(tmp_path, command, lock_asked):
    """While another save puts its files in place in the folder (its lock held), a save or a
    merge there writes, but renames nothing until the lock is released."""
    parts = [str(tmp_path / f"part{i}.tfrecord") for i in range(2)]
    for i, part in enumerate(parts):
        save(wide(2, offset=10.0 * i), part)
    tfrecord_path = str(tmp_path / "data.tfrecord")

    with lock_asked.lock(str(tmp_path)):
        thread, errors = (started(save, wide(3), tfrecord_path) if command == "save"
                          else started(merge, parts, tfrecord_path))
        assert lock_asked.asked[0].wait(60)  # the thread's save or merge asks for the lock
        thread.join(1.0)
        waited = thread.is_alive()  # and does not finish while it is held
        placed = os.path.exists(tfrecord_path + ".header.yaml")
    thread.join(60)

    assert waited and not placed and not errors, errors
    expected = wide(3) if command == "save" else wide(2).concatenate(wide(2, offset=10.0))
    assert_same_elements(expected, load(tfrecord_path))


def test_a_folder_reached_by_two_paths_is_locked_once(tmp_path):
    """Records and header in one folder by two paths (a link here; a bind mount, which no
    path resolves away, alike): two locks of the folder would wait for each other, and the
    save would never end."""
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    tfrecord_path = str(tmp_path / "real" / "data.tfrecord")
    header_path = str(tmp_path / "link" / "data.header.yaml")

    thread, errors = started(save, wide(3), tfrecord_path, header_path)
    thread.join(60)

    assert not thread.is_alive() and not errors, errors
    assert_same_elements(wide(3), load(tfrecord_path, header_path))


def test_a_load_among_saves_coming_one_after_another_reads_one_saves_files(tmp_path,
                                                                          monkeypatch):
    """Each time a load has read the header, a save of another size puts its files in place
    before the load checks them. The load's second read holds its folder's read lock, which
    that read's save waits for: it gets that header and its files. It was refused before,
    after three reads ("... bytes on disk, but ... says ...")."""
    tfrecord_path = str(tmp_path / "data.tfrecord")
    save(wide(10), tfrecord_path)
    sizes, saves, real = iter([12, 14, 16, 18]), [], core._check_files

    def check_files_as_a_save_lands(*args):
        saver = started(save, wide(next(sizes)), tfrecord_path)
        saver[0].join(1.0)  # in place, unless it waits for the load's lock
        saves.append(saver)
        return real(*args)

    monkeypatch.setattr(core, "_check_files", check_files_as_a_save_lands)
    header, _ = core._checked_header(tfrecord_path + ".header.yaml", tfrecord_path)
    monkeypatch.undo()
    for thread, _ in saves:
        thread.join(30)

    assert header.num_records in (10, 12)  # the files then in place: the first read's, or
    assert not any(errors for _, errors in saves), saves  # the second's (locked) after a save
    assert_same_elements(wide(10 + 2 * len(saves)), load(tfrecord_path))  # the last save's


def test_a_load_waits_for_the_lock_of_a_save_that_does_not_let_go_only_so_long(tmp_path,
                                                                              monkeypatch):
    """A save stopped (SIGSTOP, a debugger) while it holds its folder's lock. A load whose
    files match its header does not wait for that lock. One whose files do not match waits
    for it `_PLACING_WAIT` s at each read after the first, reads without it, and is refused."""
    monkeypatch.setattr(core, "_PLACING_WAIT", 2.0)
    tfrecord_path = str(tmp_path / "data.tfrecord")
    header_path = tfrecord_path + ".header.yaml"
    save(wide(5), tfrecord_path)
    (tmp_path / "other").mkdir()
    save(wide(6), str(tmp_path / "other" / "data.tfrecord"))
    took, outcomes = [], []

    def timed_load():
        began = time.monotonic()
        try:
            outcomes.append(load(tfrecord_path))
        finally:
            took.append(time.monotonic() - began)

    with core._commit_lock(str(tmp_path)):
        loader, matched_errors = started(timed_load)
        loader.join(30)
        os.replace(tmp_path / "other" / "data.tfrecord.header.yaml", header_path)  # 6, not 5
        loader, errors = started(timed_load)
        loader.join(30)

    assert not loader.is_alive() and not matched_errors, matched_errors
    assert_same_elements(wide(5), outcomes[0])
    assert took[0] < 2.0, took  # had it waited for the lock, 2 s
    assert len(errors) == 1 and isinstance(errors[0], CorruptDataError), errors
    assert str(errors[0]).startswith(f"{tfrecord_path}: "), errors
    assert 2.0 <= took[1] < 20, took


def test_a_load_reading_again_waits_for_a_header_without_the_lock(tmp_path, monkeypatch):
    """A load read the header; then a save was killed among its renames (the header moved
    aside, its records in place), and a save to the same paths begins. The load reads again,
    waits for a header (`_PLACING_WAIT`), and the new save puts its files in place and removes
    the killed save's: the load gets the new dataset. Had the load held its read lock while it
    waited, the save would have waited for the load, and the load would have been refused."""
    monkeypatch.setattr(core, "_PLACING_WAIT", 5.0)
    tfrecord_path = str(tmp_path / "data.tfrecord")
    header_path = tfrecord_path + ".header.yaml"
    save(wide(3), tfrecord_path)
    save(wide(7), str(tmp_path / "killed"))
    real_stat, later = tf.io.gfile.stat, []

    def stat_as_a_save_is_killed(path):
        if path == tfrecord_path and not later:
            os.rename(header_path, core._temp_name(header_path, DEAD, ".old"))
            os.rename(tfrecord_path, core._temp_name(tfrecord_path, DEAD, ".old"))
            os.rename(tmp_path / "killed", tfrecord_path)
            os.remove(tmp_path / "killed.header.yaml")
            Path(core._temp_name(tfrecord_path, DEAD, ".claim")).write_bytes(b"")
            later.append(threading.Timer(0.3, save, (wide(4, offset=1.0), tfrecord_path)))
            later[0].start()
        return real_stat(path)

    monkeypatch.setattr(tf.io.gfile, "stat", stat_as_a_save_is_killed)
    header, _ = core._checked_header(header_path, tfrecord_path)
    monkeypatch.undo()
    later[0].join(30)

    assert header.num_records == 4
    assert_same_elements(wide(4, offset=1.0), load(tfrecord_path))
    assert sorted(os.listdir(tmp_path)) == ["data.tfrecord", "data.tfrecord.header.yaml"]


# A save of one file over three shards that kills itself (SIGKILL) as it puts its files in
# place: once it has moved the old header aside, or once its files are in place, as it
# removes the old shards
KILLED_IN_PLACE = textwrap.dedent("""
    import os, signal, sys
    import tensorflow as tf
    import super_serial

    tfrecord_path, when = sys.argv[1:3]
    rename, remove = tf.io.gfile.rename, tf.io.gfile.remove

    def renamed(source, destination, overwrite=False):
        rename(source, destination, overwrite)
        if when == "old header aside":
            os.kill(os.getpid(), signal.SIGKILL)

    def removed(path):
        if when == "old shards to remove" and path.endswith("-of-00003"):
            os.kill(os.getpid(), signal.SIGKILL)
        remove(path)

    tf.io.gfile.rename, tf.io.gfile.remove = renamed, removed
    super_serial.save(tf.data.Dataset.range(7), tfrecord_path)
    print("the save finished, but it should have been killed first")
""")


@pytest.mark.parametrize("when", ["old header aside", "old shards to remove"])
def test_old_shards_a_killed_save_left_are_removed_by_the_next_save(tmp_path, when):
    """A save of other shards killed as it put its files in place left the old dataset's
    shards for good: the next save removed the killed save's temporaries, the old header
    moved aside among them, and no header listed those shards any more. It now reads that
    header first; and a save removes the old shards before the old header it moved aside."""
    tfrecord_path = str(tmp_path / "data.tfrecord")
    save(wide(30), tfrecord_path, num_shards=3)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(REPO_ROOT)}
    process = subprocess.run([sys.executable, "-c", KILLED_IN_PLACE, tfrecord_path, when],
                             env=env, capture_output=True, timeout=300)
    assert process.returncode == -signal.SIGKILL, process.stderr.decode()[-2000:]
    left = sorted(os.listdir(tmp_path))
    assert any(n.startswith(".data.tfrecord.header.yaml.") and n.endswith(".tmp.old")
               for n in left), left  # the old header, moved aside
    assert [n for n in left if n.startswith("data.tfrecord-")] == [
        f"data.tfrecord-0000{i}-of-00003" for i in range(3)], left

    save(wide(4, offset=1.0), tfrecord_path, num_shards=2)
    assert sorted(os.listdir(tmp_path)) == [
        "data.tfrecord-00000-of-00002", "data.tfrecord-00001-of-00002",
        "data.tfrecord.header.yaml"]
    assert_same_elements(wide(4, offset=1.0), load(tfrecord_path))


def test_a_killed_saves_old_header_removes_none_of_the_files_the_next_save_wrote(tmp_path):
    """A killed save's old header, moved aside, lists record files that the next save may
    write again under the same names and sizes (the same dataset saved again): those are the
    new save's and stay (M46: without `- set(names)` the new save deleted its own shards,
    leaving a header whose files are gone)."""
    tfrecord_path = str(tmp_path / "data.tfrecord")
    save(wide(30), tfrecord_path, num_shards=3)
    # What a save killed after moving the old header aside leaves: its claim, no process
    # holding it, and the old header under its hidden name
    Path(core._temp_name(tfrecord_path, DEAD, ".claim")).write_bytes(b"")
    header_path = tfrecord_path + ".header.yaml"
    os.rename(header_path, core._temp_name(header_path, DEAD, ".old"))
    save(wide(30), tfrecord_path, num_shards=3)
    assert sorted(os.listdir(tmp_path)) == [
        f"data.tfrecord-0000{i}-of-00003" for i in range(3)] + ["data.tfrecord.header.yaml"]
    assert_same_elements(wide(30), load(tfrecord_path))


def killed_among_its_renames(folder, placed: int) -> tuple[str, tf.data.Dataset]:
    """What a save of three shards over one file (`folder`/data.tfrecord, saved here), killed
    after `placed` of its record files' renames, leaves: its claim, the old header moved
    aside, its own header under its temporary name, and its record files, those placed under
    their own names and the rest under their temporaries'. The records path, and the
    dataset the killed save was saving."""
    tfrecord_path = str(folder / "data.tfrecord")
    header_path = tfrecord_path + ".header.yaml"
    save(wide(30), tfrecord_path)
    killed, elsewhere = wide(9, offset=2.0), folder / "elsewhere"
    elsewhere.mkdir()
    save(killed, str(elsewhere / "data.tfrecord"), num_shards=3)
    Path(core._temp_name(tfrecord_path, DEAD, ".claim")).write_bytes(b"")
    os.rename(header_path, core._temp_name(header_path, DEAD, ".old"))
    os.rename(elsewhere / "data.tfrecord.header.yaml", core._temp_name(header_path, DEAD))
    for i in range(3):
        name = f"data.tfrecord-0000{i}-of-00003"
        os.rename(elsewhere / name, folder / name if i < placed
                  else core._temp_name(tfrecord_path, DEAD, i))
    return tfrecord_path, killed


def test_record_files_a_killed_save_had_put_in_place_are_removed_by_the_next_save(tmp_path):
    """A save killed among its renames, some of its record files in place under their own
    names (the header goes last), left those for good: the next save of other names removed
    the killed save's temporaries, claim and old header, and nothing listed them but its own
    header, still under its temporary name (helper-135)."""
    tfrecord_path, _ = killed_among_its_renames(tmp_path, placed=2)
    save(wide(4, offset=1.0), tfrecord_path, num_shards=2)
    assert sorted(os.listdir(tmp_path)) == [
        "data.tfrecord-00000-of-00002", "data.tfrecord-00001-of-00002",
        "data.tfrecord.header.yaml", "elsewhere"]
    assert_same_elements(wide(4, offset=1.0), load(tfrecord_path))


def test_a_killed_saves_own_header_removes_none_of_the_files_the_next_save_wrote(tmp_path):
    """The same dataset saved again after the kill writes the files the killed save's header
    lists, of the sizes it gives: they are the new save's, and stay."""
    tfrecord_path, killed = killed_among_its_renames(tmp_path, placed=1)
    save(killed, tfrecord_path, num_shards=3)
    assert sorted(os.listdir(tmp_path)) == [f"data.tfrecord-0000{i}-of-00003" for i in range(3)
                                            ] + ["data.tfrecord.header.yaml", "elsewhere"]
    assert_same_elements(killed, load(tfrecord_path))


DEAD = "0123456789ab"  # the token of a save that was killed, in its temporaries' names


def killed_save_left(folder) -> list[Path]:
    """What a save to `folder`/data.tfrecord killed while it wrote leaves: its claim (no
    process holds it any more) and a record file."""
    left = [folder / f".data.tfrecord.{DEAD}.tmp.claim", folder / f".data.tfrecord.{DEAD}.tmp0"]
    for path in left:
        path.write_bytes(b"")
    return left


@pytest.mark.parametrize("header_folder", ["", "headers"])
def test_a_save_removes_what_killed_saves_to_its_paths_left_and_nothing_else(tmp_path,
                                                                             header_folder):
    """Temporaries of saves to the same paths that were killed (record files, a header, files
    moved aside during the renames, their claims) are superseded once a save puts its files in
    place, and it removes them. Anything else beside them is kept, however alike its name; so
    are the temporaries of a token with no claim (a merge's header, an older version's save:
    nothing tells whether it runs)."""
    headers = tmp_path / header_folder
    headers.mkdir(exist_ok=True)
    tfrecord_path = str(tmp_path / "data.tfrecord")
    header_path = str(headers / "data.header.yaml")
    other, unclaimed = DEAD[::-1], "abcdef012345"
    dead, kept = collections.defaultdict(list), collections.defaultdict(list)
    dead[tmp_path] += [f".data.tfrecord.{DEAD}.tmp.claim", f".data.tfrecord.{DEAD}.tmp0",
                       f".data.tfrecord.{DEAD}.tmp1", f".data.tfrecord.{other}.tmp.claim",
                       f".data.tfrecord-00001-of-00004.{other}.tmp.old",
                       f".data.tfrecord.{other}.tmp.old"]
    dead[headers] += [f".data.header.yaml.{DEAD}.tmp", f".data.header.yaml.{other}.tmp.old"]
    kept[tmp_path] += [f".other.tfrecord.{DEAD}.tmp0", f"data.tfrecord.{DEAD}.tmp0",
                       f".data.tfrecord.{DEAD.upper()}.tmp0", f".data.tfrecord.{DEAD}.tmpx",
                       f".data.tfrecord-1.{DEAD}.tmp.old", f".data.tfrecord.{DEAD}.tmp",
                       f".data.tfrecord.{unclaimed}.tmp0",
                       f".data.header.yaml.{DEAD}.tmp" if header_folder else "notes.txt"]
    kept[headers] += [f".other.header.yaml.{DEAD}.tmp", f".data.header.yaml.{DEAD}.tmp0",
                      f".data.header.yaml.{unclaimed}.tmp"]
    for folder, names in [*dead.items(), *kept.items()]:
        for name in names:
            (folder / name).write_bytes(b"" if name.endswith(".claim") else b"left")
    # FIFOs are no files a save makes: kept, and never opened (one would wait for a writer)
    fifo_claimed = "fedcba987654"
    (tmp_path / f".data.tfrecord.{fifo_claimed}.tmp0").write_bytes(b"left")
    fifos = [f".data.tfrecord.{DEAD}.tmp2", f".data.tfrecord.{fifo_claimed}.tmp.claim"]
    kept[tmp_path] += fifos + [f".data.tfrecord.{fifo_claimed}.tmp0"]

    with fifo_at(tmp_path / fifos[0]), fifo_at(tmp_path / fifos[1], rescue_after=60):
        thread, errors = started(save, wide(3), tfrecord_path, header_path)
        thread.join(30)

    assert not thread.is_alive() and not errors, errors
    assert_same_elements(wide(3), load(tfrecord_path, header_path))
    for folder in dead:
        left = set(os.listdir(folder)) - {"data.tfrecord", "data.header.yaml", "headers"}
        assert left == set(kept[folder]), folder



def test_a_save_removes_killed_saves_leftovers_of_names_cut_short(tmp_path):
    """Where a temporary's name would pass 255 bytes it is cut short and ends in a digest
    (`_temp_name`): leftovers of the record files this save writes, its header and the claim
    are still found, and removed; a file moved aside under a shard's name this save does not
    write cannot be told from another dataset's of a like long name, and is kept."""
    tfrecord_path = str(tmp_path / ("a" * 228 + ".tfrecord"))  # 237 bytes, its shards' 252
    shards = [f"{tfrecord_path}-0000{i}-of-00002" for i in range(2)]
    dead = [core._temp_name(tfrecord_path, DEAD, index) for index in (".claim", 0, 1)]
    dead += [core._temp_name(path, DEAD, ".old")
             for path in [*shards, tfrecord_path + ".header.yaml"]]
    dead += [core._temp_name(tfrecord_path + ".header.yaml", DEAD)]
    kept = [core._temp_name(f"{tfrecord_path}-00000-of-00003", DEAD, ".old")]
    assert all("~" in Path(path).name for path in dead + kept)
    for path in dead + kept:
        Path(path).write_bytes(b"")

    save(wide(3), tfrecord_path, num_shards=2)

    assert temporaries(tmp_path) == [Path(kept[0]).name]
    assert_same_elements(wide(3), load(tfrecord_path))

def test_a_running_saves_temporaries_are_kept(tmp_path, monkeypatch):
    """A save that runs while others to the same path put their files in place keeps its
    temporaries: it holds a lock of its claim, which they test before taking any as dead.
    Also where one of them looked while the claim was made and not yet locked: it took it for
    a killed save's and removed it, and the claim is made again."""
    tfrecord_path = str(tmp_path / "data.tfrecord")
    writing, go_on = threading.Event(), threading.Event()
    real_flock, raced = core.fcntl.flock, []

    def flock(descriptor, operation):  # another save comes as the first claim is made
        if operation == core.fcntl.LOCK_SH and not raced:
            raced.append(started(save, wide(5), tfrecord_path))
            raced[0][0].join(60)
        return real_flock(descriptor, operation)

    monkeypatch.setattr(core, "fcntl", types.SimpleNamespace(
        flock=flock, LOCK_SH=core.fcntl.LOCK_SH, LOCK_EX=core.fcntl.LOCK_EX,
        LOCK_NB=core.fcntl.LOCK_NB))

    def generate():
        for i in range(4):
            if i == 2:
                writing.set()
                go_on.wait(60)
            yield {"id": np.int64(i), "x": np.full(WIDTH, i, np.float32)}

    signature = {"id": tf.TensorSpec([], tf.int64), "x": tf.TensorSpec([WIDTH], tf.float32)}
    slow = tf.data.Dataset.from_generator(generate, output_signature=signature)
    first, errors = started(save, slow, tfrecord_path)
    assert writing.wait(60)
    running = temporaries(tmp_path)
    save(wide(6), tfrecord_path)  # puts its files in place while the first save runs
    kept = temporaries(tmp_path)
    go_on.set()
    first.join(60)

    assert raced and not raced[0][1] and not errors, (raced, errors)
    assert [n for n in running if n.endswith(".tmp.claim")] and kept == running, (running, kept)
    assert_same_elements(slow, load(tfrecord_path))
    assert temporaries(tmp_path) == []



def test_a_save_whose_removal_of_leftovers_fails_is_still_saved(tmp_path, monkeypatch):
    """Leftovers are removed once the save's own files are in place: an error then (a
    folder that cannot be listed, say) leaves them, and is no failure of the save, which
    must not report that nothing was saved."""
    left = killed_save_left(tmp_path)

    def refused(path):
        raise PermissionError(13, "Permission denied (simulated)", path)

    monkeypatch.setattr(core, "_dead_claim", refused)
    save(wide(3), str(tmp_path / "data.tfrecord"))
    assert_same_elements(wide(3), load(str(tmp_path / "data.tfrecord")))
    assert sorted(temporaries(tmp_path)) == sorted(path.name for path in left)

@pytest.mark.parametrize("where", ["no flock", "nfs"])
def test_killed_saves_leftovers_are_kept_where_saves_cannot_claim_theirs(tmp_path, monkeypatch,
                                                                          where):
    """Without flock (Windows), or on a filesystem whose locks may cover one machine only
    (NFS), a save cannot tell a killed save from a running one: it claims nothing and
    removes nothing."""
    left = killed_save_left(tmp_path)
    if where == "nfs":
        monkeypatch.setattr(core, "_filesystem_type", lambda device: "nfs4")
    else:
        monkeypatch.setattr(core, "fcntl", None)
    save(wide(3), str(tmp_path / "data.tfrecord"))
    assert all(path.exists() for path in left)
    assert sorted(temporaries(tmp_path)) == sorted(path.name for path in left)


def test_a_merges_header_is_not_taken_for_a_killed_saves(tmp_path, monkeypatch):
    """A save to the records path whose header a merge is writing: the merge writes and renames
    its header under the folder's lock, so the save (and its removal of killed saves'
    leftovers) comes after the merge, not between its write and its rename. With the write
    outside the lock, the merge's header replaced the save's that came after it. (A merge's
    temporary has no claim, so no save takes it for dead: test above.)"""
    parts = [str(tmp_path / f"part{i}.tfrecord") for i in range(2)]
    for i, part in enumerate(parts):
        save(wide(2, offset=10.0 * i), part)
    tfrecord_path = str(tmp_path / "data.tfrecord")
    real, saving = core._write_header, []

    def write_header(path, header, header_path):
        real(path, header, header_path)
        if not saving:  # the merge's, written: a save over the same path comes now
            saving.append(started(save, wide(3), tfrecord_path))
            saving[0][0].join(2.0)

    monkeypatch.setattr(core, "_write_header", write_header)
    merged = merge(parts, tfrecord_path)
    saving[0][0].join(60)

    assert merged and not saving[0][0].is_alive() and not saving[0][1], saving[0][1]
    assert_same_elements(wide(3), load(tfrecord_path))  # the save put its files in place last
    assert temporaries(tmp_path) == []

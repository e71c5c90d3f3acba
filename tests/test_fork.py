"""save, load and verify in a process forked after TensorFlow's runtime started, as
`multiprocessing`'s fork workers are: TensorFlow's calls there (a traced function's, a large
concat's) wait forever for thread pools that stayed in the parent, and save and load hung
(helper-82). They now refuse with a SuperSerialError that says what to do instead."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

SCRIPT = r'''
import faulthandler, os, sys
import numpy as np, tensorflow as tf
import super_serial

folder, imported, started = sys.argv[1], sys.argv[2], sys.argv[3]
def dataset():  # its first tensor starts the runtime
    return tf.data.Dataset.from_tensor_slices({"x": np.arange(6, dtype=np.float32)})

if imported == "core":  # else the package imports its core in the child, on first use
    from super_serial import core
if started == "started":
    super_serial.save(dataset(), folder + "/parent.tfrecord")
elif started == "started by tf":  # not by super_serial, whose core is then not imported
    tf.constant(1.0) + 1
print("core imported before the fork:", "super_serial.core" in sys.modules, flush=True)
read = folder + ("/parent.tfrecord" if started == "started" else "/child.tfrecord")  # read
pid = os.fork()
if pid == 0:
    faulthandler.dump_traceback_later(120, exit=True)  # a hang fails the test
    for name, call in (("save", lambda: super_serial.save(dataset(), folder + "/child.tfrecord")),
                       ("load", lambda: list(super_serial.load(read))),
                       ("verify", lambda: super_serial.verify(read))):
        try:
            call()
            print(name, "ran", flush=True)
        except super_serial.SuperSerialError as error:
            print(name, "refused:", error, flush=True)
    os._exit(0)
_, status = os.waitpid(pid, 0)
print("child exit", os.waitstatus_to_exitcode(status), sorted(os.listdir(folder)), flush=True)
'''


def run(folder: Path, imported: str, started: str, core_imported: bool = True) -> list[str]:
    """The child's lines, after the parent's line saying whether it had imported the core
    (`core_imported`)."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(folder), imported, started],
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0] == f"core imported before the fork: {core_imported}", lines
    return lines[1:]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this system")
@pytest.mark.parametrize("imported, started", [
    ("core", "started"), ("package", "started"), ("package", "started by tf")])
def test_a_process_forked_after_tensorflow_ran_is_refused(tmp_path, imported, started):
    """`core`: the core was imported before the fork; `package`: only the package, which
    imports its core on first use, here the parent's save. Where TensorFlow alone ran in the
    parent, the core is first imported in the child, and reads the fork the package noted
    (a mutant that looked for the package under another name passed, helper-123)."""
    lines = run(tmp_path, imported, started, core_imported=started == "started")
    for name, line in zip(("save", "load", "verify"), lines):
        assert line.startswith(f"{name} refused: {name}() cannot run in this process: it was "
                               "forked from one whose TensorFlow runtime had started"), lines
        assert line.endswith("Start it with multiprocessing.get_context('spawn') or "
                             "'forkserver', or fork before TensorFlow runs anything"), line
    files = "'parent.tfrecord', 'parent.tfrecord.header.yaml'" if started == "started" else ""
    assert lines[3] == f"child exit 0 [{files}]", lines


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this system")
def test_a_process_forked_before_tensorflow_ran_saves_and_loads(tmp_path):
    """Forked right after the imports, the child's TensorFlow starts its own runtime."""
    lines = run(tmp_path, "package", "not started", core_imported=False)
    assert lines == ["save ran", "load ran", "verify ran",
                     "child exit 0 ['child.tfrecord', 'child.tfrecord.header.yaml']"], lines

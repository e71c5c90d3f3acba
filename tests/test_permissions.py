"""Permission checks as they are for a user other than root. The suite runs as root, which
the OS lets read, write and remove anything: these tests make the files as root and run the
calls under test as `nobody` (`setpriv`), in a child process. Skipped where the suite does
not run as root, or `setpriv`, the user `nobody` or a Python it may run are missing."""
import json
import os
import pwd
import shutil
import site
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
import tensorflow as tf

from super_serial import merge, read_header, save

REPO = str(Path(__file__).resolve().parent.parent)


def _nobody():
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("needs root, to run a part as another user")
    setpriv = shutil.which("setpriv")
    try:
        user = pwd.getpwnam("nobody")
    except KeyError:
        user = None
    if setpriv is None or user is None:
        pytest.skip("needs setpriv and the user nobody")
    return setpriv, user


@pytest.fixture(scope="module")
def as_nobody():
    """Runs Python source as nobody; returns (returncode, the JSON it printed last, stderr)."""
    setpriv, user = _nobody()
    home = tempfile.mkdtemp(prefix="super_serial_nobody_home_")
    os.chown(home, user.pw_uid, user.pw_gid)
    path = os.pathsep.join([REPO, *site.getsitepackages()])
    env = {"PATH": "/usr/bin:/bin", "HOME": home, "TF_CPP_MIN_LOG_LEVEL": "2",
           "PYTHONPATH": path}
    prefix = [setpriv, f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"]
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    # This Python may sit where nobody cannot reach it (a venv made from root's pyenv): then
    # one of the same version, given this one's packages
    python = None
    for candidate in (sys.executable, shutil.which(version, path="/usr/local/bin:/usr/bin")):
        if candidate and subprocess.run(
                [*prefix, candidate, "-c", "import super_serial"], env=env, cwd=home,
                capture_output=True, timeout=300).returncode == 0:
            python = candidate
            break
    if python is None:
        shutil.rmtree(home, ignore_errors=True)
        pytest.skip("no Python that nobody may run imports super_serial")

    def run(source: str):
        # run in the home folder: `-c` puts the working folder first on sys.path
        done = subprocess.run([*prefix, python, "-c", textwrap.dedent(source)], env=env,
                              cwd=home, capture_output=True, text=True, timeout=300)
        lines = done.stdout.strip().splitlines()
        return done.returncode, json.loads(lines[-1]) if lines else None, done.stderr

    yield run
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def shared_folder():
    """A folder that nobody can reach (pytest's tmp_path is root's own, mode 0700)."""
    folder = tempfile.mkdtemp(prefix="super_serial_permissions_")
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def numbers(n, offset=0):
    return tf.data.Dataset.range(offset, offset + n).map(lambda x: {"a": x})


def test_a_save_over_a_header_it_cannot_read_warns_of_the_shards_it_leaves(
        as_nobody, shared_folder):
    """A header another user may not read, in a folder one may write in, is replaced by a
    save as any file there is; but the old shards it listed cannot be known, and so are not
    removed. The save said nothing of them: files of no header, left for good."""
    folder = os.path.join(shared_folder, "data")
    os.mkdir(folder)
    os.chmod(folder, 0o777)
    tfrecord_path = os.path.join(folder, "x.tfrecord")
    save(numbers(100), tfrecord_path, num_shards=3)
    os.chmod(tfrecord_path + ".header.yaml", 0o600)
    code, caught, err = as_nobody(f"""
        import json, warnings, tensorflow as tf, super_serial
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            super_serial.save(tf.data.Dataset.range(50).map(lambda x: {{"a": x}}),
                              {tfrecord_path!r}, num_shards=2)
        print(json.dumps([str(w.message) for w in caught]))
        """)
    assert code == 0, err
    assert [w["file"] for w in read_header(tfrecord_path + ".header.yaml")["shards"]] == [
        "x.tfrecord-00000-of-00002", "x.tfrecord-00001-of-00002"]
    left = [f"{tfrecord_path}-0000{i}-of-00003" for i in range(3)]
    assert all(os.path.exists(path) for path in left)  # not removed: not known to be its own
    assert len(caught) == 1, caught
    assert "could not be read (Permission denied)" in caught[0]
    assert all(path in caught[0] for path in left), caught


def test_a_merge_over_a_header_it_may_not_replace_names_that_header(as_nobody, shared_folder):
    """Another user's merged header in a folder with the sticky bit cannot be replaced: the
    error named the merge's own temporary (removed by then) as the file refused."""
    folder = os.path.join(shared_folder, "data")
    os.mkdir(folder)
    parts = [os.path.join(folder, f"x.tfrecord-part{i}") for i in range(2)]
    for i, part in enumerate(parts):
        save(numbers(20, 100 * i), part)
    tfrecord_path = os.path.join(folder, "x.tfrecord")
    header_path = tfrecord_path + ".header.yaml"
    merge(parts, tfrecord_path)
    before = Path(header_path).read_bytes()
    for name in os.listdir(folder):
        if name != "x.tfrecord.header.yaml":
            os.chown(os.path.join(folder, name), pwd.getpwnam("nobody").pw_uid, -1)
    os.chmod(folder, 0o1777)
    code, message, err = as_nobody(f"""
        import json, super_serial
        try:
            super_serial.merge({parts!r}, {tfrecord_path!r})
            print(json.dumps(None))
        except Exception as error:
            print(json.dumps(getattr(error, "message", str(error))))
        """)
    assert code == 0, err
    assert message == f"{header_path}: nothing was merged: {header_path}; Operation not permitted"
    assert Path(header_path).read_bytes() == before
    assert sorted(os.listdir(folder)) == sorted(
        [Path(p).name for p in parts] + [Path(p).name + ".header.yaml" for p in parts]
        + ["x.tfrecord.header.yaml"])

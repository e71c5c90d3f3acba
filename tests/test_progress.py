"""save(..., progress=True) and verify(..., progress=True) show one progress line on stderr;
progress=False shows nothing."""

from __future__ import annotations

import re

import pytest
import tensorflow as tf

from super_serial import save, verify

NUMBER = r"[0-9][0-9,]*(?:\.[0-9]+)?"
FULL_BAR = r"\[#{20}\] 100%"


def dataset(n: int) -> tf.data.Dataset:
    return tf.data.Dataset.range(n).map(lambda i: {"id": i, "x": tf.fill([4], 0.5)})


def last_update(stderr: str) -> str:
    """The text the terminal shows last: updates overwrite each other with '\\r'."""
    return stderr.rstrip("\n").split("\r")[-1]


@pytest.fixture
def quiet_capfd(capfd, paths):
    """capfd after TensorFlow's one-time start-up messages (they are not super_serial's)."""
    save(dataset(2), paths[0] + "-warmup")
    capfd.readouterr()
    return capfd


def test_progress_line_with_known_total(paths, quiet_capfd):
    save(dataset(100), paths[0], progress=True)
    out, err = quiet_capfd.readouterr()
    assert out == "", "progress goes to stderr, not stdout"
    assert err.endswith("\n"), "the progress line is finished with a newline"
    assert err.count("\n") == 1, f"one progress line expected, got {err!r}"
    line = last_update(err)
    assert re.fullmatch(
        rf"super_serial: save {FULL_BAR} 100/100 elements\s+{NUMBER} MB\s+{NUMBER} MB/s\s*", line
    ), line


@pytest.mark.filterwarnings("ignore:.*shard files hold no records")  # small, unknown size
def test_progress_line_with_unknown_total(paths, quiet_capfd):
    data = dataset(100).filter(lambda e: e["id"] % 2 == 0)
    assert data.cardinality() == tf.data.UNKNOWN_CARDINALITY
    save(data, paths[0], progress=True, num_shards=2, compression="GZIP")
    line = last_update(quiet_capfd.readouterr().err)
    assert re.fullmatch(rf"super_serial: save 50 elements\s+{NUMBER} MB\s+{NUMBER} MB/s\s*",
                        line), line


def test_progress_reports_megabytes(paths, quiet_capfd):
    n = 20_000  # about 0.7 MB of records
    save(dataset(n), paths[0], progress=True)
    line = last_update(quiet_capfd.readouterr().err)
    match = re.fullmatch(rf"super_serial: save {FULL_BAR} 20,000/20,000 elements\s+({NUMBER}) MB\s+"
                         rf"({NUMBER}) MB/s\s*", line)
    assert match, line
    megabytes, rate = (float(g.replace(",", "")) for g in match.groups())
    assert 0.3 < megabytes < 3, line
    assert rate > 0, line


@pytest.mark.parametrize("options", [{}, {"progress": False}, {"num_shards": 3, "progress": False}])
def test_no_progress_output_by_default(paths, quiet_capfd, options):
    save(dataset(100), paths[0], **options)
    assert quiet_capfd.readouterr() == ("", "")


def test_verify_progress_bar_counts_records_and_bytes(paths, quiet_capfd):
    save(dataset(20_000), paths[0])
    size = tf.io.gfile.stat(paths[0]).length
    quiet_capfd.readouterr()

    assert verify(paths[0], progress=True)["num_records"] == 20_000
    out, err = quiet_capfd.readouterr()
    assert out == "" and err.endswith("\n") and err.count("\n") == 1, err
    updates = err.rstrip("\n").split("\r")[1:]
    line = updates[-1]
    match = re.fullmatch(rf"super_serial: verify {FULL_BAR} 20,000/20,000 records\s+({NUMBER}) MB"
                         rf"\s+{NUMBER} MB/s\s*", line)
    assert match, line
    assert match.group(1) == f"{size / 1e6:,.1f}", (line, size)
    for update in updates:  # every redraw has the same layout, counting up to the total
        assert re.fullmatch(rf"super_serial: verify \[[#.]{{20}}\] +\d+% [0-9,]+/20,000 records"
                            rf"\s+{NUMBER} MB\s+{NUMBER} MB/s\s*", update), update


def test_progress_bar_fills_in_proportion():
    import io

    from super_serial import core

    stream = io.StringIO()
    meter = core._Progress("verify", "records", 200, enabled=True, stream=stream)
    meter.update(50, 1_000_000, force=True)
    meter.update(200, None, force=True)
    meter.close()
    first, second = stream.getvalue().rstrip("\n").split("\r")[1:]
    assert first.startswith(
        "super_serial: verify [#####...............]  25% 50/200 records  1.0 MB")
    assert second.rstrip() == "super_serial: verify [####################] 100% 200/200 records"
    assert len(second) == len(first)  # the end of the longer line cleared


def test_a_shorter_line_clears_the_end_of_a_longer_one():
    """Redrawn with "\\r" only, a line that got shorter (12.3 MB/s, then 5.7 MB/s) left the
    old line's last character on the terminal: "5.7 MB/ss" (helper-76)."""
    import io

    from super_serial import core

    stream = io.StringIO()
    meter = core._Progress("save", "elements", None, enabled=True, stream=stream)
    meter.update(1_000_000, 12_345_678_901, force=True)
    meter.update(50, 1, force=True)
    meter.close()
    first, second = stream.getvalue().rstrip("\n").split("\r")[1:]
    assert len(second) == len(first) and second.rstrip().endswith(" MB/s")
    assert second.startswith("super_serial: save 50 elements  0.0 MB")


def test_progress_without_stderr(paths, monkeypatch):
    """sys.stderr is None under pythonw, or in a daemon that closed it: save(progress=True)
    raised AttributeError and saved nothing (helper-76)."""
    import sys

    monkeypatch.setattr(sys, "stderr", None)
    save(dataset(10), paths[0], progress=True)
    assert verify(paths[0], progress=True)["num_records"] == 10


def test_verify_shows_nothing_by_default(paths, quiet_capfd):
    save(dataset(100), paths[0])
    quiet_capfd.readouterr()
    verify(paths[0])
    assert quiet_capfd.readouterr() == ("", "")

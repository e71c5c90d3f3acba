"""Smoke test: benchmarks/bench.py runs end to end at tiny scale and reports every row."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
BENCH = REPO_ROOT / "benchmarks" / "bench.py"
WORKLOADS = ("images", "tabular")
EXPECTED_ELEMENT = {"images": r"float32 \[256, 256, 3\] arrays",
                    "strings": "strings of 150,000 bytes with an int64 label",
                    "clips": r"float32 \[None\] arrays of 100,000 to 300,000 values"}
EXPECTED_ROWS = (
    ("super_serial", "save"),
    ("super_serial", "load"),
    ("super_serial (batched fast path)", "load"),
    ("tf.data", "save"),
    ("tf.data", "load"),
    ("naive", "save"),
    ("naive", "load"),
    ("naive (lists)", "save"),
    ("super_serial sharded+gzip", "save"),
    ("super_serial sharded+gzip", "load"),
    ("super_serial", "first save"),
    ("super_serial", "first load"),
    ("tf.data", "first save"),
    ("tf.data", "first load"),
)


def run_bench(out: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Run bench.py in a subprocess (with `env` added to this environment); check it succeeded
    and removed its work directory."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    result = subprocess.run(
        [sys.executable, str(BENCH), "--out", str(out), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO_ROOT,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert list(out.iterdir()) == [], "bench.py left files behind"
    return result.stdout


def parse_table(stdout: str, first_column: str) -> list[dict[str, str]]:
    """Rows of the text table whose header starts with ``first_column``, keyed by header."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(first_column + " "))
    header = re.split(r"\s{2,}", lines[start].strip())
    rows = []
    for line in lines[start + 2 :]:
        if not line.strip():
            break
        cells = re.split(r"\s{2,}", line.strip())
        assert len(cells) == len(header), line
        rows.append(dict(zip(header, cells)))
    return rows


def test_benchmark_reports_every_contender_with_ratio(tmp_path):
    # The first calls import super_serial's core from bytecode that bench.py compiles, as an
    # installed package's is (a first-call child without it fails): none beforehand, and
    # none written by any other import
    cached = Path(importlib.util.cache_from_source(str(REPO_ROOT / "super_serial" / "core.py")))
    cached.unlink(missing_ok=True)
    stdout = run_bench(tmp_path, "--scale", "0.01", "--repeats", "1", "--first-calls", "1",
                       env={"PYTHONDONTWRITEBYTECODE": "1"})

    assert "cpu count: " in stdout and "tensorflow: " in stdout
    rows = parse_table(stdout, "workload")
    assert "ratio vs tf.data" in rows[0]
    by_key = {(row["workload"], row["contender"], row["op"]): row for row in rows}
    for workload in WORKLOADS:
        for contender, op in EXPECTED_ROWS:
            assert (workload, contender, op) in by_key, f"no {contender} {op} row for {workload}"
            row = by_key[(workload, contender, op)]
            assert row["runs"] == "1"
            assert float(row["median s"]) > 0
            assert int(row["bytes on disk"].replace(",", "")) > 0
            ratio = float(row["ratio vs tf.data"])
            if contender == "tf.data":
                assert ratio == 1.0
            else:
                assert ratio > 0
    assert len(rows) == len(WORKLOADS) * len(EXPECTED_ROWS)
    assert tuple(rows[0]) == ("workload", "contender", "op", "runs", "median s", "min s",
                              "max s", "MB/s", "elements/s", "bytes on disk", "ratio vs tf.data")
    elements = {"images": 20, "tabular": 1000}  # at --scale 0.01
    for (workload, _, op), row in by_key.items():
        median = float(row["median s"])
        assert float(row["min s"]) <= median <= float(row["max s"])
        # elements/s is of the median; ratios are against tf.data's same operation
        per_second = int(row["elements/s"].replace(",", ""))
        assert per_second * median == pytest.approx(elements[workload], rel=0.15, abs=1)
        theirs = float(by_key[(workload, "tf.data", op)]["median s"])
        assert float(row["ratio vs tf.data"]) == pytest.approx(median / theirs, rel=0.15,
                                                               abs=0.02)
    for workload in WORKLOADS:  # every file counted: super_serial's header too
        ours = int(by_key[(workload, "super_serial", "save")]["bytes on disk"].replace(",", ""))
        naive = int(by_key[(workload, "naive", "save")]["bytes on disk"].replace(",", ""))
        assert ours > naive  # the same records, and the header
    for workload in WORKLOADS:
        for naive in ("naive", r"naive \(lists\)"):
            assert re.search(rf"^{workload}: save time {naive} / super_serial = [\d.]+x "
                             r"\(target >= 20x\)$", stdout, re.M)
    assert re.search(r"^first save, first load = the first of a fresh process", stdout, re.M)
    assert re.search(r"^images: super_serial on disk / raw .* = [+-][\d.]+%", stdout, re.M)


@pytest.mark.parametrize("element", ["images", "strings", "clips"])
def test_memory_mode_reports_peak_rss_growth(tmp_path, element):
    stdout = run_bench(tmp_path, "--memory", "--memory-gib", "0.01", "--memory-element", element)

    rows = {row["contender"]: row for row in parse_table(stdout, "contender")}
    assert set(rows) == {"super_serial", "tf.data"}
    for row in rows.values():
        assert float(row["save s"]) > 0
        assert int(row["bytes on disk"].replace(",", "")) >= 0.01 * 2**30
        assert int(row["peak RSS growth MB"]) >= 0
    assert re.search(r"^super_serial: peak RSS growth -?\d+ MB \(target < 400 MB\)", stdout, re.M)
    assert re.search(r"^VmHWM was reset to VmRSS before each save$", stdout, re.M)
    assert re.search(rf"^streaming save of 0.01 GiB of {EXPECTED_ELEMENT[element]}", stdout, re.M)


def test_schema_benchmark_runs_at_tiny_scale():
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "benchmarks" / "schemas.py"), "--elements", "40",
         "--repeats", "1"],
        capture_output=True, text=True, timeout=120, cwd=REPO_ROOT, env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    rows = [line for line in result.stdout.splitlines()
            if re.search(r"(\s+\d+\.\d\d){3}$", line)]
    assert len(rows) == 18, result.stdout
    assert any(row.startswith("float32 [2, None]") for row in rows), result.stdout
    assert any(row.startswith("string [None, None]") for row in rows), result.stdout
    assert any(row.startswith("sparse float32 [30000]") for row in rows), result.stdout


def test_every_timed_run_starts_after_the_settle_pause(tmp_path, monkeypatch):
    """Work one contender leaves running (tf.data's load, for some tens of ms) must not be
    timed as the next one's: each save and each load starts right after a pause of
    `settle` seconds, outside the timed call."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_under_test", BENCH)
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, bench)  # for its dataclasses
    spec.loader.exec_module(bench)
    events = []
    monkeypatch.setattr(bench.time, "sleep", lambda seconds: events.append(("pause", seconds)))
    timed_save, timed_load = bench.timed_save, bench.timed_load
    monkeypatch.setattr(bench, "timed_save", lambda contender, *a: events.append(
        ("save", contender.name)) or timed_save(contender, *a))
    monkeypatch.setattr(bench, "timed_load", lambda loader, *a: events.append(
        ("load", loader.__name__)) or timed_load(loader, *a))
    workload = bench.build_workload("tabular", 0.0005)
    contenders = [bench.CONTENDERS["super_serial"], bench.CONTENDERS["tf.data"]]

    rows = bench.run_workload(workload, contenders, 2, 0, tmp_path, settle=0.25)

    runs = [e for e in events if e[0] != "pause"]
    assert len(runs) == 2 * (3 + 2)  # 2 repeats: super_serial's save and 2 loads, tf.data's 2
    assert events[0] == ("pause", 0.25)
    for i, event in enumerate(events[1:], 1):
        if event[0] != "pause":
            assert events[i - 1] == ("pause", 0.25), (i, events[: i + 1])
    assert all(len(row.seconds) == 2 for row in rows.values())
    args = bench.parse_args([])
    assert args.settle == 0.1
    assert bench.parse_args(["--settle", "0"]).settle == 0


def test_schema_benchmark_pauses_before_each_timed_run(tmp_path, monkeypatch):
    """schemas.py times its runs as bench.py does: each one's clock starts right after a pause
    of `settle` seconds."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("schemas_under_test",
                                                  REPO_ROOT / "benchmarks" / "schemas.py")
    schemas = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, schemas)
    spec.loader.exec_module(schemas)
    events = []
    clock = schemas.time.perf_counter
    monkeypatch.setattr(schemas.time, "sleep", lambda seconds: events.append(("pause", seconds)))
    monkeypatch.setattr(schemas.time, "perf_counter", lambda: events.append(("clock",)) or clock())
    dataset, varying = schemas.schemas(16)["float32 [None] (about 500 values)"]

    medians = schemas.measure(dataset, varying, tmp_path, 2, settle=0.25)

    assert len(medians) == 6  # two saves, four loads (varying shapes: ragged_batch too)
    pauses = [i for i, event in enumerate(events) if event[0] == "pause"]
    assert len(pauses) == 2 * len(medians)
    assert all(events[i] == ("pause", 0.25) and events[i + 1] == ("clock",) for i in pauses)


def _module(name: str, monkeypatch):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"{name}_under_test",
                                                  REPO_ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # for its dataclasses
    spec.loader.exec_module(module)
    return module


def test_bench_checks_what_each_loader_reads(tmp_path, monkeypatch):
    """The timed loads only count elements; the untimed run before them checks every value,
    so a loader that reads wrong data stops the benchmark."""
    bench = _module("bench", monkeypatch)
    workload = bench.build_workload("tabular", 0.0005)
    dataset = bench.tf.data.Dataset.from_tensor_slices(workload.arrays)
    for contender in bench.CONTENDERS.values():
        bench.warm_up(contender, workload, dataset, tmp_path)  # all read back right
    target = bench.super_serial_save(dataset, tmp_path)

    def off_by_one(path, spec):
        return bench.super_serial_load(path, spec).map(lambda b: {**b, "y": b["y"] + 1})

    def one_short(path, spec):
        return bench.super_serial_load(path, spec).unbatch().skip(1).batch(bench.BATCH_SIZE)

    for loader, key in ((off_by_one, "'y'"), (one_short, "'x'")):
        with pytest.raises(RuntimeError, match=f"tabular loaded from .* differs from the data "
                                                f"saved, in {key}"):
            bench.check_load(loader, target, workload, dataset.element_spec, "broken")


@pytest.mark.parametrize("argv", [["--contenders", "naive", "--skip-naive"],
                                  ["--naive-repeats", "0"], ["--repeats", "0"],
                                  ["--memory", "--contenders", "naive"]])
def test_bench_refuses_options_that_would_run_nothing(argv, monkeypatch, capsys):
    bench = _module("bench", monkeypatch)
    with pytest.raises(SystemExit):
        bench.parse_args(argv)
    assert "error:" in capsys.readouterr().err


def test_bench_refuses_a_contender_named_twice(monkeypatch, capsys):
    bench = _module("bench", monkeypatch)
    with pytest.raises(SystemExit):
        bench.parse_args(["--contenders", "super_serial,tf.data,super_serial"])
    assert "names super_serial more than once" in capsys.readouterr().err
    assert bench.parse_args(["--contenders", "super_serial,tf.data"]).contenders == [
        "super_serial", "tf.data"]


def test_peak_rss_reset_reports_failure(monkeypatch):
    bench = _module("bench", monkeypatch)
    assert bench.reset_peak_rss()  # Linux >= 4.0, as the memory numbers assume

    def refused(path, *args, **kwargs):
        raise PermissionError(path)

    monkeypatch.setattr(bench, "open", refused, raising=False)
    assert not bench.reset_peak_rss()


def test_schema_benchmark_times_no_removal_of_the_last_save(tmp_path, monkeypatch):
    """Each save starts where nothing is, and removing the last save's files is not timed:
    it timed `tf.data`'s `rmtree` of its last snapshot inside its save."""
    schemas = _module("schemas", monkeypatch)
    removal = schemas.shutil.rmtree

    def slow_rmtree(*args, **kwargs):
        time.sleep(1.0)
        removal(*args, **kwargs)

    monkeypatch.setattr(schemas.shutil, "rmtree", slow_rmtree)
    dataset = schemas.tf.data.Dataset.from_tensor_slices({"x": [[1.0, 2.0], [3.0, 4.0]]})
    medians = schemas.measure(dataset, False, tmp_path, repeats=1)
    assert 0 < medians["save tf.data"] < 1.0
    assert 0 < medians["save super_serial"] < 1.0


def test_schema_benchmark_checks_what_it_loads(monkeypatch):
    schemas = _module("schemas", monkeypatch)
    tf = schemas.tf
    saved = tf.data.Dataset.from_tensor_slices({"x": [[1.0, 2.0], [3.0, 4.0]]})
    schemas.check(saved, saved)
    differs = "^element 0 loaded differs from the one saved$"
    for loaded, problem in ((saved.map(lambda e: {"x": e["x"] * 2}), differs),
                            (saved.take(1), "^the loaded dataset has another number of elements$"),
                            (saved.map(lambda e: {"x": tf.cast(e["x"], tf.float64)}), differs)):
        with pytest.raises(RuntimeError, match=problem):
            schemas.check(saved, loaded)
    ragged = tf.data.Dataset.from_tensor_slices({"r": tf.ragged.constant([[1], [2, 3]])})
    schemas.check(ragged, ragged)
    with pytest.raises(RuntimeError, match="^element 1 loaded differs from the one saved$"):
        schemas.check(ragged, tf.data.Dataset.from_tensor_slices(
            {"r": tf.ragged.constant([[1], [2, 4]])}))
    with pytest.raises(SystemExit):
        schemas.main(["--repeats", "0"])


def test_bench_checks_the_first_and_the_last_run_of_each_contender(tmp_path, monkeypatch):
    """The untimed run before the timed ones checks every value each contender reads, and so
    does its last timed run, made with what the runs before it left (helper-81: only the
    first was checked, and nothing failed without it)."""
    bench = _module("bench", monkeypatch)
    workload = bench.build_workload("tabular", 0.0005)
    calls = []

    def wrong_from(call):
        def save(dataset, run_dir):
            calls.append(call)
            if len(calls) >= call:
                dataset = dataset.map(lambda e: {**e, "y": e["y"] + 1})
            return bench.super_serial_save(dataset, run_dir)
        return save

    for call in (1, 3):  # wrong from the untimed run's save; from the last of two timed
        calls.clear()
        contender = bench.Contender("broken", wrong_from(call),
                                    {"broken": bench.super_serial_load})
        with pytest.raises(RuntimeError, match="broken: tabular loaded from .* differs from "
                                               "the data saved, in 'y'"):
            bench.run_workload(workload, [contender], 2, 0, tmp_path)
        assert len(calls) == call
    calls.clear()
    checked_only = bench.Contender("lists", wrong_from(1), {}, checker=bench.naive_load)
    with pytest.raises(RuntimeError, match="lists: tabular loaded from"):
        bench.run_workload(workload, [checked_only], 1, 0, tmp_path)


def test_bench_rotates_who_goes_first(tmp_path, monkeypatch):
    """Each repeat runs every contender once, a different one first each time; the naive
    writers only in their first repeats, sharded+gzip after all the others' runs. Once the
    naive writers stop, super_serial and tf.data take turns (super_serial went first in 6 of
    9 repeats; helper-81)."""
    bench = _module("bench", monkeypatch)
    order = []
    monkeypatch.setattr(bench, "warm_up", lambda *a: None)
    monkeypatch.setattr(bench, "run_once", lambda contender, *a, **k: order.append(
        contender.name))
    names = ["super_serial", "tf.data", "naive", "naive (lists)", "super_serial sharded+gzip"]
    bench.run_workload(bench.build_workload("tabular", 0.0005),
                       [bench.CONTENDERS[n] for n in names], 4, 2, tmp_path)
    rotated = [["super_serial", "tf.data", "naive", "naive (lists)"],
               ["tf.data", "naive", "naive (lists)", "super_serial"],
               ["super_serial", "tf.data"],  # the naive writers only in repeats 0 and 1
               ["tf.data", "super_serial"]]
    assert order == [n for repeat in rotated for n in repeat] + [
        "super_serial sharded+gzip"] * 4


def test_bench_ratios_are_of_the_medians(monkeypatch):
    """The table's ratio is super_serial's median over tf.data's, not the median of each
    repeat's ratio (here 0.40 against 1.00), and its spread columns are the runs' own."""
    bench = _module("bench", monkeypatch)
    workload = bench.build_workload("tabular", 0.0005)
    rows = {}
    for label, seconds in (("tf.data", [1.0, 5.0, 6.0]), ("super_serial", [1.0, 2.0, 9.0])):
        for value in seconds:
            bench.record(rows, workload, label, "save", value, 10)
    lines = {line[1]: line for line in bench.table_rows(rows)}
    assert lines["super_serial"][3:7] == ("3", "2.000", "1.000", "9.000")
    assert lines["super_serial"][-1] == "0.40"
    assert lines["tf.data"][-1] == "1.00"


def test_bench_first_timed_run_does_not_follow_the_gzip_save(tmp_path, monkeypatch):
    """The sharded+gzip save is timed after the others' runs because the save after its
    compressed writes took 2-4 times as long; its untimed run must not come right before the
    first timed run either (it did: super_serial's first timed save followed it)."""
    bench = _module("bench", monkeypatch)
    events = []
    monkeypatch.setattr(bench, "warm_up", lambda contender, *a: events.append(
        ("untimed", contender.name)))
    monkeypatch.setattr(bench, "run_once", lambda contender, *a, **k: events.append(
        ("timed", contender.name)))
    bench.run_workload(bench.build_workload("tabular", 0.0005),
                       [bench.CONTENDERS[n] for n in bench.ALL_CONTENDERS], 3, 2, tmp_path)
    gzip = "super_serial sharded+gzip"
    assert sorted(n for kind, n in events if kind == "untimed") == sorted(bench.ALL_CONTENDERS)
    for before, after in zip(events, events[1:]):
        if after == ("timed", after[1]) and after[1] != gzip:
            assert before[1] != gzip, (before, after)


def test_bench_times_no_directory_work_or_check(tmp_path, monkeypatch):
    """Making the run's folder, removing it and checking the values read stay outside every
    timed save and load (schemas.py has the like test for its removals)."""
    bench = _module("bench", monkeypatch)
    workload = bench.build_workload("tabular", 0.0005)
    dataset = bench.tf.data.Dataset.from_tensor_slices(workload.arrays)
    contenders = [bench.CONTENDERS[n] for n in ("super_serial", "tf.data", "naive")]
    for contender in contenders:  # traced before the clocks
        bench.warm_up(contender, workload, dataset, tmp_path)

    # A clock that each of them moves on by an hour, as if it took that long
    skipped = [0.0]
    clock = types.SimpleNamespace(perf_counter=lambda: time.perf_counter() + skipped[0],
                                  sleep=time.sleep)

    def slow(function):
        def run(*args, **kwargs):
            skipped[0] += 3600
            return function(*args, **kwargs)
        return run

    monkeypatch.setattr(bench, "time", clock)
    monkeypatch.setattr(bench.shutil, "rmtree", slow(bench.shutil.rmtree))
    monkeypatch.setattr(bench.tempfile, "mkdtemp", slow(bench.tempfile.mkdtemp))
    monkeypatch.setattr(bench, "check_load", slow(bench.check_load))
    rows: dict = {}
    for contender in contenders:
        bench.run_once(contender, workload, dataset, tmp_path, rows, check=True)
    assert len(rows) == 7  # 3 saves, 4 loads
    assert skipped[0] >= 3600 * 3 * 2  # a folder made and removed for each contender at least
    assert all(0 < s < 3600 for row in rows.values() for s in row.seconds), rows


def test_bench_throughput_columns_are_of_the_payload_and_the_median(monkeypatch):
    """MB/s is the raw payload (not the bytes on disk) over the median; elements/s too."""
    bench = _module("bench", monkeypatch)
    np = bench.np
    workload = bench.Workload("w", {"x": np.zeros((1000, 1000), np.float32),
                                    "y": np.zeros(1000, np.int64)})
    rows: dict = {}
    for seconds in (1.0, 2.0, 9.0):
        bench.record(rows, workload, "tf.data", "save", seconds, 123_456_789)
    (line,) = bench.table_rows(rows)
    assert line[7] == f"{4_008_000 / 1e6 / 2.0:.1f}"  # 2.0 MB/s
    assert line[8] == "500"
    assert line[9] == "123,456,789"


def test_schema_benchmark_rotates_who_goes_first(tmp_path, monkeypatch):
    """schemas.py alternates the contenders as bench.py does: not super_serial's save first
    in every repeat, right after the last repeat's loads, and tf.data's right after it."""
    schemas = _module("schemas", monkeypatch)
    from super_serial import core

    order = []
    ours, theirs = core.save, schemas.tf.data.Dataset.save
    monkeypatch.setattr(core, "save", lambda *a, **k: order.append("super_serial")
                        or ours(*a, **k))
    monkeypatch.setattr(schemas.tf.data.Dataset, "save", lambda self, *a, **k: order.append(
        "tf.data") or theirs(self, *a, **k))
    dataset = schemas.tf.data.Dataset.from_tensor_slices({"x": [[1.0, 2.0], [3.0, 4.0]]})
    schemas.measure(dataset, False, tmp_path, repeats=2)
    assert order[:2] == ["super_serial", "tf.data"]  # the untimed run
    assert order[2:] == ["super_serial", "tf.data", "tf.data", "super_serial"]

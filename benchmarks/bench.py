"""Benchmark super_serial against tf.data.Dataset.save/load and a naive TFRecord writer.

Two in-memory workloads are saved and loaded by every contender:

* ``images``:  2,000 elements of ``{"image": float32[64, 64, 3], "label": int64}``
* ``tabular``: 100,000 elements of ``{"x": float32[8], "y": int64, "id": string}``

Contenders (alternated round-robin in one process, so machine noise hits all alike; the
sharded+gzip one is timed after the others' runs, see ``run_workload``):

* ``super_serial``: ``super_serial.save`` / ``super_serial.load``; its load is also timed
  with ``load(..., batch_size=512)`` as the row ``super_serial (batched fast path)``.
* ``tf.data``: ``tf.data.Dataset.save`` / ``tf.data.Dataset.load``.
* ``naive``: one ``tf.train.Example`` per element built in Python and written with
  ``tf.io.TFRecordWriter``, the NumPy arrays handed to the protobuf lists as the original
  module did; read with ``TFRecordDataset(...).map(parse_single_example)``.
* ``naive (lists)``: the same writer with each array made a Python list first
  (``.tolist()``), which protobuf takes faster; its files are the naive writer's, so only
  its save is timed.
* ``super_serial sharded+gzip``: ``super_serial.save(..., num_shards=4, compression="GZIP")``.

A save is timed in full (including any header or metadata) into a fresh directory; a
load is timed from building the dataset until every ``ds.batch(512)`` batch has been
iterated. Results are medians over ``--repeats`` runs; ratios are ``median / tf.data
median`` for the same workload and operation, so values <= 1.0 beat tf.data. Each timed
operation starts after a pause of ``--settle`` seconds (default 0.1), so that work one
operation leaves running is not timed as the next one's: right after a
``tf.data.Dataset.load`` of the images, a save of them took up to 4.5x as long, in system CPU.

``--first-calls N`` (default 3; 0 skips them) also times the first save and the first load
in a fresh process, as a script that saves or loads once meets them: each of super_serial and
tf.data, N times alternating, each time in a new subprocess that imports TensorFlow and
super_serial and builds the workload before the clock starts. super_serial's modules are
byte-compiled for them beforehand, as an installed package's are (``run_first_calls``).

``--memory`` instead measures streaming: each of super_serial and tf.data saves
``--memory-gib`` GiB from a generator-backed dataset in a fresh subprocess, which
reports its peak RSS growth during the save; ``--memory-element strings`` streams byte
strings of 150 kB (encoded images) instead of float32 arrays, ``--memory-element clips``
float32 arrays of unknown length, 0.4 to 1.2 MB (audio clips).

Usage::

    python benchmarks/bench.py                         # full benchmark, text table
    python benchmarks/bench.py --markdown              # Markdown table for the README
    python benchmarks/bench.py --scale 0.01 --repeats 1
    python benchmarks/bench.py --memory                # streaming peak-RSS measurement
    python benchmarks/bench.py --memory --memory-element strings  # of encoded-image strings
    python benchmarks/bench.py --memory --memory-element clips    # of unknown shape
"""

from __future__ import annotations

import argparse
import compileall
import datetime
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

BATCH_SIZE = 512
SEED = 0
ALL_WORKLOADS = ("images", "tabular")
ALL_CONTENDERS = ("super_serial", "tf.data", "naive", "naive (lists)",
                  "super_serial sharded+gzip")
NAIVE = ("naive", "naive (lists)")
FIRST_CALL_CONTENDERS = ("super_serial", "tf.data")
MEMORY_CONTENDERS = ("super_serial", "tf.data")
MEMORY_ELEMENT_SHAPE = (256, 256, 3)
MEMORY_STRING_BYTES = 150_000  # about an encoded image
MEMORY_CLIP_SAMPLES = (100_000, 300_000)  # float32 [None]: audio clips of 0.4 to 1.2 MB
MEMORY_ELEMENTS = {  # what --memory-element streams, as the run describes it
    "images": f"float32 {list(MEMORY_ELEMENT_SHAPE)} arrays",
    "strings": f"strings of {MEMORY_STRING_BYTES:,} bytes with an int64 label",
    "clips": "float32 [None] arrays of {:,} to {:,} values".format(*MEMORY_CLIP_SAMPLES),
}
MEMORY_TARGET_MB = 400
SAVE_SPEEDUP_TARGET = 20.0
DISK_OVERHEAD_TARGET = 0.02
MB = 1e6


# --------------------------------------------------------------------------- workloads


@dataclass(frozen=True)
class Workload:
    """A named dict of equal-length numpy arrays, sliced into a dataset element-wise."""

    name: str
    arrays: dict[str, np.ndarray]

    @property
    def num_elements(self) -> int:
        return len(next(iter(self.arrays.values())))

    @property
    def payload_bytes(self) -> int:
        """Raw bytes of all values (fixed-width ``S`` arrays count their string bytes)."""
        return sum(array.nbytes for array in self.arrays.values())


def make_images(count: int, rng: np.random.Generator) -> Workload:
    return Workload(
        "images",
        {
            "image": rng.random((count, 64, 64, 3), dtype=np.float32),
            "label": rng.integers(0, 10, size=count, dtype=np.int64),
        },
    )


def make_tabular(count: int, rng: np.random.Generator) -> Workload:
    return Workload(
        "tabular",
        {
            "x": rng.standard_normal((count, 8), dtype=np.float32),
            "y": rng.integers(0, 1000, size=count, dtype=np.int64),
            "id": np.array([b"id%07d" % i for i in range(count)]),
        },
    )


WORKLOAD_BUILDERS = {"images": (make_images, 2_000), "tabular": (make_tabular, 100_000)}


def build_workload(name: str, scale: float) -> Workload:
    builder, base_count = WORKLOAD_BUILDERS[name]
    return builder(max(1, round(base_count * scale)), np.random.default_rng(SEED))


# --------------------------------------------------------------------------- contenders

# save(dataset, fresh_dir) -> target passed to each loader.
SaveFn = Callable[[tf.data.Dataset, Path], Path]
# loader(target, element_spec) -> dataset yielding batches of BATCH_SIZE elements.
LoadFn = Callable[[Path, dict], tf.data.Dataset]


@dataclass(frozen=True)
class Contender:
    """One way of saving a dataset, plus one or more timed ways of loading it back.

    ``loaders`` maps each load row's table label to its loader; ``checker``, where none is
    timed, reads the save back to check it.
    """

    name: str
    save: SaveFn
    loaders: dict[str, LoadFn]
    checker: LoadFn | None = None

    @property
    def checks(self) -> dict[str, LoadFn]:
        """The loaders that check what this contender saved."""
        return self.loaders or {self.name: self.checker}


def _super_serial():
    import super_serial

    return super_serial


def super_serial_save(dataset: tf.data.Dataset, run_dir: Path, **options) -> Path:
    target = run_dir / "data.tfrecord"
    _super_serial().save(dataset, str(target), **options)
    return target


def super_serial_load(target: Path, _spec: dict) -> tf.data.Dataset:
    return _super_serial().load(str(target)).batch(BATCH_SIZE)


def super_serial_load_batched(target: Path, _spec: dict) -> tf.data.Dataset:
    return _super_serial().load(str(target), batch_size=BATCH_SIZE)


def sharded_gzip_save(dataset: tf.data.Dataset, run_dir: Path) -> Path:
    return super_serial_save(dataset, run_dir, num_shards=4, compression="GZIP")


def tf_data_save(dataset: tf.data.Dataset, run_dir: Path) -> Path:
    target = run_dir / "snapshot"
    dataset.save(str(target))
    return target


def tf_data_load(target: Path, _spec: dict) -> tf.data.Dataset:
    return tf.data.Dataset.load(str(target)).batch(BATCH_SIZE)


def _naive_feature(value, lists: bool = False) -> tf.train.Feature:
    """As the original super serial module did it: the flattened NumPy array goes straight into
    the protobuf list (no ``.tolist()``), which converts it value by value; with `lists`, as a
    Python list (faster)."""
    if isinstance(value, bytes):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))
    array = np.asarray(value)
    kind = array.dtype.kind
    flat = array.flatten().tolist() if lists and kind in "fiub" else array.flatten()
    if kind == "f":
        return tf.train.Feature(float_list=tf.train.FloatList(value=flat))
    if kind in "iub":
        return tf.train.Feature(int64_list=tf.train.Int64List(value=flat))
    if kind in "SO":
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=flat))
    raise TypeError(f"naive writer does not support dtype {array.dtype}")


def naive_save(dataset: tf.data.Dataset, run_dir: Path, lists: bool = False) -> Path:
    """Reference writer, the approach of the original module: one Example per element, built in
    Python from ``.numpy()`` values (each array made a list first, with `lists`)."""
    target = run_dir / "data.tfrecord"
    with tf.io.TFRecordWriter(str(target)) as writer:
        for element in dataset:
            features = {key: _naive_feature(value.numpy(), lists)
                        for key, value in element.items()}
            example = tf.train.Example(features=tf.train.Features(feature=features))
            writer.write(example.SerializeToString())
    return target


def naive_lists_save(dataset: tf.data.Dataset, run_dir: Path) -> Path:
    return naive_save(dataset, run_dir, lists=True)


def naive_load(target: Path, spec: dict) -> tf.data.Dataset:
    """Reference reader; unlike the others it needs the schema passed in out of band."""
    features = {
        key: tf.io.FixedLenFeature(tensor_spec.shape.as_list(), tensor_spec.dtype)
        for key, tensor_spec in spec.items()
    }
    records = tf.data.TFRecordDataset(str(target))
    return records.map(lambda record: tf.io.parse_single_example(record, features)).batch(
        BATCH_SIZE
    )


CONTENDERS = {
    "super_serial": Contender(
        "super_serial",
        super_serial_save,
        {
            "super_serial": super_serial_load,
            "super_serial (batched fast path)": super_serial_load_batched,
        },
    ),
    "tf.data": Contender("tf.data", tf_data_save, {"tf.data": tf_data_load}),
    "naive": Contender("naive", naive_save, {"naive": naive_load}),
    "naive (lists)": Contender("naive (lists)", naive_lists_save, {}, checker=naive_load),
    "super_serial sharded+gzip": Contender(
        "super_serial sharded+gzip",
        sharded_gzip_save,
        {"super_serial sharded+gzip": super_serial_load},
    ),
}


# --------------------------------------------------------------------------- measuring


@dataclass
class Row:
    """All timings of one (workload, contender row, operation)."""

    workload: Workload
    label: str
    op: str
    seconds: list[float] = field(default_factory=list)
    disk_bytes: int = 0

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def disk_bytes(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.rglob("*") if path.is_file())


def timed_save(contender: Contender, dataset: tf.data.Dataset, run_dir: Path):
    start = time.perf_counter()
    target = contender.save(dataset, run_dir)
    return target, time.perf_counter() - start


def timed_load(loader: LoadFn, target: Path, workload: Workload, spec: dict) -> float:
    """Build the dataset, iterate every batch, and check that every element came back."""
    start = time.perf_counter()
    count = 0
    for batch in loader(target, spec):
        count += int(tf.nest.flatten(batch)[0].shape[0])
    elapsed = time.perf_counter() - start
    if count != workload.num_elements:
        raise RuntimeError(f"loaded {count} of {workload.num_elements} elements from {target}")
    return elapsed


def check_load(loader: LoadFn, target: Path, workload: Workload, spec: dict, label: str) -> None:
    """Load everything once, untimed, and check every value against the workload's arrays:
    the timed loads only count elements."""
    got: dict = {key: [] for key in workload.arrays}
    for batch in loader(target, spec):
        for key in got:
            got[key].append(batch[key].numpy())
    for key, expected in workload.arrays.items():
        loaded = np.concatenate(got[key]) if got[key] else np.empty((0,))
        if expected.dtype.kind in "SUO":
            same = [bytes(x) for x in loaded] == [bytes(x) for x in expected]
        else:
            same = loaded.dtype == expected.dtype and np.array_equal(loaded, expected)
        if not same:
            raise RuntimeError(f"{label}: {workload.name} loaded from {target} differs from "
                               f"the data saved, in {key!r}")


def warm_up(contender: Contender, workload: Workload, dataset: tf.data.Dataset,
            workdir: Path) -> None:
    """Save and load once, untimed, checking what each loader reads: first-time costs
    (tracing, imports) stay out of the timed runs, which matters most for the naive writer's
    two."""
    run_dir = Path(tempfile.mkdtemp(prefix="warm-", dir=workdir))
    try:
        target = contender.save(dataset, run_dir)
        for label, loader in contender.checks.items():
            check_load(loader, target, workload, dataset.element_spec, label)
    finally:
        shutil.rmtree(run_dir)


def run_once(
    contender: Contender, workload: Workload, dataset: tf.data.Dataset, workdir: Path, rows: dict,
    settle: float = 0.0, check: bool = False,
) -> None:
    """Save into a fresh directory, time every loader on it, then delete it; each timed
    operation after a pause of `settle` seconds. With `check`, then also check every value
    each loader reads, untimed: the contender's last run, made with what the runs before it
    left (super_serial's traced functions, say)."""
    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=workdir))
    try:
        time.sleep(settle)
        target, save_seconds = timed_save(contender, dataset, run_dir)
        size = disk_bytes(run_dir)
        record(rows, workload, contender.name, "save", save_seconds, size)
        for label, loader in contender.loaders.items():
            time.sleep(settle)
            load_seconds = timed_load(loader, target, workload, dataset.element_spec)
            record(rows, workload, label, "load", load_seconds, size)
        for label, loader in contender.checks.items() if check else ():
            check_load(loader, target, workload, dataset.element_spec, label)
    finally:
        shutil.rmtree(run_dir)


def record(rows: dict, workload: Workload, label: str, op: str, seconds: float, size: int):
    row = rows.setdefault((workload.name, label, op), Row(workload, label, op))
    row.seconds.append(seconds)
    row.disk_bytes = size


def run_workload(
    workload: Workload, contenders: list[Contender], repeats: int, naive_repeats: int,
    workdir: Path, settle: float = 0.0,
) -> dict:
    """Round-robin: every repeat runs each contender once, rotating who goes first, after
    an untimed run of each that checks the data; each contender's last run is checked too.
    The sharded+gzip contender's runs come after all the others': the save that followed its
    1.8 s of compressed writes often took 2-4 times as long, in system CPU (also after
    `os.sync()`), and the rotation put
    super_serial's save right after it in 6 of 9 repeats (images save 1.11-1.41 times
    `tf.data`'s, 0.53 without it; 2026-12-05)."""
    dataset = tf.data.Dataset.from_tensor_slices(workload.arrays)
    rows: dict = {}
    rotated = [c for c in contenders if c.name != "super_serial sharded+gzip"]
    last = [c for c in contenders if c not in rotated]
    # Those timed last are also run untimed first, so that the first timed run does not
    # follow the sharded+gzip save either
    for contender in last + rotated:
        print(f"  {workload.name}: untimed run {contender.name}", file=sys.stderr)
        warm_up(contender, workload, dataset, workdir)
    schedule = []
    for repeat in range(repeats):  # who goes first rotates among those that run this repeat
        runners = [c for c in rotated if c.name not in NAIVE or repeat < naive_repeats]
        shift = repeat % max(len(runners), 1)
        schedule += [(repeat, contender) for contender in runners[shift:] + runners[:shift]]
    schedule += [(repeat, contender) for repeat in range(repeats) for contender in last]
    final = {contender.name: i for i, (_, contender) in enumerate(schedule)}
    for i, (repeat, contender) in enumerate(schedule):
        print(f"  {workload.name}: run {repeat + 1}/{repeats} {contender.name}", file=sys.stderr)
        run_once(contender, workload, dataset, workdir, rows, settle,
                 check=final[contender.name] == i)
    return rows


# --------------------------------------------------------------------------- child processes


def run_child(arguments: list[str], workdir: Path, what: str) -> dict:
    """Run this script with `arguments` ("{dir}" among them: a fresh folder, removed after)
    in a fresh process, and return the JSON report it prints last."""
    run_dir = Path(tempfile.mkdtemp(prefix="child-", dir=workdir))
    command = [sys.executable, __file__] + [a.replace("{dir}", str(run_dir)) for a in arguments]
    try:
        result = subprocess.run(command, capture_output=True, text=True, check=False)
    finally:
        shutil.rmtree(run_dir)
    if result.returncode != 0:
        sys.stderr.write(result.stderr)
        raise SystemExit(f"{what} failed with exit code {result.returncode}")
    return json.loads(result.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- first calls


def first_call_child(name: str, workload_name: str, scale: float, out_dir: Path,
                     settle: float) -> None:
    """Runs in a fresh subprocess: time the first save and the first load (the contender's
    first loader) of the process, check what it read, and print a JSON report. TensorFlow and
    the `super_serial` package are imported before the clock starts, as a script imports them
    at its top; what they do on first use is timed. The report says whether the core's
    bytecode was there to import (see `run_first_calls`)."""
    import super_serial  # noqa: F401  (the package; it imports its core on first use)

    core = REPO_ROOT / "super_serial" / "core.py"
    bytecode = os.path.exists(importlib.util.cache_from_source(str(core)))

    workload = build_workload(workload_name, scale)
    dataset = tf.data.Dataset.from_tensor_slices(workload.arrays)
    contender = CONTENDERS[name]
    label, loader = next(iter(contender.loaders.items()))
    time.sleep(settle)
    target, save_seconds = timed_save(contender, dataset, out_dir)
    time.sleep(settle)
    load_seconds = timed_load(loader, target, workload, dataset.element_spec)
    check_load(loader, target, workload, dataset.element_spec, label)
    print(json.dumps({"save": save_seconds, "load": load_seconds, "label": label,
                      "disk_bytes": disk_bytes(out_dir), "bytecode": bytecode}))


def run_first_calls(workload: Workload, names: list[str], repeats: int, scale: float,
                    workdir: Path, settle: float) -> dict:
    """Each contender's first save and load in a fresh process, `repeats` times, alternating
    (who goes first rotates), as rows of the ops "first save" and "first load".

    super_serial's modules are byte-compiled first, in its source tree's `__pycache__`, as
    pip compiles an installed package's and had compiled TensorFlow's. Where bytecode is not
    written (PYTHONDONTWRITEBYTECODE, as on the machine of the README's table), every first
    save also compiled the 6,000-line core from source (0.1 s in a profile)."""
    if not compileall.compile_dir(str(REPO_ROOT / "super_serial"), quiet=1):
        raise SystemExit("could not byte-compile super_serial")
    rows: dict = {}
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            print(f"  {workload.name}: first calls {repeat + 1}/{repeats} {name}",
                  file=sys.stderr)
            report = run_child(["--first-call-child", name, workload.name, "{dir}", "--scale",
                                str(scale), "--settle", str(settle)], workdir,
                               f"first calls of {name} on {workload.name}")
            if not report["bytecode"]:
                raise SystemExit(f"first calls of {name} on {workload.name}: super_serial's "
                                 "core had no bytecode to import")
            record(rows, workload, name, "first save", report["save"], report["disk_bytes"])
            record(rows, workload, report["label"], "first load", report["load"],
                   report["disk_bytes"])
    return rows


# --------------------------------------------------------------------------- reporting

COLUMNS = (
    "workload",
    "contender",
    "op",
    "runs",
    "median s",
    "min s",
    "max s",
    "MB/s",
    "elements/s",
    "bytes on disk",
    "ratio vs tf.data",
)


def table_rows(rows: dict) -> list[tuple[str, ...]]:
    """Format rows, ordered by workload, then operation, then contender (insertion order)."""
    workload_order = {name: i for i, name in enumerate(dict.fromkeys(k[0] for k in rows))}
    ops = ("save", "load", "first save", "first load")
    ordered = sorted(rows.values(), key=lambda r: (workload_order[r.workload.name],
                                                   ops.index(r.op)))
    lines = []
    for row in ordered:
        reference = rows.get((row.workload.name, "tf.data", row.op))
        ratio = f"{row.median / reference.median:.2f}" if reference else "n/a"
        lines.append(
            (
                row.workload.name,
                row.label,
                row.op,
                str(len(row.seconds)),
                f"{row.median:.3f}",
                f"{min(row.seconds):.3f}",
                f"{max(row.seconds):.3f}",
                f"{row.workload.payload_bytes / MB / row.median:.1f}",
                f"{row.workload.num_elements / row.median:,.0f}",
                f"{row.disk_bytes:,}",
                ratio,
            )
        )
    return lines


def format_table(header: tuple[str, ...], lines: list[tuple[str, ...]], markdown: bool) -> str:
    """Text columns (first three left-aligned, numbers right-aligned) or a Markdown table."""
    if markdown:
        aligns = tuple("---" if i < 3 else "---:" for i in range(len(header)))
        return "\n".join("| " + " | ".join(cells) + " |" for cells in [header, aligns, *lines])
    widths = [max(len(cells[i]) for cells in [header, *lines]) for i in range(len(header))]
    rule = tuple("-" * width for width in widths)
    return "\n".join(
        "  ".join(
            cell.ljust(width) if i < 3 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(cells, widths))
        )
        for cells in [header, rule, *lines]
    )


def summary_lines(
    rows: dict, workloads: list[Workload], naive_repeats: int, repeats: int
) -> list[str]:
    """Targets: naive/super_serial save speedup and image on-disk overhead."""
    lines = []
    for workload in workloads:
        ours = rows.get((workload.name, "super_serial", "save"))
        for name in NAIVE:
            naive = rows.get((workload.name, name, "save"))
            if naive and ours:
                lines.append(
                    f"{workload.name}: save time {name} / super_serial = "
                    f"{naive.median / ours.median:.1f}x (target >= {SAVE_SPEEDUP_TARGET:.0f}x)"
                )
    images = next((w for w in workloads if w.name == "images"), None)
    if images:
        for (name, label, op), row in rows.items():
            if name == "images" and op == "save":
                overhead = row.disk_bytes / images.payload_bytes - 1
                target = f" (target within {DISK_OVERHEAD_TARGET:.0%})" * (label == "super_serial")
                lines.append(
                    f"images: {label} on disk / raw float32+int64 bytes = {overhead:+.2%}{target}"
                )
    if any(label in NAIVE for _, label, _ in rows) and naive_repeats < repeats:
        lines.append(
            f"the naive writers ran {naive_repeats} of {repeats} repeats to bound runtime "
            "(see the runs column; --naive-repeats changes this)"
        )
    lines.append(
        "MB/s = raw payload bytes / 1e6 / median; ratio vs tf.data = median / tf.data "
        "median for the same workload and op (<= 1.0 is better); load = build + iterate "
        f"ds.batch({BATCH_SIZE})"
    )
    if any(op.startswith("first ") for _, _, op in rows):
        lines.append("first save, first load = the first of a fresh process, which has "
                     "imported TensorFlow and the super_serial package (byte-compiled) and "
                     "built the data")
    return lines


def machine_info() -> list[str]:
    return [
        f"date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"platform: {platform.platform()}",
        f"python: {platform.python_version()}",
        f"cpu count: {os.cpu_count()}",
        f"tensorflow: {tf.__version__}",
        f"numpy: {np.__version__}",
    ]


def print_lines(lines: list[str], markdown: bool) -> None:
    for line in lines:
        print(f"- {line}" if markdown else line)


# --------------------------------------------------------------------------- memory mode


def proc_status_bytes(key: str) -> int:
    """A ``/proc/self/status`` memory field (e.g. VmRSS, VmHWM) in bytes (Linux only)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0). Returns whether it was reset: without
    it, VmHWM keeps the peak from before, and the growth it gives is overestimated."""
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
    except OSError:
        return False
    return proc_status_bytes("VmHWM") <= proc_status_bytes("VmRSS") + MB


def streaming_dataset(gib: float, element: str) -> tuple[tf.data.Dataset, int]:
    """A generator-backed dataset of fresh elements totalling about ``gib`` GiB: float32
    arrays of MEMORY_ELEMENT_SHAPE (``images``), byte strings of MEMORY_STRING_BYTES with
    an int64 label, as encoded images are stored (``strings``), or float32 arrays of unknown
    length, MEMORY_CLIP_SAMPLES values, as audio clips are stored (``clips``)."""
    if element == "clips":
        low, high = MEMORY_CLIP_SAMPLES
        element_bytes = (low + high) * 2  # on average: in pairs of low + k and high - k values
        signature = tf.TensorSpec([None], tf.float32)

        def make(rng, i):
            k = (i // 2 * 7919) % (high - low + 1)
            return rng.random(high - k if i % 2 else low + k, dtype=np.float32)
    elif element == "strings":
        element_bytes = MEMORY_STRING_BYTES + 8
        signature = {"jpeg": tf.TensorSpec([], tf.string), "label": tf.TensorSpec([], tf.int64)}

        def make(rng, i):
            return {"jpeg": rng.bytes(MEMORY_STRING_BYTES), "label": i}
    else:
        element_bytes = int(np.prod(MEMORY_ELEMENT_SHAPE)) * 4
        signature = tf.TensorSpec(MEMORY_ELEMENT_SHAPE, tf.float32)

        def make(rng, i):
            return rng.random(MEMORY_ELEMENT_SHAPE, dtype=np.float32)
    count = max(1, round(gib * 2**30 / element_bytes))
    if element == "clips" and count % 2:
        count += 1  # whole pairs

    def generate():
        rng = np.random.default_rng(SEED)
        for i in range(count):
            yield make(rng, i)

    dataset = tf.data.Dataset.from_generator(generate, output_signature=signature)
    return dataset, count * element_bytes


def memory_child(name: str, out_dir: Path, gib: float, element: str) -> None:
    """Runs in a fresh subprocess: save the stream once and print a JSON report."""
    dataset, payload = streaming_dataset(gib, element)
    for _ in dataset.take(1):  # warm up the TF runtime before taking the baseline
        pass
    if name.startswith("super_serial"):  # its core imported before the baseline, as TF is
        importlib.import_module("super_serial.core")
    baseline = proc_status_bytes("VmRSS")
    peak_reset = reset_peak_rss()
    start = time.perf_counter()
    CONTENDERS[name].save(dataset, out_dir)
    seconds = time.perf_counter() - start
    report = {
        "contender": name,
        "payload_bytes": payload,
        "disk_bytes": disk_bytes(out_dir),
        "seconds": seconds,
        "baseline_rss": baseline,
        "peak_rss": proc_status_bytes("VmHWM"),
        "peak_reset": peak_reset,
    }
    print(json.dumps(report))


def run_memory_subprocess(name: str, gib: float, element: str, workdir: Path) -> dict:
    return run_child(["--memory-child", name, "{dir}", "--memory-gib", str(gib),
                      "--memory-element", element], workdir, f"memory run for {name}")


def rss_growth(report: dict) -> int:
    return report["peak_rss"] - report["baseline_rss"]


def memory_table(reports: list[dict]) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    header = (
        "contender",
        "payload GiB",
        "save s",
        "MB/s",
        "bytes on disk",
        "baseline RSS MB",
        "peak RSS MB",
        "peak RSS growth MB",
    )
    lines = [
        (
            report["contender"],
            f"{report['payload_bytes'] / 2**30:.2f}",
            f"{report['seconds']:.2f}",
            f"{report['payload_bytes'] / MB / report['seconds']:.1f}",
            f"{report['disk_bytes']:,}",
            f"{report['baseline_rss'] / MB:.0f}",
            f"{report['peak_rss'] / MB:.0f}",
            f"{rss_growth(report) / MB:.0f}",
        )
        for report in reports
    ]
    return header, lines


def run_memory(args, names: list[str], workdir: Path) -> None:
    print_lines(machine_info(), args.markdown)
    intro = (f"streaming save of {args.memory_gib} GiB of "
             f"{MEMORY_ELEMENTS[args.memory_element]}, each contender in a fresh subprocess")
    print_lines([intro], args.markdown)
    reports = []
    for name in names:
        print(f"  memory: {name}", file=sys.stderr)
        reports.append(run_memory_subprocess(name, args.memory_gib, args.memory_element,
                                             workdir))
    print()
    print(format_table(*memory_table(reports), args.markdown))
    print()
    summary = [
        f"{report['contender']}: peak RSS growth {rss_growth(report) / MB:.0f} MB"
        + f" (target < {MEMORY_TARGET_MB} MB)" * (report["contender"] == "super_serial")
        for report in reports
    ]
    summary.append("peak RSS growth = VmHWM during the save - VmRSS just before it; MB = 1e6 bytes")
    not_reset = [report["contender"] for report in reports if not report["peak_reset"]]
    summary.append(f"VmHWM could not be reset before the save of {', '.join(not_reset)}: its "
                   "growth counts the peak from before" if not_reset else
                   "VmHWM was reset to VmRSS before each save")
    print_lines(summary, args.markdown)


# --------------------------------------------------------------------------- main


def comma_list(allowed: tuple[str, ...]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        names = [name.strip() for name in text.split(",") if name.strip()]
        unknown = sorted(set(names) - set(allowed))
        if unknown or not names:
            raise argparse.ArgumentTypeError(
                f"expected a comma-separated subset of {','.join(allowed)}, got {text!r}"
            )
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:  # each would run and be reported twice, its ratios taken from one of them
            raise argparse.ArgumentTypeError(f"{text!r} names {', '.join(twice)} more than once")
        return names

    return parse


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Benchmark super_serial save/load against tf.data.Dataset.save/load "
        "and a naive per-element TFRecord writer. Prints machine info, then a table of "
        "median/min/max seconds, throughput, bytes on disk and the ratio vs tf.data.",
    )
    parser.add_argument("--repeats", type=int, default=5,
                        help="runs per contender, alternated round-robin (default: 5)")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiplies element counts: 2,000 images and 100,000 tabular "
                        "rows at 1.0 (default: 1.0)")
    parser.add_argument("--workloads", type=comma_list(ALL_WORKLOADS), default=list(ALL_WORKLOADS),
                        help="comma-separated workloads (default: images,tabular)")
    parser.add_argument("--contenders", type=comma_list(ALL_CONTENDERS),
                        default=list(ALL_CONTENDERS),
                        help="comma-separated contenders (default: all of "
                        f"{','.join(ALL_CONTENDERS)})")
    parser.add_argument("--settle", type=float, default=0.1,
                        help="seconds to pause before each timed save and load, so that work "
                        "one leaves running is not timed as the next one's (default: 0.1)")
    parser.add_argument("--skip-naive", action="store_true",
                        help="do not run the naive writers, by far the slowest contenders")
    parser.add_argument("--naive-repeats", type=int, default=None,
                        help="runs for the slow naive writers (default: min(repeats, 2))")
    parser.add_argument("--markdown", action="store_true",
                        help="print the tables as Markdown, e.g. for the README")
    parser.add_argument("--out", type=Path, default=None,
                        help="directory for a temporary work dir, removed afterwards "
                        "(default: the system temp dir)")
    parser.add_argument("--memory", action="store_true",
                        help="instead measure peak RSS growth while streaming --memory-gib GiB "
                        "from a generator into super_serial.save and tf.data.Dataset.save, "
                        "each in a fresh subprocess")
    parser.add_argument("--memory-gib", type=float, default=1.5,
                        help="GiB streamed per contender in --memory mode (default: 1.5)")
    parser.add_argument("--memory-element", choices=MEMORY_ELEMENTS, default="images",
                        help="what --memory streams (default: images): " + "; ".join(
                            f"{name}, {what}" for name, what in MEMORY_ELEMENTS.items()))
    parser.add_argument("--first-calls", type=int, default=3,
                        help="times to run the first save and load of a fresh process, for "
                        f"each of {' and '.join(FIRST_CALL_CONTENDERS)}, each in a new "
                        "subprocess (default: 3; 0 skips them)")
    parser.add_argument("--memory-child", nargs=2, metavar=("CONTENDER", "DIR"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--first-call-child", nargs=3, metavar=("CONTENDER", "WORKLOAD", "DIR"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    if args.settle < 0:
        parser.error("--settle must be >= 0")
    if args.skip_naive:
        args.contenders = [name for name in args.contenders if name not in NAIVE]
    if not args.contenders:
        parser.error("no contender left to run")
    if args.memory and not any(n in MEMORY_CONTENDERS for n in args.contenders):
        parser.error(f"--memory runs only {' and '.join(MEMORY_CONTENDERS)}; none was given")
    if args.first_calls < 0:
        parser.error("--first-calls must be >= 0")
    if args.naive_repeats is None:
        args.naive_repeats = min(args.repeats, 2)
    elif args.naive_repeats < 1:
        parser.error("--naive-repeats must be >= 1")
    return args


def run_benchmark(args, workdir: Path) -> None:
    print_lines(machine_info() + [f"pause before each timed run: {args.settle:g} s"],
                args.markdown)
    contenders = [CONTENDERS[name] for name in args.contenders]
    workloads = [build_workload(name, args.scale) for name in args.workloads]
    first = [name for name in FIRST_CALL_CONTENDERS if name in args.contenders]
    rows: dict = {}
    for workload in workloads:
        rows.update(run_workload(workload, contenders, args.repeats, args.naive_repeats, workdir,
                                 args.settle))
        if args.first_calls and first:
            rows.update(run_first_calls(workload, first, args.first_calls, args.scale, workdir,
                                        args.settle))
    print()
    print(format_table(COLUMNS, table_rows(rows), args.markdown))
    print()
    print_lines(summary_lines(rows, workloads, args.naive_repeats, args.repeats), args.markdown)


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.memory_child:
        name, out_dir = args.memory_child
        memory_child(name, Path(out_dir), args.memory_gib, args.memory_element)
        return
    if args.first_call_child:
        name, workload_name, out_dir = args.first_call_child
        first_call_child(name, workload_name, args.scale, Path(out_dir), args.settle)
        return
    base = args.out or Path(tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="super_serial_bench-", dir=base))
    try:
        if args.memory:
            run_memory(args, [n for n in args.contenders if n in MEMORY_CONTENDERS], workdir)
        else:
            run_benchmark(args, workdir)
    finally:
        shutil.rmtree(workdir)


if __name__ == "__main__":
    main()

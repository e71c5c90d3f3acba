"""The `super-serial` command line: demo, inspect, verify and head."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import posixpath
import re
import shlex
import shutil
import statistics
import sys
import tempfile
import time
import traceback
import unicodedata

# Quiets TensorFlow's C++ start-up logging, but only if TensorFlow is not imported yet: this
# module imports it lazily, in the commands that need it (super_serial/__init__.py decides
# whether importing the package already does).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

PROG = "super-serial"
DEMO_ELEMENTS = 512
DEMO_SEED = 0
DEMO_SHARDS = 2
DEMO_COMPRESSION = "GZIP"
DEMO_REPEATS = 5  # timed runs after the first, alternating super_serial and tf.data
_BYTES_SHOWN = 40  # head: longer strings are cut to this many bytes
_ROWS_SHOWN = 3  # head: rows shown at each end of a long ragged dimension


def main(argv: list[str] | None = None) -> int:
    """Runs the command line; returns the exit status (0 ok, 1 bad data or files, 130 after
    Ctrl-C). Wrong usage and --help exit through argparse's SystemExit (2 and 0)."""
    if sys.stderr is None:  # started with stderr closed (`2>&-`)
        _null_stderr()
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, or a usage error: argparse has printed it
        raise SystemExit(_flushed(e.code)) from None
    except BrokenPipeError:  # --help to a closed pipe
        _drop_output()
        raise SystemExit(1) from None
    except OSError as e:  # --help to a full disk
        _output_failed(e.strerror or str(e))
        raise SystemExit(1) from None
    stdout = sys.stdout
    # The errors handler _run sets, given back for main() run in-process (a test, a
    # notebook): the caller's own prints into an ASCII stdout were escaped, not refused,
    # from then on (helper-118). After the flush: setting it flushes again.
    errors = getattr(stdout, "errors", None) if hasattr(stdout, "reconfigure") else None
    try:
        return _run(args, stdout)
    finally:
        if errors is not None and stdout.errors != errors:
            try:
                stdout.reconfigure(errors=errors)
            except (OSError, ValueError):  # output that failed, a stream closed meanwhile
                pass


def _run(args, stdout) -> int:
    """Runs the command parsed into `args`; its exit status, stdout flushed."""
    try:
        # What stdout cannot encode (a feature named 日本 into an ASCII or cp1252 stdout) as
        # \u65e5\u672c, as stderr writes it: a UnicodeEncodeError stopped the output half-way,
        # told as bad data (helper-91)
        if stdout is not None and hasattr(stdout, "reconfigure"):
            stdout.reconfigure(errors="backslashreplace")
        _start_tensorflow(quiet=not args.debug)
        if stdout is not None:
            sys.stdout = _GuardedOutput(stdout)
        status = args.run(args) or 0
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        status = 130
    except BrokenPipeError:  # e.g. `super-serial head ... | head -3`; the Python docs' recipe
        _drop_output()
        return 1
    except _OutputError as e:  # a full disk, met while the command printed
        _output_failed(str(e))
        return 1
    except Exception as e:  # noqa: BLE001 - every failure becomes one line (or a traceback)
        if args.debug:
            traceback.print_exc()
        given = [getattr(args, name, None) for name in ("path", "header", "dir")]
        print(f"{PROG}: error: {_describe(e, [p for p in given if p])}", file=sys.stderr)
        status = 1
    finally:
        if sys.stdout is not stdout and isinstance(sys.stdout, _GuardedOutput):
            sys.stdout = stdout
    return _flushed(status)


class _OutputError(Exception):
    """Standard output could not be written, for another reason than a closed pipe."""


class _GuardedOutput:
    """Standard output, whose write errors (but a closed pipe's) become `_OutputError`: a
    full disk met while a command printed was told as an OSError naming nothing."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        return self._guarded(self._stream.write, text)

    def flush(self):
        return self._guarded(self._stream.flush)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)

    @staticmethod
    def _guarded(call, *args):
        try:
            return call(*args)
        except BrokenPipeError:
            raise
        except OSError as e:
            raise _OutputError(e.strerror or str(e)) from None


def _flushed(status):
    """Flushes stdout here, not at exit, where a failure printed "Exception ignored" and
    exited 120: `status`, or 1 for a success whose output could not be written (quietly for
    a closed pipe, with one line for a full disk)."""
    if sys.stdout is None:  # started with stdout closed (`>&-`): nothing to flush
        return status
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _drop_output()
        return status or 1
    except OSError as e:
        _output_failed(e.strerror or str(e))
        return status or 1
    return status


def _output_failed(reason: str):
    """Tells, in one line, that standard output could not be written (a full disk)."""
    _drop_output()
    print(f"{PROG}: error: standard output: {reason}", file=sys.stderr)


def _drop_output():
    """Points stdout at the null device, so that the interpreter's flush at exit cannot fail
    again on output that cannot be written (a closed pipe, a full disk)."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _null_stderr():
    """Points stderr at the null device, for a command started with it closed (`2>&-`):
    Python had no sys.stderr then, and every command failed with an AttributeError, printed
    to stdout (print's file=None), into the data (helper-91). File descriptor 2 too, where it
    is closed: TensorFlow's C++ logs write there, into whatever file took the number."""
    try:
        os.fstat(2)
    except OSError:
        null = os.open(os.devnull, os.O_WRONLY)
        if null != 2:  # the lowest number free: 0 or 1 where those are closed too
            os.dup2(null, 2)
            os.close(null)
    sys.stderr = open(os.devnull, "w")  # open for the rest of the process


def _start_tensorflow(quiet: bool):
    """Imports TensorFlow and sets up its devices with the C++ start-up log lines held back.

    TensorFlow 2.21 prints absl lines ("oneDNN custom operations are on", "Could not find
    cuda drivers", "failed call to cuInit") straight to file descriptor 2 before its logging
    is set up, ignoring TF_CPP_MIN_LOG_LEVEL; they would bury the one line this tool prints.
    If the import fails, the held-back text is shown after all (not after a Ctrl-C).
    """
    if not quiet or "tensorflow" in sys.modules:
        import tensorflow  # noqa: F401
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            import tensorflow as tf

            tf.config.list_logical_devices()  # device set-up logs too
        except BaseException as error:
            os.dup2(saved, 2)
            if not isinstance(error, KeyboardInterrupt):  # a Ctrl-C needs no explaining
                held.seek(0)
                sys.stderr.write(held.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


# --------------------------------------------------------------------------------------------
# Arguments
# --------------------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse's parser (its commands' too), but for `--help`: argparse drops an error
    writing it (a full disk), and the command exited 0 with no help written."""

    def print_help(self, file=None):
        file = file or sys.stdout
        if file is not None:  # None: started with stdout closed (`>&-`)
            file.write(self.format_help())


def _parser() -> argparse.ArgumentParser:
    # --debug is accepted before or after the subcommand; SUPPRESS keeps the subcommand's
    # default from overwriting a --debug given before it.
    debug = argparse.ArgumentParser(add_help=False)
    debug.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="show the full traceback when something fails")

    parser = _Parser(
        prog=PROG,
        description="Inspect, verify and read datasets saved by super_serial "
                    "(tf.train.Example TFRecords plus a YAML header).",
        epilog=f"Run '{PROG} COMMAND --help' for the options of one command. Exit status: "
               "0 ok, 1 bad data or missing files, 2 wrong usage, 130 after Ctrl-C.",
    )
    parser.add_argument("--debug", action="store_true",
                        help="show the full traceback when something fails")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)

    def command(name, run, summary, description):
        sub = commands.add_parser(name, help=summary, description=f"{summary}. {description}",
                                  parents=[debug])
        sub.set_defaults(run=run)
        return sub

    def data_arguments(sub):
        sub.add_argument("path", metavar="PATH", type=_utf8_path,
                         help="the tfrecord path given to save() (shards are found from the "
                              "header)")
        sub.add_argument("--header", metavar="H", type=_utf8_path,
                         help="the header file (default: PATH.header.yaml)")

    demo = command(
        "demo", _demo, "Save, inspect and load built-in sample data, timed against tf.data",
        f"Builds {DEMO_ELEMENTS} synthetic elements (image, label, caption, variable-length "
        "tokens, nested objects, ragged sentences, sparse keywords), saves them with "
        f"num_shards={DEMO_SHARDS}, compression={DEMO_COMPRESSION!r}, prints the header and the "
        "inspect view, loads them back, checks that they are identical, and compares save "
        "and load times with tf.data.Dataset.save/load. Needs no network.")
    demo.add_argument("dir", metavar="DIR", nargs="?", type=_utf8_path,
                      help="keep the saved files in this folder (default: a temporary folder, "
                           "deleted afterwards)")

    inspect = command(
        "inspect", _inspect, "Show the schema, structure, record counts and shards of a saved "
        "dataset",
        "Reads only the header: features with dtype, shape (None: unknown), encoding, "
        "ragged rank and, where the header has them, tensor names; the element structure; "
        "records; shard files with their record counts and bytes; compression; format "
        "version.")
    data_arguments(inspect)
    inspect.add_argument("--json", action="store_true",
                         help="print the same information as JSON, for scripts")

    verify = command(
        "verify", _verify, "Read every record and check it against the header",
        "Checks file sizes, TFRecord checksums, record counts, that every feature of "
        "every record decodes as the header says, and that each compressed file reads to its "
        "end. Exits 0 when all is well, else prints the "
        "first problem (naming the file, and the record and feature when known) and exits 1.")
    data_arguments(verify)
    shown = verify.add_mutually_exclusive_group()
    shown.add_argument("--progress", dest="progress", action="store_true", default=None,
                       help="show a progress bar on stderr (default: when stderr is a "
                            "terminal)")
    shown.add_argument("--no-progress", dest="progress", action="store_false",
                       help="never show the progress bar")

    head = command(
        "head", _head, "Print the first elements as NumPy values",
        "Loads the dataset and prints the first N elements, each feature from a line of its "
        "own (arrays of two or more dims and sparse values take several); large "
        "arrays and long strings are shortened.")
    data_arguments(head)
    head.add_argument("-n", "--num", type=_positive_int, default=5, metavar="N",
                      help="how many elements to print (default: 5)")
    return parser


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if not 1 <= value < 2**63:  # what tf.data's take holds
        raise argparse.ArgumentTypeError(f"expected a positive integer below 2**63, got {value}")
    return value


def _utf8_path(text: str) -> str:
    """A path argument TensorFlow's file functions can take: they need UTF-8, and a name that
    is not (held in `str` as surrogates) failed with a UnicodeEncodeError. Python decodes the
    arguments with the locale's encoding: in an ASCII one (LC_ALL=C without UTF-8 mode) a
    UTF-8 name is surrogates too, and was refused; it is the bytes typed, decoded as UTF-8.
    An empty one names nothing (`demo ''` saved into the working folder)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path names no file or folder")
    typed = os.fsencode(text)
    try:
        return typed.decode("utf-8")
    except UnicodeDecodeError:
        raise argparse.ArgumentTypeError(
            f"{typed!r} is not valid UTF-8, which TensorFlow needs in paths") from None


def _describe(error: Exception, paths: list = ()) -> str:
    """One line for an error: the message alone for expected failures. Control characters
    are shown as \\xNN: a newline in one of `paths` (the paths of a dataset's shards and
    default header begin with its own) too, where lines of the message are joined with a
    space."""
    # Only modules already imported are used: describing an error must not fail itself (as
    # importing a broken TensorFlow again would).
    core, tf = sys.modules.get("super_serial.core"), sys.modules.get("tensorflow")
    if core is not None and isinstance(error, core.SuperSerialError):
        text = str(error)
    elif core is not None and tf is not None and isinstance(error, tf.errors.OpError):
        text = core._tf_message(error)
    elif isinstance(error, ImportError):  # e.g. a broken TensorFlow installation
        text = f"import failed: {error} (run with --debug for the traceback)"
    elif isinstance(error, (OSError, ValueError)):  # ValueError: an argument save refuses
        text = str(error)
    else:
        text = (f"{type(error).__name__}: {error} (an unexpected error; run with --debug "
                "for the traceback)")
    longest_first = sorted({p for p in paths if _escaped(p) != p}, key=len, reverse=True)
    for path in longest_first:  # one may begin with another
        text = text.replace(path, _escaped(path))
    return _escaped(" ".join(line.strip() for line in text.splitlines() if line.strip()))


def _escaped(text: str) -> str:
    """`text` with control characters (an escape, a newline: in a folder's name, or in a bad
    record's bytes TensorFlow quotes) as \\xNN, which a terminal shows as they are."""
    return re.sub(r"[\x00-\x1f\x7f]", lambda m: f"\\x{ord(m.group()):02x}", text)


def _header_path(args) -> str:
    from super_serial import default_header_path

    return args.header if args.header is not None else default_header_path(args.path)


def _read_header(args, header_path: str) -> dict:
    """`read_header`, told the records' path: where that names a header or a shard instead,
    or the header lists another save's records beside a file at that path, the error says so,
    as `load` and `verify` do."""
    from super_serial import core

    header = core._read_header(header_path, args.path)
    core._check_names(header, args.path, header_path)
    return header.to_yaml()


# --------------------------------------------------------------------------------------------
# inspect
# --------------------------------------------------------------------------------------------


def _inspect(args) -> int:
    header_path = _header_path(args)
    info = _summary(args.path, header_path, _read_header(args, header_path))
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        print(_inspect_text(info))
    return 0


def _summary(path: str, header_path: str, header: dict) -> dict:
    """The header as `inspect` shows it: features as a list in structure order, shard totals."""
    features = []
    for name, feature in header["features"].items():
        features.append({
            "name": name,
            "path": feature["path"],
            "dtype": feature["dtype"],
            "shape": feature["shape"],
            "encoding": feature["encoding"],
            # None but for ragged tensors (whose ragged rank may be 0), as in the header
            "ragged_rank": feature.get("ragged_rank"),
            "row_splits_dtype": feature.get("row_splits_dtype"),
            "tensor_name": feature.get("tensor_name"),
            "ragged": "ragged_rank" in feature,
            "sparse": feature.get("sparse", False),
        })
    shards = [dict(s) for s in header["shards"]]
    for shard in shards:
        if not shard["file"]:  # headers of the original module name no file
            shard["file"] = posixpath.basename(path)
    sizes = [s["num_bytes"] for s in shards]
    return {
        "path": path,
        "header_path": header_path,
        "format": header["format"],
        "version": header["version"],
        "num_records": header["num_records"],
        "compression": header["compression"],
        "layout": header["layout"],
        "block_records": header["block_records"],
        "structure": header["structure"],
        **({"namedtuples": header["namedtuples"]} if "namedtuples" in header else {}),
        "features": features,
        "shards": shards,
        "num_bytes": None if None in sizes else sum(sizes),
    }


def _inspect_text(info: dict) -> str:
    version = info["version"] or "0 (original super_serial module)"
    if info["version"]:
        files = (f"{len(info['shards'])} shard{'s' if len(info['shards']) != 1 else ''}, "
                 f"layout {info['layout']}, {_counted(info['block_records'], 'record')} "
                 "per block")
    else:  # the original module's header has neither: those are load's defaults
        files = (f"1 file; no layout or block size in this header (load reads it in blocks "
                 f"of at most {info['block_records']:,})")
    lines = [
        f"{_escaped(info['path'])}  (header {_escaped(info['header_path'])})",
        f"format {info['format']} version {version}; "
        f"{_counted(info['num_records'], 'record')}; "
        f"compression {info['compression'] or 'none'}",
        files,
        "",
    ]
    rows = [(_name(f["name"]), f["dtype"],
             _shape(f["shape"]) + (" sparse" if f["sparse"] else " ragged" if f["ragged"] else ""),
             f["encoding"], str(f["ragged_rank"]) if f["ragged"] else "-")
            for f in info["features"]]
    titles = ("feature", "dtype", "shape", "encoding", "ragged rank")
    if any(f["tensor_name"] is not None for f in info["features"]):  # tf.TensorSpec names
        rows = [row + ("-" if f["tensor_name"] is None else _quoted(f["tensor_name"]),)
                for row, f in zip(rows, info["features"])]
        titles += ("tensor name",)
    lines += _table(titles, rows, right=(4,))
    named = {tuple(n["path"]): n for n in info.get("namedtuples", [])}
    lines += ["", f"structure: {_structure(info['structure'], named)}", ""]
    rows = [(s["file"], _count(s["num_records"]), _count(s["num_bytes"])) for s in info["shards"]]
    if len(rows) > 1:
        rows.append(("total", _count(info["num_records"]), _count(info["num_bytes"])))
    lines += _table(("shard", "records", "bytes"), rows, right=(1, 2))
    return "\n".join(lines)


def _width(text: str) -> int:
    """The columns `text` takes in a terminal: two for East Asian wide and fullwidth
    characters (日本語), none for marks that stand on another character (by their category:
    Thai's vowel above in ชื่อ and Devanagari's vowel below in कुल have no combining class, and
    took a column each), format characters but those terminals show (`_SPACING_FORMAT`), and
    a Hangul syllable's conjoining vowels and final consonants; one for the rest."""
    if text.isascii():
        return len(text)
    return sum(0 if (unicodedata.category(c) in ("Mn", "Me", "Cf") and c not in _SPACING_FORMAT)
               or _jamo_after_first(c) else
               2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


# Format characters that terminals (glibc's wcwidth) show in a column: the soft hyphen, and
# the Arabic and Syriac marks that stand before a number
_SPACING_FORMAT = frozenset("\u00ad\u0600\u0601\u0602\u0603\u0604\u0605\u06dd\u070f\u08e2")


def _jamo_after_first(c: str) -> bool:
    """A Hangul jamo vowel or final consonant, which joins the initial consonant before it
    into one syllable (가 as U+1100 U+1161), as terminals show it."""
    return "\u1160" <= c <= "\u11ff" or "\ud7b0" <= c <= "\ud7ff"


def _pad(text: str, width: int, right: bool = False) -> str:
    """`text` padded with spaces to `width` columns (`_width`), on the left if `right`."""
    fill = " " * max(0, width - _width(text))
    return fill + text if right else text + fill


def _table(header: tuple, rows: list, right: tuple = ()) -> list[str]:
    widths = [max(_width(str(row[i])) for row in [header, *rows]) for i in range(len(header))]

    def line(cells):
        out = [_pad(str(c), w, right=i in right) for i, (c, w) in enumerate(zip(cells, widths))]
        return "  ".join(out).rstrip()

    return [line(header), line("-" * w for w in widths)] + [line(row) for row in rows]


def _shape(shape: list) -> str:
    return "[" + ", ".join("None" if d is None else str(d) for d in shape) + "]"


def _count(value) -> str:
    return "?" if value is None else f"{value:,}"


def _counted(value, noun: str) -> str:
    """`_count(value)` and the noun: "1 record", "2,000 records", "? records"."""
    return f"{_count(value)} {noun}{'' if value == 1 else 's'}"


def _structure(node, named: dict, path: tuple = ()) -> str:
    """The element structure with feature names: `{image, meta: {score}}`, `(0, 1)`, and
    namedtuples (`named`: the header's, by path) as `Point(x=0, y=1)`; a None as `None`."""
    if isinstance(node, dict):
        items = [_name(key) if isinstance(value, str) else
                 f"{_name(key)}: {_structure(value, named, path + (key,))}"
                 for key, value in node.items()]
        return "{" + ", ".join(items) + "}"
    if isinstance(node, list):
        items = [_structure(item, named, path + (i,)) for i, item in enumerate(node)]
        if path in named:
            fields = named[path]["fields"]
            return named[path]["name"] + "(" + ", ".join(
                f"{field}={item}" for field, item in zip(fields, items)) + ")"
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if node is None:  # a part with no tensor
        return "None"
    return f"a single tensor, feature {node!r}" if not path else _name(node)


def _shell_word(path: str) -> str:
    """A path as a shell command line takes it, and not for an option (`-d/x` as `./-d/x`);
    where it holds control characters (a line break, an escape), as bash's `$'...'` with
    them escaped, on one line and with none sent to the terminal."""
    path = "./" + path if path.startswith("-") else path
    if _escaped(path) == path:
        return shlex.quote(path)
    return "$'" + _escaped(path.replace("\\", "\\x5c").replace("'", "\\x27")) + "'"


def _name(name: str) -> str:
    """A feature name or dict key as printed: as it is, or JSON-quoted where it would not read
    as one name in a table cell or in `_structure` (empty, spaces at an end, anything not
    printable, such as a line break, tab or U+2028, the structure's own punctuation, a
    quote)."""
    plain = (name and name == name.strip() and name.isprintable()
             and not any(c in name for c in ",:{}()\"'"))
    return name if plain else json.dumps(name)  # escapes all but printable ASCII


def _quoted(name: str) -> str:
    """A tensor name as printed: JSON-quoted (so that "" and "-" read as names), its printable
    characters as they are (日本, not \\u65e5\\u672c)."""
    return json.dumps(name, ensure_ascii=not name.isprintable())


# --------------------------------------------------------------------------------------------
# verify
# --------------------------------------------------------------------------------------------


def _verify(args) -> int:
    import super_serial

    header_path = _header_path(args)
    start = time.perf_counter()
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    result = super_serial.verify(args.path, header_path, progress=progress)
    seconds = time.perf_counter() - start
    shards = result["header"]["shards"]
    rows, total_bytes = [], 0
    for path, shard in zip(result["files"], shards):
        size = shard["num_bytes"]
        if size is None:  # original-module headers record no sizes
            import tensorflow as tf

            size = tf.io.gfile.stat(path).length
        total_bytes += size
        # (counted by verify where the header gives none: its summary's header has them)
        rows.append((_escaped(path), _count(shard["num_records"]), _count(size)))
    for line in _table(("file", "records", "bytes"), rows, right=(1, 2)):
        print(line)
    files = len(result["files"])
    print(f"OK: {_counted(files, 'file')}, {_counted(result['num_records'], 'record')}, "
          f"{total_bytes:,} bytes match {_escaped(header_path)} ({seconds:.2f} s)")
    return 0


# --------------------------------------------------------------------------------------------
# head
# --------------------------------------------------------------------------------------------


def _head(args) -> int:
    from super_serial import core

    header_path = _header_path(args)
    # One read of the header for the names and the records, whatever a save does meanwhile
    checked = core._checked_header(header_path, args.path)
    features = checked[0].features
    names = [_name(feature.name) for feature in features]
    dataset = core._load(args.path, header_path, checked=checked).take(args.num)
    shown = 0
    for index, element in _not_an_example_named(dataset, args.path, header_path):
        print(f"element {index}")
        leaves = [(name, *_leaf_text(leaf, feature.ragged)) for name, leaf, feature
                  in zip(names, core._tensors_of(element), features)]
        name_width = max(_width(name) for name, _, _ in leaves)
        kind_width = max(len(kind) for _, kind, _ in leaves)
        for name, kind, text in leaves:
            lines = text.splitlines()
            if len(lines) == 1:
                print(f"  {_pad(name, name_width)}  {kind.ljust(kind_width)}  {text}")
            else:
                print(f"  {_pad(name, name_width)}  {kind}")
                print("\n".join(" " * (name_width + 4) + line for line in lines))
        shown += 1
    if shown < args.num:
        print(f"({shown} element{'s' if shown != 1 else ''} in all)")
    return 0


def _not_an_example_named(dataset, path: str, header_path: str):
    """enumerate(dataset), where a record that is no tf.train.Example raises a CorruptDataError
    naming its file and index (as `verify` does), not a UnicodeDecodeError naming nothing or
    TensorFlow's error quoting the record whole."""
    import tensorflow as tf

    from super_serial import core

    iterator = iter(enumerate(dataset))
    while True:
        try:
            item = next(iterator)
        except StopIteration:
            return
        except (UnicodeDecodeError, tf.errors.InvalidArgumentError) as error:
            if not core._is_not_an_example(error):
                raise
            header = core._read_header(header_path, path)
            raise core.CorruptDataError(core._not_an_example(header, path)) from None
        yield item


def _leaf_text(leaf, ragged: bool = False, prefix: str = "") -> tuple[str, str]:
    """(`dtype[shape]`, the value as NumPy prints it, shortened); `ragged`: of a ragged
    feature, which an element of ragged rank 0 gives as a plain tensor; `prefix`: the text
    that will stand before the value's first line, which its wrapped lines align to."""
    import numpy as np
    import tensorflow as tf

    if isinstance(leaf, tf.RaggedTensor) or ragged:
        kind = f"{leaf.dtype.name}{_shape(leaf.shape.as_list())} ragged"
        ragged_tensor = isinstance(leaf, tf.RaggedTensor)
        values = (leaf.flat_values if ragged_tensor else leaf).numpy()
        rows = leaf.to_list() if ragged_tensor else values.tolist()
        return kind, _ragged_text(rows, values.dtype)  # quantized: NumPy's own ints
    if isinstance(leaf, tf.SparseTensor):  # its dense shape, and its values where they lie
        kind = f"{leaf.dtype.name}{_shape(leaf.dense_shape.numpy().tolist())} sparse"
        indices = _ragged_text(leaf.indices.numpy().tolist(), np.int64)
        return kind, f"indices {indices}\nvalues {_leaf_text(leaf.values, prefix='values ')[1]}"
    array = np.asarray(leaf.numpy(), dtype=object if leaf.dtype == tf.string else None)
    kind = leaf.dtype.name + (_shape(list(array.shape)) if array.ndim else "")
    # Blank lines between the blocks of a 3-D or larger array only take up room.
    text = _array_text(array, prefix)
    return kind, "\n".join(line for line in text.splitlines() if line.strip())


def _array_text(array, prefix: str = "", linewidth: int = 88) -> str:
    import numpy as np

    if array.ndim == 0 and array.dtype == object:  # array2string skips the formatter then
        return _bytes_text(array.item())
    edge = 1 if array.ndim >= 3 else 3
    # Floats as their shortest exact text: NumPy's 8 digits showed two float64 timestamps
    # 0.333 s apart as the same 1.7335e+09. Every option NumPy's text depends on is set:
    # main() run in a process whose NumPy prints otherwise (suppress=True: 1e-300 as 300
    # zeros; sign="+"; legacy="1.13") printed so too (helper-118).
    with np.printoptions(precision=8, threshold=16, edgeitems=edge, linewidth=linewidth,
                         suppress=False, nanstr="nan", infstr="inf", sign="-",
                         floatmode="unique", legacy=False):
        return np.array2string(array, separator=" ", formatter={"object": _bytes_text},
                               prefix=prefix)


def _ragged_text(rows, dtype) -> str:
    """A ragged value (nested lists) as one line, long rows and lists shortened."""
    import numpy as np

    if rows and isinstance(rows[0], list):
        items = [_ragged_text(row, dtype) for row in _ends(rows)]
        if len(rows) > 2 * _ROWS_SHOWN:
            items.insert(_ROWS_SHOWN, "...")
        return "[" + ", ".join(items) + "]"
    # a row of values, never wrapped: where NumPy broke the line, a space and its indent of one
    # made two spaces (helper-126)
    return _array_text(np.array(rows, dtype=dtype), linewidth=sys.maxsize)


def _ends(rows: list) -> list:
    return rows if len(rows) <= 2 * _ROWS_SHOWN else rows[:_ROWS_SHOWN] + rows[-_ROWS_SHOWN:]


def _bytes_text(value) -> str:
    if isinstance(value, bytes) and len(value) > _BYTES_SHOWN:
        return f"{value[:_BYTES_SHOWN]!r}...({len(value):,} bytes)"
    return repr(value)


# --------------------------------------------------------------------------------------------
# demo
# --------------------------------------------------------------------------------------------


def _demo(args) -> int:
    if args.dir is not None:  # save makes its folders (and removes them if it fails)
        return _run_demo(args.dir, keep=True)
    folder = tempfile.mkdtemp(prefix="super_serial_demo_")
    try:
        status = _run_demo(folder, keep=False)
    finally:
        _remove(folder)
    if status == 0:  # said once they are gone: said before, a Ctrl-C then left them (helper-91)
        print(f"\nThe demo files are deleted now; to keep them: {PROG} demo DIR")
    return status


def _remove(folder: str):
    """Removes a folder of the demo's, and after a Ctrl-C that comes meanwhile finishes and
    raises the KeyboardInterrupt again: the folder (1.7 MB) was left behind (helper-91)."""
    try:
        shutil.rmtree(folder, ignore_errors=True)
    except KeyboardInterrupt:
        shutil.rmtree(folder, ignore_errors=True)
        raise


def _demo_dataset():
    """A small, realistic dataset: fixed seed, variable-length, nested, ragged and sparse
    features."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(DEMO_SEED)
    keyword_rng = np.random.default_rng(DEMO_SEED + 1)  # the other features as they were
    colors = ["red", "green", "blue", "yellow", "grey", "white"]
    shapes = ["circle", "square", "triangle", "star"]
    y, x = np.mgrid[0:32, 0:32]
    elements = []
    for i in range(DEMO_ELEMENTS):
        label = int(rng.integers(10))
        base = rng.integers(0, 256, size=3)
        image = (base + 3 * x[..., None] + 2 * y[..., None] + rng.integers(0, 16, (32, 32, 3)))
        caption = (f"{i}: a {colors[label % 6]} {shapes[label % 4]} on a "
                   f"{colors[int(rng.integers(6))]} background")
        sentence_lengths = rng.integers(1, 12, size=int(rng.integers(1, 4)))
        count = int(rng.integers(0, 5))
        elements.append({
            "image": (image % 256).astype(np.uint8),
            "label": np.int64(label),
            "caption": caption.encode(),
            "tokens": rng.integers(0, 30_000, size=int(rng.integers(4, 65)), dtype=np.int32),
            "objects": {
                "bbox": rng.random((count, 4), dtype=np.float32),
                "score": rng.random(count),  # float64
            },
            "sentences": (rng.integers(0, 30_000, int(sentence_lengths.sum()), dtype=np.int32),
                          sentence_lengths),
            # 0-4 of 1,000 keywords, each with a weight: a sparse tensor, made in the map
            "keywords": (np.sort(keyword_rng.choice(1000, int(keyword_rng.integers(5)),
                                                    replace=False)),
                         keyword_rng.random(5, dtype=np.float32)),
        })

    def generate():
        yield from elements

    signature = {
        "image": tf.TensorSpec([32, 32, 3], tf.uint8),
        "label": tf.TensorSpec([], tf.int64),
        "caption": tf.TensorSpec([], tf.string),
        "tokens": tf.TensorSpec([None], tf.int32),
        "objects": {
            "bbox": tf.TensorSpec([None, 4], tf.float32),
            "score": tf.TensorSpec([None], tf.float64),
        },
        "sentences": (tf.TensorSpec([None], tf.int32), tf.TensorSpec([None], tf.int64)),
        "keywords": (tf.TensorSpec([None], tf.int64), tf.TensorSpec([5], tf.float32)),
    }

    def make_composite(element):  # in the graph: much faster than one per element in Python
        values, lengths = element["sentences"]
        ids, weights = element["keywords"]
        return {**element, "sentences": tf.RaggedTensor.from_row_lengths(values, lengths),
                "keywords": tf.SparseTensor(ids[:, None], weights[:tf.size(ids)], [1000])}

    dataset = tf.data.Dataset.from_generator(generate, output_signature=signature)
    dataset = dataset.map(make_composite)
    dataset = dataset.cache()
    _count_elements(dataset)  # fill the cache: the timed saves then read from memory
    return dataset


def _count_elements(dataset) -> int:
    """Iterates a whole dataset inside TensorFlow (no per-element Python)."""
    import numpy as np

    return int(dataset.reduce(np.int64(0), lambda n, _: n + 1))


def _run_demo(folder: str, keep: bool) -> int:
    import tensorflow as tf

    import super_serial

    print(f"Building {DEMO_ELEMENTS} synthetic elements (seed {DEMO_SEED}) ...", flush=True)
    dataset = _demo_dataset()
    path = os.path.join(folder, "demo.tfrecord")
    header_path = super_serial.default_header_path(path)

    start = time.perf_counter()
    super_serial.save(dataset, path, num_shards=DEMO_SHARDS, compression=DEMO_COMPRESSION,
                      progress=sys.stderr.isatty())
    save_seconds = time.perf_counter() - start
    print(f"\nsuper_serial.save(dataset, {path!r}, num_shards={DEMO_SHARDS}, "
          f"compression={DEMO_COMPRESSION!r}) wrote {_escaped(header_path)}:\n")
    with tf.io.gfile.GFile(header_path, "rb") as f:  # DIR may be remote (ram://, gs://)
        print(f.read().decode().rstrip())

    print(f"\n$ {PROG} inspect {_shell_word(path)}")
    header = super_serial.read_header(header_path)
    print(_inspect_text(_summary(path, header_path, header)))

    start = time.perf_counter()
    loaded = super_serial.load(path)
    _count_elements(loaded)
    load_seconds = time.perf_counter() - start
    names = list(header["features"])  # in `tf.nest.flatten` order
    problem = _difference(dataset, loaded, names)
    print(f"\nLoaded back with super_serial.load({path!r}):")
    specs = tf.nest.flatten(loaded.element_spec)
    width = max(_width(name) for name in names)
    print("  element_spec:")
    for name, spec in zip(names, specs):
        print(f"    {_pad(name, width)}  {spec}")
    if problem:
        print(f"  identical: NO ({problem})")
        print(f"{PROG}: error: the loaded dataset differs from the saved one: {problem}",
              file=sys.stderr)
        return 1
    print(f"  identical: yes (same element_spec, {DEMO_ELEMENTS} elements bit-identical)")

    ours = sum(s["num_bytes"] for s in header["shards"])
    try:  # in temporary folders: where those cannot be written, the demo itself stands
        tf_data_first, theirs = _time_tf_data(dataset)
        first = {"super_serial": (save_seconds, load_seconds), "tf.data.Dataset": tf_data_first}
        runs: dict = {"super_serial": [], "tf.data.Dataset": []}
        for _ in range(DEMO_REPEATS):
            runs["super_serial"].append(_time_super_serial(dataset))
            runs["tf.data.Dataset"].append(_time_tf_data(dataset)[0])
    except (OSError, tf.errors.OpError, super_serial.SuperSerialError) as error:
        print(f"\nTimings against tf.data.Dataset skipped: they save in {tempfile.gettempdir()}, "
              f"where that failed: {error}", file=sys.stderr)
        return _kept(folder, path, keep)
    median = {name: tuple(statistics.median(r[i] for r in times) for i in (0, 1))
              for name, times in runs.items()}
    print(f"\nTimings on this data ({DEMO_ELEMENTS} elements; each load iterates every "
          f"element; both with {DEMO_COMPRESSION}):\n")
    size = {"super_serial": f"{ours:,}", "tf.data.Dataset": f"{theirs:,}"}
    rows = [(f"{name}, first run", f"{first[name][0]:.3f}", f"{first[name][1]:.3f}", size[name])
            for name in first]
    rows += [(f"{name}, median of {DEMO_REPEATS}", f"{median[name][0]:.3f}",
              f"{median[name][1]:.3f}", "") for name in median]
    ratio = [median["super_serial"][i] / median["tf.data.Dataset"][i] for i in (0, 1)]
    rows.append(("ratio super_serial / tf.data", f"{ratio[0]:.2f}", f"{ratio[1]:.2f}",
                 f"{ours / theirs:.2f}"))
    for line in _table(("", "save s", "load s", "bytes"), rows, right=(1, 2, 3)):
        print(line)
    print("(ratios of the medians; below 1.00 means super_serial is faster or smaller. First "
          "runs include\n one-time costs: super_serial traces its load pipeline once per schema "
          "and process.\n A small dataset: expect noise.)")
    return _kept(folder, path, keep)


def _kept(folder: str, path: str, keep: bool) -> int:
    """The demo's last line where it keeps its files (where not, `_demo` says they are
    deleted once they are); its exit code (0)."""
    if keep:
        print(f"\nFiles kept in {_escaped(folder)}; try: {PROG} head {_shell_word(path)} "
              "-n 2")
    return 0


def _time_super_serial(dataset) -> tuple[float, float]:
    """Seconds to save and to load-and-iterate with super_serial, as the demo saves."""
    import super_serial

    folder = tempfile.mkdtemp(prefix="super_serial_demo_timing_")
    try:
        path = os.path.join(folder, "demo.tfrecord")
        start = time.perf_counter()
        super_serial.save(dataset, path, num_shards=DEMO_SHARDS, compression=DEMO_COMPRESSION)
        save_seconds = time.perf_counter() - start
        start = time.perf_counter()
        _count_elements(super_serial.load(path))
        return save_seconds, time.perf_counter() - start
    finally:
        _remove(folder)


def _time_tf_data(dataset) -> tuple[tuple[float, float], int]:
    """Seconds to save and to load-and-iterate with tf.data, and the bytes it wrote."""
    import tensorflow as tf

    folder = tempfile.mkdtemp(prefix="super_serial_demo_tf_data_")
    try:
        target = os.path.join(folder, "saved")
        start = time.perf_counter()
        dataset.save(target, compression=DEMO_COMPRESSION)
        save_seconds = time.perf_counter() - start
        start = time.perf_counter()
        _count_elements(tf.data.Dataset.load(target, compression=DEMO_COMPRESSION))
        load_seconds = time.perf_counter() - start
        size = sum(os.path.getsize(os.path.join(root, name))
                   for root, _, names in os.walk(target) for name in names)
    finally:
        _remove(folder)
    return (save_seconds, load_seconds), size


def _difference(expected, actual, names: list) -> str | None:
    """The first difference between two datasets (spec, count, or bit-exact values), or None;
    `names` are the features' names, in `tf.nest.flatten` order."""
    import tensorflow as tf

    if expected.element_spec != actual.element_spec:
        return f"element_spec {actual.element_spec}, expected {expected.element_spec}"
    missing = object()
    pairs = itertools.zip_longest(expected, actual, fillvalue=missing)
    for index, (a, b) in enumerate(pairs):
        if a is missing or b is missing:
            return f"{'more' if a is missing else 'fewer'} elements than saved ({index} match)"
        for name, x, y in zip(names, tf.nest.flatten(a), tf.nest.flatten(b)):
            if not _bit_identical(x, y):
                return f"element {index}, feature '{name}' differs"
    return None


def _bit_identical(x, y) -> bool:
    import numpy as np
    import tensorflow as tf

    if isinstance(x, tf.SparseTensor) or isinstance(y, tf.SparseTensor):
        return isinstance(x, tf.SparseTensor) and isinstance(y, tf.SparseTensor) and all(
            _bit_identical(a, b) for a, b in zip([x.indices, x.values, x.dense_shape],
                                                 [y.indices, y.values, y.dense_shape]))
    if isinstance(x, tf.RaggedTensor) or isinstance(y, tf.RaggedTensor):
        if not (isinstance(x, tf.RaggedTensor) and isinstance(y, tf.RaggedTensor)):
            return False
        parts = list(zip([x.flat_values, *x.nested_row_splits],
                         [y.flat_values, *y.nested_row_splits]))
        return len(x.nested_row_splits) == len(y.nested_row_splits) and all(
            _bit_identical(a, b) for a, b in parts)
    a, b = np.asarray(x.numpy()), np.asarray(y.numpy())
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return a.tolist() == b.tolist() if a.dtype == object else a.tobytes() == b.tobytes()

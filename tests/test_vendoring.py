"""super_serial/core.py works when vendored: copied under another name into another project."""

from __future__ import annotations

import ast
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import tensorflow as tf
from conftest import assert_same_elements

CORE = Path(__file__).resolve().parents[1] / "super_serial" / "core.py"
ALLOWED_THIRD_PARTY = {"numpy", "tensorflow", "yaml"}
OPTIONAL = {"google_crc32c"}  # imported in try/except ImportError: core works without it


def _imports(source: str) -> list[tuple[str, int]]:
    """(top-level module name, relative level) of every import statement, anywhere in the file."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(alias.name.split(".")[0], 0) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append(((node.module or "").split(".")[0], node.level))
    return found


def _stdlib(names: set) -> set:
    """Those of the names that are standard library modules."""
    if hasattr(sys, "stdlib_module_names"):  # Python 3.10+
        return names & set(sys.stdlib_module_names)
    stdlib = Path(sysconfig.get_paths()["stdlib"])

    def standard(name):
        spec = importlib.util.find_spec(name)
        return spec is not None and (spec.origin in ("built-in", "frozen") or (
            spec.origin is not None and stdlib in Path(spec.origin).parents
            and "site-packages" not in Path(spec.origin).parts))

    return {name for name in names if standard(name)}


def test_the_core_says_its_version_and_carries_its_licence():
    """A copy of the file alone says what it is and may be copied on (pyproject: MIT)."""
    import super_serial

    doc = ast.get_docstring(ast.parse(CORE.read_text()))
    project = (CORE.parents[1] / "pyproject.toml").read_text()
    assert f'version = "{super_serial.__version__}"' in project and 'license = "MIT"' in project
    assert f"From super_serial {super_serial.__version__}. MIT licence" in doc
    assert "The above copyright notice and this permission notice shall be included" in doc


def test_the_package_ships_its_pep_561_marker():
    """Without py.typed, mypy refused `import super_serial` ("missing library stubs or
    py.typed marker") and ignored its annotations (helper-95). setuptools packs only the
    package data pyproject names (checked once by hand in a wheel: super_serial/py.typed)."""
    project = (CORE.parents[1] / "pyproject.toml").read_text()
    assert '[tool.setuptools.package-data]\nsuper_serial = ["py.typed"]' in project
    assert (CORE.parent / "py.typed").is_file()


def test_core_imports_only_stdlib_numpy_tensorflow_yaml():
    imports = _imports(CORE.read_text(encoding="utf-8"))
    assert imports, "no imports found: is this the right file?"
    assert all(level == 0 for _, level in imports), "relative imports break vendoring"
    names = {name for name, _ in imports}
    assert "super_serial" not in names
    outside = (names - _stdlib(names) - ALLOWED_THIRD_PARTY - OPTIONAL - {"__future__"})
    assert not outside, f"core.py imports {sorted(outside)}"


def test_optional_imports_fall_back_when_missing():
    tree = ast.parse(CORE.read_text(encoding="utf-8"))
    guarded = set()
    for node in ast.walk(tree):
        catches_import_error = isinstance(node, ast.Try) and any(
            isinstance(h.type, ast.Name) and h.type.id == "ImportError" for h in node.handlers)
        if catches_import_error:
            guarded |= {name for name, _ in _imports(ast.unparse(ast.Module(node.body, [])))}
    imported = {name for name, _ in _imports(CORE.read_text(encoding="utf-8"))}
    assert imported & OPTIONAL <= guarded, "an optional import is not in try/except ImportError"


def test_core_source_does_not_mention_the_package_in_code():
    """No importlib tricks either: 'super_serial' appears only in strings, not as a name."""
    tree = ast.parse(CORE.read_text(encoding="utf-8"))
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    attributes = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    assert "super_serial" not in names | attributes
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and getattr(n.func, "attr", getattr(n.func, "id", "")) in ("import_module",
                                                                         "__import__")]
    assert not calls, "core.py imports modules dynamically"


def _import_vendored(path: Path):
    name = path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # as a normal import would (dataclasses look it up)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def test_vendored_copy_round_trip(tmp_path):
    vendored_path = tmp_path / "my_vendored_ss.py"
    shutil.copy(CORE, vendored_path)
    before = set(sys.modules)
    vendored = _import_vendored(vendored_path)
    try:
        added = set(sys.modules) - before
        assert not {m for m in added if m == "super_serial" or m.startswith("super_serial.")}
        assert vendored.__file__ == str(vendored_path)
        dataset = tf.data.Dataset.from_tensor_slices({
            "x": np.array([0.1, 1e300, -0.0], np.float64),
            "n": np.array([2**64 - 1, 0, 7], np.uint64),
            "s": [b"", b"\x00\xff", "é".encode()],
            "r": tf.ragged.constant([[[1, 2]], [], [[3], []]]),
            "sp": tf.SparseTensor([[0, 1, 2], [2, 0, 0]], [b"a", b"b"], [3, 2, 4]),
        })
        tfrecord = str(tmp_path / "data" / "data.tfrecord")
        header = vendored.save(dataset, tfrecord)
        assert header["format"] == "super_serial"
        assert_same_elements(dataset, vendored.load(tfrecord))
        # The package reads what the vendored copy wrote, and vice versa, byte for byte.
        import super_serial

        assert_same_elements(dataset, super_serial.load(tfrecord))
        super_serial.save(dataset, str(tmp_path / "pkg" / "data.tfrecord"))
        for name in ("data.tfrecord", "data.tfrecord.header.yaml"):
            assert (tmp_path / "pkg" / name).read_bytes() == (tmp_path / "data" / name).read_bytes()
        # Its errors are its own classes.
        assert issubclass(vendored.SchemaError, vendored.SuperSerialError)
        unknown_rank = tf.data.Dataset.from_generator(
            lambda: iter([{"x": np.zeros(2)}]), output_signature={"x": tf.TensorSpec(None)})
        try:
            vendored.save(unknown_rank, str(tmp_path / "bad.tfrecord"))
        except vendored.SchemaError as e:
            assert "feature 'x'" in str(e)
        else:
            raise AssertionError("the vendored save accepted a tensor of unknown rank")
    finally:
        sys.modules.pop("my_vendored_ss", None)


_CHILD = r"""
import importlib.util, sys
sys.modules["super_serial"] = None  # any import of the package now raises ImportError
sys.modules["google_crc32c"] = None  # nor is the optional extra installed
spec = importlib.util.spec_from_file_location("my_vendored_ss", sys.argv[1])
ss = importlib.util.module_from_spec(spec)
sys.modules["my_vendored_ss"] = ss
spec.loader.exec_module(ss)
import numpy as np, tensorflow as tf
ds = tf.data.Dataset.from_tensor_slices({"x": np.arange(6, dtype=np.float64).reshape(3, 2)})
ss.save(ds, sys.argv[2])
got = np.stack([e["x"].numpy() for e in ss.load(sys.argv[2])])
assert got.dtype == np.float64 and got.tolist() == [[0, 1], [2, 3], [4, 5]], got
loaded = sorted(m for m in sys.modules if m and m.startswith("super_serial"))
assert loaded == ["super_serial"], loaded  # only the None placeholder
assert ss.google_crc32c is None  # written by tf.io.TFRecordWriter
print("vendored ok")
"""


def test_vendored_copy_in_a_fresh_interpreter_without_the_package(tmp_path):
    """In a new process where `import super_serial` fails, the copy still saves and loads."""
    shutil.copy(CORE, tmp_path / "my_vendored_ss.py")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tmp_path / "my_vendored_ss.py"),
         str(tmp_path / "out" / "data.tfrecord")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "vendored ok" in result.stdout


_SHIFTED_CHILD = r"""
import importlib.util, sys
spec = importlib.util.spec_from_file_location("my_vendored_ss", sys.argv[1])
ss = importlib.util.module_from_spec(spec)
sys.modules["my_vendored_ss"] = ss
spec.loader.exec_module(ss)
import tensorflow as tf
ss.save(tf.data.Dataset.range(100), sys.argv[2], compression="GZIP")
source = open(sys.argv[1]).read()
with open(sys.argv[1], "w") as f:  # as an upgrade in place under a running notebook
    f.write("# a line\n" * 40 + source)
print(ss.verify(sys.argv[3], sys.argv[4])["num_records"], ss.verify(sys.argv[2])["num_records"],
      sum(1 for _ in ss.load(sys.argv[3], sys.argv[4])))
"""


def test_the_cores_dataset_functions_do_not_depend_on_its_source_file(tmp_path):
    """Functions the core gives tf.data are traced as they are, not converted by AutoGraph,
    which reads their source again from the file on disk when first used: with the file
    changed since import (40 lines added at the top), verify of an original-module file ran
    other code at the old lines (a TypeError), and one of a compressed save logged AutoGraph's
    "could not transform"; without the source (a vendored .pyc) both logged it."""
    shutil.copy(CORE, tmp_path / "my_vendored_ss.py")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    golden = CORE.parents[1] / "tests" / "golden" / "original-module"
    result = subprocess.run(
        [sys.executable, "-c", _SHIFTED_CHILD, str(tmp_path / "my_vendored_ss.py"),
         str(tmp_path / "out" / "data.tfrecord"), str(golden / "images.tfrecord"),
         str(golden / "images.header")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["10", "100", "10"], result.stdout
    assert "AutoGraph" not in result.stderr, result.stderr[-3000:]


def test_the_core_names_no_public_function_or_class_beyond_its_all():
    """The API is what `__all__` lists: a vendored copy's users see every other function and
    class of the file marked private, so that none is taken for part of the API."""
    tree = ast.parse(CORE.read_text())
    defined = {node.name for node in tree.body
               if isinstance(node, (ast.FunctionDef, ast.ClassDef))
               and not node.name.startswith("_")}
    listed = next(ast.literal_eval(node.value) for node in tree.body
                  if isinstance(node, ast.Assign)
                  and getattr(node.targets[0], "id", "") == "__all__")
    assert defined == set(listed)

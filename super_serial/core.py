"""super_serial core: save any tf.data.Dataset as tf.train.Example TFRecords plus a YAML header.

This file is self-contained (standard library, numpy, tensorflow, yaml only) so that it can be
vendored by copying it into another project. Sections follow the data: errors, the dtype table and
header schema, the codecs (the NumPy encoders), writing, reading (with the TensorFlow decoders
that mirror the encoders, `_Decoder`).

From super_serial 0.1.0. MIT licence (SPDX-License-Identifier: MIT):

Copyright (c) 2026 the super_serial authors

Permission is hereby granted, free of charge, to any person obtaining a copy of this software and
associated documentation files (the "Software"), to deal in the Software without restriction,
including without limitation the rights to use, copy, modify, merge, publish, distribute,
sublicense, and/or sell copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all copies or
substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT
NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND
NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES
OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN
CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.
"""

from __future__ import annotations

import collections.abc
import contextlib
import dataclasses
import errno
import functools
import hashlib
import itertools
import keyword
import math
import os
import queue
import re
import reprlib
import stat
import sys
import threading
import time
import uuid
import warnings
import weakref
from collections.abc import Iterable
from typing import Any, NamedTuple, NoReturn

import numpy as np
import tensorflow as tf
import yaml

__all__ = [
    "CorruptDataError",
    "HeaderError",
    "SchemaError",
    "SuperSerialError",
    "default_header_path",
    "load",
    "merge",
    "read_header",
    "save",
    "verify",
]

FORMAT_NAME = "super_serial"
# The newest format save writes. A header says the lowest version that reads it
# (`_format_version`): 7 where the element holds a part with no tensor (None, an empty dict or
# tuple), 6 where a feature is quantized, 5 where the element holds a namedtuple, 4 where a
# feature is sparse, else 3, which readers of version 3 read.
FORMAT_VERSION = 7
_READ_VERSIONS = (1, 2, 3, 4, 5, 6, 7)
_SPARSE_VERSION = 4  # sparse features: a reader of version 3 would ignore `sparse: true`
_NAMEDTUPLE_VERSION = 5  # a reader of version 4 would give plain tuples for `namedtuples`
_QUANTIZED_VERSION = 6  # qint8, quint8, qint32: a reader of version 5 knows no such dtype
_EMPTY_PARTS_VERSION = 7  # None, {} and [] in 'structure': a reader of version 6 refuses them
HEADER_SUFFIX = ".header.yaml"
COMPRESSIONS = (None, "GZIP", "ZLIB")
BARE_TENSOR_NAME = "tensor"
_MAX_RECORD_BYTES = 2**31 - 1  # protobuf's hard limit on one serialized message
_MAX_BLOCK_RECORDS = 2**16
# Dicts and tuples in an element, one inside another: what `save` writes, and what a header
# may hold. Saves before 256 was set stopped where PyYAML ran out of stack (about 330 levels),
# and `load` runs out of it from about 500.
_MAX_NESTING = 256
_MAX_READ_NESTING = 400
_MAX_BLOCK_BYTES = 1 << 30  # a header may not make load parse more than this at once
# The largest header load reads, and save and merge write: a save's longest shard list (99,999
# shards of a 255-byte name) takes about 33 MB
_MAX_HEADER_BYTES = 64 << 20
# PyYAML makes an object of about 500 bytes for each value it reads: a header of 4 MB, a list of
# 2 million zeros, took 1 GB and 10-33 s, and 64 MiB of it would take 16 GB. A header of 99,999
# record files, as save writes it, counts about 1,300,000 values (`_values_at_most`, which
# counts each of its flow mappings, `{file: ..., num_bytes: ..., num_records: ...}`, as 13
# values, where PyYAML makes 7).
_MAX_HEADER_VALUES = 2_000_000
_TARGET_BLOCK_BYTES = 4 << 20  # records parsed together on load (and dealt to shards on save)
_TARGET_BATCH_BYTES = 16 << 20  # elements encoded together on save
_MAX_BATCH_RECORDS = 8192
# The most elements_per_batch may ask for beyond a known size (tf.data's batch reserves
# room for each element up front: 10**9 of them aborted the process)
_MAX_ELEMENTS_PER_BATCH = 1 << 20
# Elements read at a time where strings make their size a guess, from memory or a cache:
# fewer make more reads of short strings, more leave long ones (encoded images) waiting on
# large reads. Alternating in one process, medians of 11-13, reads of 256 against 128: 500
# files of about 150 kB read by a map and cached, with a label, 102.7 against 80.2 ms
# (tf.data 64.4); such strings and a label cached from memory, 76.1 against 61.6 (61.0);
# the tabular workload 152.8 against 163.0 (318.6), cached 158.8 against 162.8 (354.9);
# 100,000 cached ids 110.0 against 119.0 (300.3).
_READ_RECORDS = 128
# Elements read at a time where their size is a guess (unknown shapes, strings) and each
# element costs a function call (`_costly_elements`: a generator, a map decoding audio or
# reading image files), merged as strings are. Saving 1.5 GiB of float32 clips of 100,000 to
# 300,000 values from a generator: peak RSS growth 216-224 MB with 32, 375 MB with 64,
# 9,994 MB reading 8,192. 500 strings of 100-200 kB and a label from a generator, alternating
# runs of 7 beside tf.data's 160 ms: 260 ms in reads of 256, 236 of 64, 205 of 32, 204 of 16
# (tf.data's batch and NumPy's strings take fresh pages for each batch: 67,000 faults a save
# in reads of 256, 34,000 in reads of 32); 50,000 short strings from a tf.data map: 1,286 ms
# in reads of 256, 1,278 of 32, 1,393 of 16 (tf.data 1,458).
_READ_COSTLY = 32
# Elements a batch where strings sit beside a component of unknown shape (`_read_records`):
# 3,000 cached images of 150 kB and their boxes saved in 1.47 against 3.54 s in batches of
# 3,000, and an id beside a token list in 282 against 310 ms for 20,000
_BESIDE_STRINGS = 1024
_OVERSIZED_BATCH_BYTES = 4 * _TARGET_BATCH_BYTES  # a batch this large gets a warning
_READ_AHEAD_BYTES = 4 * _TARGET_BATCH_BYTES  # what tf.data may read ahead of small reads
# Reads that come to this much are encoded one by one, not merged (`_Merger`): merging
# concatenates them, a copy that gains nothing at that size (those 500 strings, read 16 at a
# time: 289 ms merged into batches of 16 MiB, 255 ms not).
_MERGE_READ_BYTES = 1 << 20
# Reads of rows of a dense component of unknown shape with at least this many values are taken
# apart one by one (`_rows_one_by_one`), float and raw ones then written where they lie
# (integers are joined a slice at a time to be encoded, strings at once): TensorFlow's
# decoding of a whole read copies a value at a time, about 2 ns each for uint8 and 3.7 for
# float32 (reads of 32 and of 1,024 rows: 8,192 values 19-20 and 29-31 us a row, 65,536
# values 134-139 and 219-222), where taking out a row costs 15-16 us, and writing it by
# itself about 7 more.
_ROW_BY_ROW_VALUES = 8192
# Flat rows of numbers, which `_joined_rows` joins by a copy of each instead, are taken apart
# only from this many bytes too (where the read is not larger than `_OVERSIZED_BATCH_BYTES`,
# `_rows_one_by_one`): 500 rows of 16,384-24,575 float32 saved in 34.5 ms so and 35.2
# joined, of 24,576-32,767 in 40.4 and 45.3; of 65,536-131,071 uint8 26.5 and 21.5, of
# 131,072-262,143 25.7 and 32.7 (`tf.data` 38.3, 48.3, 36.4, 86.4)
_ROW_BY_ROW_BYTES = 1 << 16
# The most values `_joined_rows` joins: TensorFlow's op takes their number as an int32
_MAX_JOINED_VALUES = (1 << 31) - 1


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


class SuperSerialError(Exception):
    """Base class of every error super_serial raises."""


class HeaderError(SuperSerialError):
    """A header file is missing, unreadable, or has an invalid field."""


class SchemaError(SuperSerialError):
    """A dataset cannot be saved as it is (or an element is not the shape its spec gives), or
    parts cannot be merged. Records that do not match their header are a CorruptDataError
    (verify) or a tf.errors.InvalidArgumentError (iterating a loaded dataset)."""


class CorruptDataError(SuperSerialError):
    """A record file is missing, truncated, corrupt, or holds a different number of records."""


# --------------------------------------------------------------------------------------------
# The dtype table and the header schema
# --------------------------------------------------------------------------------------------

# Encodings: how one feature's values sit in its tf.train.Feature.
#   int64: Int64List of the values (narrow ints and bool widened to int64).
#   float: FloatList of float32 values.
#   bytes: BytesList, one entry per string value.
#   raw:   BytesList with one entry: the values' little-endian bytes, row-major.
# Format version 2 stores int8 and uint8 raw (one byte a value); version 1 stored them as int64,
# which cost up to 2 bytes a value for uint8 (10 for a negative int8) and still loads. Version
# 3 stores int16 and uint16 raw too (two bytes a value), which version 2 stored as int64: 3
# bytes for a uint16 from 16,384, 10 for a negative int16 (audio: 3 times the raw size).
ENCODINGS = ("int64", "float", "bytes", "raw")


@dataclasses.dataclass(frozen=True)
class _DType:
    name: str
    tf_dtype: tf.DType
    encoding: str  # the encoding save() writes
    raw_as: tf.DType | None = None  # dtype tf.io.decode_raw reads, bitcast to tf_dtype after


_DTYPE_TABLE = (
    _DType("bool", tf.bool, "int64"),
    _DType("int8", tf.int8, "raw", tf.int8),
    _DType("int16", tf.int16, "raw", tf.int16),
    _DType("int32", tf.int32, "int64"),
    _DType("int64", tf.int64, "int64"),
    _DType("uint8", tf.uint8, "raw", tf.uint8),
    _DType("uint16", tf.uint16, "raw", tf.uint16),
    _DType("uint32", tf.uint32, "int64"),
    _DType("uint64", tf.uint64, "raw", tf.int64),
    _DType("float16", tf.float16, "raw", tf.float16),
    _DType("bfloat16", tf.bfloat16, "raw", tf.uint16),
    _DType("float32", tf.float32, "float"),
    _DType("float64", tf.float64, "raw", tf.float64),
    _DType("complex64", tf.complex64, "raw", tf.complex64),
    _DType("complex128", tf.complex128, "raw", tf.complex128),
    _DType("string", tf.string, "bytes"),
    # Quantized integers: their integers' bits (TensorFlow casts none of them to another dtype)
    _DType("qint8", tf.qint8, "raw", tf.int8),
    _DType("quint8", tf.quint8, "raw", tf.uint8),
    _DType("qint32", tf.qint32, "raw", tf.int32),
)
_DTYPES = {d.name: d for d in _DTYPE_TABLE}
_DTYPES_BY_ENUM = {d.tf_dtype.as_datatype_enum: d for d in _DTYPE_TABLE}

# Which encodings a header may pair with a dtype. Files of the original module store every
# float as a FloatList and every integer as an Int64List; those still load.
_LEGAL_ENCODINGS = {
    d.name: {d.encoding}
    | ({"float"} if d.tf_dtype.is_floating else set())
    | ({"int64"} if d.tf_dtype.is_integer else set())
    | ({"raw"} if d.raw_as is not None else set())
    for d in _DTYPE_TABLE
}


@dataclasses.dataclass(frozen=True)
class _Feature:
    """One tensor of the element structure, as the header describes it."""

    name: str
    path: tuple
    dtype: _DType
    shape: tuple  # ints, None for unknown dims
    encoding: str
    ragged_rank: int = 0
    row_splits_dtype: str = "int64"
    ragged: bool = False  # a tf.RaggedTensor component (its ragged_rank may be 0)
    tensor_name: str | None = None  # the name of its tf.TensorSpec, if it has one
    sparse: bool = False  # a tf.SparseTensor component (format version 4)

    @property
    def kind(self) -> str:
        if self.sparse:
            return "sparse"
        if self.ragged_rank:
            return "ragged"
        return "fixed" if None not in self.shape else "varshape"

    @property
    def dense_unknown(self) -> bool:
        """A dense tensor (not a tf.RaggedTensor) of unknown shape."""
        return self.kind == "varshape" and not self.ragged

    @property
    def known_values(self) -> int:
        """Values its known dims hold together (1 for none)."""
        return math.prod(d for d in self.shape if d is not None)

    @property
    def shape_key(self) -> str:
        return f"{self.name}#shape"

    def lengths_key(self, level: int) -> str:
        return f"{self.name}#row_lengths_{level}"

    @property
    def indices_key(self) -> str:
        return f"{self.name}#indices"

    @property
    def keys(self) -> list[str]:
        """Every tf.train.Example key this feature writes."""
        if self.sparse:
            return [self.name, self.indices_key, self.shape_key]
        if self.kind == "varshape":
            return [self.name, self.shape_key]
        return [self.name] + [self.lengths_key(k) for k in range(self.ragged_rank)]

    @property
    def inner_shape(self) -> tuple:
        """Shape of one row of the flat values: the dims after the ragged ones."""
        return self.shape[self.ragged_rank + 1 :] if self.ragged_rank else ()

    def spec(self, original_dtypes: bool = True):
        dtype = self.dtype.tf_dtype if original_dtypes else _STORED[self.encoding]
        if self.encoding == "raw" and not original_dtypes:
            return tf.TensorSpec([], tf.string, name=self.tensor_name)
        if self.sparse:
            return tf.SparseTensorSpec(self.shape, dtype)
        if self.ragged:
            return tf.RaggedTensorSpec(
                self.shape, dtype, self.ragged_rank, tf.as_dtype(self.row_splits_dtype)
            )
        return tf.TensorSpec(self.shape, dtype, name=self.tensor_name)

    def to_yaml(self) -> dict:
        out = {
            "path": list(self.path),
            "dtype": self.dtype.name,
            "dtype_enum": self.dtype.tf_dtype.as_datatype_enum,
            "shape": list(self.shape),
            "encoding": self.encoding,
        }
        if self.ragged:
            out["ragged_rank"] = self.ragged_rank
            out["row_splits_dtype"] = self.row_splits_dtype
        if self.tensor_name is not None:
            out["tensor_name"] = self.tensor_name
        if self.sparse:
            out["sparse"] = True
        return out


@dataclasses.dataclass(frozen=True)
class _Shard:
    file: str  # base name, in the folder of tfrecord_path
    num_records: int | None
    num_bytes: int | None


@dataclasses.dataclass(frozen=True)
class _Header:
    features: tuple  # of _Feature, in tf.nest order of the structure
    structure: Any  # dict -> mapping, tuple -> list, leaf -> feature name, None -> None
    num_records: int | None
    shards: tuple  # of _Shard
    compression: str | None
    block_records: int
    layout: str  # "round_robin" (block i in shard i % n) or "sequential"
    version: int
    namedtuples: tuple = ()  # of _NamedTuple: which lists of the structure are namedtuples

    def to_yaml(self) -> dict:
        fields = {
            "format": FORMAT_NAME,
            "version": self.version,
            "structure": self.structure,
            "features": {f.name: f.to_yaml() for f in self.features},
            "num_records": self.num_records,
            "compression": self.compression,
            "block_records": self.block_records,
            "layout": self.layout,
            "shards": [dataclasses.asdict(s) for s in self.shards],
        }
        if self.namedtuples:  # else as version 3 and 4 wrote it
            fields["namedtuples"] = [n.to_yaml() for n in self.namedtuples]
        return fields

    def schema(self) -> tuple:
        """What the element is made of: what a pipeline depends on, and parts must share."""
        return self.features, repr(self.structure), self.namedtuples


@dataclasses.dataclass(frozen=True)
class _NamedTuple:
    """A tuple of the element that is a namedtuple: its place in the structure (the keys and
    indices that lead to it), its type's name and its fields. `load` gives it back as a
    namedtuple of that name and fields (`_namedtuple_type`), as `tf.data.Dataset.load`
    does; the user's own class is not imported."""
    path: tuple
    name: str
    fields: tuple

    def to_yaml(self) -> dict:
        return {"path": list(self.path), "name": self.name, "fields": list(self.fields)}


@functools.cache  # unbounded: one type for each name and fields, however many are loaded
def _namedtuple_type(name: str, fields: tuple) -> type:
    """One type for each name and fields, so that every load of them gives the same
    element_spec. `rename=True` takes fields as such a type names them (`_1` for its second
    field where the names it was given were not all Python names)."""
    return collections.namedtuple(name, fields, rename=True)


def _format_version(features, namedtuples, structure) -> int:
    """The version a header of these features, namedtuples and structure says: the lowest
    that reads them. (No defaults: a structure of None is itself a part with no tensor.)"""
    if _empty_parts(structure):
        return _EMPTY_PARTS_VERSION
    if any(f.dtype.tf_dtype.is_quantized for f in features):
        return _QUANTIZED_VERSION
    if namedtuples:
        return _NAMEDTUPLE_VERSION
    return _SPARSE_VERSION if any(f.sparse for f in features) else 3


def _no_tensor(node) -> bool:
    """Whether a node of a header's structure is a part with no tensor: None, {} or []."""
    return node is None or node in ({}, [])


def _structure_leaves(structure):
    """Each leaf of a header's structure (a feature name, or a part with no tensor) with its
    path, in the structure's order. Without recursion: a structure may nest deeper than
    Python's stack, which save and merge then refuse."""
    nodes = [(structure, ())]
    while nodes:
        node, path = nodes.pop()
        if isinstance(node, dict) and node:  # (reversed: popped in order)
            nodes += reversed([(item, path + (key,)) for key, item in node.items()])
        elif isinstance(node, list) and node:
            nodes += reversed([(item, path + (i,)) for i, item in enumerate(node)])
        else:
            yield node, path


def _empty_parts(structure) -> bool:
    """Whether a header's structure holds a part with no tensor."""
    return any(_no_tensor(node) for node, _ in _structure_leaves(structure))


def default_header_path(tfrecord_path) -> str:
    """Where the header sits when `header_path` is omitted: `<tfrecord_path>.header.yaml`.
    ValueError where `tfrecord_path` is "" (it gave ".header.yaml")."""
    path = _fspath(tfrecord_path, "tfrecord_path")
    _check_not_empty(path, "tfrecord_path")
    return path + HEADER_SUFFIX


# Shard names have five digits (`base-00000-of-00064`): the most files one save can name
_MAX_SHARDS = 99_999
# int64's bounds as NumPy's ints for TensorFlow's ops: under TensorFlow's NumPy behaviour
# (`experimental_enable_numpy_behavior(dtype_conversion_mode="all")` or "safe"), a Python int
# past int32 is refused ("OverflowError: Python int ... too large to convert to np.int32"),
# and load and verify failed on every read (helper-98)
_INT64_MIN, _INT64_MAX = np.int64(np.iinfo(np.int64).min), np.int64(np.iinfo(np.int64).max)


def _shard_file_names(base: str, num_shards: int) -> list[str]:
    """`base` for one shard, else `base-00000-of-NNNNN`, the count in five digits (the
    TensorFlow/TFDS convention)."""
    if num_shards == 1:
        return [base]
    return [f"{base}-{i:05d}-of-{num_shards:05d}" for i in range(num_shards)]


def _is_save_name(name: str, base: str) -> bool:
    """Whether `name` is one a save to `base` writes records to: `base` itself, or
    `base-NNNNN-of-NNNNN` as `_shard_file_names` makes them."""
    return re.fullmatch(re.escape(base) + r"(-\d{5}-of-\d{5})?", name) is not None


def _fspath(path, name: str) -> str:
    """The path `path` (the argument `name`) as a plain str of its own text (one of a
    subclass, NumPy's `np.str_`, failed as the header's file name, and a str Enum's member
    named another file); ValueError naming it where it is not UTF-8,
    which TensorFlow's file functions need (bytes failed with a UnicodeDecodeError, a str with
    surrogates with a UnicodeEncodeError, neither naming the path), holds a NUL, where
    TensorFlow's C++ cuts it short and so names another file (Python's own `open` refuses it
    too), or is a file:// URL of a relative path, which TensorFlow reads as a host's.
    FileNotFoundError naming it where it is relative and the working folder was deleted (a bare
    "No such file or directory" from `os.getcwd` otherwise, naming neither)."""
    if isinstance(path, (tf.Tensor, tf.Variable)):  # inside a tf.function, say
        raise TypeError(f"{name} must be a str, bytes or os.PathLike object, not a tensor "
                        "(super_serial opens its files in Python: load, while it builds the "
                        f"pipeline); got {path!r}")
    try:
        path = os.fspath(path)
    except TypeError:
        raise TypeError(f"{name} must be a str, bytes or os.PathLike object, not "
                        f"{type(path).__name__} ({path!r:.80})") from None
    if isinstance(path, bytes):
        text = None
        with contextlib.suppress(UnicodeError):
            text = bytes.decode(path)
    else:  # str.__str__, not str(): to str(), a str Enum's member is "Paths.TRAIN"
        text = _utf8_text(str.__str__(path))
    if text is None:
        raise ValueError(f"{path!r}: {_NOT_UTF8}")
    if "\0" in text:
        raise ValueError(f"{path!r}: a path cannot hold a NUL character (\\x00), where "
                         "TensorFlow's file functions would cut it short")
    if text.startswith("file://") and not text.startswith("file:///"):
        raise ValueError(f"{text!r}: a file:// URL needs an absolute path, as in "
                         "'file:///data/train.tfrecord' (TensorFlow reads what follows file:// "
                         "up to the next slash as a host)")
    if "://" not in text and not os.path.isabs(text):
        try:
            os.getcwd()
        except FileNotFoundError:
            raise FileNotFoundError(errno.ENOENT, f"{name} is relative, but the working folder "
                                    "was deleted: it names no file", text) from None
    return text


_NOT_UTF8 = "paths must be valid UTF-8, as TensorFlow's file functions take them"


def _utf8_text(text: str) -> str | None:
    """`text` as TensorFlow's file functions take it (UTF-8): itself, or where it holds UTF-8
    bytes as surrogates (as Python decodes names in a locale of another encoding with UTF-8
    mode off: sys.argv's, os.getcwd()'s) the text they are; None where it is not UTF-8."""
    try:
        text.encode()
        return text
    except UnicodeError:
        try:
            return os.fsencode(text).decode()
        except UnicodeError:
            return None


def _feature_name(path: tuple) -> str:
    return "/".join(str(p) for p in path) if path else BARE_TENSOR_NAME


def _schema_from_spec(element_spec) -> tuple[list[_Feature], Any, tuple]:
    """The features, structure skeleton and namedtuples (`_NamedTuple`) of an element_spec;
    SchemaError if unsupported."""
    features: list[_Feature] = []
    namedtuples: list[_NamedTuple] = []

    def visit(spec, path):
        # a dict or tuple at the top is the element, not the feature of a bare tensor
        where = _named(_feature_name(path)) if path else "the element"
        if isinstance(spec, collections.abc.Mapping):
            for key in spec:
                if not isinstance(key, str):
                    kind = type(key).__name__
                    raise SchemaError(f"{where}: dict key {key!r} is a"
                                      f"{'n' if kind[:1] in 'aeiou' else ''} {kind}; only str "
                                      "keys are supported")
                if not key.isascii() and not _utf8(key):
                    raise SchemaError(f"{where}: dict key {key!r} cannot be written as UTF-8 "
                                      "(it holds a lone surrogate)")
            # Keys as plain strs: a subclass (numpy.str_ from np.array(names), a str Enum) is
            # no type YAML's safe dumper writes, and load gives plain strs back. Unless that
            # changes the element: keys that differ but read alike, or sort (as tf.nest
            # flattens them) otherwise than their text, would have their values mixed up.
            plain = {str.__str__(k): spec[k] for k in spec}
            if len(plain) != len(spec) or sorted(plain) != [str.__str__(k) for k in sorted(spec)]:
                raise SchemaError(f"{where}: its dict keys are of a str subclass "
                                  f"({type(next(k for k in spec if type(k) is not str)).__name__}"
                                  ") that compares or sorts otherwise than their text; use "
                                  "plain str keys")
            visited = {k: visit(plain[k], path + (k,)) for k in sorted(plain)}  # tf.nest's
            return {k: visited[k] for k in plain}  # the dict in its own order, for load
        if isinstance(spec, tuple):
            if _is_namedtuple(spec):
                name, fields = type(spec).__name__, tuple(spec._fields)
                problem = _namedtuple_problem(name, fields)
                if not problem and len(fields) != len(spec):
                    problem = "fields", f"{len(fields)} fields for a tuple of {len(spec)}"
                if problem:  # (load's check of the header named only its entry's field)
                    raise SchemaError(f"{where}: load could not give back its namedtuple type "
                                      f"{_short(name)} ({problem[1]}); use a "
                                      "collections.namedtuple, a plain tuple or a dict")
                namedtuples.append(_NamedTuple(path, name, fields))
            return [visit(s, path + (i,)) for i, s in enumerate(spec)]
        if isinstance(spec, _NoneSpec):  # no tensor: the header's structure holds the None
            return None
        features.append(_feature_from_spec(spec, path))
        return features[-1].name

    skeleton = visit(element_spec, ())
    if not features:  # tf.data makes no such dataset (its ops need a tensor an element)
        raise SchemaError("the element holds no tensor: None, empty dicts and empty tuples "
                          "are saved only beside one")
    keys = [k for f in features for k in f.keys]
    duplicates = sorted(k for k, n in collections.Counter(keys).items() if n > 1)
    if duplicates:
        raise SchemaError(
            f"{_named(duplicates[0])}: two parts of the element structure map to the same "
            "TFRecord key; rename dict keys that contain '/' or '#'"
        )
    return features, skeleton, tuple(namedtuples)


def _is_namedtuple(value) -> bool:
    """A namedtuple, or what tf.nest takes for one (a tuple with `_fields` of strings)."""
    fields = getattr(type(value), "_fields", None)
    return isinstance(value, tuple) and isinstance(fields, tuple) and all(
        isinstance(f, str) for f in fields)


def _namedtuple_problem(name, fields: list | tuple) -> tuple[str, str] | None:
    """Why `_namedtuple_type` cannot make a type of this name and fields (as save found them
    or a header lists them): the entry's field at fault ("name" or "fields") and what is
    wrong; None where it can."""
    if not _python_name(name):
        return "name", f"{_short(name)} cannot name a namedtuple"
    for index, item in enumerate(fields):
        if not _python_name(item) or item.startswith("_") and item != f"_{index}":
            return "fields", f"{_short(item)} cannot name a namedtuple's field"
    if len(set(fields)) != len(fields):
        return "fields", "a field is named twice"
    try:  # as load makes it: Python reads names as NFKC, so "\ufb01" and "fi" clash
        _namedtuple_type(name, tuple(fields))
    except (SyntaxError, ValueError, TypeError) as e:
        return "fields", f"no namedtuple type has these fields ({e})"
    return None


def _tuple_paths(node, path: tuple) -> list:
    """The paths of the tuples (lists) of a header's structure, depth first, each before
    what it holds: the order in which `_schema_from_spec` finds namedtuples."""
    if isinstance(node, dict):
        return [p for key in sorted(node, key=str) for p in _tuple_paths(node[key], path + (key,))]
    if isinstance(node, list):
        return [path] + [p for i, item in enumerate(node) for p in _tuple_paths(item, path + (i,))]
    return []


def _python_name(text) -> bool:
    """Whether `text` may name a namedtuple or one of its fields."""
    return isinstance(text, str) and text.isidentifier() and not keyword.iskeyword(text)


def _utf8(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


# The spec of a None in an element: a part with no tensor, which the header's structure holds
_NONE_SPEC = tf.type_spec_from_value(None)
_NoneSpec = type(_NONE_SPEC)


def _tensors_of(structure, expand_composites: bool = False) -> list:
    """`tf.nest.flatten` of an element (or of its spec) without its Nones (NoneTensorSpecs),
    which hold no tensor: what tf.data holds the element as, one for each feature."""
    return [x for x in tf.nest.flatten(structure, expand_composites=expand_composites)
            if x is not None and not isinstance(x, _NoneSpec)]

# What tf.data's other kinds of component are, and what to save instead
_UNSUPPORTED_HINTS = {
    "DatasetSpec": ("a dataset, as .window() makes", "make it a tensor first, e.g. with "
                    ".batch(size) in place of .window(size)"),
    "TensorArraySpec": ("a tf.TensorArray", "save its .stack()"),
}

# TensorFlow's dtypes that tf.data cannot batch, and how to save their values (the fnuz, float4
# and 2-bit dtypes cannot be cast, and TensorFlow 2.21's tf.data runs none of them, nor
# float8_e5m2)
_UNBATCHABLE_HINTS = {
    "float8_e4m3fn": "cast it to float16 in a map (float16 holds each of its values exactly)",
    "float8_e5m2": "cast it to float16 where the dataset makes it (float16 holds each of its "
                   "values exactly; TensorFlow 2.21 runs no dataset that holds it)",
    "int4": "cast it to int8 in a map",
    "uint4": "cast it to uint8 in a map",
    "qint16": "tf.bitcast it to int16 in a map",
    "quint16": "tf.bitcast it to uint16 in a map",
}


def _feature_from_spec(spec, path) -> _Feature:
    name = _feature_name(path)
    where = _named(name)
    if isinstance(spec, tf.RaggedTensorSpec):
        ragged_rank = spec.ragged_rank
        if spec.flat_values_spec is not None:  # which tf.data cannot batch or iterate either
            raise SchemaError(f"{where}: a tf.RaggedTensorSpec with a flat_values_spec is not "
                              "supported; give the spec its dtype and shape alone")
    elif isinstance(spec, (tf.TensorSpec, tf.SparseTensorSpec)):
        ragged_rank = 0
    else:
        kind, todo = type(spec).__name__, ""
        # Structures tf.nest flattens but tf.data's save cannot write either: a list (of a
        # spec made by hand), an attrs class, a custom nest (`__tf_flatten__`)
        if (hasattr(spec, "_fields") or isinstance(spec, list) or hasattr(spec, "__tf_flatten__")
                or hasattr(type(spec), "__attrs_attrs__")):
            kind = f"{kind} (use a dict or a tuple)"
        elif (isinstance(spec, tf.TypeSpec) and isinstance(getattr(spec, "value_type", None), type)
                and issubclass(spec.value_type, tf.experimental.ExtensionType)):
            kind = f"{kind} (an extension type: save its tensors in a dict or a tuple)"
        elif kind in _UNSUPPORTED_HINTS:
            what, todo = _UNSUPPORTED_HINTS[kind]
            kind, todo = f"{kind} ({what})", f": {todo}"
        raise SchemaError(
            f"{where if path else 'the element'}: {kind} is not supported; "
            f"super_serial saves tf.Tensor, tf.RaggedTensor and tf.SparseTensor components{todo}"
        )
    dtype = _DTYPES.get(spec.dtype.name)
    if dtype is None:
        todo = _UNBATCHABLE_HINTS.get(spec.dtype.name)
        todo = f", as tf.data cannot batch it: {todo}, and back after load" if todo else ""
        raise SchemaError(
            f"{where}: dtype {spec.dtype.name} is not supported{todo}; "
            f"supported: {', '.join(_DTYPES)}"
        )
    if spec.shape.rank is None:  # the way to a known rank, as each kind of spec takes one
        how = ("its tf.RaggedTensorSpec a shape, as [None, None] for ragged rank 1"
               if isinstance(spec, tf.RaggedTensorSpec) else
               "it one in a map with x.set_shape([None, None]), one None a dim"
               if isinstance(spec, tf.SparseTensorSpec) else
               "it one in a map with tf.ensure_shape(x, [None, None]), one None a dim")
        raise SchemaError(f"{where}: unknown rank is not supported; it needs a known rank "
                          f"(its dims may be None): give {how}")
    shape = tuple(spec.shape.as_list())
    feature = _Feature(name, path, dtype, shape, dtype.encoding, ragged_rank,
                       sparse=isinstance(spec, tf.SparseTensorSpec))
    if feature.sparse and not shape:
        raise SchemaError(f"{where}: a sparse tensor of shape [] is not supported; give it "
                          "a dim, e.g. with tf.sparse.reshape(x, [1])")
    if isinstance(spec, tf.TensorSpec) and spec.name is not None:
        if not _utf8(spec.name):
            raise SchemaError(f"{where}: its TensorSpec name {spec.name!r} is not "
                              "valid UTF-8 text, which the header is written in")
        feature = dataclasses.replace(feature, tensor_name=spec.name)
    if isinstance(spec, tf.RaggedTensorSpec):
        feature = dataclasses.replace(feature, row_splits_dtype=spec.row_splits_dtype.name,
                                      ragged=True)
        if not shape or ragged_rank < 0:  # unbatching ragged tensors with no ragged dim
            # left gives these: plain scalars, or of shape [3] from rows of [None, 3] (helper-89;
            # the header check refused ragged rank -1, as if the header were at fault)
            values = "scalars" if not shape else f"tensors of shape {list(shape)}"
            raise SchemaError(
                f"{where}: a ragged tensor of shape {list(shape)} (ragged rank {ragged_rank}) "
                f"is not supported; its values are {values}, which a map gives as tf.Tensor, "
                "e.g. dataset.map(lambda x: x)"
            )
        if not ragged_rank and None in shape[1:]:
            raise SchemaError(
                f"{where}: a ragged tensor of ragged rank 0 and shape {list(shape)} is "
                "not supported; only its first dim may be unknown"
            )
        if None in feature.inner_shape:
            raise SchemaError(
                f"{where}: ragged tensor of shape {list(shape)} has unknown dims after "
                f"its {ragged_rank} ragged dims; those must be known: give them a size (e.g. "
                "x.with_flat_values(tf.ensure_shape(x.flat_values, [None, 3]))), or make "
                "them ragged too (a higher ragged_rank)"
            )
    return feature


# ---- reading and validating a header ------------------------------------------------------


def read_header(header_path) -> dict:
    """Reads and validates a header file.

    Args:
      header_path: The header's path (any `tf.io.gfile` path).

    Returns:
      The header as a dict, in the current format (files of the original module are converted;
      their `version` is 0).

    Raises:
      HeaderError: The file is missing or cannot be read (no filesystem for its scheme, say),
        is not safe YAML (records, say: the paths swapped), or has an invalid field.
      ValueError, TypeError: The path is not UTF-8 or is "", or is a tensor or of another
        type.

    Example:
      >>> # the header of save's example, of one element
      >>> header = read_header("data.tfrecord.header.yaml")  # doctest: +SKIP
      >>> header["num_records"]  # doctest: +SKIP
      1
    """
    header_path = _fspath(header_path, "header_path")
    _check_not_empty(header_path, "header_path", _HEADER_EXAMPLE)
    return _read_header(header_path).to_yaml()


# How deep flow collections ([...], {...}) may nest in a header, as libyaml 0.2.5 allows
_MAX_FLOW_LEVELS = 1000


class _SafeLoader(yaml.SafeLoader):
    """PyYAML's own safe loader, reading what libyaml reads where they differed (tabs between
    tokens, the `%YAML` version; tabs inside plain scalars still differ), and refusing flow
    collections nested past `_MAX_FLOW_LEVELS` as libyaml does. Its scanner's work grows with
    the square of the depth: 50,000 nested brackets took 2.1 s to reach Python's recursion
    limit (about 1,500 levels; PyYAML 5.4.1, Python 3.9), 0.2 s to be refused so."""

    def fetch_flow_collection_start(self, TokenClass):  # noqa: N803 - PyYAML's name
        if self.flow_level >= _MAX_FLOW_LEVELS:
            raise yaml.scanner.ScannerError(
                None, None, f"collections nested deeper than {_MAX_FLOW_LEVELS} levels",
                self.get_mark())
        super().fetch_flow_collection_start(TokenClass)

    def scan_to_next_token(self):
        """PyYAML's, but for tabs, which it refused between tokens anywhere ("version:\t3"):
        skipped as libyaml skips them, in flow collections and where no simple key may
        start (after a value's `:`, not at a line's start, where YAML forbids them)."""
        if self.index == 0 and self.peek() == "\ufeff":
            self.forward()
        while True:
            while self.peek() == " " or self.peek() == "\t" and (
                    self.flow_level or not self.allow_simple_key):
                self.forward()
            if self.peek() == "#":
                while self.peek() not in "\0\r\n\x85\u2028\u2029":
                    self.forward()
            if not self.scan_line_break():
                return
            if not self.flow_level:
                self.allow_simple_key = True

    def process_directives(self):
        """PyYAML's, refusing as libyaml does a `%YAML` version other than 1.1 and 1.2."""
        value = super().process_directives()
        if self.yaml_version is not None and self.yaml_version[1] not in (1, 2):
            raise yaml.parser.ParserError(None, None, "found incompatible YAML document",
                                          self.peek_token().start_mark)
        return value


def _yaml_loader():
    """libyaml's safe loader when PyYAML has it and its libyaml bounds nesting: the same
    documents, several times faster. libyaml 0.2.5 refuses documents nested past 1,000
    levels; some builds of PyYAML carry an older one, which recurses until the process
    crashes (Python 3.9's PyYAML 6.0.3 wheel, at about 30,000 levels). Else PyYAML's own
    loader (`_SafeLoader`), bounded the same way."""
    loader = getattr(yaml, "CSafeLoader", None)
    if loader is None:
        return _SafeLoader
    depth = _MAX_FLOW_LEVELS + 1  # one past what it must refuse
    try:
        yaml.load("[" * depth + "]" * depth, Loader=loader)
    except yaml.YAMLError:
        return loader
    return _SafeLoader


_YAML_LOADER = _yaml_loader()


def _read_header(header_path: str, tfrecord_path: str | None = None) -> _Header:
    text = _header_bytes(header_path, tfrecord_path)
    if len(text) > _MAX_HEADER_BYTES:
        raise HeaderError(f"{header_path}: not a valid header: larger than the "
                          f"{_MAX_HEADER_BYTES:,} bytes a header may take")
    values = _values_at_most(text)
    if values > _MAX_HEADER_VALUES:
        raise HeaderError(f"{header_path}: not a valid header: it may hold up to {values:,} "
                          f"values, more than the {_MAX_HEADER_VALUES:,} a header may hold")
    try:
        loader = _YAML_LOADER(text)  # PyYAML's own loader reads bytes here, and may refuse them
        try:
            node = loader.get_single_node()  # the document's nodes, checked before building
            problem = _node_problem(node)
            if problem:
                raise HeaderError(f"{header_path}: not a valid header: {problem}")
            raw = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as e:
        _check_not_records(header_path, text)
        reason = _yaml_reason(e)
        if isinstance(e, yaml.constructor.ConstructorError) and "tag" in str(e.problem):
            reason = "YAML tags are not allowed in a header (" + str(e.problem) + ")"
        raise HeaderError(f"{header_path}: not a valid header: {reason}") from None
    except (ValueError, TypeError, RecursionError) as e:  # e.g. undecodable bytes
        _check_not_records(header_path, text)
        raise HeaderError(f"{header_path}: not a valid header: {e}") from None
    base = _basename(tfrecord_path) if tfrecord_path else None
    return _HeaderParser(header_path).parse(raw, base)


def _check_not_records(header_path: str, text: bytes):
    """HeaderError where the header file, which is no YAML, holds records: the record path
    given as the header's (PyYAML's reason, "unacceptable character #x0013", said nothing)."""
    kind = _records_kind(text[:12], zlib=True)
    if kind:
        raise HeaderError(f"{header_path}: not a header: it holds {kind}; were the records' "
                          "path and the header's swapped?")


def _records_kind(data: bytes, zlib: bool = False) -> str | None:
    """What `data`, a file's first bytes, begins with where it is records, not a header:
    "TFRecord records" (the first record's length with its masked CRC32C after it), or
    "GZIP-compressed records" (GZIP's magic bytes); with `zlib`, also "ZLIB-compressed
    records" (a ZLIB stream's two-byte header, which text can begin with too)."""
    if data[:2] == b"\x1f\x8b":
        return "GZIP-compressed records"
    if len(data) >= 12:
        length = np.frombuffer(data[:8], "<u8")
        if _masked_crc32c(_crc32c_u64(length))[0] == int.from_bytes(data[8:12], "little"):
            return "TFRecord records"
    if zlib and len(data) >= 2 and data[0] == 0x78 and (data[0] << 8 | data[1]) % 31 == 0:
        return "ZLIB-compressed records"
    return None


# A space or YAML's line breaks after `-`, as its indicator of an entry needs one (in UTF-8;
# PyYAML's reader reads UTF-16 too, after a byte order mark)
_YAML_ENTRY = [b"-" + after for after in (b" ", b"\t", b"\n", b"\r", "\x85".encode(),
                                          "\u2028".encode(), "\u2029".encode())]


def _values_at_most(text: bytes) -> int:
    """At most how many values (nodes) PyYAML makes of `text`, counted before it reads it. Each
    value but the first is a key and its value after `:`, `,`, `{` or `?` (two each, a
    mapping's key and value; `?` makes a key in a flow collection whatever follows it), an
    entry after `-` and a space or line break, or a sequence opened by `[` (one each); a
    `-` or `?` that ends the text makes up to two more. Line ends were counted instead of
    `-` and `?`, which missed lines such as `- - - - 0` and made nothing of line ends that
    are not `\n`: 2 MB of the first, or 12 MB of `- 0\r`, took a gigabyte and more than 15 s
    to read (helper-96)."""
    if text[:2] in (b"\xff\xfe", b"\xfe\xff"):  # UTF-16, which PyYAML reads too
        text = text.decode("utf-16", "replace").encode()
    pairs = sum(text.count(c) for c in (b":", b",", b"{", b"?"))
    return 3 + 2 * pairs + text.count(b"[") + sum(text.count(c) for c in _YAML_ENTRY)


def _yaml_reason(error: Exception) -> str:
    """PyYAML's reason for refusing a text, on one line: where (line and column, from 1), what
    it found, and what it was doing, as "line 5, column 1: found character that cannot start
    any token (while scanning for the next token)"; the first line of any other error (or of
    one without those parts), or its type's name."""
    problem, mark = getattr(error, "problem", None), getattr(error, "problem_mark", None)
    if not problem:
        return str(error).splitlines()[0] if str(error) else type(error).__name__
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    context = getattr(error, "context", None)
    return where + problem + (f" ({context})" if context else "")


def _misnamed(tfrecord_path: str | None, header_path: str) -> str:
    """Where `tfrecord_path` names a folder, a header, or one shard of a save, rather than the
    records' path that `load` and `verify` take (and the header was to be found beside it):
    says which path that is (for a folder, the records saved there, from their headers). Where
    the records have no header beside them but a file named as the original module's example
    named headers (X.header beside X.tfrecord, or PATH.header), says that it is there."""
    if tfrecord_path is None or not _same_place(header_path, default_header_path(
            tfrecord_path)) or not tf.io.gfile.exists(tfrecord_path):
        return ""
    if tf.io.gfile.isdir(tfrecord_path):
        saved = sorted(f"{tfrecord_path.rstrip('/')}/{name[:-len(HEADER_SUFFIX)]}"
                       for name in tf.io.gfile.listdir(tfrecord_path)
                       if name.endswith(HEADER_SUFFIX))
        listed = (f" ({', '.join(saved[:3])}{', ...' if len(saved) > 3 else ''} there)"
                  if saved else "")
        return f"; {tfrecord_path} is a folder: give the path of records saved in it{listed}"
    meant = []
    if tfrecord_path.endswith(HEADER_SUFFIX):
        meant.append((tfrecord_path[:-len(HEADER_SUFFIX)], "a header"))
    shard = re.fullmatch(r"(.+)-\d{5}-of-\d{5}", tfrecord_path)
    if shard:
        meant.append((shard[1], "one shard of a save"))
    for path, what in meant:
        if tf.io.gfile.exists(default_header_path(path)):
            return f"; {tfrecord_path} is {what}: give the records' path, {path}"
    # The original module's own example named them X.tfrecord and X.header (helper-118)
    stem = tfrecord_path[:-len(".tfrecord")] if tfrecord_path.endswith(".tfrecord") else None
    for path in ([stem + ".header"] if stem else []) + [tfrecord_path + ".header"]:
        if not tf.io.gfile.isdir(path) and tf.io.gfile.exists(path):
            return (f"; {path} is there, as the original super_serial module named headers: "
                    "give it as the header path (header_path, or --header)")
    return ""


# How long a reader waits for a header that a save beside it is putting in place, seconds
_PLACING_WAIT = 2.0


def _header_bytes(header_path: str, tfrecord_path: str | None) -> bytes:
    """The header file's bytes, up to one more than a header may take.

    Where it is missing while a save there puts its files in place (another process's, in the
    window between moving the old header aside and renaming its new one into place: the save's
    temporaries of the header are beside it), waits for it, up to `_PLACING_WAIT` seconds, and
    reads the new one. A save killed in that window leaves its temporaries, and the error after
    the wait says so. A header put in place between the two looks (missing, then no
    temporaries) is read too: each temporary goes as the header comes.
    """
    deadline, refusals = None, 0
    kind = _special_file(header_path)
    if kind:
        raise HeaderError(f"{header_path}: {kind}, not a header file")
    while True:
        refused = None
        try:
            there = tf.io.gfile.exists(header_path)
        except tf.errors.OpError as e:  # no filesystem for its scheme ("foo://"), say
            raise HeaderError(f"{header_path}: cannot read header: "
                              f"{_file_reason(header_path, e)}") from None
        if there:
            try:
                with tf.io.gfile.GFile(header_path, "rb") as f:
                    return f.read(_MAX_HEADER_BYTES + 1)
            except tf.errors.NotFoundError as e:  # moved aside since it was looked for; or
                refused = e  # there but no file that opens (a socket)
            except tf.errors.OpError as e:
                _cannot_read_header(header_path, e)
        placing = _placing(header_path)
        now = time.monotonic()
        deadline = now + _PLACING_WAIT if deadline is None else deadline
        if placing and now < deadline:
            time.sleep(0.005)
            continue
        if refused is not None and not placing:
            refusals += 1  # once more, for a header put in place since; then it is refused
            if refusals > 1 or now >= deadline:
                _cannot_read_header(header_path, refused)
            continue
        if not placing and now < deadline and tf.io.gfile.exists(header_path):
            continue  # put in place between the two looks
        refused = _refusal(header_path)
        if refused:
            raise HeaderError(f"{header_path}: cannot read header: {refused}")
        hint = _misnamed(tfrecord_path, header_path) or _interrupted(placing)
        raise HeaderError(f"{header_path}: header file not found{hint}")


def _refusal(path: str) -> str | None:
    """Why the OS will not open a local file for reading ("Permission denied": a folder above
    it that cannot be searched, or the file's own mode), else None, also where it is missing.
    TensorFlow's look for a file in a folder that cannot be searched says only that it is not
    there; and a file that can be looked at (stat) may still not open, and would fail only
    once read. Opened without waiting (a FIFO would wait for a writer)."""
    if not _is_local(path):
        return None
    try:
        os.close(os.open(_local(path), os.O_RDONLY | os.O_NONBLOCK))
    except (FileNotFoundError, NotADirectoryError, ValueError):  # gone since it was looked at
        return None
    except OSError as e:
        return e.strerror or str(e)
    return None


def _cannot_read_header(header_path: str, error: tf.errors.OpError) -> NoReturn:
    if tf.io.gfile.isdir(header_path):  # TensorFlow's message: "<path>; Is a directory"
        raise HeaderError(f"{header_path}: a folder, not a header file") from None
    raise HeaderError(f"{header_path}: cannot read header: {_file_reason(header_path, error)}"
                      ) from None


def _file_reason(path: str, error: tf.errors.OpError) -> str:
    """TensorFlow's reason a file operation failed, without the path its message begins
    with ("<path>; Permission denied")."""
    text = _tf_message(error)
    return text[len(path) + 2:] if text.startswith(f"{path}; ") else text


def _placing(header_path: str) -> set:
    """The kinds of temporaries of the header beside it, as a save makes them while it puts
    its files in place (`_move_into_place`): "new" for its new header, ".old" for the old
    one moved aside; for any save's token."""
    kinds = set()
    try:
        names = tf.io.gfile.listdir(_listable(_dirname(header_path)))
    except (tf.errors.OpError, UnicodeDecodeError):  # a name in the folder is not UTF-8
        return kinds
    for name in names:
        found = _temporary_of(name, header_path)
        if found is not None and found[1] in ("", ".old"):
            kinds.add(found[1] or "new")
    return kinds


def _interrupted(placing: set) -> str:
    """What a header's temporaries beside it (`_placing`) say, once a reader has waited for
    the header: a save there is slow to put its files in place, or was killed while it did.
    Where it had moved the old header aside, the previous files are beside it."""
    if not placing:
        return ""
    hint = (f"; a save there is still putting its files in place after {_PLACING_WAIT:g} s "
            "(try again in a moment), or was interrupted while it did")
    if ".old" not in placing:
        return hint + (": then its new header was not put in place (it is beside it as a "
                       "hidden '.<name>.<token>.tmp')")
    return hint + (": then the previous files are beside it as hidden "
                   "'.<name>.<token>.tmp.old' (once no save runs there, rename them back to "
                   "recover that dataset, before saving there again: a save may remove them)")


def _node_problem(root) -> str | None:
    """What makes a composed YAML document no header: a node used twice (what an alias makes,
    of a scalar too, and what cycles and "billion laughs" bombs are made of; each node is
    visited once, so a bomb is found before anything is built), or a key twice in one mapping
    (directly or through a merge key, `<<`), of which PyYAML would keep one without a word."""
    seen, stack = set(), [root] if root is not None else []
    while stack:
        node = stack.pop()
        if id(node) in seen:
            return "YAML aliases (*name) are not allowed in a header"
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            keys = set()
            for key, value in node.value:
                if not isinstance(key, yaml.ScalarNode):  # `? [a, b]`: PyYAML cannot hash it
                    return (f"a key that is a list or mapping (line {key.start_mark.line + 1}) "
                            "is not allowed in a header")
                if key.tag == "tag:yaml.org,2002:merge":  # its keys may hide others
                    return "YAML merge keys (<<) are not allowed in a header"
                if (key.tag, key.value) in keys:
                    return (f"key {_short(key.value)} appears twice in one mapping (line "
                            f"{key.start_mark.line + 1})")
                keys.add((key.tag, key.value))
                stack += (key, value)  # a key may be an alias too
        elif isinstance(node, yaml.SequenceNode):
            stack += node.value
    return None


class _HeaderParser:
    """Validates every field of a loaded YAML header, naming the field on failure."""

    def __init__(self, source: str):
        self.source = source
        self.version = 0  # the header's, once read

    def fail(self, field: str, problem: str) -> NoReturn:
        raise HeaderError(f"{self.source}: field '{_printable(field)}': {problem}")

    def get(self, mapping: dict, key: str, field: str, kind, *, optional=False, default=None):
        if key not in mapping:
            if optional:
                return default
            self.fail(field, "missing")
        value = mapping[key]
        if not _is_kind(value, kind):
            self.fail(field, f"expected {_kind_name(kind)}, found {_short(value)}")
        if kind is int and not -(2**63) <= value < 2**63:
            self.fail(field, f"{_short(value)} does not fit in 64 bits")
        return value

    def parse(self, raw, tfrecord_base: str | None) -> _Header:
        if not isinstance(raw, dict):
            raise HeaderError(f"{self.source}: not a valid header: expected a mapping, found "
                              f"{_short(raw)}")
        # The original module's header maps each feature's name to its shape and dtype, so
        # there 'format' and 'version' can only name features (mappings)
        if not any(key in raw and not isinstance(raw[key], dict) for key in ("format",
                                                                           "version")):
            return self.parse_legacy(raw, tfrecord_base)
        if raw.get("format") != FORMAT_NAME:
            self.fail("format", f"expected '{FORMAT_NAME}', found {_short(raw.get('format'))}")
        version = self.get(raw, "version", "version", int)
        if version not in _READ_VERSIONS:
            self.fail("version", f"this super_serial reads versions "
                                 f"{', '.join(map(str, _READ_VERSIONS))}, found {version}")
        self.version = version
        features_raw = self.get(raw, "features", "features", dict)
        if not all(isinstance(name, str) for name in features_raw):
            self.fail("features", "every feature name must be a string")
        if "structure" not in raw:
            self.fail("structure", "missing")
        structure = raw["structure"]
        # an element that is itself null, {} or [] is no matter of version (helper-113)
        leaves = [] if _no_tensor(structure) else self.parse_structure(structure, "structure",
                                                                         ())
        if not leaves:
            self.fail("structure", "names no feature; an element holds at least one tensor")
        if sorted(n for n, _ in leaves) != sorted(features_raw):
            named = collections.Counter(n for n, _ in leaves)
            problems = [*(f"leaf {_short(n)} names no feature" for n in named
                          if n not in features_raw),
                        *(f"{_short(n)} is named by {c} leaves" for n, c in named.items()
                          if c > 1 and n in features_raw),
                        *(f"feature {_short(n)} is named by no leaf" for n in features_raw
                          if n not in named)]
            self.fail("structure", "its leaves do not name exactly the features listed under "
                                   f"'features': {'; '.join(problems[:3])}"
                                   f"{'; ...' if len(problems) > 3 else ''}")
        features = []
        for name, path in leaves:
            features.append(self.parse_feature(name, features_raw[name], path))
        keys = [k for f in features for k in f.keys]
        if len(set(keys)) != len(keys):
            self.fail("features", "two features write the same TFRecord key")
        least = _least_record_bytes(features)
        if least > _MAX_RECORD_BYTES:
            self.fail("features", f"together at least {least:,} bytes a record, more than a "
                                  "record can hold (2 GiB)")
        num_records = self.get(raw, "num_records", "num_records", int)
        if num_records < 0:
            self.fail("num_records", f"must be >= 0, found {num_records}")
        if "compression" not in raw:
            self.fail("compression", f"missing; expected one of {list(COMPRESSIONS)}")
        compression = raw["compression"]
        if compression not in COMPRESSIONS:
            self.fail("compression", f"expected one of {list(COMPRESSIONS)}, found "
                                     f"{_short(compression)}")
        block = self.get(raw, "block_records", "block_records", int)
        if not 1 <= block <= _MAX_BLOCK_RECORDS:
            self.fail("block_records", f"must be in 1..{_MAX_BLOCK_RECORDS}, found {block}")
        layout = raw.get("layout")
        if layout not in ("round_robin", "sequential"):
            self.fail("layout", f"expected 'round_robin' or 'sequential', found {_short(layout)}")
        shards_raw = self.get(raw, "shards", "shards", list)
        if not shards_raw:
            self.fail("shards", "must list at least one file")
        if block > 1 and block * least > _MAX_BLOCK_BYTES:
            self.fail("block_records", f"{block} records of at least "
                                       f"{least} bytes are more than load parses "
                                       f"at once ({_MAX_BLOCK_BYTES >> 20} MiB)")
        shards = tuple(self.parse_shard(s, i) for i, s in enumerate(shards_raw))
        files = [s.file for s in shards]
        if len(set(files)) != len(files):
            self.fail("shards", "a file is listed twice")
        counts = [s.num_records for s in shards]
        if sum(counts) != num_records:
            self.fail("shards", f"record counts add up to {sum(counts)}, but num_records is "
                                f"{num_records}")
        if layout == "round_robin":
            dealt = _dealt_counts(num_records, block, len(shards))
            if counts != dealt:
                self.fail("shards", f"record counts {_short(counts)} are not those of blocks "
                                    f"of {block} records dealt to {len(shards)} files in turn, "
                                    f"{_short(dealt)}")
        namedtuples = self.parse_namedtuples(raw, structure)
        return _Header(tuple(features), structure, num_records, shards, compression, block,
                       layout, version, namedtuples)

    def parse_namedtuples(self, raw, structure) -> tuple:
        entries = self.get(raw, "namedtuples", "namedtuples", list, optional=True, default=[])
        if entries and self.version < _NAMEDTUPLE_VERSION:
            self.fail("namedtuples", f"namedtuples need format version {_NAMEDTUPLE_VERSION}; "
                                     f"the header says {self.version}")
        out = []
        for i, entry in enumerate(entries):
            field = f"namedtuples[{i}]"
            if not isinstance(entry, dict):
                self.fail(field, f"expected a mapping, found {_short(entry)}")
            path = self.get(entry, "path", f"{field}.path", list)
            name = self.get(entry, "name", f"{field}.name", str)
            fields = self.get(entry, "fields", f"{field}.fields", list)
            problem = _namedtuple_problem(name, fields)
            if problem:
                self.fail(f"{field}.{problem[0]}", problem[1])
            node = structure
            for step in path:
                if isinstance(node, dict) and isinstance(step, str) and step in node:
                    node = node[step]
                elif isinstance(node, list) and type(step) is int and 0 <= step < len(node):
                    node = node[step]
                else:
                    self.fail(f"{field}.path", f"{_short(path)} leads to no tuple of "
                                               "'structure'")
            if not isinstance(node, list):
                self.fail(f"{field}.path", f"{_short(path)} leads to no tuple of 'structure'")
            if len(fields) != len(node):
                self.fail(f"{field}.fields", f"{len(fields)} fields for a tuple of "
                                             f"{len(node)} in 'structure'")
            out.append(_NamedTuple(tuple(path), name, tuple(fields)))
        if len({n.path for n in out}) != len(out):
            self.fail("namedtuples", "a path is listed twice")
        # In the order save lists them (the structure's, depth first), whatever the header's
        order = {path: i for i, path in enumerate(_tuple_paths(structure, ()))}
        return tuple(sorted(out, key=lambda n: order[n.path]))

    def parse_structure(self, node, field, path) -> list:
        if isinstance(node, str):
            return [(node, path)]
        if _no_tensor(node):
            if self.version < _EMPTY_PARTS_VERSION:  # (it may lie as deep as a feature)
                self.fail(field, f"{_short(node)}, a part with no tensor, needs format version "
                                 f"{_EMPTY_PARTS_VERSION}; the header says {self.version}")
            return []
        if len(path) == _MAX_READ_NESTING:  # deeper, `load` runs out of Python's stack
            self.fail("structure", f"nests more than {_MAX_READ_NESTING} levels deep")
        if isinstance(node, dict):
            out = []
            for key in sorted(node, key=str):
                if not isinstance(key, str):
                    self.fail(field, f"dict key {_short(key)} is not a string")
                out += self.parse_structure(node[key], f"{field}.{key}", path + (key,))
            return out
        if isinstance(node, list):
            out = []
            for i, item in enumerate(node):
                out += self.parse_structure(item, f"{field}[{i}]", path + (i,))
            return out
        self.fail(field, f"expected a feature name, a mapping, a list or null, found "
                         f"{_short(node)}")

    def parse_feature(self, name, raw, path) -> _Feature:
        field = f"features.{name}"
        if not isinstance(raw, dict):
            self.fail(field, f"expected a mapping, found {_short(raw)}")
        dtype_name = self.get(raw, "dtype", f"{field}.dtype", str)
        dtype = _DTYPES.get(dtype_name)
        if dtype is None:
            self.fail(f"{field}.dtype", f"unknown dtype {_short(dtype_name)}; known: "
                                        f"{', '.join(_DTYPES)}")
        enum = self.get(raw, "dtype_enum", f"{field}.dtype_enum", int, optional=True)
        if enum is not None and enum != dtype.tf_dtype.as_datatype_enum:
            self.fail(f"{field}.dtype_enum", f"{enum} does not match dtype {dtype_name} "
                                             f"({dtype.tf_dtype.as_datatype_enum})")
        if dtype.tf_dtype.is_quantized and self.version < _QUANTIZED_VERSION:
            self.fail(f"{field}.dtype", f"{dtype_name} needs format version "
                                        f"{_QUANTIZED_VERSION}; the header says {self.version}")
        header_path = self.get(raw, "path", f"{field}.path", list)
        if tuple(header_path) != path:
            self.fail(f"{field}.path", f"{_short(header_path)} does not match its place in "
                                       f"'structure' ({_short(list(path))})")
        sparse = self.get(raw, "sparse", f"{field}.sparse", bool, optional=True, default=False)
        if sparse and self.version < _SPARSE_VERSION:
            self.fail(f"{field}.sparse", f"sparse features need format version "
                                         f"{_SPARSE_VERSION}; the header says {self.version}")
        shape = self.parse_shape(self.get(raw, "shape", f"{field}.shape", object),
                                 f"{field}.shape", sparse)
        encoding = self.get(raw, "encoding", f"{field}.encoding", str)
        if encoding not in _LEGAL_ENCODINGS[dtype_name]:
            legal = sorted(_LEGAL_ENCODINGS[dtype_name])
            self.fail(f"{field}.encoding", f"{_short(encoding)} cannot hold {dtype_name}; "
                                           f"expected one of {legal}")
        if sparse:
            for key in ("ragged_rank", "row_splits_dtype", "tensor_name"):
                if key in raw:
                    self.fail(f"{field}.{key}", "a sparse feature has none")
            if not shape:
                self.fail(f"{field}.shape", "a sparse feature needs a rank of 1 or more")
            return _Feature(name, path, dtype, shape, encoding, sparse=True)
        ragged_rank = self.get(raw, "ragged_rank", f"{field}.ragged_rank", int, optional=True,
                               default=0)
        if not 0 <= ragged_rank < max(len(shape), 1):
            self.fail(f"{field}.ragged_rank", f"must be in 0..{len(shape) - 1}, found "
                                              f"{ragged_rank}")
        ragged = "ragged_rank" in raw
        if not ragged and "row_splits_dtype" in raw:  # else a dense [None] loaded as ragged
            self.fail(f"{field}.row_splits_dtype", "only a ragged feature (one with a "
                                                   "ragged_rank) has row splits")
        splits = self.get(raw, "row_splits_dtype", f"{field}.row_splits_dtype", str,
                          optional=True, default="int64")
        if splits not in ("int32", "int64"):
            self.fail(f"{field}.row_splits_dtype", f"expected int32 or int64, found "
                                                   f"{_short(splits)}")
        tensor_name = self.get(raw, "tensor_name", f"{field}.tensor_name", str, optional=True)
        if ragged and tensor_name is not None:
            self.fail(f"{field}.tensor_name", "a ragged tensor's spec has no name")
        feature = _Feature(name, path, dtype, shape, encoding, ragged_rank, splits, ragged,
                           tensor_name)
        if ragged_rank and None in feature.inner_shape:
            self.fail(f"{field}.shape", "dims after the ragged dims must be known")
        if ragged and not shape:  # as save refuses them
            self.fail(f"{field}.shape", "a ragged tensor needs a dim")
        if ragged and not ragged_rank and None in shape[1:]:
            self.fail(f"{field}.shape", "with ragged_rank 0 only the first dim may be unknown")
        self.check_size(f"{field}.shape", shape,
                        1 if dtype.name == "string" else dtype.tf_dtype.size)
        return feature

    def check_size(self, field: str, shape: tuple, itemsize: int):
        """The known dims' values, at least `itemsize` bytes each, must fit in a record, beside
        their key and tags at least."""
        known = [d for d in shape if d is not None]
        if math.prod(known) * itemsize >= _MAX_RECORD_BYTES:
            self.fail(field, f"{list(shape)} is larger than a record can hold (2 GiB)")

    def parse_shape(self, raw, field, sparse: bool = False, most_rank: int = 32) -> tuple:
        """A shape's dims: each at most what a record holds, or for a sparse feature (whose
        records hold only its values) what int64 holds; at most `most_rank` of them."""
        if not isinstance(raw, list) or not all(
            d is None or (_is_kind(d, int) and d >= 0) for d in raw
        ):
            self.fail(field, f"expected a list of dims, each a non-negative integer or null "
                             f"(unknown), found {_short(raw)}")
        if len(raw) > most_rank:
            self.fail(field, f"rank {len(raw)} is more than {most_rank}")
        if sparse and any(d is not None and d >= 2**63 for d in raw):
            self.fail(field, f"{_short(raw)} has a dim larger than int64 holds")
        if not sparse and any(d is not None and d > _MAX_RECORD_BYTES for d in raw):
            self.fail(field, f"{_short(raw)} has a dim larger than a record can hold")
        return tuple(raw)

    def parse_shard(self, raw, i) -> _Shard:
        field = f"shards[{i}]"
        if not isinstance(raw, dict):
            self.fail(field, f"expected a mapping, found {_short(raw)}")
        file = self.get(raw, "file", f"{field}.file", str)
        if not _plain_file_name(file):
            self.fail(f"{field}.file", f"expected a plain file name, found {_short(file)}")
        count = self.get(raw, "num_records", f"{field}.num_records", int)
        size = self.get(raw, "num_bytes", f"{field}.num_bytes", int)
        if count < 0 or size < 0:
            self.fail(field, "num_records and num_bytes must be >= 0")
        return _Shard(file, count, size)

    def parse_legacy(self, raw, tfrecord_base) -> _Header:
        """Headers of the original module: `{key: {shape: [...], dtype: <tf.DType enum>}}`."""
        if not raw:
            raise HeaderError(f"{self.source}: not a valid header: it is empty")
        # Where any entry is a feature's, the others are named where they are not
        if not any(isinstance(v, dict) and ("dtype" in v or "shape" in v) for v in raw.values()):
            raise HeaderError(f"{self.source}: not a valid header: expected 'format: "
                              f"{FORMAT_NAME}' or an original-module header")
        features = []
        for key in sorted(raw, key=str):
            field = str(key)
            value = raw[key]
            if not isinstance(key, str):  # `yes` or `2024` unquoted, say
                kind = type(key).__name__
                self.fail(field, f"a feature name must be a string, not a"
                                 f"{'n' if kind[:1] in 'aeiou' else ''} {kind}: YAML reads it "
                                 "as one unquoted; quote it ('...')")
            if not isinstance(value, dict):
                self.fail(field, f"expected a mapping of 'shape' and 'dtype', found "
                                 f"{_short(value)}")
            enum = self.get(value, "dtype", f"{field}.dtype", int)
            dtype = _DTYPES_BY_ENUM.get(enum)
            if dtype is None:
                self.fail(f"{field}.dtype", f"unknown tf.DType enum {enum}")
            # up to NumPy 2's 64 dims: the module wrote what NumPy held
            shape = self.parse_shape(self.get(value, "shape", f"{field}.shape", object),
                                     f"{field}.shape", most_rank=64)
            if None in shape:
                self.fail(f"{field}.shape", "the original format needs fully known shapes")
            if dtype.name == "string":
                encoding = "bytes"
            elif dtype.tf_dtype.is_floating:
                encoding = "float"
            elif dtype.tf_dtype.is_integer or dtype.name == "bool":
                encoding = "int64"
            else:
                self.fail(f"{field}.dtype", f"{dtype.name} was not saveable by the original "
                                            "module")
            feature = _Feature(key, (key,), dtype, shape, encoding)
            # By what its records hold: float64 as float32, integers as varints
            self.check_size(f"{field}.shape", shape, _least_value_bytes(feature))
            features.append(feature)
        least = _least_record_bytes(features)
        if least > _MAX_RECORD_BYTES:
            raise HeaderError(f"{self.source}: not a valid header: its features take at least "
                              f"{least:,} bytes a record, more than a record can hold (2 GiB)")
        # No block size in this header: load parses about _TARGET_BLOCK_BYTES at once, and at
        # most 256 records (blocks of 256 made 3 GB of 12 MB images)
        block = _records_per_block(least, 256)
        shard = _Shard(tfrecord_base or "", None, None)
        return _Header(tuple(features), {f.name: f.name for f in features}, None, (shard,),
                       None, block, "sequential", 0)


def _dealt_counts(num_records: int, block: int, num_shards: int) -> list[int]:
    """Each file's records where blocks of `block` records go to the files in turn."""
    full, rest = divmod(num_records, block)
    counts = [(full // num_shards + (i < full % num_shards)) * block for i in range(num_shards)]
    counts[full % num_shards] += rest
    return counts


def _plain_file_name(name: str) -> bool:
    """Whether a header may name this record file: a printable name in the header's folder,
    with no path in it (nor a backslash, a separator on Windows)."""
    return bool(name) and "/" not in name and "\\" not in name and name not in (".", "..") \
        and name.isprintable()


def _deepest_part(header: _Header) -> tuple[str, int]:
    """The deepest part of the header's structure, as a message names it (its feature, or a
    part with no tensor: None, {} or ()), and how many levels deep it lies (a None may lie
    deeper than Python's stack: `_structure_leaves`). Of parts as deep, the first in the
    structure's order, as of features (the first in flatten order)."""
    deepest = max(header.features, key=lambda f: len(f.path))
    empty = max(((node, path) for node, path in _structure_leaves(header.structure)
                 if _no_tensor(node)), key=lambda part: len(part[1]), default=None)
    if empty is not None and len(empty[1]) > len(deepest.path):
        kind = "None" if empty[0] is None else "{}" if isinstance(empty[0], dict) else "()"
        return (f"the part with no tensor at {_short(_feature_name(empty[1]))} ({kind})",
                len(empty[1]))
    return f"feature {_short(deepest.name)}", len(deepest.path)


def _check_reads_back(header: _Header, tfrecord_path: str):
    """SchemaError unless `load` reads this header, as `save` would write it, back to the same
    schema: what the header format cannot hold (a dim past 2**31 - 1, a rank past 32, a
    component larger than a record can hold) is refused before anything is written."""
    key = (header.schema(), header.block_records)
    if key in _READ_BACK:
        return
    source = f"{tfrecord_path}: nothing was written: the header"
    deepest, depth = _deepest_part(header)
    if depth > _MAX_NESTING:
        raise SchemaError(f"{source} cannot hold {deepest}: its element "
                          f"structure nests {depth} levels deep, more than "
                          f"{_MAX_NESTING}")
    try:
        text = _header_text(header)
        back = _HeaderParser(source).parse(
            yaml.load(text.encode(), Loader=_YAML_LOADER), _basename(tfrecord_path))
    except HeaderError as e:
        raise SchemaError(f"{e} (load could not read it back)") from None
    except (yaml.YAMLError, ValueError) as e:  # a lone surrogate in a key, say
        reason = _yaml_reason(e)
        raise SchemaError(f"{source} could not be written as UTF-8 YAML: {reason}") from None
    except RecursionError:  # PyYAML recurses through nested dicts and tuples
        deepest, depth = _deepest_part(header)
        raise SchemaError(f"{source} cannot hold {deepest}: its element "
                          f"structure nests {depth} levels deep") from None
    problem = _beyond_header_limits(text.encode(), header)  # its features' part of it: checked
    if problem:  # again at the end, with every record file listed (`_write_header`)
        raise SchemaError(f"{source} {problem}")
    if back.schema() != header.schema():
        changed = [f.name for f, r in zip(header.features, back.features) if f != r]
        what = f"feature {changed[0]!r}" if changed else "the element structure"
        raise SchemaError(f"{source} would not read back {what} as saved")
    if len(_READ_BACK) >= 256:
        _READ_BACK.clear()
    _READ_BACK.add(key)


_READ_BACK: set = set()  # what _check_reads_back passed: its keys


def _least_record_bytes(features) -> int:
    """The least number of bytes a record holds for the features' values (fixed shapes only),
    not counting its framing."""
    return sum(_fixed_bytes(f) for f in features)


def _fixed_bytes(feature: _Feature) -> int:
    """The least number of bytes one record holds for this feature's values (0 if unknown)."""
    if feature.kind != "fixed":
        return 0
    return math.prod(feature.shape) * _least_value_bytes(feature)


def _least_value_bytes(feature: _Feature) -> int:
    """The least number of bytes one of the feature's values takes in a record."""
    return {"float": 4, "raw": _raw_size(feature), "int64": 1, "bytes": 2}[feature.encoding]


def _is_kind(value, kind) -> bool:
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def _integer(value) -> int | None:
    """An integer argument (NumPy's too, not a bool) as a Python int; None for anything else."""
    if isinstance(value, (bool, np.bool_)) or not hasattr(value, "__index__"):
        return None
    try:
        return value.__index__()
    except (TypeError, AttributeError):  # an eager tensor of floats, an array of one int
        return None


def _check_not_forked(function: str):
    """SuperSerialError where this process was forked from one whose TensorFlow runtime had
    started: TensorFlow's calls there (a traced function's, a large concat's) wait forever for
    thread pools that stayed in the parent, and save and load hung (helper-82)."""
    if _FORKED_AFTER_TF:
        raise SuperSerialError(
            f"{function}() cannot run in this process: it was forked from one whose TensorFlow "
            "runtime had started (as multiprocessing's 'fork' start method does, the default "
            "on Linux before Python 3.14), where TensorFlow waits forever for thread pools "
            "that stayed in the parent. Start it with multiprocessing.get_context('spawn') or "
            "'forkserver', or fork before TensorFlow runs anything")


def _runtime_started() -> bool:
    """Whether TensorFlow's eager context, with its thread pools, has started; right after a
    fork, whether it had in the parent (where it cannot tell, yes)."""
    try:
        from tensorflow.python.eager import context
        return context.context()._context_handle is not None
    except Exception:  # noqa: BLE001 -- a private attribute: any TensorFlow may lack it
        return True


def _note_fork():
    global _FORKED_AFTER_TF
    _FORKED_AFTER_TF = _FORKED_AFTER_TF or _runtime_started()


# Whether this process was forked from one whose TensorFlow runtime had started. Also where
# that was before this module was imported: the `super_serial` package imports it on first
# use, and notes such a fork itself.
_FORKED_AFTER_TF = bool(getattr(sys.modules.get(__name__.rpartition(".")[0]),
                                "_forked_after_tf", False))
if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_note_fork)


def _check_eager(function: str):
    """SuperSerialError where `function` (save, verify: each iterates a dataset in Python) is
    called inside a tf.function or graph, or where the program turned eager execution off (it
    said "call it outside" then, where there is no outside; helper-98). TensorFlow tells a
    graph (`with tf.Graph().as_default()`) from that only by a private flag."""
    if not tf.executing_eagerly():
        if not tf.compat.v1.executing_eagerly_outside_functions():
            raise SuperSerialError(
                f"{function}() needs TensorFlow 2's eager execution, which is off here: call it "
                "outside any graph, where the program has not turned it off "
                "(tf.compat.v1.disable_eager_execution() or disable_v2_behavior()); load() "
                "works in a graph")
        raise SuperSerialError(f"{function}() runs eagerly (in a script), not inside a "
                               "tf.function or graph; call it outside")


def _not_traced(value, name: str):
    """TypeError where an argument that shapes the pipeline is a tensor of a graph being
    traced, whose value is not known while the pipeline is built."""
    if tf.is_symbolic_tensor(value):
        raise TypeError(f"{name} must be a Python value, known when the dataset is built, "
                        f"not a tensor of the function being traced ({value!r})")


def _count(value, name: str) -> int | None:
    """An argument that counts something, as a Python int: a positive integer below 2**63
    (TensorFlow's counts are int64), or None; ValueError naming the argument otherwise."""
    if value is None:
        return None
    _not_traced(value, name)
    number = _integer(value)
    if number is None or not 1 <= number < 2**63:
        raise ValueError(f"{name} must be a positive integer below 2**63 or None, got {value!r}")
    return number


def _flag(value, name: str, default: bool | None = None) -> bool:
    """A yes/no argument as a bool (NumPy's bools too); None means `default` where there is
    one; ValueError naming the argument otherwise."""
    if value is None and default is not None:
        return default
    _not_traced(value, name)
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def _kind_name(kind) -> str:
    return {int: "an integer", str: "a string", list: "a list", dict: "a mapping",
            bool: "true or false"}[kind]


def _printable(text: str) -> str:
    """`text` with what does not print (a newline in a feature name, say) escaped as `repr`
    escapes it, so that a message stays on one line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _named(name: str) -> str:
    """How messages name a feature: `feature 'a/b'`, on one line (`_printable`)."""
    return f"feature '{_printable(name)}'"


def _short(value) -> str:
    try:
        text = repr(value)
    except (RecursionError, ValueError):  # a hand-edited header's value: see _BoundedRepr
        text = _BoundedRepr().repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _BoundedRepr(reprlib.Repr):
    """`repr` for what `repr` cannot show: lists nested about 1,000 deep (RecursionError) are
    shown 6 levels deep, and ints of more digits than Python writes out in decimal (a header's
    `0xfff...`: ValueError, sys.get_int_max_str_digits) in hex."""

    def __init__(self):
        super().__init__()
        self.maxlevel = 6
        self.maxlist = self.maxtuple = self.maxdict = self.maxset = 60
        self.maxstring = self.maxlong = self.maxother = 200

    def repr_int(self, x, level):
        try:
            return super().repr_int(x, level)
        except ValueError:
            return hex(x)


# --------------------------------------------------------------------------------------------
# Codecs: numpy encoders that build serialized tf.train.Example bytes for a whole batch at once.
# Their TensorFlow decoders (`_Decoder`, `_raw_fixed`, `_raw_ragged`, `_bitcast`) are under
# Reading, where the parse specs are built. Encode and decode of each encoding mirror each
# other; the dtype table above picks the encoding for both.
# --------------------------------------------------------------------------------------------
#
# Wire format of one record (protobuf): Example{1: Features{1: repeated FeatureEntry{1: key,
# 2: Feature{1: BytesList | 2: FloatList | 3: Int64List}}}}. Entries are written sorted by key.
# FloatList and Int64List values are packed; raw values are one BytesList entry.

_STORED = {"int64": tf.int64, "float": tf.float32, "bytes": tf.string, "raw": tf.string}
_LIST_TAG = {"bytes": 0x0A, "raw": 0x0A, "float": 0x12, "int64": 0x1A}  # Feature's oneof fields
# Strings a row (on average) from which TensorFlow encodes the lists (`_tf_lists`): the
# break-even against Python's strings, measured for 4,096 rows (3.4 against 2.9 ms at 4).
# Integer lists went there too from 64 values a row until 2026-12-05; one Int64List of a whole
# batch's values (`_proto_varints`) took 40-50% less time than a message a row, which
# encode_proto pads to each part's longest (benchmarks/NOTES.md).
_TF_LIST_STRINGS = 4
_ENCODE_PARTS = max(1, min(8, os.cpu_count() or 1))  # parts it encodes them in, one a core
# Rows at least this wide are written from views of the batch (`_records`), not joined
_WIDE = 256
# Strings, one a row, this long on average are written as they are (`_Strings`). Saves of
# 50,000 (and a label) against joining them: 64 bytes 180 against 150-163 ms, 128 bytes 172
# against 160 and 213 against 231, 200 bytes 200-219 against 268-286, 300 bytes 219-242
# against 325-335
_LONG_STRING = 128


class _Col:
    """One column of byte strings, a row per record: a 2-D uint8 array when every row has the
    same width, else the rows' bytes concatenated plus their lengths."""

    __slots__ = ("data", "lengths")

    def __init__(self, data: np.ndarray, lengths: np.ndarray | None = None):
        self.data = data
        self.lengths = lengths  # None: fixed width, data is [rows, width]

    @property
    def fixed(self) -> bool:
        return self.lengths is None

    def row_lengths(self, rows: int) -> np.ndarray:
        if self.fixed:
            return np.full(rows, self.data.shape[1], np.int64)
        return self.lengths


class _Strings(_Col):
    """A column of one buffer a row, kept as the buffers themselves (`data` is their list):
    long byte strings (`_LONG_STRING`), or read-only NumPy rows of float or raw values taken
    out one by one (`_rows_one_by_one`). `_records` writes them where they lie instead of
    copying them into one buffer."""

    __slots__ = ()


class _StringLists(_Strings):
    """A `_Strings` column of a tuple of buffers a row: a list of long strings, each string's
    field header and then the string itself (`_string_lists`). `_records` lays them out in
    the row's record."""

    __slots__ = ()


def _const(value: bytes, rows: int) -> _Col:
    return _Col(np.broadcast_to(np.frombuffer(value, np.uint8), (rows, len(value))))


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _varints(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Protobuf varints of integers as int64 (negative ones take 10 bytes).

    Returns the bytes of all varints in order and each varint's length (uint8). Values below
    128 are their own varints, in the values' own width.
    """
    return _unsigned_varints(*_unsigned(values))


def _unsigned(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Integers (or bools) as the unsigned ints their varints encode: of their own width, or
    int64's two's complement where any is negative; and the largest of them."""
    if values.dtype.kind == "b":
        values = values.view(np.uint8)
    elif values.dtype.kind == "i":
        # One pass over the values, not a `min()` and a `max()` (about 1 ms each for a read of
        # 8,192 lists of about 500 token ids): viewed as unsigned, the largest has its sign
        # bit set if any value is negative, and is then the least negative one.
        bits = 8 * values.dtype.itemsize
        unsigned = values.view(f"u{values.dtype.itemsize}")
        top = int(unsigned.max()) if values.size else 0
        if top >> (bits - 1):  # as int64's two's complement: the same value, as uint64
            return (values.astype(np.int64, copy=False).view(np.uint64),
                    top - (1 << bits) + (1 << 64))
        return unsigned, top
    return values, int(values.max()) if values.size else 0


def _unsigned_varints(values: np.ndarray, top: int) -> tuple[np.ndarray, np.ndarray]:
    """`_varints` of `_unsigned`'s values, the largest `top`."""
    if top < 0x80:
        return values.astype(np.uint8, copy=False), _one_each(values.size, 1)
    most = (top.bit_length() + 6) // 7  # bytes of the longest varint
    if _one_length(values, top, most):
        return _uniform_varints(values, most), _one_each(values.size, most)
    if top >= _VARINT_TABLE and _PROTO_VALUES <= values.size <= _MAX_PROTO_VALUES:
        lengths = _varint_lengths(values, most)
        return _proto_varints(values, int(lengths.sum(dtype=np.int64))), lengths
    if most <= 8:  # each varint in one word, a slice of the values at a time
        encode, step = ((_table_varints, _TABLE_SLICE) if top < _VARINT_TABLE
                        else (_word_varints, _VARINT_SLICE))
        pieces = [encode(values[i : i + step], most) for i in range(0, values.size, step)]
        if len(pieces) == 1:
            return pieces[0]
        return np.concatenate([p[0] for p in pieces]), np.concatenate([p[1] for p in pieces])
    lengths = _varint_lengths(values, most)  # 9 or 10 bytes: byte by byte
    groups = np.empty((values.size, most), np.uint8)  # 7 bits a byte, low bits first
    present = np.empty((values.size, most), bool)
    for k in range(most):
        groups[:, k] = (values >> (7 * k)) & 0x7F
        present[:, k] = lengths > k
    groups[:, :-1] |= present[:, 1:].view(np.uint8) << 7  # "more bytes follow"
    return np.compress(present.ravel(), groups.ravel()), lengths


def _one_each(count: int, size: int) -> np.ndarray:
    """The lengths of `count` varints of `size` bytes each, as a broadcast of one value (no
    memory), which `_group_rows` sums by the rows' counts instead of value by value."""
    return np.broadcast_to(np.uint8(size), (count,))


def _one_length(values: np.ndarray, top: int, most: int) -> bool:
    """Whether `_unsigned`'s values (the largest `top`, whose varint takes `most` bytes) all
    have varints as long as each other's, of 3 bytes or more (`_uniform_varints`):
    timestamps, negative numbers (10 bytes), ids of a narrow range. Smaller ones are looked
    up in `_varint_table`."""
    return top >= _VARINT_TABLE and int(values.min()) >> 7 * (most - 1) > 0


def _proto_varints(values: np.ndarray, size: int) -> np.ndarray:
    """`_varints` of unsigned values (`size` bytes of them) by TensorFlow: encode_proto writes
    all of them as one Int64List, whose packed field holds them after its tag and length."""
    as_int64 = values.view(np.int64) if values.dtype.itemsize == 8 else values.astype(np.int64)
    message = _one_list_encoder()(tf.constant(as_int64)).numpy()
    return np.frombuffer(message, np.uint8)[len(message) - size:]


@functools.lru_cache(maxsize=1)
def _one_list_encoder():
    """A function to one Int64List message holding every value of a vector of int64."""
    def encode(values):
        count = tf.reshape(tf.size(values, tf.int32), [1, 1])
        return tf.io.encode_proto(count, [values[None]], ["value"], "tensorflow.Int64List")[0]

    return tf.function(encode, autograph=False,
                       input_signature=[tf.TensorSpec([None], tf.int64)])


def _uniform_varints(values: np.ndarray, most: int) -> np.ndarray:
    """The varints of unsigned values that each take `most` bytes (`_one_length`), one after
    the other: byte k of each holds bits 7k to 7k + 6 of its value, and the "more bytes follow"
    bit but in the last. A slice of the values at a time (`_UNIFORM_SLICE`)."""
    out = np.empty((values.size, most), np.uint8)
    for start in range(0, values.size, _UNIFORM_SLICE):
        part, varints = values[start:start + _UNIFORM_SLICE], out[start:start + _UNIFORM_SLICE]
        for k in range(most):  # the low byte of the value shifted, 7 bits of it used
            np.bitwise_or((part >> 7 * k).astype(np.uint8), 0x80 if k < most - 1 else 0,
                          out=varints[:, k])
    return out.reshape(-1)


def _varint_lengths(values: np.ndarray, most: int) -> np.ndarray:
    """Each unsigned value's varint length in bytes (uint8), none longer than `most`."""
    lengths = np.ones(values.size, np.uint8)
    for k in range(1, most):
        lengths += values >= (1 << (7 * k))
    return lengths


# Values `_word_varints` encodes at a time, so that its temporaries stay in the CPU's caches
# (1.25 million token ids: 10-14 ms in slices of 65,536, about 24 ms in one)
_VARINT_SLICE = 1 << 16
# Varints of values below this (3 bytes at most: token ids, pixels, small counts) are looked up
# in a table (`_table_varints`): 1.25 million token ids below 30,000 took 8.3 ms against 14-16
_VARINT_TABLE = 1 << 16
# Values `_table_varints` encodes at a time. Each of its temporaries then stays under glibc's
# 128 KiB mmap threshold (np.compress's index array, 8 bytes for each byte kept, is the
# largest), so that it reuses memory instead of faulting fresh pages in. Where that threshold
# had not moved up, saves of 2,500 lists of about 500 token ids faulted 1,480-2,700 pages in
# slices of 4,096 against 4,750-10,500 in slices of 8,192-65,536 (36.5-37.4 against 38.8-44.5
# ms); with no faults, 1.25 million ids took 10.7 ms against 9.3-9.8 in 8,192-16,384.
_TABLE_SLICE = 1 << 12
# Values `_uniform_varints` encodes at a time: 64 KiB of uint64 temporaries. 320,000 timestamps
# (9 bytes each) took 2.2-2.5 ms in NumPy this way, 4.7 ms in `_proto_varints`
_UNIFORM_SLICE = 1 << 13
# Values from `_VARINT_TABLE` up whose varints differ in length go to TensorFlow's encode_proto
# (`_proto_varints`) from this many a batch: its call costs about 0.14 ms, and from there it is
# the faster (320,000 random int64: 7.0 against 13.4 ms; below 2**40: 4.4 against 6.0; 65,536
# below 2**40: 0.93 against 0.94). At most `_MAX_PROTO_VALUES`, as a message stays under 2 GiB.
_PROTO_VALUES = 1 << 16
_MAX_PROTO_VALUES = (2**31 - 16) // 10
# By a varint's length n: its "more bytes follow" bits
_MORE_BITS = [sum(0x80 << 8 * i for i in range(n - 1)) for n in range(9)]


def _word_varints(values: np.ndarray, most: int) -> tuple[np.ndarray, np.ndarray]:
    """`_varints` of unsigned values of at most `most` (<= 8) varint bytes: each varint laid
    out in the little-endian bytes of one word, then the bytes it leaves unused dropped."""
    return _drop_unused(*_varint_words(values.astype(np.uint32 if most <= 4 else np.uint64),
                                       most))


def _table_varints(values: np.ndarray, most: int) -> tuple[np.ndarray, np.ndarray]:
    """`_word_varints` of values below `_VARINT_TABLE`, their words looked up in a table."""
    if values.dtype.itemsize == np.dtype(np.intp).itemsize:  # unsigned: all below 65,536
        index = values.view(np.intp)
    else:
        index = values.astype(np.intp)
    return _drop_unused(*(column[index] for column in _varint_table()))


def _varint_words(x: np.ndarray, most: int) -> tuple[np.ndarray, np.ndarray]:
    """Each value's varint in the little-endian bytes of a word of x's dtype, its other bytes
    0: (the words, the varints' lengths)."""
    lengths = _varint_lengths(x, most)
    out = x & 0x7F
    group = np.empty_like(x)
    for k in range(1, most):  # 7 bits a byte, low bits first
        np.left_shift(x, k, out=group)
        group &= 0x7F << (8 * k)
        out |= group
    out |= np.array(_MORE_BITS[: most + 1], x.dtype)[lengths]
    return out, lengths


def _drop_unused(words: np.ndarray, lengths: np.ndarray) -> tuple:
    """`_varint_words`' words as varints: (their used bytes in order, the lengths). A varint
    uses its word's first byte (0 for the value 0) and its other bytes that are not 0: all but
    its last byte carry the "more bytes follow" bit, and its last the value's top bits."""
    data = _little_endian_bytes(words)
    used = data != 0
    used[:: words.dtype.itemsize] = True
    return np.compress(used, data), lengths


@functools.lru_cache(maxsize=1)
def _varint_table() -> tuple[np.ndarray, np.ndarray]:
    """`_varint_words` of every value below `_VARINT_TABLE` (320 KiB)."""
    return _varint_words(np.arange(_VARINT_TABLE, dtype=np.uint32), 3)


def _varint_col(lengths: np.ndarray) -> _Col:
    """The varint of each length (none negative), a row each. `_wrap` makes one for each level
    of each feature's message, most of them under 128: a byte each, from the largest alone
    (20,000 boxes beside their labels, read 1,024 at a time, 21 of these a read: 6-9% of their
    save)."""
    top = int(lengths.max()) if lengths.size else 0
    if top < 0x80:
        return _Col(lengths.astype(np.uint8).reshape(-1, 1))
    data, sizes = _unsigned_varints(np.asarray(lengths, np.int64).view(np.uint64), top)
    if sizes.size and (sizes == sizes[0]).all():
        return _Col(data.reshape(len(lengths), -1))
    return _Col(data, sizes.astype(np.int64))


def _wrap(prefix: bytes, pieces: list, rows: int) -> list:
    """`prefix`, then the varint length of the pieces, then the pieces: a length-delimited field."""
    return [_const(prefix, rows), _varint_col(_total_lengths(pieces, rows))] + pieces


def _total_lengths(pieces: list, rows: int) -> np.ndarray:
    """Each row's bytes in all the pieces: the fixed ones' widths summed once, then the others'
    lengths (`_wrap` sums each level of a record again: an array a fixed piece cost 5-8% of
    the save of 20,000 boxes beside their labels, read 1,024 at a time)."""
    total = np.full(rows, sum(p.data.shape[1] for p in pieces if p.fixed), np.int64)
    for piece in pieces:
        if not piece.fixed:
            total += piece.lengths
    return total


def _group_rows(data: np.ndarray, item_lengths: np.ndarray, splits: np.ndarray | None,
                rows: int) -> _Col:
    """Regroups a ragged column of items into rows: row i holds items `splits[i]:splits[i+1]`,
    or an equal share of the items when `splits` is None."""
    if item_lengths.size and item_lengths.strides == (0,):  # one length for all (`_one_each`)
        counts = np.diff(splits) if splits is not None else np.full(rows, item_lengths.size // rows)
        return _Col(data, counts.astype(np.int64) * int(item_lengths[0]))
    if splits is None:
        if not item_lengths.size:
            return _Col(data, np.zeros(rows, np.int64))
        return _Col(data, item_lengths.reshape(rows, -1).sum(axis=1, dtype=np.int64))
    lengths = np.zeros(rows, np.int64)
    starts = splits[:-1]
    begun = starts < splits[-1]  # all rows but the empty ones at the end
    # each row's sum of item lengths (reduceat gives an empty row the next item: zeroed), of
    # varint lengths (uint8) in the narrowest of uint16 and uint32 that no row's sum can pass:
    # reduceat converts every length to the sum's dtype first (in int64 rather than uint32,
    # 2,500 lists of about 500 token ids saved 2-4 ms later; in uint32 rather than uint16, a
    # save's reads of 8,192 of them were summed in 5.2 ms each against 3.0)
    dtype = np.int64
    if item_lengths.dtype == np.uint8:
        most = int(np.diff(splits).max(initial=0)) * int(item_lengths.max(initial=0))
        dtype = np.uint16 if most < 1 << 16 else np.uint32 if most < 1 << 32 else np.int64
    lengths[begun] = np.add.reduceat(item_lengths[: splits[-1]], starts[begun], dtype=dtype)
    lengths[starts == splits[1:]] = 0
    return _Col(data, lengths)


# `_concat` places a piece of varying length of at least _MASKED_BYTES that makes at least
# 1 / _MASKED_SHARE of its output through a mask of the bytes the piece owns (a byte for each
# byte of the output) rather than an index for each of the piece's bytes (8 bytes each then, 4
# since `_byte_index`), which grows slow once it leaves the CPU's caches. 8,192 rows (ms,
# index / mask, with the int64 index): 200 of 205 bytes a row 6.8 / 0.81, 50 of 75 3.5 / 0.40,
# 30 of 75 2.1 / 0.38; but 20 of 400 0.34 / 0.69, 11 of 75 0.18 / 0.33 (the tabular workload's
# ids), 9 of 11 0.15 / 0.26.
_MASKED_BYTES = 192 << 10
_MASKED_SHARE = 8
# Outputs of `_concat` up to this size place their bytes by an int32 index, larger ones int64
_INT32_POSITIONS = (1 << 31) - 1


def _fixed_runs_joined(pieces: list) -> list:
    """The pieces, each run of consecutive fixed ones joined into one (fewer to place)."""
    out: list = []
    for fixed, run in itertools.groupby(pieces, key=lambda p: p.fixed):
        run = list(run)
        if fixed and len(run) > 1:
            out.append(_Col(np.concatenate([p.data for p in run], axis=1)))
        else:
            out += run
    return out


def _owned(starts: np.ndarray, lengths: np.ndarray, size: int) -> np.ndarray:
    """A mask of `size` bytes, true where row i's `lengths[i]` bytes from `starts[i]` lie
    (rows in order, none overlapping)."""
    gaps = np.diff(starts, prepend=0)
    gaps[1:] -= lengths[:-1]  # from the end of the last row to the start of this one
    counts = np.empty(2 * len(starts) + 1, np.int64)
    counts[0:-1:2], counts[1::2] = gaps, lengths
    counts[-1] = size - (starts[-1] + lengths[-1] if len(starts) else 0)  # after the last row
    return np.repeat(np.arange(len(counts)) % 2 == 1, counts)


def _concat(pieces: list, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Concatenates the columns row by row: (all rows' bytes, row offsets of length rows + 1)."""
    if all(p.fixed for p in pieces):
        block = np.concatenate([p.data for p in pieces], axis=1)
        return block.reshape(-1), np.arange(rows + 1, dtype=np.int64) * block.shape[1]
    offsets = np.zeros(rows + 1, np.int64)
    np.cumsum(_total_lengths(pieces, rows), out=offsets[1:])
    out = np.empty(int(offsets[-1]), np.uint8)
    position = offsets[:-1].copy()
    index_dtype = np.int32 if out.size <= _INT32_POSITIONS else np.int64
    for piece in _fixed_runs_joined(pieces):
        lengths = piece.row_lengths(rows)
        if (not piece.fixed and piece.data.size >= _MASKED_BYTES
                and piece.data.size * _MASKED_SHARE >= out.size):
            out[_owned(position, lengths, out.size)] = piece.data
        elif piece.data.size:  # an index for each byte
            if piece.fixed:
                width = np.arange(piece.data.shape[1], dtype=index_dtype)
                out[position.astype(index_dtype)[:, None] + width] = piece.data
            else:
                out[_byte_index(position, lengths, piece.data.size, index_dtype)] = piece.data
        position += lengths
    return out, offsets


def _byte_index(position: np.ndarray, lengths: np.ndarray, size: int, dtype) -> np.ndarray:
    """Where each of `size` bytes goes: row i's `lengths[i]` bytes to `position[i]` on (rows in
    order, none overlapping). A step of 1 from byte to byte, summed, with a jump at each
    row's first byte: one array of `dtype` (int32 where positions fit), where a repeat of the
    rows' starts plus a range made two of int64. Allocations of 128 kB or more come fresh
    from the kernel once TensorFlow has run a generator (glibc's trim threshold, README):
    ten float32 lists of 1-40 values a row placed 5,000 rows in 3.7 ms a list so, with 1,636
    page faults, and in 2.1 ms with 412 this way."""
    filled = lengths > 0
    starts, counts = position[filled], lengths[filled]
    index = np.ones(size, dtype)
    firsts = np.cumsum(counts) - counts
    index[0] = starts[0]
    index[firsts[1:]] = starts[1:] - (starts[:-1] + counts[:-1] - 1)
    return np.cumsum(index, dtype=dtype, out=index)


def _little_endian_bytes(values: np.ndarray) -> np.ndarray:
    values = np.ascontiguousarray(values)
    if sys.byteorder != "little" and values.dtype.itemsize > 1:
        values = values.byteswap()
    return values.reshape(-1).view(np.uint8)


def _encode_list(encoding: str, values, splits: np.ndarray | None, rows: int) -> list:
    """The list message (Int64List, FloatList or BytesList) of each row, as columns.

    `values` (a NumPy array, or a tensor of any shape) holds every row's values in order; row i
    owns values `splits[i]:splits[i + 1]` of them flattened (or an equal share of them when
    `splits` is None).
    Mirrored by `_Decoder._parse_specs` and `_raw_fixed` / `_raw_ragged`.

    Long lists of short strings in a tensor are encoded by TensorFlow's encode_proto
    (`_tf_lists`), faster there than Python's strings; strings of `_LONG_STRING` bytes or more
    on average are written as they are (`_Strings`, `_string_lists`); integers by
    `_unsigned_varints`.
    """
    if isinstance(values, list) and encoding in ("float", "raw"):  # rows read one by one
        data = [_read_only(_little_endian_bytes(v)) for v in values]  # written where they lie
        return _wrap(b"\x0a", [_Strings(data, np.diff(splits) * values[0].dtype.itemsize)],
                     rows)
    if isinstance(values, list):  # integers (`_Rows`): a slice of rows at a time (`_slices`)
        values = tf.concat(values, 0)  # tensors, or views of a read merged with them
    if isinstance(values, tf.Tensor):  # of any shape
        if encoding == "bytes" and _long_lists(values, splits, rows):
            return [_tf_lists(values, splits, rows)]
        values = _numpy(values).reshape(-1)
    if encoding in ("float", "raw"):  # one length-delimited field of little-endian bytes
        if encoding == "float":
            values = values.astype(np.float32, copy=False)
        data = _little_endian_bytes(values)
        if splits is None:
            return _wrap(b"\x0a", [_Col(data.reshape(rows, data.size // rows))], rows)
        return _wrap(b"\x0a", [_Col(data, np.diff(splits) * values.dtype.itemsize)], rows)
    if encoding == "int64":  # packed varints of the values as int64
        data, sizes = _unsigned_varints(*_unsigned(values))
        return _wrap(b"\x0a", [_group_rows(data, sizes, splits, rows)], rows)
    # bytes: one length-delimited field per string
    strings = values.tolist()
    sizes = np.fromiter(map(len, strings), np.int64, len(strings))
    one_a_row = splits is None and len(strings) == rows
    if one_a_row and sizes.sum() >= _LONG_STRING * rows > 0:
        # one long string a row (an encoded image, say): no copy into one buffer
        return [_const(b"\x0a", rows), _varint_col(sizes), _Strings(strings, sizes)]
    if sizes.sum() >= _LONG_STRING * len(strings) > 0:  # lists of long strings: no copy either
        return [_string_lists(strings, sizes, splits, rows)]
    fields = [_const(b"\x0a", len(strings)), _varint_col(sizes),
              _Col(np.frombuffer(b"".join(strings), np.uint8), sizes)]
    if one_a_row:  # each row's field is these pieces: laid out once, in the record
        return fields
    data, offsets = _concat(fields, len(strings))
    return [_group_rows(data, np.diff(offsets), splits, rows)]


def _string_lists(strings: list, sizes: np.ndarray, splits: np.ndarray | None,
                  rows: int) -> _StringLists:
    """The BytesList of each row (`_encode_list`) as the strings themselves, each after its
    field header (0x0a and its length): row i holds strings `splits[i]:splits[i + 1]`, or an
    equal share of them when `splits` is None."""
    count = len(strings)
    headers, ends = _concat([_const(b"\x0a", count), _varint_col(sizes)], count)
    lengths = _group_rows(headers, np.diff(ends) + sizes, splits, rows).lengths
    headers, ends = headers.tobytes(), ends.tolist()
    pieces = [None] * (2 * count)
    pieces[0::2] = [headers[a:b] for a, b in zip(ends, ends[1:])]
    pieces[1::2] = strings
    if splits is None:
        splits = np.arange(rows + 1, dtype=np.int64) * (count // rows)
    cut = (2 * splits).tolist()
    return _StringLists([tuple(pieces[a:b]) for a, b in zip(cut, cut[1:])], lengths)


def _long_lists(values: tf.Tensor, splits: np.ndarray | None, rows: int) -> bool:
    """Whether the rows' lists of strings are long (`_TF_LIST_STRINGS` a row on average), and
    about as long as each other: `_tf_lists` pads each of its parts to its longest. Not lists
    of long strings (`_LONG_STRING` bytes on average), which encode_proto would copy four
    times (`_string_lists` writes them as they are)."""
    count = values.shape.num_elements()
    if not rows or count < _TF_LIST_STRINGS * rows:
        return False
    if splits is not None and rows * int(np.diff(splits).max()) > 2 * count:
        return False
    total = tf.reduce_sum(tf.cast(tf.strings.length(values), tf.int64))
    return int(total) < _LONG_STRING * count


def _tf_lists(values: tf.Tensor, splits: np.ndarray | None, rows: int) -> _Col:
    """Each row's BytesList message, the bytes `_encode_list` gives, as a column: encoded by
    TensorFlow (`_list_encoder`)."""
    if splits is None:  # rows as long as each other: a matrix, with nothing to pad
        joined, lengths = _list_encoder(fixed=True)(tf.reshape(values, [rows, -1]))
    else:
        joined, lengths = _list_encoder(fixed=False)(values, splits)
    return _Col(np.frombuffer(joined.numpy(), np.uint8), lengths.numpy().astype(np.int64))


@functools.lru_cache(maxsize=2)
def _list_encoder(fixed: bool):
    """A function to (the rows' BytesList messages joined, their lengths) of a matrix of
    strings (`fixed`), or of (strings, row splits)."""

    def encode_part(lists, sizes):
        return tf.io.encode_proto(sizes, [lists], ["value"], "tensorflow.BytesList")

    def joined(parts):
        messages = tf.concat(parts, 0)
        return tf.strings.reduce_join(messages), tf.strings.length(messages)

    def encode_matrix(values):  # encode_proto takes one core: a part of the rows for each
        count, width = tf.shape(values)[0], tf.shape(values)[1]
        return joined([encode_part(part, tf.fill([tf.shape(part)[0], 1], width))
                       for part in _parts(values, count)])

    def encode_ragged(values, splits):  # the same, each part padded to its longest row
        rows = tf.RaggedTensor.from_row_splits(tf.reshape(values, [-1]), splits, validate=False)
        return joined([encode_part(part.to_tensor(),
                                   tf.cast(part.row_lengths(), tf.int32)[:, None])
                       for part in _parts(rows, rows.nrows())])

    if fixed:
        return tf.function(encode_matrix, autograph=False,
                           input_signature=[tf.TensorSpec([None, None], tf.string)])
    return tf.function(encode_ragged, autograph=False, input_signature=[
        tf.TensorSpec(None, tf.string), tf.TensorSpec([None], tf.int64)])


def _parts(rows, count) -> list:
    """`_ENCODE_PARTS` consecutive slices of the rows, for the encoders' parts."""
    count = tf.cast(count, tf.int64)
    return [rows[count * k // _ENCODE_PARTS:count * (k + 1) // _ENCODE_PARTS]
            for k in range(_ENCODE_PARTS)]


def _encode_streams(feature: _Feature, leaf, rows: int) -> dict:
    """Splits one batched component into its TFRecord keys: {key: (encoding, values, splits)}.

    `leaf` is the batch as `_batches_for_encoding` prepares it. A key's values are its tensor,
    left to `_encode_list` to flatten (or encode in TensorFlow); its splits and the shapes and
    row lengths beside them are NumPy arrays. Mirrors `_decode_feature`.
    """
    if isinstance(leaf, tf.RaggedTensor) and feature.ragged:
        _check_ragged(feature, leaf)
    if feature.sparse:  # its values, its indices and its dense shape, each element's
        values, indices, shapes = leaf
        flat, splits = _flat_and_splits(values)
        index_values, shapes = indices.flat_values.numpy(), shapes.numpy()
        _check_sparse(feature, index_values, np.diff(splits), shapes)
        return {
            feature.name: (feature.encoding, flat, splits),
            feature.indices_key: ("int64", index_values, indices.row_splits.numpy()),
            feature.shape_key: ("int64", shapes.reshape(-1), None),
        }
    if feature.kind == "fixed":
        if isinstance(leaf, tf.RaggedTensor):  # ragged rank 0, batched with a uniform dim
            leaf = leaf.flat_values
        return {feature.name: (feature.encoding, leaf, None)}
    if feature.kind == "varshape":
        if isinstance(leaf, tf.SparseTensor):  # `sparse_batch` of one unknown dim (`_sized_dim`)
            flat = leaf.values
            # Indices are in batch order: each element's count from a binary search
            counts = np.diff(np.searchsorted(np.asarray(leaf.indices)[:, 0], np.arange(rows + 1)))
            splits = np.concatenate([[0], np.cumsum(counts)])
            shapes = _shapes(feature, counts // feature.known_values)
        elif isinstance(leaf, tuple):  # flattened values and shapes
            values, shapes = leaf
            flat, splits = _flat_and_splits(values)
            shapes = shapes.numpy()
        else:  # a ragged batch with one unknown dim: its rows, or given by its flat values
            flat, splits = _flat_and_splits(leaf)
            row_splits = leaf.row_splits if isinstance(leaf, _Rows) else leaf.row_splits.numpy()
            if feature.shape[0] is None:  # its rows (known dims may be 0)
                shapes = _shapes(feature, np.diff(row_splits))
            else:  # values flattened (`_sized_dim`): known dims are not 0
                shapes = _shapes(feature, np.diff(splits) // feature.known_values)
        return {
            feature.name: (feature.encoding, flat, splits),
            feature.shape_key: ("int64", shapes.reshape(-1), None),
        }
    nested = [s.numpy() for s in leaf.nested_row_splits]
    streams = {}
    starts = nested[0]  # rows of each element at the current level
    for level in range(feature.ragged_rank):
        streams[feature.lengths_key(level)] = ("int64", np.diff(nested[level + 1]), starts)
        starts = nested[level + 1][starts]
    inner = math.prod(feature.inner_shape)
    streams[feature.name] = (feature.encoding, leaf.flat_values, starts * inner)
    return streams


def _flat_and_splits(leaf) -> tuple:
    """A batch of rows of one unknown dim (a ragged tensor, or `_Rows`): its values (flat
    values, or the rows' list), and where each row's values start in them, flattened."""
    if isinstance(leaf, _Rows):
        sizes = [math.prod(v.shape) for v in leaf.values]
        return leaf.values, np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
    flat = leaf.flat_values
    return flat, leaf.row_splits.numpy() * math.prod(flat.shape[1:])


def _check_ragged(feature: _Feature, leaf: tf.RaggedTensor):
    """Raises `_WrongShape` where a batch of a ragged component does not have the shape its
    spec gives: flat values of other inner dims, or a known dim of another size. tf.data's
    batch of ragged tensors checks neither (a set_shape after a numpy_function that does not
    hold), and the encoders take both from the spec: such a batch was written unreadable,
    reshaped, or read past the end of its values."""
    inner = feature.shape[feature.ragged_rank + 1:]
    read = tuple(leaf.flat_values.shape[1:])
    if read != inner:
        raise _WrongShape(
            f"feature {_short(feature.name)}: a batch of its elements read with flat values of "
            f"shape {[None, *read]}, not {[None, *inner]}: {_spec_gives(feature)} {_SHAPE_HINT}")
    for level, (known, splits) in enumerate(zip(feature.shape, leaf.nested_row_splits)):
        if known is None:
            continue
        sizes = np.diff(splits.numpy())
        if (sizes != known).any():
            raise _WrongShape(
                f"feature {_short(feature.name)}: an element came with dim {level} of size "
                f"{int(sizes[sizes != known][0])}: {_spec_gives(feature)} {_SHAPE_HINT}")


def _check_sparse(feature: _Feature, indices: np.ndarray, counts: np.ndarray,
                  shapes: np.ndarray):
    """Raises `_WrongShape` where a batch of a sparse component holds an element whose dense
    shape is not the one its spec gives, or an index outside its dense shape: `load`
    would refuse its record. `indices`: every element's, flattened; `counts`: each element's
    number of values."""
    known = np.array([-1 if d is None else d for d in feature.shape], np.int64)
    wrong = ((shapes != known) & (known >= 0)).any(axis=1) | (shapes < 0).any(axis=1)
    if wrong.any():
        raise _WrongShape(
            f"feature {_short(feature.name)}: an element came with dense shape "
            f"{shapes[wrong][0].tolist()}: {_spec_gives(feature)} {_SHAPE_HINT}")
    rank = len(feature.shape)
    bounds = np.repeat(shapes, counts, axis=0).reshape(-1)  # each index's dim
    outside = (indices < 0) | (indices >= bounds)
    if outside.any():
        first = int(np.argmax(outside))  # of the indices; its value is first // rank
        element = int(np.searchsorted(np.cumsum(counts), first // rank, side="right"))
        raise _WrongShape(
            f"feature {_short(feature.name)}: an element has an index outside its dense shape "
            f"{shapes[element].tolist()} (found {int(indices[first])}), which "
            "tf.SparseTensor does not check and load would refuse")


def _shapes(feature: _Feature, extents: np.ndarray) -> np.ndarray:
    """Each row's shape, for a feature with one unknown dim: its known dims, and `extents`."""
    shapes = np.array([d or 0 for d in feature.shape], np.int64)[None].repeat(len(extents), 0)
    shapes[:, feature.shape.index(None)] = extents
    return shapes


def _numpy(tensor) -> np.ndarray:
    array = np.asarray(tensor)  # a view of the tensor's buffer; .numpy() would copy it
    if tensor.dtype == tf.string and array.dtype != object:
        array = array.astype(object)
    return array


def _encode_records(features: list, leaves: list, rows: int) -> tuple[list, np.ndarray]:
    """The serialized tf.train.Example of each row (`_records`), and their sizes in bytes (an
    int64 array), summed from the pieces' row lengths rather than measured record by record."""
    streams = {}
    for feature, leaf in zip(features, leaves):
        streams.update(_encode_streams(feature, leaf, rows))
    entries = []
    for key in sorted(streams, key=lambda k: k.encode()):
        encoding, values, splits = streams[key]
        key_bytes = key.encode()
        feature_message = _wrap(bytes([_LIST_TAG[encoding]]),
                                _encode_list(encoding, values, splits, rows), rows)
        entry = [_const(b"\x0a" + _varint_bytes(len(key_bytes)) + key_bytes, rows)]
        entry += _wrap(b"\x12", feature_message, rows)  # FeatureEntry{1: key, 2: Feature}
        entries += _wrap(b"\x0a", entry, rows)  # Features{1: repeated FeatureEntry}
    example = _wrap(b"\x0a", entries, rows)  # Example{1: Features}
    return _records(example, rows), _total_lengths(example, rows)


def _records(pieces: list, rows: int) -> list:
    """Each row's serialized record: bytes, or a tuple of the pieces it is made of when a wide
    piece (an image, a long list of values) is part of it.

    Runs of narrow pieces are concatenated for all rows at once. Wide pieces, fixed ones at
    least `_WIDE` bytes a row and ones of varying length that average that, stay read-only
    views into the batch's buffer, and `_Strings` (long strings, rows read one by one) stay
    the buffers they are, so that their bytes are copied only when they are written; a row of
    `_StringLists` (lists of long strings) is several of them, laid out in its record.
    `_joined` makes bytes of either kind. Pieces of varying length narrower than that are
    sliced a row as bytes (`_sliced`) where together they make enough of a record.
    """
    sliced = _sliced(pieces, rows)
    segments, run, wide, nested = [], [], False, False
    for piece in pieces + [None]:
        if (piece is None or isinstance(piece, _Strings) or id(piece) in sliced
                or _wide(piece, rows)):
            if run:
                data, offsets = _concat(run, rows)
                data, offsets = data.tobytes(), offsets.tolist()  # slicing bytes is cheapest
                segments.append([data[a:b] for a, b in zip(offsets, offsets[1:])])
                run = []
            if isinstance(piece, _Strings):
                wide, nested = True, nested or type(piece) is _StringLists
                segments.append(piece.data)
            elif id(piece) in sliced:
                segments.append(_cut(piece.data.tobytes(), piece.lengths))
            elif piece is not None:
                wide = True
                flat = np.ascontiguousarray(piece.data).reshape(-1).view()
                flat.flags.writeable = False  # CRC32C wants read-only buffers
                if piece.fixed:
                    width = piece.data.shape[1]
                    segments.append([flat[i * width:(i + 1) * width] for i in range(rows)])
                else:
                    segments.append(_cut(flat, piece.lengths))
        else:
            run.append(piece)
    if not wide:
        return segments[0] if len(segments) == 1 else [b"".join(r) for r in zip(*segments)]
    records = list(zip(*segments))
    if nested:  # a row's list of long strings is a tuple of pieces: laid out in its record
        return [tuple(itertools.chain.from_iterable(
            part if type(part) is tuple else (part,) for part in record)) for record in records]
    return records


def _wide(piece: _Col, rows: int) -> bool:
    """Whether `_records` writes a piece (not `_Strings`) from views of the batch's buffer:
    `_WIDE` bytes a row or more, on average where rows vary."""
    return piece.data.shape[1] >= _WIDE if piece.fixed else piece.data.size >= _WIDE * rows


def _cut(buffer, lengths: np.ndarray) -> list:
    """`buffer` (bytes, or a NumPy view) cut into its consecutive rows of `lengths` bytes."""
    ends = np.cumsum(lengths).tolist()
    return [buffer[a:b] for a, b in zip([0] + ends, ends)]


def _joined(record) -> bytes:
    return record if type(record) is bytes else b"".join(record)


# Pieces of varying length of `_SLICED` to `_WIDE` bytes a row (on average) are sliced a row as
# bytes by `_records`, where those of a batch come to `_SLICED_TOTAL` bytes a row or more. A
# slice and the record's join cost about 0.15 us a row and piece; an index costs about 5 ns a
# byte placed (`_byte_index`, more out of the CPU's caches), and each piece taken out of a
# run splits it. Laying out a batch's records (ms, index / sliced; NOTES, 2026-12-05 17:12
# UTC; 8,192 rows, 5,000 of ten lists, 2,500 bags): ten float32 lists of 1-40 values 30.9 /
# 24.0 and of 1-60 40.0 / 26.1, two of 1-60 11.0 / 9.8, one of 1-100 6.3 / 5.9, sparse bags
# of 1-99 words 3.5 / 2.7; but one list of 1-40 3.1-4.2 / 4.6-5.0, of 1-50 4.4 / 4.9, of 1-60
# 4.9 / 5.3. The index's cost depends on whether its arrays page-fault, which varies from one
# process to the next (the bags: 2.3 / 2.7 in one that did not).
_SLICED = 64
_SLICED_TOTAL = 192


def _sliced(pieces: list, rows: int) -> set:
    """The ids of the pieces `_records` slices a row as bytes (`_SLICED`)."""
    narrow = [p for p in pieces if not isinstance(p, _Strings) and not p.fixed
              and p.data.size >= _SLICED * rows and not _wide(p, rows)]
    if not rows or sum(p.data.size for p in narrow) < _SLICED_TOTAL * rows:
        return set()
    return {id(p) for p in narrow}


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


def save(
    dataset: tf.data.Dataset,
    tfrecord_path,
    header_path=None,
    *,
    num_shards: int | None = None,
    shard_size: int | None = None,
    compression: str | None = None,
    progress: bool = False,
    elements_per_batch: int | None = None,
) -> dict:
    """Saves a dataset as tf.train.Example TFRecords plus a YAML header.

    The save is atomic: records and header go to temporary files beside their destination and
    are renamed into place (header last) only once everything was written. Existing files at
    those paths are overwritten then, and left untouched if the save fails.

    Args:
      dataset: Any `tf.data.Dataset` whose elements are tensors, ragged or sparse tensors,
        alone or in (nested) dicts, tuples and namedtuples, which may also hold parts with
        no tensor (None, empty dicts, tuples and namedtuples) beside the tensors.
      tfrecord_path: Where the records go (any `tf.io.gfile` path). With several shards, the
        files are `<tfrecord_path>-00000-of-NNNNN`.
      header_path: Where the header goes; default `<tfrecord_path>.header.yaml`.
      num_shards: Split the records over this many files (blocks of records dealt round-robin,
        so that `load` restores the order while reading all files in parallel).
      shard_size: Instead of `num_shards`, start a new file once one holds this many bytes of
        records, counted before compression (compressed files come out smaller).
      compression: None, "GZIP" or "ZLIB". The header records it; `load` needs no argument.
      progress: Show a progress line on stderr.
      elements_per_batch: Encode exactly this many elements at a time. By default batches
        come to about 16 MiB: where the element spec's size is a guess because of strings
        (with no unknown shape beside them), or of strings or unknown shapes from a pipeline
        that calls a function for each element (a generator, a map), a few elements are read
        at a time and merged by the bytes they come to; strings beside unknown shapes in
        memory or a cache are batched at most 1,024 elements at a time; otherwise batches
        are sized from the spec, which for each unknown dim assumes 64
        values (numbers beyond about 32 MiB a batch are encoded a slice at a time). Give a
        small number for elements of unknown shape far larger than that which are read
        afresh for each batch (a file cache of long audio clips), whose batches would
        otherwise take that much more memory (`save` warns when a batch passes 64 MiB). The
        files do not change. At most the dataset's size is used; more than 1,048,576
        elements (of a dataset larger than that, or of unknown size) is a ValueError.

    Returns:
      The header that was written, as a dict.

    Raises:
      SchemaError: The dataset holds something super_serial cannot represent, an element
        does not have the shape its element_spec gives, or the header would list more shards
        than fit in the 64 MiB a header may take (nothing is saved then; the message begins
        with the path of the records or of the header, then "nothing was saved" or "nothing
        was written").
      SuperSerialError: Called outside eager mode, or in a process forked after
        TensorFlow's runtime started (where TensorFlow hangs). Or the save failed while
        putting its files in place, and could not rename back the old files it had moved
        aside: the message names them by their hidden names, to be renamed back by hand.
      ValueError: An option or path has an invalid value, the dataset is infinite (its
        cardinality says so), or a file would land on a folder, on another of the save's
        files, or (the header) on a file of records (nothing is written then).
      TypeError: `dataset` is not a `tf.data.Dataset`, or a path is a tensor or of another
        type.
      OSError: Writing, renaming or making a file or folder failed (a full disk, a folder it
        may not write in; nothing is saved then): the error's kind, with a message that
        begins "<tfrecord_path>: nothing was saved: ". TensorFlow's error kinds where
        TensorFlow writes the file or makes the folder (compressed records, headers,
        folders, renames): README, Guarantees.
      Any other: where reading the dataset fails, the error its pipeline raises (an
        `InvalidArgumentError` of a failed `tf.debugging` assertion, say).

    Example:
      >>> ds = tf.data.Dataset.from_tensor_slices({"x": [[1.0, 2.0]], "y": [3]})
      >>> header = save(ds, "data.tfrecord")  # doctest: +SKIP
    """
    if not isinstance(dataset, tf.data.Dataset):
        raise TypeError(f"save() needs a tf.data.Dataset, got {type(dataset).__name__}")
    _check_eager("save")
    _check_not_forked("save")
    compression = _check_compression(compression)
    if num_shards is not None and shard_size is not None:
        raise ValueError("give num_shards or shard_size, not both")
    num_shards = _count(num_shards, "num_shards")
    if num_shards is not None and num_shards > _MAX_SHARDS:
        raise ValueError(f"num_shards={num_shards:,} is more than the {_MAX_SHARDS:,} files a "
                         "save can name (name-00000-of-99999)")
    shard_size = _count(shard_size, "shard_size (bytes)")
    elements_per_batch = _count(elements_per_batch, "elements_per_batch")
    progress = _flag(progress, "progress")
    tfrecord_path = _fspath(tfrecord_path, "tfrecord_path")
    header_path = (_fspath(header_path, "header_path") if header_path is not None
                   else tfrecord_path + HEADER_SUFFIX)  # "" is refused next, as a folder
    name = _basename(tfrecord_path)
    _check_names_a_file(tfrecord_path, header_path)
    if not _plain_file_name(name):
        raise ValueError(f"{tfrecord_path!r}: the records need a plain, printable file name "
                         "(no backslash, nothing non-printable), which the header lists and "
                         "load reads back")
    try:  # (the paths first: the messages below name the records')
        features, skeleton, namedtuples = _schema_from_spec(dataset.element_spec)
    except SchemaError as e:  # a message that names the file, as save's others do
        raise SchemaError(f"{tfrecord_path}: nothing was saved: {e}") from None
    cardinality = int(dataset.cardinality())
    if cardinality == tf.data.INFINITE_CARDINALITY:
        raise ValueError(f"{tfrecord_path}: nothing was saved: the dataset is infinite (e.g. "
                         ".repeat() without a count); save a finite one, e.g. with .take(n)")
    if elements_per_batch and cardinality >= 0:  # tf.data reserves a batch's slots up front
        elements_per_batch = min(elements_per_batch, max(cardinality, 1))
    if elements_per_batch and elements_per_batch > _MAX_ELEMENTS_PER_BATCH:
        raise ValueError(f"elements_per_batch={elements_per_batch:,} is more than save reads "
                         f"at once ({_MAX_ELEMENTS_PER_BATCH:,}) from a dataset of "
                         f"{'unknown size' if cardinality < 0 else f'{cardinality:,} elements'}")
    block_records, batch_records = _block_and_batch_records(features, num_shards or 1,
                                                            cardinality)
    planned = _Header(tuple(features), skeleton, 0, (_Shard(_basename(tfrecord_path), 0, 0),),
                      compression, block_records,
                      "sequential" if shard_size else "round_robin",
                      _format_version(features, namedtuples, skeleton), namedtuples)
    _check_reads_back(planned, tfrecord_path)
    batch_records = elements_per_batch or batch_records  # blocks (and so files) do not change
    _check_paths(tfrecord_path, header_path, num_shards or 1,
                 sharded=bool(shard_size) or (num_shards or 1) > 1)
    made = _make_folders(f"{tfrecord_path}: nothing was saved", tfrecord_path, header_path)
    try:
        header, written = _save_records(dataset, tfrecord_path, header_path, planned,
                                        batch_records, elements_per_batch, num_shards,
                                        shard_size, cardinality, progress)
    except BaseException:
        _remove_empty_folders(made)
        raise
    empty = sum(not s.num_records for s in header.shards)
    if empty and written >= len(header.shards) > 1:
        warnings.warn(
            f"{tfrecord_path}: {empty} of {len(header.shards)} shard files hold no records, "
            f"so workers reading their own files may get none: the dataset's size was unknown, "
            f"so blocks of {header.block_records} records were dealt. Give the size with "
            f"ds.apply(tf.data.experimental.assert_cardinality(n)) and save again",
            UserWarning, stacklevel=2)
    return header.to_yaml()


def _make_folders(what: str, *paths: str) -> list:
    """Makes the missing folders of the paths; returns those it made, each before its parent
    (the order they are made in, reversed). Where one cannot be made (a full disk), those made
    before it are removed, and the error begins with `what` (`_raise_nothing_saved`)."""
    made: list = []
    try:
        for folder in sorted({_dirname(path) for path in paths}):
            missing = []
            while (folder and not _is_filesystem_root(folder) and folder not in missing
                   and not tf.io.gfile.isdir(folder)):
                missing.append(folder)
                folder = _dirname(folder)
            for level in reversed(missing):  # one at a time, so that each made is known
                tf.io.gfile.makedirs(level)
                made.append(level)
    except BaseException as error:
        _remove_empty_folders(made[::-1])
        _raise_nothing_saved(error, what)
        raise
    return made[::-1]


def _remove_empty_folders(folders: list):
    """After a failed save: the local folders it made, those still empty."""
    for folder in folders:
        if _is_local(folder):
            try:
                os.rmdir(_local(folder))
            except OSError:  # not empty: something else is there now
                pass


def _save_records(dataset, tfrecord_path, header_path, planned, batch_records,
                  elements_per_batch, num_shards, shard_size, cardinality, progress) -> tuple:
    """Writes the records and commits them with their header: (the header, elements written).
    On failure, the files as they were before. `planned` is the header to write, but for the
    counts: its features, compression and blocks."""
    features, block_records = planned.features, planned.block_records
    # Where strings, or unknown shapes from a generator or map, make the spec's size a guess,
    # elements are read in small batches (`_read_records`), merged into batches of about
    # _TARGET_BATCH_BYTES by the bytes encoded so far (`_Merger`); other unknown shapes are
    # read as the spec's guess sizes them, and merged so too.
    # elements_per_batch reads and encodes exactly that many.
    read_records, max_records, small_reads = (
        (elements_per_batch, elements_per_batch, False) if elements_per_batch else
        _read_records(features, batch_records, dataset))
    batches = _Merger(_batches_for_encoding(dataset, features, read_records, small_reads),
                      read_records, max_records)
    files = _RecordFiles(tfrecord_path, num_shards or 1, shard_size, planned.compression,
                         block_records)
    meter = _Progress("save", "elements", cardinality, enabled=progress)
    try:
        written, warned, late = 0, elements_per_batch is not None, None
        for leaves in batches:
            rows = _rows(leaves[0])
            before = files.bytes_written
            for part, part_rows in ([(leaves, rows)] if elements_per_batch
                                    else _slices(leaves, rows)):
                records, sizes = _encode_records(features, part, part_rows)
                if len(sizes) and sizes.max() > _MAX_RECORD_BYTES:
                    raise SchemaError(_oversized_record(tfrecord_path, features, part,
                                                        part_rows, sizes, written))
                files.write(records, sizes, written)
                written += part_rows
            nbytes = files.bytes_written - before
            batches.encoded(rows, nbytes)
            # One element that large needs no smaller batches, and no option bounds it
            if (not warned and nbytes > _OVERSIZED_BATCH_BYTES and rows > 1
                    and not (_has_rows(leaves) and _holds_elements(dataset))):
                warned = True
                try:  # said as the save goes, before memory runs out...
                    _warn_oversized(tfrecord_path, rows, nbytes)
                except Warning:  # ...but an error once it is done, as if it were one
                    late = rows, nbytes
            meter.update(written, files.bytes_written)
        meter.update(written, files.bytes_written, force=True)
        header = files.commit(
            header_path,
            lambda shards: dataclasses.replace(planned, num_records=written, shards=shards,
                                               block_records=files.parsed_block(written)),
        )
    except BaseException as e:
        files.abort()
        try:
            problem = _misshapen(e, features, batches.batches, dataset)
        except Exception:  # noqa: BLE001 - never hide the error itself behind one of ours
            problem = None
        if problem is None:
            # its own files' errors: writing them (named by the save's token), or putting them
            # in place (renaming the old ones aside names those)
            if files.token in str(e) or files.committing:
                _raise_nothing_saved(e, f"{tfrecord_path}: nothing was saved")
            raise
        raise SchemaError(f"{tfrecord_path}: nothing was saved: {problem}") from None
    finally:
        meter.close()
    # Warned of once the save is done, so that warnings turned into errors do not undo it
    for path, reason in files.unremoved:
        warnings.warn(
            f"save {header_path}: {path}, a file of the dataset saved there before, could not "
            f"be removed ({reason}); the new dataset does not use it",
            UserWarning, stacklevel=3)  # the user's call of save
    if files.unread is not None and files.unread[1] != []:
        reason, left = files.unread
        named = "any it listed (the folder cannot be listed)" if left is None else ", ".join(
            left[:3]) + (f" and {len(left) - 3} more" if len(left) > 3 else "")
        warnings.warn(
            f"save {header_path}: the header saved there before could not be read ({reason}), "
            f"so the record files it listed could not be known, and were left: {named}; the "
            "new dataset does not use them", UserWarning, stacklevel=3)
    if late:
        _warn_oversized(tfrecord_path, *late)
    return header, written


def _oversized_record(tfrecord_path: str, features: list, leaves: list, rows: int,
                      sizes: np.ndarray, first_index: int) -> str:
    """Why the largest of a batch's records (`sizes`) cannot be written, naming the feature
    that takes most of it: the batch encoded again, a feature at a time (a record that large
    is most often a batch of its own, `_slices`)."""
    row = int(sizes.argmax())
    taken = [int(_encode_records([f], [leaf], rows)[1][row]) for f, leaf in zip(features, leaves)]
    largest = int(np.argmax(taken))
    return (f"{tfrecord_path}: element {first_index + row} makes a record of "
            f"{int(sizes[row]):,} bytes, more than a tf.train.Example can hold (2 GiB, "
            f"protobuf's limit); {_named(features[largest].name)} takes {taken[largest]:,} "
            "bytes of it; nothing was saved")


def _slices(leaves: list, rows: int) -> list:
    """A batch read as (leaves, rows) slices of consecutive rows, each of at most about
    `_TARGET_BATCH_BYTES` of numbers (or one row), encoded and written one after another,
    where the read holds twice that or more: a read sized from the spec's guess of 64 values an
    unknown dim can hold far more (200 cached int16 clips of 200,000 values in one read, stored
    as int64 before format version 3: their varints, lengths and sums took 522 MB at once, and
    1.31 s against 0.53 in batches of 8). Cut by each row's bytes, so that wide rows side by
    side (a dataset sorted by length) are spread over slices too. Strings count none (slicing
    them would copy them), and batches with lists of strings (`sparse_batch`) are not sliced."""
    if rows < 2 or any(isinstance(leaf, tf.SparseTensor) for leaf in leaves):
        return [(leaves, rows)]
    ends = np.cumsum(sum(_number_bytes(leaf, rows) for leaf in leaves))
    if ends[-1] < 2 * _TARGET_BATCH_BYTES:
        return [(leaves, rows)]
    # after the row that brings a slice past the target, and never two cuts in one place
    bounds = np.arange(_TARGET_BATCH_BYTES, ends[-1], _TARGET_BATCH_BYTES)
    inner = np.unique(np.searchsorted(ends, bounds, side="left") + 1).tolist()
    cuts = [0, *(cut for cut in inner if 0 < cut < rows), rows]
    return [([_row_slice(leaf, a, b) for leaf in leaves], b - a)
            for a, b in zip(cuts, cuts[1:])]


def _number_bytes(leaf, rows: int) -> np.ndarray:
    """The bytes of each row's numbers in a batched component (`_batches_for_encoding`),
    integers stored as int64 counted as such (encoding them takes that much again); strings
    count none."""
    if isinstance(leaf, tuple):  # flattened values and their shapes
        return sum(_number_bytes(part, rows) for part in leaf)
    if isinstance(leaf, _Rows):
        counts = np.array([math.prod(row.shape) for row in leaf.values], np.int64)
        dtype = tf.as_dtype(leaf.values[0].dtype)
    elif isinstance(leaf, tf.RaggedTensor):  # each row's flat values, through every level
        starts = leaf.row_splits.numpy()
        for splits in leaf.nested_row_splits[1:]:
            starts = splits.numpy()[starts]
        values = leaf.flat_values
        counts, dtype = np.diff(starts) * math.prod(values.shape[1:]), values.dtype
    else:
        counts = np.full(rows, math.prod(leaf.shape[1:]), np.int64)
        dtype = leaf.dtype
    encoding = _DTYPES[dtype.name].encoding
    return counts * (0 if encoding == "bytes" else 8 if encoding == "int64" else dtype.size)


def _has_rows(leaves: list) -> bool:
    """Whether a batch holds rows taken out one by one (`_Rows`, also beside their shapes)."""
    return any(isinstance(part, _Rows) for leaf in leaves
               for part in (leaf if isinstance(leaf, tuple) else [leaf]))


def _holds_elements(dataset) -> bool:
    """Whether the pipeline holds its elements in memory already (arrays, a cache() in
    memory: no function for each element, no file cache). Rows taken out one by one from
    there are views of that memory, and their batch is encoded a slice at a time: it takes
    little memory of its own, however large."""
    return not _costly_elements(dataset) and not _any_upstream(dataset, lambda d: (
        type(d).__name__ == "CacheDataset" and bool(d._filename.numpy())))


def _row_slice(leaf, start: int, end: int):
    """Rows `start:end` of a batched component that is not sparse (`_slices`)."""
    if isinstance(leaf, tuple):
        return tuple(_row_slice(part, start, end) for part in leaf)
    if isinstance(leaf, _Rows):
        splits = leaf.row_splits[start:end + 1]
        return _Rows(splits - splits[0], leaf.values[start:end])
    return leaf[start:end]


# How TensorFlow refuses an element whose shape is not the one its spec gives (a set_shape
# after a numpy_function that does not hold, say), by what reads it: a batch (the component's
# index among those read), `sparse_batch` (no component named), the flattening map's
# `ensure_shape` (its input's name, `_input_name`)
_WRONG_SHAPE = (
    re.compile(r"Incompatible shapes at component (\d+): expected (\[[^]]*\]) but got "
               r"(\[[^]]*\])"),
    re.compile(r"Input element had shape \((\[[^]]*\])\) that is incompatible with the row "
               r"shape \((\[[^]]*\])\)"),
    re.compile(r"Shape of tensor (\S+) (\[[^]]*\]) is not compatible with expected shape "
               r"(\[[^]]*\])"),
    # a batch of elements of different shapes: of as many values (the component's index), or
    # not (no component named: an element's shape, then the first element's)
    re.compile(r"Cannot batch tensors with different shapes in component (\d+)\. First element "
               r"had shape (\[[^]]*\]) and element \d+ had shape (\[[^]]*\])"),
    re.compile(r"Cannot add tensor to the batch: number of elements does not match\. Shapes "
               r"are: \[tensor\]: (\[[^]]*\]), \[batch\]: (\[[^]]*\])"),
)


class _WrongShape(Exception):
    """A batch read that does not have the shape its spec gives (`_check_ragged`); its
    message names the feature."""


class _UnlikeRows(_WrongShape):
    """Ragged rows whose flat values differ in their inner dims (`_read_leaf`,
    `_concatenated`): of the reads' leaf `index`, whose feature `_misshapen` names; the inner
    dims of the first rows and of others."""

    def __init__(self, index: int, first: list, other: list):
        super().__init__(f"rows with flat values of inner dims {first} and {other}")
        self.index, self.first, self.other = index, first, other


_SHAPE_HINT = ("(a set_shape or ensure_shape after a numpy_function or py_function that does "
               "not hold?)")


def _spec_gives(feature: _Feature) -> str:
    return f"its element_spec gives {list(feature.shape)}"


def _misshapen(error: BaseException, features: list, reads: _Reads, dataset) -> str | None:
    """What a TensorFlow error from reading the dataset (or `_check_ragged`) says of an
    element that does not have the shape its spec gives, naming the feature; None for any
    other error, and for errors of a batch that the dataset's own pipeline may have made
    (`_batches_itself`)."""
    if isinstance(error, _UnlikeRows):
        feature = features[reads.owners()[error.index]]
        return (f"feature {_short(feature.name)}: its elements came with flat values of shapes "
                f"{[None, *error.first]} and {[None, *error.other]}: {_spec_gives(feature)} "
                f"{_SHAPE_HINT}")
    if isinstance(error, _WrongShape):
        return str(error)
    if not isinstance(error, tf.errors.InvalidArgumentError):
        return None
    found = [pattern.search(str(error.message)) for pattern in _WRONG_SHAPE]
    if (found[1] or found[3] or found[4]) and _batches_itself(dataset):
        return None

    def dims(text: str) -> list:  # TensorFlow's "[?,2]"
        return [None if d == "?" else int(d) for d in text[1:-1].split(",") if d]

    def shape(text: str) -> str:  # as save's messages write shapes
        return str(dims(text))

    def one_of(listed: list) -> str:
        if len(listed) == 1:
            return f"feature {_short(listed[0].name)}"
        names = ", ".join(_short(f.name) for f in listed[:8])
        more = f" and {len(listed) - 8} more" if len(listed) > 8 else ""
        return f"one of the features {names}{more}"

    batch = found[0] or (None if reads.windowed else found[3])  # windows: each its 0th
    if batch:
        owners = reads.owners()  # only here: the other messages need no component's owner
        index = int(batch[1])
        feature = features[owners[index]] if index < len(owners) else None
        if feature is None or feature.kind != "fixed" or feature.ragged:
            return None  # save batches no such component by its shape: the pipeline's own batch
        read = (f"a batch of its elements read as shape {shape(batch[3])}, not "
                f"{shape(batch[2])}" if batch.re is _WRONG_SHAPE[0] else
                f"its elements came as shapes {shape(batch[2])} and {shape(batch[3])}")
        return f"feature {_short(feature.name)}: {read}: {_spec_gives(feature)} {_SHAPE_HINT}"
    row = found[1]
    if row:
        listed = [f for f in features if f.dense_unknown]
        if not listed:
            return None
        return (f"{one_of(listed)}: an element came as shape {shape(row[1])}, where its "
                f"element_spec gives {shape(row[2])} {_SHAPE_HINT}")
    added = found[4] or found[3]
    if added:  # no component named (or in a window of one): any feature of fixed shape
        first, other = ((added[2], added[1]) if added.re is _WRONG_SHAPE[4] else
                        (added[2], added[3]))
        listed = [f for f in features if f.kind == "fixed"]
        if not listed:
            return None
        # of those, the ones whose spec gives one of the two shapes (a scalar that came as [4]
        # where others came as [3] cannot be meant), unless none does
        listed = [f for f in listed if list(f.shape) in (dims(first), dims(other))] or listed
        given = f": {_spec_gives(listed[0])}" if len(listed) == 1 else ""
        return (f"{one_of(listed)}: its elements came as shapes {shape(first)} and "
                f"{shape(other)}{given} {_SHAPE_HINT}")
    mapped = found[2]
    named = {_input_name(i, f.name): f for i, f in enumerate(features) if f.dense_unknown}
    if mapped and mapped[1] in named:
        feature = named[mapped[1]]
        return (f"feature {_short(feature.name)}: an element came as shape "
                f"{shape(mapped[2])}: {_spec_gives(feature)} {_SHAPE_HINT}")
    return None


# Datasets, and the dataset ops of functions, that batch elements (batch, padded_batch,
# sparse_batch, window, group_by_window...)
_BATCHING = re.compile(r"Batch|Window|GroupBy")


def _batches_itself(dataset) -> bool:
    """Whether the dataset's pipeline may batch elements itself: a batching dataset upstream,
    or a function making one (a `group_by_window` or `flat_map` that batches its windows).
    TensorFlow's errors for a batch of unequal elements name no dataset, so they may then be
    that batch's, of elements that fit their spec (rows of [0] and [2] batched inside a
    group_by_window, for [None, None])."""
    def batches(d) -> bool:
        return bool(_BATCHING.search(type(d).__name__)) or any(
            op.endswith(("Dataset", "DatasetV2", "DatasetV3")) and _BATCHING.search(op)
            for f in d._functions() for op in _ops_within(f.function))
    return _any_upstream(dataset, batches, stop=lambda d: d in _LOADED)


def _ops_within(function) -> set:
    """The op types of a traced function and of every function it calls, however deep (a
    `tf.function` given to `map`, a `flat_map` within a `flat_map`)."""
    graph = function.graph.as_graph_def()
    return {node.op for node in graph.node} | {
        node.op for called in graph.library.function for node in called.node_def}


# The datasets `load` returned: their pipelines (hidden in a variant) batch records, never
# elements that could be unequal, so `_batches_itself` need not look into them
_LOADED: weakref.WeakSet = weakref.WeakSet()


def _warn_oversized(tfrecord_path: str, rows: int, nbytes: int):
    """Batches are sized from the element spec (`_element_values`), which cannot tell how large
    an unknown dim is, or merged from small batches read where it is a guess (`_Merger`): a
    batch far larger than meant is one of large elements of unknown shape from a file cache
    (or from memory, but for rows taken out one by one, `_holds_elements`), or one small batch
    of very long strings or very large elements, and memory grows with it. Says so once a
    save, with the option that bounds it."""
    suggested = max(1, rows * _TARGET_BATCH_BYTES // nbytes)
    warnings.warn(
        f"save {tfrecord_path}: a batch of {rows:,} elements came to {nbytes / 2**20:,.0f} MiB, "
        f"where about {_TARGET_BATCH_BYTES >> 20} MiB were meant (the element spec does not "
        f"tell how large strings or unknown dims are; save reads strings {_READ_RECORDS} at a "
        f"time, {_BESIDE_STRINGS} beside unknown shapes, and {_READ_COSTLY} from a generator "
        f"or map, as it does unknown shapes), "
        f"and memory grows with batches that size: elements_per_batch={suggested} bounds "
        f"them and writes the same files",
        UserWarning, stacklevel=4)  # the user's call of save


def _check_compression(compression):
    if compression in (None, ""):
        return None
    if isinstance(compression, str) and compression.upper() in COMPRESSIONS[1:]:
        return compression.upper()
    raise ValueError(f"compression must be one of None, 'GZIP', 'ZLIB'; got {compression!r}")


def _check_paths(tfrecord_path: str, header_path: str, num_shards: int, sharded: bool):
    """ValueError, before save writes anything, where its files would land on a folder (its
    `num_shards` files' names too) or on each other: the header on the records (or on a name
    of their shards, which a save there removes), which would lose both; or where a local
    file's name (a shard's, if `sharded`) would be too long, which the renames at the end
    would find only after all the writing."""
    _check_local_names([tfrecord_path, header_path])
    folder, base = _dirname(tfrecord_path), _basename(tfrecord_path)
    shards = [_join(folder, name) for name in _shard_file_names(base, num_shards)]
    _check_not_folders([tfrecord_path, header_path] + shards)
    longest = ((tfrecord_path, _shard_file_names(base, 2 if sharded else 1)[0]),
               (header_path, _basename(header_path)))
    for path, name in longest:
        _check_name_length(path, name)
    _check_header_not_on_records(tfrecord_path, header_path)
    _check_header_not_over_records(header_path)


def _check_local_names(paths):
    """ValueError where Python's file system encoding does not give a local path the bytes
    TensorFlow names its file by (UTF-8): in a locale of another encoding with Python's UTF-8
    mode off, save's and merge's own file operations failed with a UnicodeEncodeError naming
    no file (or would touch another file)."""
    for path in paths:
        if _is_local(path):
            try:
                same = os.fsencode(path) == path.encode()
            except UnicodeError:
                same = False
            if not same:
                raise ValueError(
                    f"{path!r}: Python's file system encoding ({sys.getfilesystemencoding()}) "
                    "cannot name this file as TensorFlow does (UTF-8); run Python in UTF-8 "
                    "mode (PYTHONUTF8=1 or python -X utf8)")


def _check_name_length(path: str, name: str):
    """ValueError where `name`, the name of a local file that `path` gives (itself or its
    shards'), is too long for most filesystems."""
    if _is_local(path) and len(name.encode()) > _MAX_NAME_BYTES:
        raise ValueError(f"{path!r}: a file name of {len(name.encode())} bytes "
                         f"({'its shards: ' if name != _basename(path) else ''}{name!r}) "
                         f"is longer than the {_MAX_NAME_BYTES} most filesystems allow")


def _check_header_not_on_records(tfrecord_path: str, header_path: str):
    """ValueError where the header would land where a save to `tfrecord_path` puts its records
    (its name, or a name of its shards): `save`'s own would overwrite it; `merge`'s, a later
    save's."""
    folder, name = _dirname(header_path), _basename(header_path)
    if _same_place(folder, _dirname(tfrecord_path)) and _is_save_name(
            name, _basename(tfrecord_path)):
        raise ValueError(f"header_path {header_path!r} is where the records of "
                         f"{tfrecord_path!r} go; give the header a name of its own")


def _check_header_not_over_records(header_path: str):
    """ValueError where a local file at `header_path` holds records (another save's: the
    paths mixed up, say), which the header would replace."""
    if not _is_local(header_path):
        return
    try:
        with open(_local(header_path), "rb") as f:
            kind = _records_kind(f.read(12))
    except OSError:  # none there (or none to read: the save's own checks tell)
        return
    if kind:
        raise ValueError(f"header_path {header_path!r} holds {kind}, which the header would "
                         "replace; give the header a path of its own (or remove the file)")


def _check_not_empty(path: str, name: str, example: str = "data/train.tfrecord"):
    """ValueError where `path` (the argument `name`), a path to read, is "": a load (or a
    merge of such a part) looked for `.header.yaml` and said only that it was not found, and a
    header path of "" gave ": header file not found". (Save refuses "" as a folder's path,
    `_check_names_a_file`; load names other folders as such, with the saves in them.)"""
    if path == "":
        raise ValueError(f"{name} is '', which names no file: give the file's path, as in "
                         f"{example!r}")


_HEADER_EXAMPLE = "data/train.tfrecord.header.yaml"


def _check_names_a_file(tfrecord_path: str, header_path: str):
    """ValueError where either path names a folder ("", "data/", "."): load would read
    `<tfrecord_path>.header.yaml`, a hidden file or the folder's own, and the header's rename
    failed after all the writing. (Where it is a folder, `_check_not_folders` refuses it.)"""
    for path, whose, example in ((tfrecord_path, "records'", "data/train.tfrecord"),
                                 (header_path, "header's", _HEADER_EXAMPLE)):
        if _basename(path) in ("", ".", ".."):
            raise ValueError(f"{path!r} names a folder, not a file: give the {whose} file "
                             f"name, as in {example!r}")


def _check_not_folders(paths: list):
    """ValueError where a local path is a folder, or a file that is not a regular one (a FIFO,
    a device: the save's rename would replace it, `/dev/null` for all of the system)."""
    for path in dict.fromkeys(paths):
        if _is_local(path) and os.path.isdir(_local(path)):
            raise ValueError(f"{path!r} is a folder; a file goes there")
        kind = _special_file(path)
        if kind:
            raise ValueError(f"{path!r} is {kind}; a regular file goes there")


# What a local path that is not a regular file or a folder is (os.stat's S_IS* tests)
_SPECIAL_FILES = (("S_ISFIFO", "a FIFO (named pipe)"), ("S_ISSOCK", "a socket"),
                  ("S_ISCHR", "a character device"), ("S_ISBLK", "a block device"))


def _special_file(path: str) -> str | None:
    """What a local file that is neither a regular file nor a folder is ("a FIFO (named
    pipe)", "a socket", ...), the link followed; else None (also for remote paths). Reading a
    FIFO that nothing writes to waits forever, and renaming over one replaces it."""
    if not _is_local(path):
        return None
    try:
        mode = os.stat(_local(path)).st_mode
    except (OSError, ValueError):  # not there, or a name the OS refuses: others say so
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return next((kind for test, kind in _SPECIAL_FILES if getattr(stat, test)(mode)),
                "not a regular file")


def _is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


def _local(path: str) -> str:
    return path.removeprefix("file://") or "."


def _same_place(a: str, b: str) -> bool:
    """Whether two paths (folders, say) name the same place: resolved where local."""
    return _place(a) == _place(b)


def _place(path: str) -> str:
    """The place `path` names, as `_same_place` compares them: resolved where local and
    Python's file system encoding can name it. (A name it cannot give, in an ASCII locale
    with UTF-8 mode off, only TensorFlow opens; resolving it failed with a UnicodeEncodeError
    naming nothing, in load and verify of a missing file.)"""
    if not _is_local(path):
        return path
    try:
        return os.path.realpath(_local(path))
    except UnicodeError:
        return os.path.abspath(_local(path))


def _dirname(path: str) -> str:
    """The folder of `path`: "" for the working folder, "/" for the root ("/x": "" put a
    save's records in the working folder, over a file there of that name)."""
    return (path.rpartition("/")[0] or "/") if "/" in path else ""


def _is_filesystem_root(folder: str) -> bool:
    """`scheme:/`, what `_dirname` makes of `scheme://name`: not a folder to make or list."""
    return folder.endswith(":/")


def _listable(folder: str) -> str:
    return f"{folder}/" if _is_filesystem_root(folder) else folder or "."


def _basename(path: str) -> str:
    return path.rpartition("/")[2]


def _join(folder: str, name: str) -> str:
    return f"/{name}" if folder == "/" else f"{folder}/{name}" if folder else name


# What sizes from the spec assume where it cannot tell: the values of an unknown dim, the bytes
# of a string, and a feature's own bytes in a record besides its values (key, tags, lengths)
_GUESSED_DIM = 64
_GUESSED_STRING_BYTES = 32
_FEATURE_BYTES = 16


def _element_bytes(feature: _Feature) -> int:
    """A feature's bytes in one record, as batches and blocks are sized from the spec."""
    string = feature.dtype.name == "string"
    itemsize = _GUESSED_STRING_BYTES if string else feature.dtype.tf_dtype.size
    if feature.sparse:  # an int64 index for each dim and value
        itemsize += 8 * len(feature.shape)
    return itemsize * _element_values(feature) + _FEATURE_BYTES


def _element_values(feature: _Feature) -> int:
    """Values an element holds, as sizes are estimated: `_GUESSED_DIM` for each unknown dim,
    and for a sparse component `_GUESSED_DIM` (its dense shape says nothing of them)."""
    if feature.sparse:
        return _GUESSED_DIM
    return math.prod(_GUESSED_DIM if d is None else d for d in feature.shape)


def _records_per_block(record_bytes: int, most: int) -> int:
    """Records of this size that make about `_TARGET_BLOCK_BYTES`: at least 1, at most `most`."""
    return max(1, min(most, _TARGET_BLOCK_BYTES // max(record_bytes, 1)))


def _block_and_batch_records(features: list, num_shards: int, cardinality: int
                             ) -> tuple[int, int]:
    """Records per block (parsed together on load) and elements per batch encoded on save.

    With several shards and a known size, blocks are small enough that every shard gets at
    least one (given as many records as shards), so that no worker reading its own files is
    left with none; shards then differ by at most a block.
    """
    size = sum(_element_bytes(f) for f in features)
    block = _records_per_block(size, 1024)
    if num_shards > 1 and cardinality > 0:
        block = max(1, min(block, cardinality // num_shards))
    if _sparse_batches(features):  # their indices: an int64 per dim and value, and the batch's
        size += sum(8 * (len(f.shape) + 1) * _element_values(f)
                    for f in features if f.dense_unknown)
    batch = max(1, min(_MAX_BATCH_RECORDS, _TARGET_BATCH_BYTES // size) // block) * block
    return block, batch


def _read_records(features: list, batch_records: int, dataset) -> tuple[int, int, bool]:
    """Elements `save` reads at a time, at most in a batch, and whether those are small reads
    (`_batches_for_encoding`): `batch_records`, sized from the element spec, unless that size
    is a guess. Then small reads of at most `_READ_COSTLY` or `_READ_RECORDS`, merged into
    batches afterwards (`_Merger`): where shapes are unknown (`_GUESSED_DIM` values an unknown
    dim) or strings (`_GUESSED_STRING_BYTES` a string) make it a guess and the pipeline calls
    a function for each element anyway (`_costly_elements`: a generator of audio clips, a map
    reading image files), or where strings are the only guess.

    Other unknown shapes of a cheap pipeline (arrays in memory, a cache) are read as the
    spec sizes them: a small read costs 0.1 to 0.3 ms, as much as 30 small elements take to
    read there, and their memory is held already. Small reads would also leave out
    `sparse_batch` and windows (`_batches_for_encoding`: sparse reads are not merged), and
    reads of 256 made saves of an id beside a token list 1.3 times slower. Where those reads
    come to fewer than `_MAX_BATCH_RECORDS` elements (several unknown dims, guessed at 64
    values each), they are merged too, by the bytes they turn out to hold: 2,000 cached
    string matrices of up to 3 x 3 were read 124 at a time, each read encoded and written by
    itself (50 ms, `tf.data` 16). Where a component of a known number of strings (an encoded
    image, an id) sits beside them, batches take at most `_BESIDE_STRINGS` elements instead of
    up to 8,192: a cached detection dataset of 150 kB images and their boxes made batches of
    1.2 GB."""
    strings = any(f.dtype.name == "string" for f in features)
    fixed = all(f.kind == "fixed" for f in features)
    if (strings or not fixed) and _costly_elements(dataset):
        read = min(batch_records, _READ_COSTLY)
        return read, batch_records, read < batch_records
    if strings and fixed:
        read = min(batch_records, _READ_RECORDS)
        return read, batch_records, read < batch_records
    if any(f.dtype.name == "string" and f.kind == "fixed" for f in features):
        read = min(batch_records, _BESIDE_STRINGS)
        return read, read, False
    if not fixed and not _sparse_batches(features):  # read as the spec says, merged by bytes
        return batch_records, max(batch_records, _MAX_BATCH_RECORDS), False
    return batch_records, batch_records, False


class _Merger:
    """The batches `save` encodes: consecutive small batches read (`_read_records`)
    concatenated, as many as the bytes encoded so far say make `_TARGET_BATCH_BYTES`, and at
    most `max_rows` elements. The first batch is one small batch; `encoded` tells the bytes
    each batch came to. Reads of `_MERGE_READ_BYTES` or more are batches by themselves.

    So batches follow what the elements turn out to hold (a string of 10 bytes or of 150 kB,
    an encoded image, an audio clip of unknown length), and memory is bounded by the small
    batches rather than by as many elements as the spec's guess would fit in a batch.
    """

    def __init__(self, batches: _Reads, read_rows: int, max_rows: int):
        self.batches, self.read_rows, self.max_rows = batches, read_rows, max_rows
        self.reads = 1  # small batches in the next batch
        self.rows = self.nbytes = 0  # encoded so far

    def encoded(self, rows: int, nbytes: int):
        self.rows += rows
        self.nbytes += nbytes
        rows_meant = _TARGET_BATCH_BYTES * self.rows // max(1, self.nbytes)
        if self.nbytes * self.read_rows >= _MERGE_READ_BYTES * self.rows:
            rows_meant = 0  # a read this large is a batch by itself
        self.reads = max(1, min(self.max_rows, rows_meant) // self.read_rows)

    def __iter__(self):
        pending = []
        for parts in self.batches.parts():
            pending.append(parts)
            if len(pending) >= self.reads:
                yield self.batches.finish(_concatenated(pending))
                pending = []
        if pending:
            yield self.batches.finish(_concatenated(pending))


class _RaggedRead(NamedTuple):
    """A ragged tensor as read: its nested row splits in NumPy, and its flat values; or, for
    rows read one by one (`_rows_one_by_one`), a list of each row's values: read-only NumPy
    views for float and raw encodings, the tensors read for integers."""

    splits: list
    values: tf.Tensor | list


def _concatenated(reads: list) -> list:
    """Reads (lists of parts, `_Reads.parts`) as one, concatenated part by part."""
    if len(reads) == 1:
        return reads[0]
    return [_concat_parts(index, list(parts)) for index, parts in enumerate(zip(*reads))]


def _concat_parts(index: int, parts: list):
    """Part `index` of several reads, concatenated: tensors, or ragged tensors (small reads
    are never sparse, `_batches_for_encoding`), whose row splits at each level go on from
    where the read before ended. Raises `_UnlikeRows` where the reads' flat values differ in
    their inner dims."""
    if not isinstance(parts[0], _RaggedRead):
        return tf.concat(parts, 0)
    inner = [p.values.shape[1:].as_list() for p in parts if not isinstance(p.values, list)]
    if any(dims != inner[0] for dims in inner):
        raise _UnlikeRows(index, inner[0], next(d for d in inner if d != inner[0]))
    splits = []
    for level in range(len(parts[0].splits)):
        starts = np.cumsum([0] + [p.splits[level][-1] for p in parts[:-1]])
        splits.append(np.concatenate([parts[0].splits[level][:1]] + [
            p.splits[level][1:] + start for p, start in zip(parts, starts)]))
    if any(isinstance(p.values, list) for p in parts):  # some read one by one: all as rows
        return _RaggedRead(splits, [row for p in parts for row in _row_list(p)])
    return _RaggedRead(splits, tf.concat([p.values for p in parts], 0))


def _row_list(read: _RaggedRead) -> list:
    """The rows of a read of rows (one unknown dim), as `_rows_one_by_one` gives them."""
    if isinstance(read.values, list):
        return read.values
    values, ends = _read_only(np.asarray(read.values)), read.splits[0].tolist()
    return [values[a:b] for a, b in zip(ends, ends[1:])]


def _read_only(array: np.ndarray) -> np.ndarray:
    """A read-only view (CRC32C takes read-only buffers)."""
    view = array.view()
    view.flags.writeable = False
    return view


def _batches_for_encoding(dataset, features, batch_records, small_reads=False) -> _Reads:
    """Batches of the dataset as lists of components (one per feature) ready to encode, or
    with `small_reads` the small batches `_Merger` merges.

    Dense lists of strings (`[None]`, `_sparse_batches`) are batched as sparse tensors by
    `sparse_batch`, over windows of the dataset, or over the dataset itself when it has no
    other component (windows cost as much again): no function runs for each element. Not from
    pipelines that call one for each element anyway (read in small reads, `_read_records`,
    unless `elements_per_batch` is given), where a sparse tensor's indices (an int64 for each
    dim and value) would be most of the memory: saving 1.5 GiB of audio clips took a peak RSS
    growth of 389 MB so in reads of 32, 224 MB as ragged tensors and 1.2 times as fast.
    Otherwise dense components of unknown shape are batched as ragged tensors,
    as `ragged_batch` does but without its per-element tf.data map: those with an unknown dim
    besides the first are flattened first, with their shapes beside them unless the number of
    values gives the one unknown dim, so that every dim (a 7 after a 0, say) keeps its exact
    extent. Ragged components of ragged rank 0 batch as ragged by themselves.
    """
    specs = tuple(_tensors_of(dataset.element_spec))
    rows_apart = _ragged_may_come_as_rows(dataset)
    if (_sparse_batches(features) and not small_reads and not rows_apart
            and not _costly_elements(dataset)):  # elements_per_batch: sized like small reads
        how = "sparse_batch" if len(specs) == 1 else "windows"
    elif rows_apart or any(f.dense_unknown or f.sparse for f in features):
        how = "rows"
    else:
        how = "batch"
    read_ahead = None  # one batch: nothing to overlap
    if not 0 <= int(dataset.cardinality()) <= batch_records:
        autotune = dataset.options().autotune
        read_ahead = (2 if not small_reads or autotune.enabled is False else
                      tf.data.AUTOTUNE if autotune.ram_budget is not None else "budget")
    function, structure, counted = _save_pipeline(
        specs, tuple(features), batch_records, how, rows_apart, read_ahead,
        _applies_functions(dataset))
    batched = tf.data.experimental.from_variant(
        function(tf.data.experimental.to_variant(dataset)), structure)
    rows = ()
    if how == "rows":  # the components, then the counts of the rows `counted`
        rows = tuple(f.dense_unknown for f, s in zip(features, structure[0])
                     for _ in tf.nest.flatten(s))
    return _Reads(batched, (lambda b: [b]) if how == "sparse_batch" else list,
                  how == "windows", rows, counted if how == "rows" else None)


@functools.lru_cache(maxsize=16)
def _save_pipeline(specs: tuple, features: tuple, batch_records: int, how: str,
                   rows_apart: bool, read_ahead, applies_functions: bool):
    """The traced function that makes the batches `_batches_for_encoding` reads from the
    dataset's variant (its elements as the flat tuple `specs`), their structure, and which of
    their flat tensors are rows with their values counted after the others (`_flattening`):
    batched `how` ("sparse_batch", "windows", "rows" or "batch"), read ahead (`_prefetched`)
    unless `read_ahead` is None, with save's own options unless the pipeline
    `applies_functions`. One function call instead of a dataset op at a time: in eager mode
    each costs about 0.4 ms, most of a small save's fixed cost (a `[None]` save took 4.5 ms
    to build them)."""
    structure, counted = [], []

    def build(variant):
        dataset = tf.data.experimental.from_variant(variant, specs)
        if how == "sparse_batch":  # lists of strings, the only component
            batched = _sparse_batch(dataset, batch_records, specs[0])
        elif how == "windows":
            windows = dataset.window(batch_records)
            function, flat = _window_batching(
                tuple(tf.nest.flatten(windows.element_spec)), specs, features, batch_records)
            batched = _flat_map(windows, function, flat)
        elif how == "rows":
            function, flat, counted[:] = _flattening(specs, features, rows_apart)
            mapped = _map_inline(dataset, function, flat)
            # A parallel batch, which map_and_batch_fusion leaves apart from the map before it
            batched = mapped.batch(batch_records, num_parallel_calls=tf.data.AUTOTUNE,
                                   deterministic=True)
        else:
            batched = dataset.batch(batch_records)
        if read_ahead is not None:
            batched = _prefetched(batched, read_ahead)
        if not applies_functions:  # the functions above need none of them
            batched = batched.with_options(_OWN_PIPELINE)
        structure.append(batched.element_spec)
        return tf.data.experimental.to_variant(batched)

    function = tf.function(build, input_signature=[tf.TensorSpec([], tf.variant)],
                           autograph=False).get_concrete_function()
    return function, structure[0], tuple(counted)


def _prefetched(batched, read_ahead) -> tf.data.Dataset:
    """`batched`, read ahead while save encodes: two batches; or, for small reads that make a
    batch together (`_Merger`), an AUTOTUNE prefetch, unless the dataset's options turn
    autotuning off (then two). Two reads of short strings are not enough to keep tf.data busy
    while a batch is encoded: tabular save took 1.47× the time of reading batches of 8,192
    so, and 1.17× this way (alternating runs of 20).

    The read-ahead stays within `_READ_AHEAD_BYTES` (a batch's worth of short strings, one
    read of long ones), unless the dataset's options set a budget of their own. TensorFlow
    gives the prefetch that budget also where save turns autotuning off (`_OWN_PIPELINE`),
    and the prefetch then grows each time it runs dry, within it: 1.5 GiB of 150 kB strings
    from a generator grew peak RSS by 161 MB with autotuning and without.

    `read_ahead` is 2, AUTOTUNE, or "budget": AUTOTUNE within `_READ_AHEAD_BYTES`, where the
    dataset's options set no budget of their own."""
    if read_ahead != "budget":
        return batched.prefetch(read_ahead)
    options = tf.data.Options()
    options.autotune.ram_budget = _READ_AHEAD_BYTES
    return batched.prefetch(tf.data.AUTOTUNE).with_options(options)


class _Reads:
    """The batches of a batched dataset, each a list of components ready to encode (`unpack`
    makes them of its element).

    `parts` reads them with the iterator's ops, without tf.data's Python structure around
    them, which costs 0.1 ms a batch of tensors and 1 to 2 ms one of sparse or ragged
    tensors (also in the GIL that a generator feeding the dataset needs): each is a list of
    its leaves (`tf.nest.flatten`), ragged ones as `_RaggedRead` (sparse ones, never merged,
    as they are). `finish` makes a list of parts (or several concatenated) the components.

    Where `counted` is given, the batches are the components, then the values of each row of
    the leaves `counted` lists (`_flattening`): `_read_part` joins those rows by the counts.
    """

    def __init__(self, batched: tf.data.Dataset, unpack, windowed: bool = False,
                 rows: tuple = (), counted: tuple | None = None):
        self.batched, self.unpack = batched, unpack
        self.windowed = windowed  # each component batched by itself (`_window_batching`)
        self.structure = batched.element_spec
        self.count_specs = []  # of the counts read after the components
        if counted is not None:
            self.structure, self.count_specs = self.structure
        self.counted = counted or ()
        self.specs = tf.nest.flatten(self.structure)
        # Which leaves are rows of a dense component of unknown shape (`_flattening`), which
        # wide rows let `_read_part` take out one by one
        self.rows = rows or (False,) * len(self.specs)

    def __iter__(self):
        return map(self.finish, self.parts())

    def parts(self) -> Iterable[list]:
        flat = [s._flat_tensor_specs for s in self.specs]  # noqa: SLF001 - one tensor a leaf
        flat += [[s] for s in self.count_specs]
        types = [t.dtype for f in flat for t in f]
        shapes = [t.shape for f in flat for t in f]
        iterator = tf.raw_ops.AnonymousIteratorV3(output_types=types, output_shapes=shapes)
        tf.raw_ops.MakeIterator(dataset=tf.data.experimental.to_variant(self.batched),
                                iterator=iterator)
        plain = all(isinstance(s, tf.TensorSpec) for s in self.specs)
        while True:
            try:
                tensors = tf.raw_ops.IteratorGetNext(iterator=iterator, output_types=types,
                                                     output_shapes=shapes)
            except tf.errors.OutOfRangeError:
                return
            counts = dict(zip(self.counted, tensors[len(self.specs):]))
            tensors = tensors[:len(self.specs)]
            if not plain:  # the tensors read are let go once taken apart
                tensors = [_read_leaf(i, s, t, r, counts.get(i))
                           for i, (s, t, r) in enumerate(zip(self.specs, tensors, self.rows))]
            yield tensors

    def finish(self, parts: list) -> list:
        leaves = [_finished(p) for p in parts]
        return self.unpack(tf.nest.pack_sequence_as(self.structure, leaves))

    def owners(self) -> list[int]:
        """For each tensor a read gives (one a leaf, as `parts` reads them), the index of the
        feature (of those `unpack` gives) it belongs to."""
        tree = tf.nest.pack_sequence_as(self.structure, list(range(len(self.specs))))
        owner = {}
        for feature, leaf in enumerate(self.unpack(tree)):
            for index in tf.nest.flatten(leaf):
                owner[index] = feature
        return [owner[i] for i in range(len(self.specs))]


def _read_leaf(index: int, spec, tensor, rows: bool, counts):
    """`_read_part` of the read's leaf `index`, raising `_UnlikeRows` where a read of ragged
    rows fails to decode as one because their flat values differ in their inner dims."""
    try:
        return _read_part(spec, tensor, rows, counts)
    except tf.errors.InvalidArgumentError:
        unlike = _unlike_rows(spec, tensor) if isinstance(spec, tf.RaggedTensorSpec) else None
        if unlike is None:
            raise
        raise _UnlikeRows(index, *unlike) from None


def _unlike_rows(spec: tf.RaggedTensorSpec, tensor: tf.Tensor) -> tuple | None:
    """The inner dims of the flat values of a read's first row and of the first row whose
    differ from them, each row decoded by itself; None if none differ."""
    if tensor.shape.rank != 1:
        return None
    first = None
    for row in tf.unstack(tensor):
        _, values = tf.raw_ops.RaggedTensorFromVariant(
            encoded_ragged=row, input_ragged_rank=spec.ragged_rank - 1,
            output_ragged_rank=spec.ragged_rank - 1, Tvalues=spec.dtype,
            Tsplits=spec.row_splits_dtype)
        inner = values.shape[1:].as_list()
        if first is None:
            first = inner
        elif inner != first:
            return first, inner
    return None


def _read_part(spec, tensor, rows: bool = False, counts: tf.Tensor | None = None):
    """One leaf of a read as `_Reads.parts` gives it; `counts`, the values of each of its
    rows where the flattening map counts them (`_counted`)."""
    if isinstance(spec, tf.SparseTensorSpec):
        return tf.SparseTensor(*tf.raw_ops.DeserializeSparse(serialized_sparse=tensor,
                                                             dtype=spec.dtype))
    if counts is not None:
        counts = counts.numpy()
    if (rows and isinstance(spec, tf.RaggedTensorSpec) and spec.ragged_rank == 1
            and tensor.shape.rank == 1 and tensor.shape[0]):
        read = _rows_one_by_one(spec, tensor, counts)
        if read is not None:
            return read
    if counts is not None and counts.sum() <= _MAX_JOINED_VALUES:
        return _joined_rows(spec, tensor, counts)
    if isinstance(spec, tf.RaggedTensorSpec):
        splits, values = tf.raw_ops.RaggedTensorFromVariant(
            encoded_ragged=tensor, input_ragged_rank=spec.ragged_rank - tensor.shape.rank,
            output_ragged_rank=spec.ragged_rank, Tvalues=spec.dtype,
            Tsplits=spec.row_splits_dtype)
        return _RaggedRead([np.asarray(s) for s in splits], values)
    return tensor


def _joined_rows(spec: tf.RaggedTensorSpec, tensor: tf.Tensor, counts: np.ndarray
                 ) -> _RaggedRead:
    """A read of flat rows of numbers (a variant each, `_flattening`), of `counts` values
    each, with their values joined by one copy of each row: TensorFlow's op for the gradient
    of making rows variants (RaggedTensorToVariantGradient) joins the rows' values, where
    decoding the read (RaggedTensorFromVariant) copies them a value at a time, 2-4 ns each.
    A read of 2,500 rows of 1-4,000 float32 took 15.9 ms to decode, 3.4 to join; of uint8,
    13.0 and 2.5. The op trusts `counts`: the rows must hold that many values."""
    splits = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=splits[1:])
    values = tf.raw_ops.RaggedTensorToVariantGradient(
        encoded_ragged_grad=tensor, row_splits=splits,
        dense_values_shape=tf.constant([splits[-1]], tf.int32), Tvalues=spec.dtype)
    return _RaggedRead([splits], values)


def _rows_one_by_one(spec: tf.RaggedTensorSpec, tensor: tf.Tensor,
                     counts: np.ndarray | None = None) -> _RaggedRead | None:
    """A read of rows (a variant each, `_flattening`) taken out one by one, if its rows have
    `_ROW_BY_ROW_VALUES` values or more (and `_ROW_BY_ROW_BYTES` for flat rows of numbers,
    which `_joined_rows` would join, their values in `counts`, unless the read's values come
    to more than `_OVERSIZED_BATCH_BYTES`: so large a copy of cached rows, which one by one
    take no memory of their own, would grow peak memory by as much and get save's warning),
    as up to four of them spread over the read tell (the lower of their middle two): as a
    list of the rows where they lie, read-only NumPy views for the encodings that write
    values as they are, and the tensors read for integers, which `_encode_list` joins a slice
    of rows at a time (`_slices`); strings joined at once (as NumPy rows they would be Python
    strings: 400 rows of 9,000-14,000 tokens saved 3 times as slowly). None for narrower
    rows: one wide row among narrow ones must not send a read of thousands of rows one by one
    (10 times slower)."""
    def row(variant):
        return tf.raw_ops.RaggedTensorFromVariant(
            encoded_ragged=variant, input_ragged_rank=0, output_ragged_rank=0,
            Tvalues=spec.dtype, Tsplits=spec.row_splits_dtype).output_dense_values

    count = tensor.shape[0]
    looked_at = sorted({0, count // 3, 2 * count // 3, count - 1})
    if counts is not None:  # flat rows of numbers, counted by the flattening map
        sizes, wide = counts[looked_at].tolist(), _ROW_BY_ROW_VALUES
        if int(counts.sum()) * spec.dtype.size <= _OVERSIZED_BATCH_BYTES:
            wide = max(wide, _ROW_BY_ROW_BYTES // spec.dtype.size)  # joined: a copy of them
    else:  # the rows looked at, decoded by one op
        splits, values = tf.raw_ops.RaggedTensorFromVariant(
            encoded_ragged=tf.gather(tensor, looked_at), input_ragged_rank=0,
            output_ragged_rank=1, Tvalues=spec.dtype, Tsplits=spec.row_splits_dtype)
        inner = values.shape[1:].num_elements()
        sizes, wide = (np.diff(splits[0]) * inner).tolist(), _ROW_BY_ROW_VALUES
    if sorted(sizes)[(len(sizes) - 1) // 2] < wide:
        return None
    values = [row(v) for v in tf.unstack(tensor)]
    splits = np.zeros(len(values) + 1, np.int64)
    np.cumsum([v.shape[0] for v in values], out=splits[1:])
    encoding = _DTYPES[spec.dtype.name].encoding
    if encoding in ("float", "raw"):
        return _RaggedRead([splits], [_read_only(np.asarray(v)) for v in values])
    return _RaggedRead([splits], tf.concat(values, 0) if encoding == "bytes" else values)


class _Rows:
    """A batch of rows of one unknown dim taken out one by one (`_rows_one_by_one`): each
    row's values (NumPy views, or the tensors read for integers), and the row splits of
    their first dim."""

    __slots__ = ("row_splits", "values")

    def __init__(self, row_splits: np.ndarray, values: list):
        self.row_splits, self.values = row_splits, values


def _finished(part):
    if isinstance(part, _RaggedRead) and isinstance(part.values, list):
        return _Rows(part.splits[0], part.values)
    if isinstance(part, _RaggedRead):
        return tf.RaggedTensor.from_nested_row_splits(part.values, part.splits, validate=False)
    return part


@functools.lru_cache(maxsize=16)
def _window_batching(window_specs: tuple, specs: tuple, features: tuple, batch_records: int):
    """The traced function (and the structure it gives) that makes one batch of a window of
    `batch_records` elements, given as a dataset for each component: `sparse_batch` for dense
    components of unknown shape, `batch` for the others."""
    def batch_window(*windows):
        return tf.data.Dataset.zip(tuple(
            window.sparse_batch(batch_records, s.shape)
            if f.dense_unknown else window.batch(batch_records)
            for f, s, window in zip(features, specs, windows)))
    return _one_device_function(batch_window, list(window_specs))


def _sparse_batch(dataset, batch_records: int, spec) -> tf.data.Dataset:
    """`dataset.sparse_batch(batch_records, spec.shape)` for a dataset of one component, also
    when that component sits in a dict or tuple (`Dataset.sparse_batch` takes bare tensors
    only): the same op, on the dataset's variant."""
    structure = tf.SparseTensorSpec([None, *spec.shape], spec.dtype)
    flat = structure._flat_tensor_specs  # noqa: SLF001 - how tf.data holds a sparse tensor
    variant = tf.raw_ops.DenseToSparseBatchDataset(
        input_dataset=tf.data.experimental.to_variant(dataset),
        batch_size=tf.constant(batch_records, tf.int64),
        row_shape=tf.constant([-1 if d is None else d for d in spec.shape], tf.int64),
        output_types=[s.dtype for s in flat], output_shapes=[s.shape for s in flat])
    return tf.data.experimental.from_variant(variant, structure)


def _sparse_batches(features) -> bool:
    """Whether save batches the dense components of unknown shape with `sparse_batch`: when
    all of them are lists (`[None]`) of strings (a list of strings beside a list of numbers
    goes through the map with it). No function runs for each element then, but the op writes
    two int64 indices for each value, 16 bytes, less than a string takes in TensorFlow (24
    bytes, more when long). For numbers they are 1 to 16 times the values themselves
    (complex128 to uint8 and bool): 600 cached float32 clips of about 200,000 values (481 MB)
    saved in 7.5-8.0 s so, with 2.4 GB of peak memory growth, against 0.93 s and 12 MB as
    ragged rows taken out one by one (`tf.data`: 1.1-1.3 s, 1 MB). Short lists pay for the
    map: 20,000 cached lists of 1-3 float32 took 51-70 against 30-37 ms (`tf.data` 78-81),
    2,500 of about 500 values 24-38 against 20-28 ms (`tf.data` 23-27), 20,000 of 20-80
    int64 83 against 67 ms (`tf.data` 62), and beside a string id 113 against 97. Not for
    more dims either: TensorFlow's op keeps a row's dims in 16 bits and refuses a row of
    (k + 1) * 65,536 rows of k values or more (TF 2.21; a stereo clip of 4.5 s)."""
    varshape = [f for f in features if f.dense_unknown]
    return bool(varshape) and all(len(f.shape) == 1 and f.dtype.name == "string"
                                  for f in varshape) and not any(f.sparse for f in features)


# Datasets that hand on their input's elements as they are, and those that make them anew
# (which hold a ragged component as one variant), for `_ragged_may_come_as_rows`
_PASSING_ON = frozenset({
    "_PrefetchDataset", "CacheDataset", "_TakeDataset", "_SkipDataset", "_ShuffleDataset",
    "_RepeatDataset", "_FilterDataset", "_ShardDataset", "_OptionsDataset",
    "_AssertCardinalityDataset", "_ConcatenateDataset", "_ZipDataset"})
_MAKING_ANEW = frozenset({"_TensorSliceDataset", "_TensorDataset", "_MapDataset",
                          "_ParallelMapDataset"})


def _ragged_may_come_as_rows(dataset) -> bool:
    """Whether a ragged component may come as a variant for each of its rows, as a batch
    leaves it (`batch`, `ragged_batch`, `load(batch_size=...)`), instead of as one variant:
    `batch` cannot stack those of batches of other sizes (a last, shorter one). Yes unless
    every path upstream reaches a dataset that makes its elements anew, through ones that
    pass them on."""
    if not any(isinstance(s, tf.RaggedTensorSpec)
               for s in tf.nest.flatten(dataset.element_spec)):
        return False
    return _any_upstream(dataset, lambda d: type(d).__name__ not in _PASSING_ON,
                         stop=lambda d: type(d).__name__ in _MAKING_ANEW)


@functools.lru_cache(maxsize=16)
def _flattening(specs: tuple, features: tuple, rows_apart: bool = False):
    """The traced function (and the structure it gives) that `_batches_for_encoding` maps
    over the elements' flat tensors. A dense component of unknown shape becomes a ragged row:
    the tensor itself if only its first dim is unknown, else its values flattened, with its
    shape beside them unless the number of values tells it (`_sized_dim`). A sparse one
    becomes its values and its indices (flattened) as ragged rows, and its dense shape: a
    batch of sparse tensors keeps only the largest. With `rows_apart`
    (`_ragged_may_come_as_rows`), ragged components are made one variant each.

    Also gives, for the rows of numbers that are flat (`_counted`), the number of values of
    each, after the other tensors; and the indices of those rows among the flat tensors."""
    structure, counted = [], []  # filled as the function is traced, once

    def flatten(*tensors):
        out, counts = [], []
        for f, s, x in zip(features, specs, tensors):
            if f.sparse:  # tf.data holds it as one variant (its three tensors serialized)
                indices, values, shape = tf.raw_ops.DeserializeSparse(serialized_sparse=x,
                                                                      dtype=s.dtype)
                out += [_ragged_variant(values), _ragged_variant(tf.reshape(indices, [-1])),
                        shape]
                structure.append((tf.RaggedTensorSpec([None], s.dtype, 0, tf.int64),
                                  tf.RaggedTensorSpec([None], tf.int64, 0, tf.int64),
                                  tf.TensorSpec([len(f.shape)], tf.int64)))
                continue
            if rows_apart and isinstance(s, tf.RaggedTensorSpec):
                splits, values = tf.raw_ops.RaggedTensorFromVariant(
                    encoded_ragged=x, input_ragged_rank=-1, output_ragged_rank=s.ragged_rank,
                    Tvalues=s.dtype, Tsplits=s.row_splits_dtype)
                out.append(_ragged_variant(values, splits))
                structure.append(s)
                continue
            if not f.dense_unknown:
                out.append(x)
                structure.append(s)
                continue
            # The element as its spec says (a wrong set_shape after a numpy_function, say):
            # tf.data's own iterator would refuse it, but flattened it would be written. Its
            # message names the input, which `inputs` names after the feature (`_input_name`)
            x = tf.ensure_shape(x, s.shape)
            if _counted(f):
                counted.append(len(out))
                counts.append(tf.size(x, out_type=tf.int64))
            if _sized_dim(f) == 0:
                out.append(_ragged_variant(x))
                structure.append(tf.RaggedTensorSpec(s.shape, s.dtype, 0, tf.int64))
            else:
                out.append(_ragged_variant(tf.reshape(x, [-1])))
                row = tf.RaggedTensorSpec([None], s.dtype, 0, tf.int64)
                if _sized_dim(f) is None:
                    out.append(tf.shape(x, out_type=tf.int64))
                    row = (row, tf.TensorSpec([len(f.shape)], tf.int64))
                structure.append(row)
        return out + counts

    inputs = [tf.TensorSpec(s.shape, s.dtype, name=_input_name(i, f.name))
              if f.dense_unknown else s
              for i, (f, s) in enumerate(zip(features, _flat_specs(specs)))]
    function = _one_device_trace(flatten, inputs)
    counts = (tf.TensorSpec([], tf.int64),) * len(counted)
    return function, (tuple(structure), counts), tuple(counted)


def _counted(feature: _Feature) -> bool:
    """Whether the flattening map (`_flattening`) counts the values of a dense component of
    unknown shape, so that `_joined_rows` can join a read of its rows: numbers whose rows are
    flat (`[None]`, or flattened). TensorFlow's decoding of a read copies such rows a value
    at a time; rows with dims after the first go a row of those at a time (`[None, 64]`),
    and strings a string at a time either way."""
    return feature.dtype.name != "string" and (len(feature.shape) == 1
                                               or _sized_dim(feature) != 0)


def _input_name(index: int, feature_name: str) -> str:
    """A function input's name that names the feature in TensorFlow's messages: its index
    among the features, so that no two are alike (`a/b` and `A_b`, say), and its own name as
    far as a function's argument names allow (lower case letters, digits and `_`: TensorFlow
    would make them so)."""
    return f"super_serial_feature_{index}_" + re.sub(r"[^a-z0-9_]", "_", feature_name.lower())


def _sized_dim(feature: _Feature) -> int | None:
    """The unknown dim of a shape whose number of values gives it: its only unknown dim,
    after known dims that are not 0."""
    unknown = [axis for axis, d in enumerate(feature.shape) if d is None]
    if len(unknown) == 1 and 0 not in feature.shape:
        return unknown[0]
    return None


# Options for a pipeline that runs no function of the user's: save's reads of a dataset that
# applies none (`_applies_functions`), verify's reads, counting an original-module file's
# records. Neither tf.data's default graph rewrites nor its autotuning have anything to improve
# there:
# - The rewrites (parallelizing maps, fusing them with batches, ...) copy the whole dataset
#   graph each time an iterator is made, constants included: 25 ms for 100 MB of arrays in
#   from_tensor_slices.
# - Autotuning runs a thread that optimizes the pipeline 10, 30, 70, 150... ms after the
#   iterator is made, each wait twice the last (up to a minute), and deleting the iterator
#   often waits out the current one (TensorFlow 2.21: 0.3 s after a read of 0.3 s, 2.6 s
#   after one of 7.6 s). Without it, parallel ops take a thread a core and AUTOTUNE prefetches
#   grow while they run dry. Alternating runs of 11: saves 3-20% faster, their slowest runs
#   half as slow; verify of tabular 314 -> 137 ms.
_OWN_PIPELINE = tf.data.Options()
_OWN_PIPELINE.experimental_optimization.apply_default_optimizations = False
_OWN_PIPELINE.autotune.enabled = False


def _applies_functions(dataset) -> bool:
    """Whether the pipeline may run a function that graph rewrites could change (a map,
    filter, interleave...): any function but the one `from_generator` starts its generator
    with, and any when it was made from a variant, which hides its pipeline, or cannot be
    looked into."""
    return _any_upstream(dataset, lambda d: not all(
        _starts_generator(f.function) for f in d._functions()))


def _costly_elements(dataset) -> bool:
    """Whether the pipeline calls a function for each element it makes (a Python generator, a
    map...; 20 to 300 us an element here) before any cache, or cannot be looked into. Reading
    such elements a few at a time costs less beside that than elsewhere (the smallest took
    18 to 39% more time so: CHANGELOG.md)."""
    return _any_upstream(dataset, lambda d: bool(d._functions()),
                         stop=lambda d: type(d).__name__ == "CacheDataset")


def _any_upstream(dataset, test, stop=lambda d: False) -> bool:
    """Whether `test` holds for the dataset or one upstream of it (not past one that `stop`
    holds for); also when one was made from a variant, which hides its pipeline, or tf.data's
    internals cannot be looked into."""
    todo = [dataset]
    try:
        while todo:
            dataset = todo.pop()
            if stop(dataset):
                continue
            if type(dataset).__name__ == "_VariantDataset" or test(dataset):
                return True
            todo.extend(dataset._inputs())
    except Exception:  # noqa: BLE001 - tf.data internals changed: assume the worst
        return True
    return False


# All a function does that only makes a `from_generator` dataset: none of it, nor the Python
# generator it runs, is anything tf.data's rewrites change (7 ms of them for 2,500 elements)
_GENERATOR_OPS = frozenset({"GeneratorDataset", "Identity", "NoOp", "Placeholder"})


def _starts_generator(function) -> bool:
    return {op.type for op in function.graph.get_operations()} <= _GENERATOR_OPS


def _rows(leaf) -> int:
    if isinstance(leaf, tuple):
        leaf = leaf[1]
    if isinstance(leaf, tf.SparseTensor):
        return int(np.asarray(leaf.dense_shape)[0])  # indexing an eager tensor: 0.5 ms
    if isinstance(leaf, tf.RaggedTensor):
        return leaf.row_splits.shape[0] - 1
    if isinstance(leaf, _Rows):
        return len(leaf.values)
    return int(leaf.shape[0])


try:  # optional (super_serial[fast]): CRC32C in C, so that save can frame records itself
    with warnings.catch_warnings():  # its pure-Python fallback (no wheel with its C code for
        # the Python) warns on import, an error under -W error; save does not use it then
        warnings.simplefilter("ignore", RuntimeWarning)
        import google_crc32c
except ImportError:  # pragma: no cover - depends on what is installed
    google_crc32c = None


def _record_writer(path: str, compression: str | None):
    """A TFRecord file writer: `write(prepare(records, sizes))`, then `close()`.

    `write` runs in a writer thread (it gives the GIL up); `prepare` in the thread that
    encodes (it needs the GIL anyway), but for saves of `shard_size`, whose writer thread
    prepares each batch as it comes to it.

    Uncompressed files are framed here when a C implementation of CRC32C is installed (one
    write per batch); otherwise, and for compressed files, tf.io.TFRecordWriter writes them.
    Both write the same bytes.
    """
    if compression is None and getattr(google_crc32c, "implementation", None) == "c":
        return _FramedFile(path)
    return _TFRecordFile(path, compression)


class _TFRecordFile:
    def __init__(self, path: str, compression: str | None):
        options = tf.io.TFRecordOptions(compression_type=compression or "")
        self.writer = tf.io.TFRecordWriter(path, options)

    def prepare(self, records: list, sizes: np.ndarray) -> list:
        return records

    def write(self, records: list):
        write = self.writer.write
        for record in records:
            write(_joined(record))

    def close(self):
        try:
            self.writer.close()
        except tf.errors.OpError:
            # A compressed writer whose last flush fails (a full disk) keeps its file open, and
            # with it the file's space once the save removes it; a second close releases it
            try:
                self.writer.close()
            except tf.errors.OpError:
                pass
            raise


class _FramedFile:
    def __init__(self, path: str):
        # Local files get os.pwritev, straight from the records without a joined copy, each
        # batch at its offset; other filesystems (and systems without pwritev) GFile.
        self.path = path
        self.fd = os.open(_local(path), _NEW_FILE_FLAGS, 0o666) if (
            _is_local(path) and hasattr(os, "pwritev")) else None
        self.file = tf.io.gfile.GFile(path, "wb") if self.fd is None else None
        if self.file is not None:
            self.file.write(b"")  # creates the file now, as TFRecordWriter does
        self.size = 0  # bytes prepared so far: where the next prepared batch goes

    def prepare(self, records: list, sizes: np.ndarray):
        pieces = _frame(records, sizes) if records else []
        offset = self.size
        self.size += int(sizes.sum()) + _FRAMING_BYTES * len(records)
        return offset, pieces

    def write(self, prepared):
        offset, pieces = prepared
        if not pieces:
            return
        if self.fd is None:
            self.file.write(b"".join(pieces))  # bytes.join takes the read-only arrays too
            return
        # A call takes pieces until it has _WRITE_BYTES, and at most _IOV_MAX of them; where
        # each call ends comes from the pieces' running sizes, not a Python step a piece
        ends = np.cumsum(np.fromiter(map(len, pieces), np.int64, len(pieces)))
        start, before = 0, 0  # the call's first piece, and the bytes before it
        while start < len(pieces):
            stop = min(int(np.searchsorted(ends, before + _WRITE_BYTES)) + 1,
                       start + _IOV_MAX, len(pieces))
            size = int(ends[stop - 1]) - before
            self._pwritev(pieces[start:stop], size, offset)
            offset += size
            start, before = stop, before + size

    def _pwritev(self, chunk: list, size: int, offset: int):
        try:
            written = os.pwritev(self.fd, chunk, offset)
            if written < size:  # short write: the rest one call at a time
                rest = memoryview(b"".join(chunk))[written:]
                while rest:
                    rest = rest[os.pwrite(self.fd, rest, offset + written):]
                    written = size - len(rest)
        except OSError as e:  # a full disk, say: named by the file, as GFile's errors are
            raise OSError(e.errno, e.strerror, _local(self.path)) from None

    def close(self):  # closing twice is fine, as for TFRecordWriter
        if self.file is not None:
            self.file.close()
        elif self.fd != -1:
            os.close(self.fd)
            self.fd = -1


_WRITER_THREADS = 4  # at most, however many shards
_POLL_SECONDS = 0.2  # how often an idle writer thread looks whether the save was aborted
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0)
_IOV_MAX = 1024  # POSIX guarantees at least 16; Linux and macOS allow 1024
# Bytes a write call gathers (once past them, the call is made). Larger calls get slow at times
# on this VM: right after a CPU-heavy stretch (a GZIP save, say), one write of the 98 MB
# images took 100-440 ms where writes of 1 MiB took 21-48 and of 8 MiB 24-35
_WRITE_BYTES = 1 << 20


# What a TFRecord file holds for each record: its length, the masked CRC32C of the length, the
# record, the masked CRC32C of the record (little-endian). Between two records that is 16 bytes:
# the footer of one and the header of the next.
_GLUE = np.dtype([("footer", "<u4"), ("length", "<u8"), ("length_crc", "<u4")])
_FRAMING_BYTES = _GLUE.itemsize  # a record's framing in all
_CRC_MASK_DELTA = 0xA282EAD8


def _masked_crc32c(crcs) -> np.ndarray:
    """TFRecord's masking of CRC32C values: rotated right by 15 bits, plus a constant."""
    c = np.asarray(crcs, np.uint64)
    return ((((c >> 15) | (c << 17)) + _CRC_MASK_DELTA) & 0xFFFFFFFF).astype(np.uint32)


def _frame(records: list, sizes: np.ndarray) -> list:
    """Records (of `sizes` bytes) in TFRecord framing, as tf.io.TFRecordWriter writes them: a
    list of pieces to be written in order (the records themselves, and the bytes around
    them)."""
    n = len(records)
    whole = type(records[0]) is bytes  # else tuples of pieces (all records of a batch alike)
    lengths = sizes.astype(np.uint64)
    glue = np.zeros(n + 1, _GLUE)
    glue["length"][:n] = lengths
    glue["length_crc"][:n] = _masked_crc32c(_crc32c_u64(lengths))
    # CRC32C of each record; of a tuple, its pieces' in turn: reduce(extend, pieces, 0)
    crcs = map(google_crc32c.value, records) if whole else itertools.starmap(
        functools.reduce, zip(itertools.repeat(google_crc32c.extend), records,
                              itertools.repeat(0)))
    glue["footer"][1:] = _masked_crc32c(np.fromiter(crcs, np.uint64, n))
    # bytes slices, not memoryviews: these small copies are cheaper than views, which the
    # garbage collector tracks
    data, size = glue.tobytes(), _GLUE.itemsize
    pieces = [data[i * size:(i + 1) * size] for i in range(n + 1)]
    pieces[0], pieces[n] = data[4:size], data[n * size:n * size + 4]
    if whole:
        out = [None] * (2 * n + 1)
        out[0::2], out[1::2] = pieces, records
        return out
    out = []
    for glue_piece, record in zip(pieces, records):
        out.append(glue_piece)
        out += record
    out.append(pieces[n])
    return out


def _crc32c_table() -> np.ndarray:
    """CRC32C's table: the remainder of each byte, bit-reflected (polynomial 0x82F63B78)."""
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(0x82F63B78), table >> 1)
    return table.astype(np.uint32)


_CRC32C_TABLE = _crc32c_table()


def _crc32c_u64(values: np.ndarray) -> np.ndarray:
    """CRC32C of each value's 8 little-endian bytes (a record's length), for all at once: a
    byte at a time through the table, as any table-driven CRC32C does."""
    values = np.asarray(values, np.uint64)
    crc = np.full(values.shape, 0xFFFFFFFF, np.uint32)
    for shift in range(0, 64, 8):
        byte = ((values >> np.uint64(shift)) & np.uint64(0xFF)).astype(np.uint32)
        crc = _CRC32C_TABLE[(crc ^ byte) & np.uint32(0xFF)] ^ (crc >> np.uint32(8))
    return crc ^ np.uint32(0xFFFFFFFF)


def _out_of_files(error: BaseException) -> bool:
    """Whether opening a file failed because the process has too many open (EMFILE): an
    OSError from `os.open`, or TensorFlow's error from its own writer."""
    if isinstance(error, OSError):
        return error.errno == errno.EMFILE
    return isinstance(error, tf.errors.ResourceExhaustedError) and (
        "Too many open files" in str(error))


def _raise_nothing_saved(error: BaseException, what: str):
    """Raises an OSError or TensorFlow error of a failed save's (or merge's) own file work
    (writing or renaming its files, making their folders: a full disk, a folder it may not
    write in) as the same kind of error, its message (an OSError's strerror) beginning with
    `what` ("<path>: nothing was saved"), the file it names kept. Returns for any other
    error, which the caller raises as it is."""
    if isinstance(error, OSError) and error.errno is not None:
        raise OSError(error.errno, f"{what}: {error.strerror}", error.filename) from error
    if isinstance(error, tf.errors.OpError) and type(error) is not tf.errors.OpError:
        raise type(error)(error.node_def, error.op, f"{what}: {error.message}") from error


def _open_files_limit() -> str:
    """The words ", `ulimit -n`, is N" for `_RecordFiles`' error when files run out, where the
    platform tells the limit N; else none."""
    try:
        import resource  # not on Windows
    except ImportError:
        return ""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return "" if soft == resource.RLIM_INFINITY else f", `ulimit -n`, is {soft:,}"


class _RecordFiles:
    """Record files written under temporary names beside their destination.

    `commit` renames them into place and writes the header last; `abort` deletes them.
    """

    def __init__(self, tfrecord_path, num_shards, shard_size, compression, block_records):
        self.path = tfrecord_path
        self.folder = _dirname(tfrecord_path)
        self.base = _basename(tfrecord_path)
        self.token = uuid.uuid4().hex[:_TOKEN_CHARS]
        self.compression = compression
        self.shard_size = shard_size
        self.block_records = block_records
        # Shards dealt in turn: the first records, held until their block is fitted (`_fit`)
        self.held: list | None = [] if not shard_size and num_shards > 1 else None
        self.temp_paths: list[str] = []
        self.claim: int | None = None  # `_claimed`, while the save runs
        self.writers: list = []
        self.counts: list[int] = []
        self.bytes_written = 0
        self.current_bytes = 0
        self._queues: list = []
        self._threads: list = []
        self._aborted = False
        self.committing = False  # from the last write on: errors are of putting files in place
        self.unremoved: list = []  # (path, reason): old shards commit could not remove
        # (reason, files): the old header could not be read, and the files named as this
        # save's shards are, which it may have listed, were left (None: no listing)
        self.unread: tuple | None = None
        try:
            self._start(num_shards, shard_size)
        except BaseException as error:  # too many files open, say: what was made goes again
            opened = len(self.writers)
            self.abort()
            if _out_of_files(error) and not shard_size and num_shards > 1:
                raise OSError(errno.EMFILE, (
                    f"{tfrecord_path}: nothing was saved: {os.strerror(errno.EMFILE)}: "
                    f"num_shards={num_shards} "
                    f"keeps that many record files open at once, and this process could open "
                    f"{opened} (its limit on open "
                    f"files{_open_files_limit()}); save fewer shards, or with shard_size= "
                    "(one file open at a time), or raise the limit"
                )) from error
            if self.token in str(error):  # opening its own temporaries
                _raise_nothing_saved(error, f"{tfrecord_path}: nothing was saved")
            raise

    def _start(self, num_shards, shard_size):
        self.claim = _claimed(self.path, self.token)
        for _ in range(1 if shard_size else num_shards):
            self._open()
        # Writer threads (compression, checksums and writes give up the GIL, so shards are
        # written in parallel) while the main thread encodes; thread i writes the shards
        # i, i + threads, ... Each queue holds at most two batches' worth for its thread.
        # Never two threads a file: the kernel locks a file for each write, so a second thread
        # only spins on that lock (benchmarks/NOTES.md, 2026-12-03).
        threads = 1 if shard_size else min(num_shards, _WRITER_THREADS)
        self._queues = [queue.Queue(maxsize=2) for _ in range(threads)]
        self._error: BaseException | None = None
        for lane in range(len(self._queues)):  # listed once started: abort joins those
            thread = threading.Thread(target=self._drain, args=(lane,), daemon=True,
                                      name=f"super_serial-writer-{lane}")
            thread.start()
            self._threads.append(thread)

    def _open(self):
        temp = _temp_name(self.path, self.token, len(self.temp_paths))
        self.temp_paths.append(temp)
        self.writers.append(_record_writer(temp, self.compression))
        self.counts.append(0)
        self.current_bytes = 0

    def write(self, records: list, sizes: np.ndarray, first_index: int):
        """Queues a batch of encoded records (`_encode_records`) for the writer threads."""
        self._raise_pending()
        self.bytes_written += int(sizes.sum())
        if self.shard_size:
            self._queues[0].put((records, sizes))
        elif self.held is not None:
            self.held.append((records, sizes, first_index))
            if (sum(len(s) for _, s, _ in self.held) >= self.block_records
                    or self.bytes_written >= _TARGET_BATCH_BYTES):
                self._fit()
        else:
            self._queue_dealt(records, sizes, first_index)

    def _fit(self):
        """Fits the block of shards dealt in turn to the first records (`_fitted`): the first
        `block_records`, or those that make `_TARGET_BATCH_BYTES` (as many as a batch holds,
        so that one large record first does not make blocks of one), or all where fewer; then
        deals the records held until then. Records, not batches: the files are the same
        whatever batches `save` read and encoded."""
        held, self.held = self.held, None
        ends = np.cumsum(np.concatenate([sizes for _, sizes, _ in held] or [np.zeros(0)]))
        if not len(ends):  # no records at all
            return
        first = min(len(ends), self.block_records,
                    int(np.searchsorted(ends, _TARGET_BATCH_BYTES)) + 1)
        self.block_records = self._fitted(first, int(ends[first - 1]))
        for records, sizes, first_index in held:
            self._queue_dealt(records, sizes, first_index)

    def _queue_dealt(self, records: list, sizes: np.ndarray, first_index: int):
        work: list[list] = [[] for _ in self._queues]
        for shard, (part, part_sizes) in enumerate(self._deal(records, sizes, first_index)):
            if part:  # one write per file and batch: fewer GIL hand-overs
                lane = shard % len(work)
                work[lane].append((shard, self.writers[shard].prepare(part, part_sizes)))
                self.counts[shard] += len(part)
        for lane, items in enumerate(work):
            if items:
                self._queues[lane].put(items)

    def _deal(self, records: list, sizes: np.ndarray, first_index: int) -> list:
        """The records of each shard, and their sizes: block b (of block_records) goes to
        shard b % shards."""
        block, shards = self.block_records, len(self.writers)
        if shards == 1:
            return [(records, sizes)]
        runs: list[list] = [[] for _ in range(shards)]  # each shard's (start, end) of the batch
        i = 0
        while i < len(records):
            index = first_index + i
            end = min(len(records), (index // block + 1) * block - first_index)
            runs[(index // block) % shards].append((i, end))
            i = end
        return [(list(itertools.chain.from_iterable(records[a:b] for a, b in ends)),
                 np.concatenate([sizes[a:b] for a, b in ends] or [sizes[:0]])) for ends in runs]

    def _drain(self, lane: int):
        while True:
            # Polled, not waited for: a KeyboardInterrupt in the main thread's put can lose the
            # wake-up of a waiting get, and abort then stops the threads without their queues
            try:
                work = self._queues[lane].get(timeout=_POLL_SECONDS)
            except queue.Empty:
                if self._aborted:
                    return
                continue
            if work is None:
                return
            if self._error is None and not self._aborted:
                try:
                    if self.shard_size:
                        self._write_sequential(work)
                    else:
                        for shard, prepared in work:  # prepared, and counted, in write()
                            self.writers[shard].write(prepared)
                except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
                    self._error = e

    def _raise_pending(self):
        if self._error is not None:
            raise self._error

    def _stop_threads(self):
        if not self._aborted:
            for q in self._queues:
                q.put(None)
        for thread in self._threads:  # aborted: each stops within _POLL_SECONDS of its write
            thread.join()
        self._threads = []

    def _write_sequential(self, batch: tuple):
        """Into the current file, starting a new one once it holds shard_size bytes."""
        records, sizes = batch
        start = 0
        for i, size in enumerate(sizes.tolist()):
            if self.current_bytes >= self.shard_size:
                self._write_to(-1, records[start:i], sizes[start:i])
                start = i
                if len(self.writers) == _MAX_SHARDS:
                    raise ValueError(
                        f"{self.path}: shard_size={self.shard_size:,} bytes makes more than "
                        f"the {_MAX_SHARDS:,} files a save can name (name-00000-of-99999); "
                        "nothing was saved: give a larger shard_size")
                self.writers[-1].close()
                self._open()
            self.current_bytes += size + _FRAMING_BYTES
        self._write_to(-1, records[start:], sizes[start:])

    def _write_to(self, shard: int, records: list, sizes: np.ndarray):
        self.writers[shard].write(self.writers[shard].prepare(records, sizes))
        self.counts[shard] += len(records)

    def _fitted(self, records: int, nbytes: int) -> int:
        """The block for `records` records of `nbytes` bytes: about `_TARGET_BLOCK_BYTES` of
        them where they came out far larger than the element spec let guess (unknown shapes,
        strings), else the block sized from it. Shards dealt in turn fit theirs to the first
        records (`_fit`): blocks of 1,024 guessed for clips of 400 kB made load parse 400 MB
        at a time, and a save of fewer records than that put them all in the first file.
        Other saves fit theirs to all records (`parsed_block`)."""
        fitted = max(1, _TARGET_BLOCK_BYTES * records // max(nbytes, 1))
        return fitted if 2 * fitted < self.block_records else self.block_records

    def parsed_block(self, records: int) -> int:
        """`block_records` for the header. Round-robin shards keep the blocks they were dealt
        (fitted in `write`); elsewhere a block is only what `load` parses at once, so where
        records came out far larger than the element spec let guess (1 MB clips made blocks
        of 1,024), the block holds about `_TARGET_BLOCK_BYTES` of them instead."""
        if not records or (not self.shard_size and len(self.counts) > 1):
            return self.block_records  # nothing to fit; or round robin, a count for each file
        return self._fitted(records, self.bytes_written)

    def commit(self, header_path: str, make_header) -> _Header:
        if self.held is not None:  # fewer records than a fitted block's worth
            self._fit()
        self.committing = True
        self._stop_threads()
        self._raise_pending()
        for writer in self.writers:
            writer.close()
        self.writers = []
        names = _shard_file_names(self.base, len(self.temp_paths))
        if self.shard_size:  # save checked num_shards' names before writing; these are known now
            _check_not_folders([_join(self.folder, name) for name in names])
        shards = tuple(
            _Shard(name, count, tf.io.gfile.stat(temp).length)
            for name, count, temp in zip(names, self.counts, self.temp_paths)
        )
        header = make_header(shards)
        with _commit_lock(self.folder, _dirname(header_path)):
            stale, refused = self._old_shards(header_path)
            stale -= set(names)
            header_temp = _temp_name(header_path, self.token)
            self.temp_paths.append(header_temp)
            _write_header(header_temp, header, header_path)
            destinations = [_join(self.folder, name) for name in names] + [header_path]
            aside = _move_into_place(list(zip(self.temp_paths, destinations)), self.token)
            self.temp_paths = []
            for path in (_join(self.folder, name) for name in sorted(stale)):
                reason = _remove_quietly(path)  # warned of once the save is done
                if reason is not None:
                    self.unremoved.append((path, reason))
            if refused is not None:
                self.unread = (refused, self._other_save_names(names))
            # The old header moved aside goes last: a save killed before it removed the old
            # files leaves it, and the next save removes the files it lists then
            for backup in aside[::-1]:
                _remove_quietly(backup)
            # Its files are in place: what it cannot remove of others' is no failure of its own
            with contextlib.suppress(Exception):
                _remove_dead_temporaries(self.path, header_path, names)
        self._release()
        return header

    def _other_save_names(self, names: list) -> list | None:
        """The files beside the records named as a save to this path names its records, but
        for `names`; None where the folder cannot be listed."""
        try:
            listed = tf.io.gfile.listdir(_listable(self.folder))
        except tf.errors.OpError:
            return None
        return sorted(_join(self.folder, n) for n in listed
                      if _is_save_name(n, self.base) and n not in names)

    def _old_shards(self, header_path: str) -> tuple[set, str | None]:
        """Record files of the header being replaced (`_listed_record_files`), so that a save
        of fewer or other shards leaves none behind; and why that header cannot be read, where
        its files beside the records would be its own (None where it can)."""
        if not tf.io.gfile.exists(header_path) or not _lists_files_here(header_path, self.path):
            return set(), None  # not waited for where a killed save left its header's temporaries
        refused = _refusal(header_path)
        if refused is not None:  # its list unknown: files that may be on it are left
            return set(), refused
        return _files_listed(header_path, self.path), None

    def abort(self):
        self._aborted = True
        self._stop_threads()
        for writer in self.writers:
            try:
                writer.close()
            except Exception:  # noqa: BLE001 - cleaning up after the real error
                pass
        for temp in self.temp_paths:
            _remove_quietly(temp)
        self.writers, self.temp_paths = [], []
        self._release()

    def _release(self):
        # Taken first, closed once: a Ctrl-C met as the close returned (where Python runs its
        # handler) made the abort that followed close the number again (EBADF, or another
        # file's descriptor by then) and raise that instead of the KeyboardInterrupt
        claim, self.claim = self.claim, None
        if claim is not None:
            try:
                _remove_quietly(_temp_name(self.path, self.token, ".claim"))
            finally:
                os.close(claim)  # and with it the claim's lock


try:  # not on Windows, where saves are not locked (`_commit_lock`)
    import fcntl
except ImportError:  # pragma: no cover - depends on the platform
    fcntl = None


def _commit_lock(*folders: str):
    """An exclusive `flock` of each local folder (the records', the header's), held while a
    save puts its files in place: two saves to one path at once then commit one after the
    other, and the last one's files are all there. Their renames overlapped before, and could
    leave one save's header beside the other's records. Advisory (between saves, and anything
    else that locks the folder); none on remote filesystems, nor where a folder cannot be
    opened or locked (a save then goes on unlocked, as before)."""
    return _folder_locks(folders, shared=False, patience=None)


def _read_lock(*folders: str):
    """A shared `flock` of each local folder, held while `load` reads a header once more and
    checks its files against it, where they did not match at first: no save to a local path
    puts its files in place meanwhile (`_commit_lock`), so what is read then is of one save,
    however fast saves come one after another. Waited for up to `_PLACING_WAIT` s: a save
    stopped while it holds its lock delays each such read (two at most) that long, and the
    read then goes on without the lock."""
    return _folder_locks(folders, shared=True, patience=_PLACING_WAIT)


@contextlib.contextmanager
def _folder_locks(folders: tuple, shared: bool, patience: float | None):
    """`flock`s of the local folders among `folders`: shared or exclusive, waited for without
    end (`patience` None) or up to `patience` s, after which the rest are not taken."""
    opened = []
    try:
        local = {_local(f) for f in folders if _is_local(f)}
        for folder in local if fcntl is not None else ():
            try:
                opened.append(os.open(folder, os.O_RDONLY))
            except OSError:
                continue
        # One lock a folder, whatever its paths (a link, a bind mount): two would wait for
        # each other. Taken in one order in every process, so that no two wait for each other.
        held = {}
        for descriptor in opened:
            info = os.fstat(descriptor)
            held.setdefault((info.st_dev, info.st_ino), descriptor)
        deadline = None if patience is None else time.monotonic() + patience
        for _, descriptor in sorted(held.items()):
            if not _flock(descriptor, fcntl.LOCK_SH if shared else fcntl.LOCK_EX, deadline):
                break
        yield
    finally:
        for descriptor in opened:  # closing it releases its lock
            os.close(descriptor)


def _flock(descriptor: int, operation: int, deadline: float | None) -> bool:
    """Takes a lock of `descriptor`, waiting up to `deadline` (`time.monotonic`; None, no
    end). False where the wait ran out; True where it was taken, or where the filesystem
    has no flock (a save or load then goes on unlocked)."""
    try:
        if deadline is None:
            fcntl.flock(descriptor, operation)
            return True
        while True:
            try:
                fcntl.flock(descriptor, operation | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.005)
    except OSError:  # a filesystem without flock
        return True


def _claimed(tfrecord_path: str, token: str) -> int | None:
    """A save's claim on its temporaries, made before any of them and held until they are in
    place or removed: a shared `flock` of an empty file `.<name>.<token>.tmp.claim` beside
    its records (the descriptor to close, once the file is removed). It tells a later save
    that these temporaries are not a killed save's leftovers (`_remove_dead_temporaries`).
    Where such a save took the claim for a killed one's and removed it before it was locked,
    it is made again (that save found no other temporary of the token: none was made yet).
    None where temporaries are not cleaned up (`_cleaned_up_here`), or the file cannot be
    made or locked."""
    if _cleaned_up_here(_dirname(tfrecord_path)) is None:
        return None
    path = _local(_temp_name(tfrecord_path, token, ".claim"))
    for _ in range(3):
        try:
            descriptor = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except OSError:  # the writers opening their files name the error
            return None
        try:
            fcntl.flock(descriptor, fcntl.LOCK_SH)
            if os.fstat(descriptor).st_nlink:
                return descriptor
        except BaseException as error:  # a Ctrl-C too: nothing left of the claim
            os.close(descriptor)
            _remove_quietly(path)
            if not isinstance(error, OSError):
                raise
            return None
        os.close(descriptor)  # removed before it was locked: made again
    return None


# Filesystems on this machine's own disks or memory (Linux's names), whose flock covers every
# process that can reach them; not NFS, SMB or FUSE, where it may cover one machine only
_LOCAL_FILESYSTEMS = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "zfs", "f2fs",
                                "jfs", "bcachefs", "reiserfs", "overlay"})


def _cleaned_up_here(folder: str) -> os.stat_result | None:
    """The folder's `os.stat` where saves claim their temporaries there, and remove those of
    killed saves: a local path on one of `_LOCAL_FILESYSTEMS`, with flock (not Windows); else
    None. Elsewhere they cannot tell a killed save from a running one on another machine."""
    if fcntl is None or not _is_local(folder):
        return None
    try:
        info = os.stat(_local(folder) or ".")
    except OSError:
        return None
    return info if _filesystem_type(info.st_dev) in _LOCAL_FILESYSTEMS else None


def _filesystem_type(device: int) -> str | None:
    """The type of the filesystem mounted as `device` (st_dev), from /proc/self/mountinfo
    (Linux); None where it is not listed there, or not readable (other systems). Read anew
    each time (about 20 us for 20 mounts): a number of an unmounted filesystem (tmpfs, say)
    goes to the next one mounted, which may be NFS."""
    wanted = f"{os.major(device)}:{os.minor(device)}"
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as mounts:
            for line in mounts:
                fields, _, rest = line.partition(" - ")
                if fields.split()[2:3] == [wanted] and rest:
                    return rest.split()[0]
    except OSError:
        return None
    return None


# A save's temporaries (`_temp_name`): `.<name>.<token>.tmp<index>`, the index a record
# file's number, none for a header, ".old" for a file moved aside, ".claim" for its claim
_TEMPORARY = re.compile(
    r"\.(?P<name>.+)\.(?P<token>[0-9a-f]{12})\.tmp(?P<index>[0-9]*|\.old|\.claim)", re.DOTALL)


def _temporary_of(name: str, owner: str) -> tuple[str, str] | None:
    """(token, index) where `name` is a temporary that a save (of any token) makes of the path
    `owner` (`_temp_name`, names cut short included); else None."""
    match = _TEMPORARY.fullmatch(name)
    if match is None or _basename(_temp_name(owner, match["token"], match["index"])) != name:
        return None
    return match["token"], match["index"]


def _listed_record_files(listing: str, tfrecord_path: str, header_path: str) -> set:
    """The record files beside `tfrecord_path` that the header file `listing` (the header at
    `header_path`, or a copy of it a save moved aside) lists, as a save replacing it removes
    those its own files do not replace (`_RecordFiles._old_shards`).

    The header names its files but not their folder, so they are only taken for its own
    where nothing else claims them: the header is the records' default one, or there is none
    (which would describe files of those names); and each file has the size the header lists.
    A header saved with its records elsewhere made a save here delete another dataset's
    shards of the same names. Only files named as a save to `tfrecord_path` names them: a
    merged header also lists its parts' files, and those belong to the parts."""
    if not _lists_files_here(header_path, tfrecord_path):
        return set()
    return _files_listed(listing, tfrecord_path)


def _lists_files_here(header_path: str, tfrecord_path: str) -> bool:
    """Whether the files named by the header at `header_path` beside `tfrecord_path` may be
    its own (`_listed_record_files`): it is the records' default header, or there is none."""
    default = default_header_path(tfrecord_path)
    return _same_place(header_path, default) or not tf.io.gfile.exists(default)


def _files_listed(listing: str, tfrecord_path: str) -> set:
    """`_listed_record_files` where the header's files beside the records are its own."""
    try:
        old = _read_header(listing, tfrecord_path)
    except SuperSerialError:
        return set()
    folder, base = _dirname(tfrecord_path), _basename(tfrecord_path)
    return {s.file for s in old.shards if old.version and _is_save_name(s.file, base)
            and s.num_bytes is not None and _size(_join(folder, s.file)) == s.num_bytes}


def _remove_dead_temporaries(tfrecord_path: str, header_path: str, names: list):
    """Removes what saves to these paths that were killed (SIGKILL, the kernel out of memory)
    left: their record files, header, files moved aside and claim, all of them superseded by
    the save that has just put its files (`names` beside its records) in place. A save is
    taken for dead where its claim (`_claimed`) is there and no process holds it; where it is
    held the save runs, and where there is none (a merge's header, a save by an older
    version) nothing of that token is removed. Only regular files, in folders where saves
    claim theirs (`_cleaned_up_here`), each folder once whatever its paths."""
    folder, base = _dirname(tfrecord_path), _basename(tfrecord_path)
    ours = [_join(folder, name) for name in names]  # moved aside under names cut short too
    dead: dict = {}  # by token: whether that save is dead (its claim then removed)
    seen = set()
    for where in (folder, _dirname(header_path)):
        info = _cleaned_up_here(where)
        if info is None or (info.st_dev, info.st_ino) in seen:
            continue
        seen.add((info.st_dev, info.st_ino))
        try:
            listed = sorted(os.listdir(_local(where) or "."))
        except OSError:
            continue
        for name in listed:
            match = _TEMPORARY.fullmatch(name)
            if match is None:
                continue
            token, index = match["token"], match["index"]
            if index == "":
                owners = [header_path]
            elif index != ".old":  # a record file, or the claim
                owners = [tfrecord_path]
            else:  # a file moved aside: a header, or record files of any count
                owners = [header_path, *ours]
                if _is_save_name(match["name"], base):
                    owners.append(_join(folder, match["name"]))
            if not any(_same_place(_dirname(owner), where) and _temporary_of(name, owner)
                       for owner in owners):
                continue  # another dataset's, or not a temporary
            if token not in dead:
                dead[token] = _dead_claim(_temp_name(tfrecord_path, token, ".claim"))
            if not dead[token] or index == ".claim":  # the claim went with the verdict
                continue
            if index == "" or index == ".old" and _temporary_of(name, header_path):
                # A header: the one it replaced, moved aside, whose record files no save lists
                # now (their save was killed before it removed them); or its own, not yet in
                # place (the header goes last), whose record files it may have put in place,
                # under names no temporary's name gives away (helper-135)
                for stale in _listed_record_files(_join(where, name), tfrecord_path,
                                                  header_path) - set(names):
                    _remove_regular(_join(folder, stale))
            _remove_regular(_join(where, name))


def _dead_claim(path: str) -> bool:
    """Whether the save whose claim (`_claimed`) is at `path` was killed: the file is there,
    a regular one, and no process holds its lock. It is then removed, under that lock (a
    claim not yet locked, that this takes for dead, is made again: `_claimed`)."""
    try:
        descriptor = os.open(_local(path), os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:  # none: nothing to tell by
        return False
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return False
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.remove(_local(path))
        return True
    except OSError:  # held: the save runs
        return False
    finally:
        os.close(descriptor)


def _remove_regular(path: str):
    """Removes `path` where it is a regular file (not a link, a FIFO or a folder)."""
    try:
        if stat.S_ISREG(os.lstat(_local(path)).st_mode):
            os.remove(_local(path))
    except OSError:
        pass


def _move_into_place(moves: list, token: str):
    """Renames each (temporary, destination) pair in order, the header last.

    Files already at the destinations are first moved aside, the old header before anything
    else: a process killed among the renames leaves no header that would pair old records
    with new ones, so `load` refuses what is there. If any rename fails, the new files are
    removed and the old ones moved back, so a failed save changes nothing. Returns the
    files moved aside, the old header's first, for the caller to remove.
    """
    aside, placed = [], []  # the renames made: (backup, destination), (temp, destination)
    # The rename under way: (where it is listed once made, the pair, its source). A Ctrl-C
    # during its system call is raised once the call returns, the rename made: the rollback
    # then looks for the source by its exact name (ram:// calls any prefix of a file one)
    underway = None
    try:
        for _, destination in moves[-1:] + moves[:-1]:
            # Files only: save refuses a local folder there, and TensorFlow's ram:// calls any
            # prefix of its files a folder ("data.tfrecord" beside its shards)
            if tf.io.gfile.exists(destination) and not tf.io.gfile.isdir(destination):
                backup = _temp_name(destination, token, ".old")
                underway = (aside, (backup, destination), destination)
                tf.io.gfile.rename(destination, backup, overwrite=True)
                aside.append((backup, destination))
                underway = None
        for temp, destination in moves:
            underway = (placed, (temp, destination), temp)
            tf.io.gfile.rename(temp, destination, overwrite=True)
            placed.append((temp, destination))
            underway = None
    except BaseException as error:
        if underway is not None and not _exists_by_name(underway[2]):
            underway[0].append(underway[1])
        for _, destination in placed:
            _remove_quietly(destination)
        # The new files not yet in place go first too: on a full disk the renames back can
        # need the room (a folder's listing grows for the old names)
        for temp, destination in moves:
            if (temp, destination) not in placed:
                _remove_quietly(temp)
        stranded = []
        for backup, destination in aside:
            try:
                tf.io.gfile.rename(backup, destination, overwrite=True)
            except tf.errors.OpError:
                stranded.append((backup, destination))
        if stranded and isinstance(error, Exception):
            raise _stranded_error(error, stranded) from error
        raise
    return [backup for backup, _ in aside]


def _stranded_error(error: Exception, stranded: list) -> SuperSerialError:
    """The error of a failed save that could not put back old files it had moved aside
    (backup, destination): where they are, so that they can be renamed back by hand."""
    listed = "; ".join(f"{backup} back to {_basename(destination)}"
                       for backup, destination in stranded[:3])
    more = f"; and {len(stranded) - 3} more alike" if len(stranded) > 3 else ""
    return SuperSerialError(
        f"{_dirname(stranded[0][1])}: a save failed ({_printable(str(error))}) and could "
        f"not put back {len(stranded)} of the files there before, which it had moved aside; "
        f"load refuses them until they are renamed back (before saving there again: a save "
        f"may remove them): {listed}{more}")


def _exists_by_name(path: str) -> bool:
    """Whether `path` is there, by its exact name in its folder's listing (ram:// says any
    prefix of a file's name exists). Where the folder cannot be listed (an error, a name in
    it that is not UTF-8, a folder one may write in but not list): a local path is looked
    up by its name, and others are taken as gone; the rollback then undoes the rename, which
    does nothing where it was not made (but for an old file moved aside, which it would
    call stranded)."""
    try:
        return _basename(path) in tf.io.gfile.listdir(_listable(_dirname(path)))
    except Exception:  # noqa: BLE001 - a rollback must go on whatever the listing raises
        return _is_local(path) and os.path.lexists(_local(path))


def _size(path: str) -> int | None:
    try:
        return tf.io.gfile.stat(path).length
    except tf.errors.OpError:
        return None


def _remove_quietly(path: str) -> str | None:
    """Removes a file, raising nothing: the OS's reason where it cannot (another user's file
    in a folder with the sticky bit, say), None where it is gone (or was not there)."""
    try:
        tf.io.gfile.remove(path)
    except tf.errors.NotFoundError:
        pass
    except tf.errors.OpError as e:
        return _file_reason(path, e)
    return None


def _temp_name(path: str, token: str, index: int | str = "") -> str:
    """A hidden temporary name beside `path`: `.<name>.<token>.tmp<index>`. Where the whole
    would pass 255 bytes, most filesystems' limit on a name, the name is cut short and ends in
    `~` and a digest of all of it: long names that differ only at the end (a dataset's
    records and its header, its shards) still get temporaries of their own."""
    tail = f".{token}.tmp{index}"
    name = _basename(path).encode()
    room = _MAX_NAME_BYTES - 1 - len(tail)
    if len(name) > room:
        digest = b"~" + hashlib.sha1(name).hexdigest()[:12].encode()
        name = name[:room - len(digest)] + digest
    return _join(_dirname(path), f".{name.decode(errors='ignore')}{tail}")


_MAX_NAME_BYTES = 255
_TOKEN_CHARS = 12  # of a save's token, in its temporaries' names


def _write_header(path: str, header: _Header, header_path: str):
    """Writes the header to `path`, a temporary name of `header_path`; SchemaError, and
    nothing written, where load could not read it back (`_MAX_HEADER_BYTES`,
    `_MAX_HEADER_VALUES`)."""
    text = ("# super_serial header: the schema of the tf.train.Example records beside it.\n"
            + _header_text(header)).encode()
    problem = _beyond_header_limits(text, header)
    if problem:
        raise SchemaError(f"{header_path}: nothing was written: the header {problem}")
    with tf.io.gfile.GFile(path, "wb") as f:
        f.write(text)


def _beyond_header_limits(text: bytes, header: _Header) -> str | None:
    """How the header's `text` passes what load reads (`_MAX_HEADER_BYTES`,
    `_MAX_HEADER_VALUES`), if it does."""
    parts = f"(its {len(header.features):,} features and {len(header.shards):,} record files)"
    if len(text) > _MAX_HEADER_BYTES:
        return (f"would take {len(text):,} bytes, more than the {_MAX_HEADER_BYTES:,} load "
                f"reads {parts}")
    values = _values_at_most(text)
    if values > _MAX_HEADER_VALUES:
        return (f"could hold up to {values:,} values, more than the {_MAX_HEADER_VALUES:,} load "
                f"reads {parts}")
    return None


def _header_text(header: _Header) -> str:
    """The header as YAML. The features, most of it, are dumped once per schema (PyYAML's
    pure-Python emitter takes milliseconds for them) and put in place of a stand-in: the same
    text as dumping it whole, as the shard list keeps the top level in block style. Mappings
    are sorted but the structure's dicts (`_InOrder`)."""
    fields = dict(header.to_yaml(), features=_STAND_IN)
    fields["structure"] = _in_order(fields["structure"])
    text = _yaml(fields)
    line = f"\nfeatures: {_STAND_IN}\n"
    assert text.count(line) == 1, "the features' stand-in is not where it should be"
    return text.replace(line, "\n" + _features_yaml(header.features))


_STAND_IN = "super_serial_features"


class _HeaderDumper(yaml.SafeDumper):
    """PyYAML's safe dumper, except that strings holding a line break other than "\n" (NEL,
    LS, PS) are double-quoted, where they are escaped: in other styles PyYAML writes them as
    they are, and the loader folds them into a space (a dict key "a\x85b" read back as "a b")."""


def _represent_str(dumper, text: str):
    if any(c in text for c in "\x85\u2028\u2029"):
        return dumper.represent_scalar("tag:yaml.org,2002:str", text, style='"')
    return yaml.SafeDumper.represent_str(dumper, text)


_HeaderDumper.add_representer(str, _represent_str)


class _InOrder(dict):
    """A mapping that the header lists in its own order, not sorted: the structure's dicts,
    whose keys `load` gives back in that order (readers before it sorted them)."""


def _in_order(node):
    if isinstance(node, dict):
        return _InOrder((k, _in_order(v)) for k, v in node.items())
    if isinstance(node, list):
        return [_in_order(item) for item in node]
    return node


_HeaderDumper.add_representer(_InOrder, lambda dumper, mapping: dumper.represent_mapping(
    "tag:yaml.org,2002:map", list(mapping.items())))  # pairs, which PyYAML does not sort


def _yaml(mapping: dict) -> str:
    return yaml.dump(mapping, Dumper=_HeaderDumper, sort_keys=True, default_flow_style=None,
                     allow_unicode=True, width=100)


def _features_difference(features: tuple, others: tuple) -> str:
    """The first feature (and its field) where `features` differ from `others`, for merge's
    error: ": feature 'x', dtype 'float64' against 'float32'"; "" where none is told apart."""
    mine, theirs = ({f.name: f.to_yaml() for f in fs} for fs in (features, others))
    for name in [*mine, *(n for n in theirs if n not in mine)]:
        if name not in mine or name not in theirs:
            return f": {_named(name)} is only in {'this part' if name in mine else 'that one'}"
        for field in [*mine[name], *(k for k in theirs[name] if k not in mine[name])]:
            # a field a header leaves out where it has its default: `sparse` where false
            ours, other = (fs[name].get(field, False if field == "sparse" else None)
                           for fs in (mine, theirs))
            if ours != other:
                return f": {_named(name)}, {field} {_short(ours)} against {_short(other)}"
    return ""


def _structure_difference(ours, theirs, path: tuple = ()) -> str:
    """Where two headers' structures first differ, for merge's error (once their features are
    the same, in their parts with no tensor): " (at '1': None against an empty dict)"."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in [*ours, *(k for k in theirs if k not in ours)]:
            if key not in ours or key not in theirs:
                return (f" ({_short(_feature_name(path + (key,)))} is only in "
                        f"{'this part' if key in ours else 'that one'})")
            found = _structure_difference(ours[key], theirs[key], path + (key,))
            if found:
                return found
        return ""
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        for i, (mine, other) in enumerate(zip(ours, theirs)):
            found = _structure_difference(mine, other, path + (i,))
            if found:
                return found
        return ""
    if ours == theirs:
        return ""
    where = _short(_feature_name(path)) if path else "the element"
    return f" (at {where}: {_part_kind(ours)} against {_part_kind(theirs)})"


def _part_kind(node) -> str:
    if isinstance(node, str):
        return "a tensor"
    if isinstance(node, dict):
        return (f"a dict of {len(node)} key{'s' if len(node) != 1 else ''}" if node else
                "an empty dict")
    if isinstance(node, list):
        return f"a tuple of {len(node)}" if node else "an empty tuple"
    return "None"


def _as_saved_now(features: tuple) -> tuple:
    """The features with the encodings save writes now: earlier format versions stored some
    dtypes otherwise (int8 and uint8 as int64 before version 2, int16 and uint16 before 3)."""
    return tuple(dataclasses.replace(f, encoding=f.dtype.encoding) for f in features)


@functools.lru_cache(maxsize=16)
def _features_yaml(features: tuple) -> str:
    return _yaml({"features": {f.name: f.to_yaml() for f in features}})


def merge(part_paths, tfrecord_path, header_path=None) -> dict:
    """Combines datasets that separate `save` calls wrote (one per machine, say) into one.

    Writes one header that lists every part's record files, in the order of `part_paths`; no
    records are copied. Loading it gives the parts' elements one part after the other.

    Args:
      part_paths: The `tfrecord_path` of each part, each with its header at the default place.
        They must sit in the folder of `tfrecord_path`, hold the same structure, features and
        compression, and each be one file or saved with `shard_size` (round-robin shards of
        `num_shards` only keep their order within their own part's header).
      tfrecord_path: The name of the combined dataset; `load(tfrecord_path)` reads it.
      header_path: Where the combined header goes; default `<tfrecord_path>.header.yaml`.

    Returns:
      The combined header, as a dict.

    Raises:
      SchemaError: A part is in another folder, was saved with num_shards or by the original
        module, or cannot be combined with the first, a record file would be listed
        twice (a merged dataset given with its own parts), parts are named as a save to
        `tfrecord_path` names its own shards, or a part nests more than 256 levels; the
        message names the part. Also when the merged header would list more record files
        than fit in the 64 MiB a header may take.
      HeaderError: A part's header is missing or invalid, or lists the record files of a
        save to another name where a file named for the part is there too (a copied header,
        which `load` of the part refuses).
      CorruptDataError: A part's record file is missing or its size differs from its header's.
      ValueError: The merged dataset or its header would land on a part's files or on a
        folder, the merged name is a part's header, the header would land where a save to
        `tfrecord_path` puts its records (as `save` refuses), a part is listed twice or is
        "", a path is not UTF-8, the header's local file name is longer than 255 bytes, or
        one part would be merged where the records of an earlier save to `tfrecord_path` are
        (`load` could not tell that header from a copy of the part's).
      TypeError: A path is a tensor or of another type, or `part_paths` is not an iterable.
      OSError: Writing the header or making its folder failed (nothing is merged then): the
        error's kind (TensorFlow's, which writes it), with a message that begins
        "<header_path>: nothing was merged: ".

    Example:
      >>> # machine i of n: save(ds.shard(n, i), f"gs://bucket/data-part{i}")
      >>> n = 4
      >>> parts = [f"gs://bucket/data-part{i}" for i in range(n)]  # doctest: +SKIP
      >>> merge(parts, "gs://bucket/data")  # doctest: +SKIP
    """
    tfrecord_path = _fspath(tfrecord_path, "tfrecord_path")
    header_path = (_fspath(header_path, "header_path") if header_path is not None
                   else tfrecord_path + HEADER_SUFFIX)  # "" is refused below, as a folder
    if isinstance(part_paths, (str, bytes, os.PathLike)):
        raise ValueError(f"part_paths must list the parts' paths; got one path, "
                         f"{_fspath(part_paths, 'part_paths')!r}")
    if not isinstance(part_paths, collections.abc.Iterable):
        raise TypeError(f"part_paths must list the parts' paths, not "
                        f"{type(part_paths).__name__} ({part_paths!r:.80})")
    parts = [_fspath(p, "each of part_paths") for p in part_paths]
    if not parts:
        raise ValueError("merge() needs at least one part")
    for part in parts:
        _check_not_empty(part, "a path in part_paths")
    _check_names_a_file(tfrecord_path, header_path)
    _check_local_names([tfrecord_path, header_path, *parts])  # as save's `_check_paths`
    _check_not_folders([tfrecord_path, header_path])
    _check_name_length(header_path, _basename(header_path))  # not at the rename, as TF's error
    _check_header_not_on_records(tfrecord_path, header_path)
    places: dict = {}  # each part's place, resolved once: 2,000 parts compared pairwise took 14 s
    for i, part in enumerate(parts):
        if places.setdefault(_place(part), i) != i:
            raise ValueError(f"{part}: listed twice in part_paths")
        if _same_place(part, tfrecord_path) or _same_place(default_header_path(part),
                                                           header_path):
            raise ValueError(f"{part}: the merged dataset needs a name of its own; this would "
                             "replace the part's header")
        if _same_place(default_header_path(part), tfrecord_path):
            raise ValueError(f"{part}: the merged dataset needs a name of its own; "
                             f"{tfrecord_path} is the part's header")
    folder = _dirname(tfrecord_path)
    headers = []
    for part in parts:
        if not _same_place(_dirname(part), folder):
            raise SchemaError(f"{part}: parts must sit in the folder of {tfrecord_path}")
        header = _read_header(default_header_path(part), part)
        _check_names(header, part, default_header_path(part))  # a copy of another's, as load
        if not header.version:
            raise SchemaError(f"{part}: files of the original module cannot be merged")
        deepest = _deepest_part(header)[1]  # a None, {} or () may lie deeper than a feature
        if deepest > _MAX_NESTING:  # as save: PyYAML runs out of stack writing the header
            raise SchemaError(f"{part}: its element structure nests {deepest} levels deep; "
                              f"merge writes headers of at most {_MAX_NESTING}, as save does")
        _check_files(header, _shard_paths(header, part), default_header_path(part))
        if header.layout == "round_robin" and len(header.shards) > 1:
            raise SchemaError(f"{part}: saved with num_shards={len(header.shards)}; save parts "
                              "as one file each, or with shard_size")
        first = headers[0] if headers else header
        for what in ("features", "structure", "namedtuples", "compression"):
            if getattr(header, what) != getattr(first, what):
                where = ""
                if what == "features":
                    where = _features_difference(header.features, first.features)
                    if header.version != first.version and (
                            _as_saved_now(header.features) == _as_saved_now(first.features)):
                        older = part if header.version < first.version else parts[0]
                        where += (f" ({older} is of format version "
                                  f"{min(header.version, first.version)}, which stored it so: "
                                  "save it again to merge it)")
                elif what == "structure":
                    where = _structure_difference(header.structure, first.structure)
                elif what == "namedtuples" and not (header.namedtuples and first.namedtuples):
                    where = " (this part has none)" if first.namedtuples else (
                        " (that one has none)")
                differ = "differs from that" if what in ("structure", "compression") else (
                    "differ from those")
                raise SchemaError(f"{part}: its {what} {differ} of {parts[0]}{where}")
        headers.append(header)
    _check_part_files(parts, headers, tfrecord_path, header_path)
    _check_header_not_over_records(header_path)  # records of none of the parts
    shards = tuple(s for h in headers for s in h.shards)
    # One block size for all files: the smallest, so that no part's records are parsed in
    # blocks far past _TARGET_BLOCK_BYTES (the first part's, of small elements, made 195 MiB
    # blocks of another's 200 kB clips); not an empty part's, which has no records to fit
    # (saves before 2026-12-04 wrote 1 there, and every record was then parsed by itself)
    block = min((h.block_records for h in headers if h.num_records),
                default=headers[0].block_records)
    # the version every part's reader needs, whichever part comes first
    merged = dataclasses.replace(headers[0], shards=shards, layout="sequential",
                                 num_records=sum(h.num_records for h in headers),
                                 block_records=block, version=max(h.version for h in headers))
    beside = _beside_a_copy(merged, tfrecord_path)
    if beside is not None:  # one part: its header's copy, which load would refuse
        raise ValueError(f"{beside}: records of an earlier save are there, and a header that "
                         f"lists only {parts[0]}'s files beside them reads as a copy of that "
                         "part's header; remove them, or merge under another name")
    made = _make_folders(f"{header_path}: nothing was merged", header_path)  # as save does
    temp = _temp_name(header_path, uuid.uuid4().hex[:_TOKEN_CHARS])
    try:
        # Written and renamed under the folder's lock: a save there puts its files in place
        # before or after, never between the two
        with _commit_lock(_dirname(header_path)):
            _write_header(temp, merged, header_path)
            try:
                tf.io.gfile.rename(temp, header_path, overwrite=True)
            except tf.errors.OpError as e:  # TensorFlow's message names the temporary, gone
                if type(e) is tf.errors.OpError:
                    raise
                raise type(e)(e.node_def, e.op,
                              f"{header_path}; {_file_reason(temp, e)}") from e
    except BaseException as error:
        _remove_quietly(temp)
        _remove_empty_folders(made)  # as a failed save leaves none
        _raise_nothing_saved(error, f"{header_path}: nothing was merged")
        raise
    return merged.to_yaml()


def _check_part_files(parts: list, headers: list, tfrecord_path: str, header_path: str):
    """Errors where the merged header would list a record file twice (a part merged already,
    listed with its own parts), land on a part's records, or list records named as a save to
    `tfrecord_path` names its own, which a later save there would replace or remove."""
    folder, base = _dirname(tfrecord_path), _basename(tfrecord_path)
    owner: dict = {}
    for part, header in zip(parts, headers):
        for shard in header.shards:
            if shard.file in owner:
                raise SchemaError(f"{part}: its record file {shard.file!r} is also "
                                  f"{owner[shard.file]}'s; list each part once")
            owner[shard.file] = part
            if _same_place(_join(folder, shard.file), header_path):
                raise ValueError(f"{part}: header_path {header_path!r} is one of its record "
                                 "files; give the merged header a name of its own")
            if _is_save_name(shard.file, base):
                raise SchemaError(f"{part}: its record file {shard.file!r} is named as a save "
                                  f"to {tfrecord_path} names its own, which a save there "
                                  "would replace; merge under another name")


class _Progress:
    """A one-line progress meter on stderr, redrawn at most five times a second:
    `super_serial: save [#####.....]  50% 1,000/2,000 elements  49.2 MB  98.1 MB/s`.
    The bar and percentage need a known total; the megabytes need a byte count."""

    WIDTH = 20

    def __init__(self, action: str, unit: str, total, enabled: bool, stream=None):
        self.action, self.unit = action, unit
        self.total = int(total) if total is not None and total >= 0 else None
        self.stream = stream or sys.stderr
        self.enabled = enabled and self.stream is not None  # None: pythonw, a daemon
        self.start = self.last = time.perf_counter()
        self.shown = False
        self.width = 0  # of the longest line drawn: a shorter one clears what it leaves

    def update(self, done: int, nbytes: int | None = None, force: bool = False):
        now = time.perf_counter()
        if not self.enabled or (now - self.last < 0.2 and not force):
            return
        self.last = now
        parts = [f"super_serial: {self.action}"]
        if self.total is not None:
            fraction = min(done / self.total, 1.0) if self.total else 1.0
            filled = int(fraction * self.WIDTH)
            parts.append(f"[{'#' * filled}{'.' * (self.WIDTH - filled)}] {fraction:4.0%}")
            parts.append(f"{done:,}/{self.total:,} {self.unit}")
        else:
            parts.append(f"{done:,} {self.unit}")
        if nbytes is not None:
            mb = nbytes / 1e6
            parts.append(f" {mb:,.1f} MB  {mb / max(now - self.start, 1e-9):,.1f} MB/s")
        line = " ".join(parts)
        self.stream.write("\r" + line.ljust(self.width))
        self.width = max(self.width, len(line))
        self.stream.flush()
        self.shown = True

    def close(self):
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


@tf.autograph.experimental.do_not_convert  # no tensor-dependent Python control flow inside
def load(
    tfrecord_path,
    header_path=None,
    *,
    original_dtypes: bool = True,
    batch_size: int | None = None,
    drop_remainder: bool = False,
    shuffle_files: bool = False,
    seed: int | tf.Tensor | None = None,
    deterministic: bool | None = True,
) -> tf.data.Dataset:
    """Loads records saved by `save` (or by the original super_serial module) as a dataset.

    Works eagerly and inside `tf.function`. Records are parsed in blocks with
    `tf.io.parse_example`, the shards of `num_shards` (or any, with `deterministic=False`)
    read in parallel, and the record counts and file sizes in the header are checked.

    Args:
      tfrecord_path: The path given to `save` (shards are found from the header).
      header_path: The header; default `<tfrecord_path>.header.yaml`.
      original_dtypes: Restore the saved dtypes (default). False gives the TFRecord lists'
        dtypes: int64, float32, and string (raw-encoded features come back as their bytes,
        one string an element, without the shapes, row lengths or indices of those whose
        shape is unknown, ragged or sparse).
      batch_size: Give batches of this many elements instead of single elements (faster than
        `.batch()` afterwards; components of unknown shape are batched as ragged tensors, as
        `Dataset.ragged_batch` does, and sparse ones as `Dataset.batch` does).
      drop_remainder: With `batch_size`, drop a last smaller batch (ValueError without it).
      shuffle_files: Read the shard files in a random order (a new one each epoch).
      seed: Seed of that shuffle (ValueError without it): an integer, or an integer
        tensor inside a `tf.function`. Combined with the global seed (`tf.random.set_seed`),
        as `Dataset.shuffle`'s seed is.
      deterministic: False lets shards and blocks arrive in whichever order is fastest (None
        means True, as in tf.data).

    Returns:
      A `tf.data.Dataset` with the saved element structure, dtypes and shapes.

    Raises:
      HeaderError: The header is missing, cannot be read, or is invalid, or lists none of the
        record files named for `tfrecord_path` while one is there (a pair copied under
        another name). Where a save in another process is putting its files in place there,
        `load` first waits for its new header, up to 2 s.
      CorruptDataError: A record file is missing or cannot be opened, its size differs from
        the header's, or it is too small for the records and shapes the header gives.
      ValueError: An option has an invalid value, or one that would do nothing (`seed`
        without `shuffle_files`, `drop_remainder` without `batch_size`), or a path is not
        UTF-8 or is "".
      TypeError: A path is a tensor (paths are Python strings: the header is read while the
        pipeline is built) or of another type, or, inside a `tf.function`, an option that
        shapes the pipeline (`batch_size`, `drop_remainder`, `original_dtypes`,
        `shuffle_files`, `deterministic`) is a tensor of the function.
      SuperSerialError: Called in a process forked after TensorFlow's runtime started (as
        `multiprocessing`'s "fork" workers are), where TensorFlow's calls hang.

    Iterating raises `tf.errors.InvalidArgumentError` whose message holds "super_serial:
    <file>: ..." (after TensorFlow's own prefix) when a file holds fewer or more records than
    its header says, or is corrupt or truncated (TFRecord checksums are checked), and
    TensorFlow's parse error, naming the file, the record
    and the feature, when records do not match the header. `verify` turns both into
    `CorruptDataError`. A record that is no `tf.train.Example` TensorFlow can parse raises
    TensorFlow's error quoting it, or a `UnicodeDecodeError` where that quote is not UTF-8
    (tensorflow#5676); `verify` names its file and index.

    Example:
      >>> ds = load("data.tfrecord")  # doctest: +SKIP
      >>> for element in ds.take(1): print(element["x"])  # doctest: +SKIP
    """
    dataset = _load(tfrecord_path, header_path, original_dtypes, batch_size, drop_remainder,
                    shuffle_files, seed, deterministic)
    _LOADED.add(dataset)
    return dataset


def _load(tfrecord_path, header_path, original_dtypes=True, batch_size=None,
          drop_remainder=False, shuffle_files=False, seed=None, deterministic=True,
          verifying=False, checked: tuple | None = None) -> tf.data.Dataset:
    """`load`; `verifying`: verify's dataset, of the records' count in each block checked
    (`_Reading.verifying`); `checked`: the header and paths of `_checked_header`, where the
    caller has read them already (and reports on that header: one read, whatever a save does
    since), and iterates the dataset at once, so that its errors name the files as given."""
    _check_not_forked("load")
    tfrecord_path = _fspath(tfrecord_path, "tfrecord_path")
    header_path = (_fspath(header_path, "header_path") if header_path is not None
                   else default_header_path(tfrecord_path))
    batch_size = _count(batch_size, "batch_size")
    original_dtypes = _flag(original_dtypes, "original_dtypes")
    drop_remainder = _flag(drop_remainder, "drop_remainder")
    shuffle_files = _flag(shuffle_files, "shuffle_files")
    deterministic = _flag(deterministic, "deterministic", default=True)  # None: tf.data's
    if isinstance(seed, tf.Tensor):  # inside tf.function, say
        if not seed.dtype.is_integer or seed.shape.rank not in (0, None):
            raise ValueError(f"seed must be an integer or None, got a tensor of "
                             f"{seed.dtype.name} and shape {seed.shape}")
        seed = tf.cast(seed, tf.int64)  # what the shuffle takes (an int32 one failed there)
    elif seed is not None:
        number = _integer(seed)
        if number is None or not -(2**63) <= number < 2**63:  # the shuffle's int64
            raise ValueError(f"seed must be an integer of 64 bits or None, got {seed!r}")
        seed = number
    if seed is not None and not shuffle_files:
        raise ValueError("seed is the seed of shuffle_files=True's shuffle, and does nothing "
                         "without it")
    if drop_remainder and batch_size is None:
        raise ValueError("drop_remainder=True drops the last batch of batch_size=, and does "
                         "nothing without it; for load(...).batch(n), pass it to .batch")
    header, paths = checked or _checked_header(header_path, tfrecord_path)
    reading = _Reading(
        one_file=len(paths) == 1, shuffle_files=shuffle_files and len(paths) > 1,
        parallel=header.layout == "round_robin" or not deterministic,
        deterministic=deterministic, batch_size=batch_size, drop_remainder=drop_remainder,
        verifying=verifying, in_graph=not tf.executing_eagerly())
    if checked is None:  # the dataset reads the files it was loaded from, after a chdir too
        # (it read the new folder's files of those names, without a word where their record
        # counts matched)
        paths = [os.path.abspath(p) if "://" not in p else p for p in paths]
    texts = [_utf8_text(p) for p in paths]  # a working folder's name in another locale
    if None in texts:
        raise ValueError(f"{paths[texts.index(None)]!r}: {_NOT_UTF8} (a relative path takes "
                         "the working folder's name)")
    paths = tf.constant(texts)
    counts = tf.constant([s.num_records for s in header.shards], tf.int64)
    if reading.shuffle_files:  # built afresh: each load draws its own seeds, as Dataset ops do
        return _Pipeline(header, original_dtypes, reading).build(paths, counts, seed=seed)
    pipeline = _pipeline(header, original_dtypes, reading)
    # In a graph, built in it: a call of the traced function there is a stateful op, which
    # tf.data refuses to checkpoint in a dataset's function ("StatefulPartitionedCall is
    # stateful": an iterator over an interleave of loads)
    return pipeline.build(paths, counts) if reading.in_graph else pipeline(paths, counts)


def _checked_header(header_path: str, tfrecord_path: str) -> tuple[_Header, list]:
    """The header and its record files' paths, the files checked against it (`_check_files`).

    Where they do not match, reads and checks again, up to three times in all, now with the
    folders' read lock held (`_read_lock`): a save in another process may have begun to put
    its files in place since the header was read (its new header has the same fields where
    the new dataset has the same schema and sizes). Reading the header again waits for that
    save's (`_header_bytes`), and the lock keeps the next save's renames from coming between
    the header and the files (saves on other machines, or by older versions, take no lock;
    a third read is for them). Files that do not match for any other reason fail the same way
    each time, at the cost of two more reads of the header (none for the original module's,
    whose records are counted by reading the file).
    """
    _check_not_empty(tfrecord_path, "tfrecord_path")
    _check_not_empty(header_path, "header_path", _HEADER_EXAMPLE)
    attempts, locked = 3, False  # the first read takes no lock: a save rarely comes between
    folders = _dirname(tfrecord_path), _dirname(header_path)
    while True:
        if locked and not tf.io.gfile.exists(header_path):
            # waited for here, not with the lock held: a save to these paths may be what puts
            # it back, as it removes a killed save's leftovers (`_RecordFiles.commit`)
            _header_bytes(header_path, tfrecord_path)
        with _read_lock(*folders) if locked else contextlib.nullcontext():
            header = _read_header(header_path, tfrecord_path)
            paths = _shard_paths(header, tfrecord_path)
            _check_names(header, tfrecord_path, header_path)
            checked = header if header.version else _count_records(header, paths[0])
            try:
                _check_files(checked, paths, header_path)
                return checked, paths
            except CorruptDataError:
                attempts -= 1
                if not attempts or not header.version:  # the original module's: counted
                    raise
        locked = True


def _shard_paths(header: _Header, tfrecord_path: str) -> list[str]:
    if not header.version:  # the original module: one file, no shard list
        return [tfrecord_path]
    folder = _dirname(tfrecord_path)
    return [_join(folder, s.file) for s in header.shards]


def _count_records(header: _Header, path: str) -> _Header:
    """The header of an original-module file with its record count, read from the file once
    (its header has none); a corrupt or truncated file raises CorruptDataError here.

    Records are counted a block at a time (as many as load parses at once): `reduce` calls
    its function for each element, 31 us a record here, against 0.9 us in blocks of 256.
    Their bytes are summed too: TensorFlow's reader takes a file that ends inside a record's
    framing (cut fewer than 12 bytes into it) for one that ends there, so the framed records
    must add up to the file's size."""
    @tf.autograph.experimental.do_not_convert  # AutoGraph would read it from the file again
    def add(totals, block):
        return (totals[0] + tf.size(block, out_type=tf.int64),
                totals[1] + tf.reduce_sum(tf.cast(tf.strings.length(block), tf.int64)))

    _check_regular(path, "")  # a FIFO: its read would wait for a writer
    with tf.init_scope():  # eagerly, also while a tf.function is being traced
        try:
            blocks = tf.data.TFRecordDataset(path).batch(header.block_records)
            count, payload = (int(t) for t in blocks.with_options(_OWN_PIPELINE).reduce(
                (np.int64(0), np.int64(0)), add))
            size = tf.io.gfile.stat(path).length
        except tf.errors.NotFoundError:
            raise CorruptDataError(f"{path}: record file not found") from None
        except tf.errors.OpError as e:
            _check_not_a_folder(path, "")
            raise CorruptDataError(f"{path}: {_tf_message(e)}: the file is corrupt or "
                                   "truncated") from None
    framed = payload + count * _FRAMING_BYTES
    if header.compression is None and size != framed:
        raise CorruptDataError(
            f"{path}: {size - framed} bytes after its last whole record (record {count}): the "
            "file is truncated inside a record, or has bytes appended")
    shard = dataclasses.replace(header.shards[0], num_records=count)
    # Blocks of about _TARGET_BLOCK_BYTES by the records' real size, which the header's
    # shapes cannot tell for strings (encoded images of 1 MB: 256 MB parsed at once)
    average = payload // max(count, 1)
    block = _records_per_block(average, header.block_records)
    return dataclasses.replace(header, num_records=count, shards=(shard,), block_records=block)


def _check_names(header: _Header, tfrecord_path: str, header_path: str):
    """A header names its record files, and `tfrecord_path` gives only their folder: a header
    copied beside a copy of its records would make `load` read the original ones. Refused
    where the header lists the files of a save to another name, and a file named for
    `tfrecord_path` is there (`_beside_a_copy`)."""
    path = _beside_a_copy(header, tfrecord_path)
    if path is not None:
        raise HeaderError(
            f"{header_path}: lists the record files {_short(header.shards[0].file)}"
            f"{', ...' if len(header.shards) > 1 else ''}, not {path}, which is there too: "
            "the header was saved with other records (copied or renamed beside these?)")


def _beside_a_copy(header: _Header, tfrecord_path: str) -> str | None:
    """The file named for `tfrecord_path` (at the path, or its first shard's name) where it is
    there and `header` lists exactly the files of a save to another name; else None. A header
    merged from several parts lists files that are no one save's: loaded as they are, also
    where the records of an earlier save to its path are still there."""
    base = _basename(tfrecord_path)
    names = [s.file for s in header.shards]
    if not header.version or any(_is_save_name(name, base) for name in names):
        return None
    other = names[0] if len(names) == 1 else names[0].rpartition("-00000-of-")[0]
    if names != _shard_file_names(other, len(names)):  # merged
        return None
    folder = _dirname(tfrecord_path)
    for name in dict.fromkeys([base, _shard_file_names(base, len(header.shards))[0]]):
        path = _join(folder, name)
        if tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path):
            return path
    return None


def _check_not_a_folder(path: str, listed: str):
    """CorruptDataError where a record file's path is a folder, or a file that is not a
    regular one (a FIFO), whose size or read error would otherwise tell of a truncated file
    (and whose read can wait forever)."""
    if tf.io.gfile.isdir(path):
        raise CorruptDataError(f"{path}: a folder, not a record file{listed}")
    _check_regular(path, listed)


def _check_regular(path: str, listed: str):
    """CorruptDataError where a record file's path is a local file that is not a regular one
    nor a folder (`_special_file`: a FIFO, a device)."""
    kind = _special_file(path)
    if kind:
        raise CorruptDataError(f"{path}: {kind}, not a record file{listed}")


def _check_files(header: _Header, paths: list, header_path: str):
    framed = _FRAMING_BYTES + _least_record_bytes(header.features)  # least bytes on disk
    for shard, path in zip(header.shards, paths):
        # a FIFO has no size to tell, and its read waits for a writer
        _check_regular(path, f" (listed in {header_path})")
        try:
            size = tf.io.gfile.stat(path).length
        except tf.errors.NotFoundError:
            raise CorruptDataError(f"{path}: record file not found (listed in {header_path})"
                                   ) from None
        except tf.errors.OpError as e:  # permission denied, say
            refused = _file_reason(path, e)
        else:
            refused = _refusal(path)
        if refused is not None:
            raise CorruptDataError(f"{path}: cannot read record file (listed in {header_path}): "
                                   f"{refused}")
        if shard.num_bytes is not None and size != shard.num_bytes:
            _check_not_a_folder(path, f" (listed in {header_path})")  # stat gives it a size
            raise CorruptDataError(
                f"{path}: {size} bytes on disk, but {header_path} says {shard.num_bytes}: the "
                "file is truncated, was overwritten, or belongs to another header"
            )
        least = (shard.num_records or 0) * framed
        if header.compression is None and size < least:
            raise CorruptDataError(
                f"{path}: {size} bytes cannot hold the {shard.num_records} records of the shapes "
                f"that {header_path} gives (at least {least} bytes)"
            )


@dataclasses.dataclass(frozen=True)
class _Reading:
    """How `load` reads, besides the schema: the options that shape its pipeline."""

    one_file: bool
    shuffle_files: bool
    parallel: bool  # shards read at once, not one after another
    deterministic: bool
    batch_size: int | None
    drop_remainder: bool
    # verify's: each block's records checked and decoded, and their count given, not the
    # elements (a batch of elements of unknown shape is ragged, its row splits an int64 a row,
    # so elements of zero size with 2**40 rows took all memory, or TensorFlow looped over
    # them); and integers restored to a narrower dtype checked to fit it
    verifying: bool = False
    # load() called in a graph (a tf.function, or a tf.data function such as flat_map's): its
    # functions are not marked one-device (`_ONE_DEVICE_FUNCTION`)
    in_graph: bool = False


_PIPELINES: collections.OrderedDict = collections.OrderedDict()  # most recently used last
_PIPELINES_KEPT = 16
_PIPELINES_LOCK = threading.Lock()


def _pipeline(header: _Header, original_dtypes: bool, reading: _Reading) -> _Pipeline:
    """The pipeline of a schema and options, shared by every load of them in this process."""
    key = (header.schema(), header.block_records, header.compression, original_dtypes,
           reading)
    with _PIPELINES_LOCK:
        pipeline = _PIPELINES.pop(key, None)
        if pipeline is None:
            with tf.init_scope():  # traced as if eagerly, also when load() runs in a tf.function
                pipeline = _Pipeline(header, original_dtypes, reading)
                if not reading.in_graph:  # built in the graph there (`_load`)
                    pipeline.trace()
        _PIPELINES[key] = pipeline
        while len(_PIPELINES) > _PIPELINES_KEPT:
            _PIPELINES.popitem(last=False)
    return pipeline


class _Pipeline:
    """The dataset `load` gives, built from file paths and their record counts.

    `build` makes it with Dataset methods. `__call__` runs one traced function that builds the
    same dataset: in eager mode each dataset op costs about a millisecond and each map function
    traced several, and a load of one file needs a dozen of them. (Loads in a graph build it.)
    Tracing it and its first call are paid by the first load of a schema in a process: its
    constants are made once (`_constants_once`), and it is called without grappler
    (`_without_grappler`), about 20 ms less for the benchmark's images.
    """

    def __init__(self, header: _Header, original_dtypes: bool, reading: _Reading):
        self.decoder = _Decoder(header, original_dtypes, batched=reading.batch_size is not None,
                                check_ranges=reading.verifying)
        self.header = header
        self.reading = reading
        self.function = self.element_spec = None

    def trace(self):
        def variant(paths, counts):
            dataset = self.build(paths, counts)
            self.element_spec = dataset.element_spec
            return tf.data.experimental.to_variant(dataset)

        signature = [tf.TensorSpec([None], tf.string), tf.TensorSpec([None], tf.int64)]
        self.function = tf.function(_constants_once(variant), input_signature=signature,
                                    autograph=False).get_concrete_function()

    def __call__(self, paths, counts) -> tf.data.Dataset:
        return tf.data.experimental.from_variant(_without_grappler(self.function, paths, counts),
                                                 self.element_spec)

    def build(self, paths, counts, seed=None) -> tf.data.Dataset:
        with _one_device_marks(not self.reading.in_graph):
            return self._build(paths, counts, seed)

    def _build(self, paths, counts, seed) -> tf.data.Dataset:
        decoder, reading = self.decoder, self.reading
        blocks = self.blocks(paths, counts, seed)
        captured = (paths[0], counts[0]) if reading.one_file else ()
        if reading.verifying:
            return _map(blocks, decoder.check_block, captured, reading.deterministic)
        dataset = _map(blocks, decoder.decode_block, captured, reading.deterministic,
                       unbatch=not decoder.whole_blocks)
        if decoder.whole_blocks:
            # Not `rebatch`: tf.distribute's data-sharding rewrite turns it into the legacy
            # rebatch, which leaves one replica's batches the size of the blocks.
            dataset = dataset.unbatch().batch(reading.batch_size, reading.drop_remainder)
        else:
            if decoder.element_map:
                dataset = _map_inline(dataset, *decoder.finishing(dataset.element_spec))
            if reading.batch_size is not None:  # batches as Dataset.ragged_batch gives them
                dataset = dataset.batch(reading.batch_size, reading.drop_remainder,
                                        num_parallel_calls=tf.data.AUTOTUNE,
                                        deterministic=reading.deterministic)
        # The size is known (len() works), and tf.data cannot fuse a map above with a batch
        # or a map after load().
        size = tf.reduce_sum(counts)
        if reading.batch_size is not None:  # (size + batch_size - 1) could overflow
            partial = 0 if reading.drop_remainder else tf.cast(
                size % reading.batch_size > 0, tf.int64)
            size = size // reading.batch_size + partial
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(size))
        if reading.batch_size is None and any(
                f.tensor_name is not None for f in decoder.features):
            # The TensorSpec names the dataset was saved with, which the ops above drop
            # (`Dataset.batch` drops them too, so batches have none)
            structure = decoder.pack([f.spec(decoder.original) for f in decoder.features],
                                     _NONE_SPEC)
            dataset = tf.data.experimental.from_variant(
                tf.data.experimental.to_variant(dataset), structure)
        return dataset

    def blocks(self, paths, counts, seed) -> tf.data.Dataset:
        """Blocks of `block_records` serialized records, each with its index in its file.

        Elements are (index, records) for one file, else (index, records, file path, records
        the header gives that file). Each file's blocks end with an empty block, the end marker
        that lets `_check_count` notice a file that ends early (a corrupt or truncated record
        ends the file's stream).
        """
        header, reading = self.header, self.reading
        compression = header.compression or ""
        # Many shards are read at once: keep their read buffers small.
        files = tf.size(paths, out_type=tf.int64)
        buffer_size = tf.clip_by_value((64 << 20) // files, 64 << 10, 1 << 20)
        end_marker = tf.data.Dataset.from_tensors(tf.constant([], tf.string))

        def file_blocks(path, *extras):
            # A corrupt record ends the file's stream (the count check reports where), but a
            # file that cannot be opened would be retried forever (TensorFlow moves past a file
            # after a read error, not after an open error): `_opened` opens it first.
            records = _opened(path).concatenate(
                _tfrecords(path, compression, buffer_size).ignore_errors())
            blocks = records.batch(header.block_records).concatenate(end_marker)
            return tf.data.Dataset.zip((
                tf.data.Dataset.range(_INT64_MAX), blocks,
                *(tf.data.Dataset.from_tensors(x).repeat() for x in extras)))

        if reading.one_file:
            return file_blocks(paths[0])
        listed = tf.data.Dataset.from_tensor_slices((paths, counts))
        if reading.shuffle_files:
            listed = listed.shuffle(files, seed=seed, reshuffle_each_iteration=True)
        return _interleave(listed, lambda path, expected: file_blocks(path, path, expected),
                           files if reading.parallel else 1, reading.parallel,
                           reading.deterministic)


def _without_grappler(function, *args):
    """`function(*args)`, an eager call of a concrete function that builds a dataset, without
    grappler's rewrites of its graph (made when a function is first called). They leave such
    a function's dataset as it was, and took 30 of the 45 ms of the first call of load's
    pipeline for the images of the benchmark. Where TensorFlow lacks the private call options
    this sets, a plain call."""
    try:
        from tensorflow.python.eager import context
        eager = context.context()
        options = eager.function_call_options  # this thread's
        config = tf.compat.v1.ConfigProto.FromString(options.config_proto_serialized)
        config.graph_options.rewrite_options.disable_meta_optimizer = True
        plain = context.FunctionCallOptions(options.executor_type, config)
    except Exception:  # noqa: BLE001 -- private names: any TensorFlow may lack them
        return function(*args)
    eager.function_call_options = plain
    try:
        return function(*args)
    finally:
        eager.function_call_options = options


# tf.data's own map functions are instantiated for several devices: each iterator made runs
# grappler over them again, which takes 20 ms for a small schema. A function with this mark (as
# tf.data gives its copy-to-device functions) is instantiated for its one device, the CPU.
_ONE_DEVICE_FUNCTION = {"experimental_ints_on_device": True}
# Not where load() is called in a graph: traced inside a tf.data function (a flat_map's or an
# interleave's), a marked function with an int32 output beside others gives its outputs as
# _DeviceRetval nodes, and tf.data's rewrites then take it for a pipeline of several outputs
# ("Expected only one fetch node but there were 3"), in a tf.function or under tf.distribute.
_MARKS = threading.local()


@contextlib.contextmanager
def _one_device_marks(marked: bool):
    """Whether `_one_device_trace` marks the functions traced in this block (and thread)."""
    before = getattr(_MARKS, "marked", True)
    _MARKS.marked = marked
    try:
        yield
    finally:
        _MARKS.marked = before


def _one_device_function(fn, inputs: list, batched_ragged: bool = False):
    """`fn` traced once, marked one-device, as tf.data calls it: with flat tensors in and out.

    Returns the concrete function and the structure of what `fn` returns: a dataset (given as
    its variant) or tensors and ragged tensors (ragged ones as their variant encoding, the
    one tf.data holds them in; with `batched_ragged`, the encoding of their rows, the one
    unbatching takes). Tensors `fn` captures are the function's last inputs
    (`captured_inputs`), which the dataset op passes as its `other_arguments`.
    """
    structure = []

    def flat(*args):
        result = fn(*args)
        if isinstance(result, tf.data.Dataset):
            structure.append(result.element_spec)
            return tf.data.experimental.to_variant(result)
        structure.append(tf.nest.map_structure(tf.type_spec_from_value, result))
        return [_ragged_variant(x.flat_values, x.nested_row_splits, batched_ragged)
                if isinstance(x, tf.RaggedTensor) else x for x in _tensors_of(result)]

    return _one_device_trace(flat, inputs), structure[0]


def _map(dataset, fn, captured: tuple, deterministic: bool, unbatch: bool = False
         ) -> tf.data.Dataset:
    """`dataset.map(lambda *x: fn(*x, *captured), tf.data.AUTOTUNE, deterministic)` for a
    dataset of tensors, with `fn` marked as a one-device function; then
    `.prefetch(tf.data.AUTOTUNE)`, and `.unbatch()` if `unbatch`.

    `Dataset.unbatch` would map every batch again to re-encode its ragged parts (a tf.data
    function, which grappler optimizes for each iterator made): `fn` gives them encoded.
    """
    function, structure = _one_device_function(fn, [
        *tf.nest.flatten(dataset.element_spec),
        *(tf.TensorSpec(x.shape, x.dtype) for x in captured)], batched_ragged=unbatch)
    types = [x.dtype for x in function.outputs]
    variant = tf.raw_ops.ParallelMapDatasetV2(
        input_dataset=tf.data.experimental.to_variant(dataset),
        other_arguments=[*captured, *function.captured_inputs],
        num_parallel_calls=tf.constant(tf.data.AUTOTUNE, tf.int64), f=function,
        output_types=types, output_shapes=[x.shape for x in function.outputs],
        deterministic="true" if deterministic else "false", preserve_cardinality=True)
    # Blocks, not elements, are prefetched: a prefetch hands over each of its elements
    # between threads, which costs more than unbatching them where they are consumed.
    variant = tf.raw_ops.PrefetchDataset(
        input_dataset=variant, buffer_size=tf.constant(tf.data.AUTOTUNE, tf.int64),
        output_types=types, output_shapes=[x.shape for x in function.outputs])
    if unbatch:
        structure = tf.nest.map_structure(_unbatched_spec, structure)
        variant = tf.raw_ops.UnbatchDataset(
            input_dataset=variant, output_types=types,
            output_shapes=[s.shape for s in _flat_specs(structure)])
    return tf.data.experimental.from_variant(variant, structure)


def _unbatched_spec(spec):
    if isinstance(spec, _NoneSpec):
        return spec
    if isinstance(spec, tf.RaggedTensorSpec):
        return tf.RaggedTensorSpec(spec.shape[1:], spec.dtype, spec.ragged_rank - 1,
                                   spec.row_splits_dtype)
    return tf.TensorSpec(spec.shape[1:], spec.dtype)


def _flat_specs(structure) -> list:
    """The tensors tf.data holds an element of `structure` as: a ragged tensor is one variant."""
    return [s if isinstance(s, tf.TensorSpec) else tf.TensorSpec(None, tf.variant)
            for s in _tensors_of(structure)]


def _ragged_variant(values, splits=(), batched: bool = False):
    """How tf.data holds a ragged tensor (its flat values and nested row splits): one variant,
    or with `batched` a variant for each row, as unbatching takes them. Without splits, a
    component of RaggedTensorSpec(ragged_rank=0): a batch of them is ragged, `values` a row."""
    return tf.raw_ops.RaggedTensorToVariant(rt_nested_splits=list(splits),
                                            rt_dense_values=values, batched_input=batched)


def _one_device_trace(fn, inputs: list):
    """The concrete function of `fn` for flat tensors `inputs`, marked one-device (but for
    loads in a graph: `_one_device_marks`), with each of its constants made once
    (`_constants_once`)."""
    marks = _ONE_DEVICE_FUNCTION if getattr(_MARKS, "marked", True) else None
    return tf.function(_constants_once(fn), input_signature=inputs, autograph=False,
                       experimental_attributes=marks).get_concrete_function()


def _constants_once(fn):
    """`fn`, traced so that each distinct constant is one op, used wherever it is needed.

    TensorFlow's tracing makes a constant op for each use of a value: the begin, end and
    strides of every slice, the axis of every gather. tf.data rewrites the pipeline of each
    new dataset, and that makes the functions of load's maps again, at about 0.035-0.075 ms
    a node of them (NOTES, 2026-12-05 and -06): 138 of the 179 constants of the demo's block
    decoder repeated another. A constant made under control dependencies is shared only with
    those made under the same ones (it waits for them). Where TensorFlow's graphs no longer
    make constants this way, `fn` is traced as it is."""
    @functools.wraps(fn)
    def traced(*args, **kwargs):
        graph = tf.compat.v1.get_default_graph()
        create = getattr(graph, "_create_op_internal", None)
        controls = getattr(graph, "_current_control_dependencies", None)
        if create is None or controls is None:
            return fn(*args, **kwargs)
        made = {}

        def create_op(op_type, inputs, *rest, **options):  # as Graph._create_op_internal
            attrs = options.get("attrs")  # tf.constant passes them by name
            if op_type != "Const" or inputs or attrs is None:
                return create(op_type, inputs, *rest, **options)
            key = (*(attrs[k].SerializeToString(deterministic=True) for k in ("dtype", "value")),
                   frozenset(op.name for op in controls()))
            if key not in made:
                made[key] = create(op_type, inputs, *rest, **options)
            return made[key]

        graph._create_op_internal = create_op  # noqa: SLF001 - this graph's, while tracing
        try:
            return fn(*args, **kwargs)
        finally:
            del graph._create_op_internal
    return traced


def _map_inline(dataset, function, structure) -> tf.data.Dataset:
    """`dataset.map(function)` for a cheap function, run in the thread that asks for each
    element.

    `function` (from `_one_device_trace`) takes and gives the elements' flat tensors
    (`_flat_specs`); `structure` is the spec of what it gives. tf.data's own map sends each
    element to other threads (and each op too, with inter-op parallelism): about 20 us an
    element on 2 cores, ten times what a few reshapes cost. `force_synchronous` keeps
    map_parallelization off this map; callers must not batch it directly, which
    map_and_batch_fusion would turn into such a map again.
    """
    variant = tf.raw_ops.MapDataset(
        input_dataset=tf.data.experimental.to_variant(dataset),
        other_arguments=function.captured_inputs, f=function,
        output_types=[x.dtype for x in function.outputs],
        output_shapes=[x.shape for x in function.outputs],
        use_inter_op_parallelism=False, preserve_cardinality=True, force_synchronous=True)
    return tf.data.experimental.from_variant(variant, structure)


def _ragged_batch_spec(spec):
    """What `Dataset.ragged_batch` makes of a component of `spec` before batching it: a
    tensor of unknown dims becomes ragged up to its last unknown dim."""
    if not isinstance(spec, tf.TensorSpec) or spec.shape.is_fully_defined():
        return spec
    last = max(axis for axis, d in enumerate(spec.shape) if d is None)
    return tf.RaggedTensorSpec(spec.shape, spec.dtype, last, tf.int64)


def _as_ragged_batch_element(x):
    """A tensor of unknown dims as `_ragged_batch_spec` gives it, in tf.data's encoding: its
    rows up to the last unknown dim, each level of them uniform in length."""
    shape = tf.shape(x, out_type=tf.int64)
    rows = tf.math.cumprod(shape)  # rows[k]: rows at level k
    last = max(axis for axis, d in enumerate(x.shape) if d is None)
    splits = [tf.range(rows[level] + 1) * shape[level + 1] for level in range(last)]
    return _ragged_variant(tf.reshape(x, tf.concat([rows[last:last + 1], shape[last + 1:]], 0)),
                           splits)


def _flat_map(dataset, function, structure) -> tf.data.Dataset:
    """`dataset.flat_map` of a function from `_one_device_function` (`structure`: what its
    datasets hold): one-device, so that making an iterator does not run grappler over it."""
    specs = _flat_specs(structure)
    variant = tf.raw_ops.FlatMapDataset(
        input_dataset=tf.data.experimental.to_variant(dataset),
        other_arguments=function.captured_inputs, f=function,
        output_types=[s.dtype for s in specs], output_shapes=[s.shape for s in specs])
    return tf.data.experimental.from_variant(variant, structure)


def _interleave(dataset, fn, cycle_length, parallel: bool, deterministic: bool):
    """`dataset.interleave(fn, cycle_length, block_length=1)` for a dataset of tensors, `fn`
    giving datasets of tensors; in parallel (`num_parallel_calls=AUTOTUNE`) or in order.
    `fn` is marked as a one-device function."""
    function, structure = _one_device_function(fn, tf.nest.flatten(dataset.element_spec))
    specs = tf.nest.flatten(structure)
    common = dict(input_dataset=tf.data.experimental.to_variant(dataset),
                  other_arguments=function.captured_inputs,
                  cycle_length=tf.cast(cycle_length, tf.int64),
                  block_length=tf.constant(1, tf.int64), f=function,
                  output_types=[s.dtype for s in specs], output_shapes=[s.shape for s in specs])
    if parallel:
        autotune = tf.constant(tf.data.AUTOTUNE, tf.int64)
        variant = tf.raw_ops.ParallelInterleaveDatasetV4(
            **common, buffer_output_elements=autotune, prefetch_input_elements=autotune,
            num_parallel_calls=autotune, deterministic="true" if deterministic else "false")
    else:
        variant = tf.raw_ops.InterleaveDataset(**common)
    return tf.data.experimental.from_variant(variant, structure)


# Built from its raw op: the Python class adds a function (a flat_map over file names) that
# costs on every iterator made and does nothing for one file.


def _tfrecords(path, compression: str, buffer_size) -> tf.data.Dataset:
    """`tf.data.TFRecordDataset(path, compression, buffer_size)` for one file."""
    variant = tf.raw_ops.TFRecordDataset(filenames=tf.reshape(path, [1]),
                                         compression_type=compression,
                                         buffer_size=tf.cast(buffer_size, tf.int64))
    return tf.data.experimental.from_variant(variant, tf.TensorSpec([], tf.string))


def _opened(path) -> tf.data.Dataset:
    """No elements, but TensorFlow's error naming the file (NotFoundError, say) when it cannot
    open it: a file read one byte at a time (its raw op), of which the first is read and
    dropped."""
    variant = tf.raw_ops.FixedLengthRecordDatasetV2(
        filenames=tf.reshape(path, [1]), header_bytes=tf.constant(0, tf.int64),
        record_bytes=tf.constant(1, tf.int64), footer_bytes=tf.constant(0, tf.int64),
        buffer_size=tf.constant(1, tf.int64), compression_type="")
    return tf.data.experimental.from_variant(variant, tf.TensorSpec([], tf.string)).take(1).skip(1)


def _check_count(start, end, rows, path, expected, block: int):
    """An assertion that the block of records [start, end) of a file holds as many records as
    the header says (`expected` for the whole file)."""
    # Blocks arrive in order, each checked: a block must hold what is left after the full
    # blocks before it, at most `block` (the end marker, empty, comes right after the last).
    ok = tf.equal(rows, tf.clip_by_value(expected - start, 0, block))
    said = tf.strings.as_string(expected)
    # Earlier blocks were checked to be full. Reading stops at a corrupt record (a checksum
    # that fails), so fewer records may be read than the file holds
    found = tf.where(end > expected, tf.strings.join(["the file holds more than ", said]),
                     tf.strings.join(["only ", tf.strings.as_string(end),
                                      " could be read from it"]))
    message = tf.strings.join([
        "super_serial: ", path, ": the header says ", said, " records, but ", found,
        "; it is corrupt, truncated, or belongs to another header"])
    return tf.debugging.Assert(ok, [message], summarize=1)


class _Decoder:
    """Parses blocks of records with the header's specs and rebuilds the element structure.

    Depends only on the schema (features, structure, block size) and the options, never on
    files or counts: file paths and counts reach `decode_block` as tensors.
    """

    def __init__(self, header: _Header, original_dtypes: bool, batched: bool,
                 check_ranges: bool = False):
        self.check_ranges = check_ranges
        self.structure = header.structure
        self.namedtuples = {n.path: _namedtuple_type(n.name, n.fields)
                            for n in header.namedtuples}
        self.block_records = header.block_records
        self.features = header.features
        self.original = original_dtypes
        self.reshaped = [f.dense_unknown and not self._as_bytes(f)
                         for f in self.features]
        # Sparse components are made for each element from their values, indices and dense
        # shape: unbatching a batch of them would give each the batch's largest dense shape
        self.sparse = [f.sparse and not self._as_bytes(f) for f in self.features]
        # tf.data's unbatch crashes on zero-size components (TF 2.21, a segfault), so those
        # are left out of the blocks and made again for each element.
        self.empty = [f.kind == "fixed" and 0 in f.shape and not f.ragged and not
                      self._as_bytes(f) for f in self.features]
        # With `batch_size`, blocks are unbatched and batched again whole (components of
        # unknown shape as ragged batches, as Dataset.ragged_batch gives them) unless an
        # unknown dim other than the first needs a reshape for each element, or a zero-size
        # component needs making.
        self.whole_blocks = batched and not any(self.empty) and not any(self.sparse) and not any(
            r and None in f.shape[1:] for f, r in zip(self.features, self.reshaped))
        self.element_map = not self.whole_blocks and (
            any(self.reshaped) or any(self.empty) or any(self.sparse))
        self.batched = batched
        self.specs = {}
        for f in self.features:
            self.specs.update(self._parse_specs(f))

    def _as_bytes(self, feature: _Feature) -> bool:
        """Raw features with original_dtypes=False: their bytes, as the BytesList holds them."""
        return feature.encoding == "raw" and not self.original

    def _parse_specs(self, f: _Feature) -> dict:
        stored = _STORED[f.encoding]
        if f.encoding == "raw":
            values = tf.io.FixedLenFeature([], tf.string)
        elif f.kind == "fixed":
            values = tf.io.FixedLenFeature(f.shape, stored)
        else:
            values = tf.io.RaggedFeature(stored, row_splits_dtype=tf.int64)
        specs = {f.name: values}
        if self._as_bytes(f):
            return specs
        if f.kind in ("varshape", "sparse"):
            specs[f.shape_key] = tf.io.FixedLenFeature([len(f.shape)], tf.int64)
        if f.sparse:
            specs[f.indices_key] = tf.io.RaggedFeature(tf.int64, row_splits_dtype=tf.int64)
        for level in range(f.ragged_rank):
            specs[f.lengths_key(level)] = tf.io.RaggedFeature(tf.int64, row_splits_dtype=tf.int64)
        return specs

    @tf.autograph.experimental.do_not_convert
    def decode_block(self, index, serialized, path, expected):
        # Every op here is paid again each time tf.data rewrites the dataset (the first
        # iterator of each dataset `load` gives, each `reduce`, each graph-mode call: the
        # function's kernels are made again then): ops are shared where they can be.
        rows = tf.size(serialized, out_type=tf.int64)
        start = index * self.block_records  # file position of the block's first record
        end = start + rows
        with tf.control_dependencies([_check_count(start, end, rows, path, expected,
                                                   self.block_records)]):
            serialized = tf.identity(serialized)
        names = tf.strings.join([path, ":", tf.strings.as_string(tf.range(start, end))])
        parsed = tf.io.parse_example(serialized, self.specs, example_names=names)
        checks = _Checks(path, start)
        # Zero-size components are checked too (their records hold nothing), but made again
        # for each element instead (`finishing`); here, from their parsed values: where they
        # are all there is, nothing else runs the parse (a control dependency on it was
        # dropped in a graph)
        decoders = [self._decode_feature(f, parsed, checks) for f in self.features]
        with tf.control_dependencies(checks.assertion()):
            leaves = [tf.zeros(tf.shape(parsed[f.name], tf.int64)[:1], tf.bool) if empty
                      else decode()
                      for f, decode, empty in zip(self.features, decoders, self.empty)]
        return tuple(leaves) if self.element_map else self.pack(leaves)

    @tf.autograph.experimental.do_not_convert
    def check_block(self, index, serialized, *file):
        """`decode_block`'s checks and decoding run, for the number of records in the block."""
        decoded = _tensors_of(self.decode_block(index, serialized, *file),
                              expand_composites=True)
        with tf.control_dependencies(decoded):
            return tf.size(serialized, out_type=tf.int64)

    def finishing(self, element_spec):
        """The function that makes each element (`_map_inline`) of an unbatched block of
        `decode_block`, and the structure it gives.

        Components of unknown shape are reshaped (and with `batch_size`, encoded as ragged,
        the way `Dataset.ragged_batch` encodes them before batching), zero-size ones made.
        Everything else passes as tf.data holds it (ragged tensors as variants).
        """
        specs = tf.nest.flatten(element_spec)
        structure = [f.spec(self.original) for f in self.features]
        if self.batched:
            structure = [_ragged_batch_spec(s) for s in structure]

        def row(leaf, spec, f):
            if spec.dtype == tf.string and f.encoding == "raw":  # the element's own bytes
                return _bitcast(tf.io.decode_raw(leaf, f.dtype.raw_as, little_endian=True), f)
            return tf.raw_ops.RaggedTensorFromVariant(  # a row of a ragged batch
                encoded_ragged=leaf, input_ragged_rank=0, output_ragged_rank=0,
                Tvalues=spec.dtype, Tsplits=spec.row_splits_dtype).output_dense_values

        def finish(*tensors):
            tensors, out = iter(zip(tensors, specs)), []
            for f, reshaped, empty, sparse in zip(self.features, self.reshaped, self.empty,
                                                  self.sparse):
                leaf, spec = next(tensors)
                if sparse:  # the values, the indices and the dense shape
                    values = row(leaf, spec, f)
                    indices = tf.reshape(row(*next(tensors), f), [-1, len(f.shape)])
                    leaf = tf.raw_ops.SerializeSparse(  # as tf.data holds a sparse tensor
                        sparse_indices=indices, sparse_values=values,
                        sparse_shape=next(tensors)[0], out_type=tf.variant)
                elif reshaped:  # the values, and the shape
                    leaf = tf.reshape(row(leaf, spec, f), next(tensors)[0])
                    leaf.set_shape(f.shape)  # decode_block checked the stored shapes
                    if self.batched:
                        leaf = _as_ragged_batch_element(leaf)
                elif empty:
                    leaf = tf.zeros(f.shape, self.spec_dtype(f))
                out.append(leaf)
            return out  # headers list features in flatten order (`parse_structure`)

        return (_one_device_trace(finish, _flat_specs(element_spec)),
                self.pack(structure, _NONE_SPEC))

    def spec_dtype(self, f: _Feature):
        return f.spec(self.original).dtype

    def pack(self, leaves, none=None):
        """The element's structure around `leaves`, one for each feature, with `none` for
        each None of it (_NONE_SPEC where the leaves are specs)."""
        by_name = {f.name: leaf for f, leaf in zip(self.features, leaves)}

        def build(node, path):
            if isinstance(node, dict):
                return {k: build(node[k], path + (k,)) for k in node}  # the header's order
            if isinstance(node, list):
                items = [build(item, path + (i,)) for i, item in enumerate(node)]
                namedtuple = self.namedtuples.get(path)
                return namedtuple(*items) if namedtuple else tuple(items)
            return none if node is None else by_name[node]

        return build(self.structure, ())

    def _decode_feature(self, f: _Feature, parsed: dict, checks: _Checks):
        """Mirror of `_encode_streams`. Adds what one component's parsed keys must satisfy to
        `checks`, and returns the function that builds the batched component from them; it is
        called once every check of the block holds (ops there, reshapes say, could fail with
        TensorFlow's own message otherwise)."""
        values = parsed[f.name]
        if self._as_bytes(f):  # the bytes as stored, checked as they are for the dtype
            if f.kind == "fixed":
                _raw_fixed(f, values, checks)
            else:
                _raw_ragged(f, values, checks)
            return lambda: values
        if self.check_ranges and self.original:  # values stored wider than their dtype
            if f.encoding == "int64" and f.dtype.tf_dtype.size < 8:
                _check_range(f, values, checks)
            elif f.encoding == "float" and f.dtype.tf_dtype.size < 4:
                _check_exact(f, values, checks)
        if f.sparse:
            return self._decode_sparse(f, values, parsed, checks)
        if f.kind == "fixed":
            if f.encoding == "raw":
                decode = _raw_fixed(f, values, checks)
            else:
                def decode():
                    return self._restore(f, values)
            if not f.ragged:
                return decode

            def ragged_rank_0():  # a batch of them is ragged in its second dim
                batch = decode()
                splits_dtype = tf.as_dtype(f.row_splits_dtype)
                return _uniform_rows(
                    tf.reshape(batch, [tf.shape(batch)[0] * f.shape[0], *f.shape[1:]]),
                    f.shape[0], tf.shape(batch, out_type=splits_dtype)[0], splits_dtype)
            return ragged_rank_0
        if f.encoding == "raw":  # rows of their own bytes where decoded by element (`varshape`)
            counts, flat = _raw_ragged(f, values, checks)
        else:
            counts = values.row_lengths()

            def flat():
                return self._restore(f, values.flat_values)

            def rows():
                return values.with_flat_values(flat())
        if f.kind == "ragged":
            return self._rebuild_ragged(f, counts, flat, parsed, checks)
        shapes = _check_shapes(f, parsed[f.shape_key], checks)
        # The product in float64 too: in int64 it wraps ([2**62 + 1, 4] "holds" 4 values)
        checks.add(tf.logical_and(
            tf.equal(tf.reduce_prod(shapes, axis=1), counts),
            tf.equal(tf.reduce_prod(tf.cast(shapes, tf.float64), axis=1),
                     tf.cast(counts, tf.float64))), f,
            "the number of values does not match the stored shape", found=counts)

        def varshape():
            if self.whole_blocks or f.ragged:  # [rows, None, *inner] like ragged_batch
                # rows counted, not inferred (-1): inner dims may be 0
                inner = tf.reshape(flat(), [tf.reduce_sum(shapes[:, 0]), *f.shape[1:]])
                lengths = tf.cast(shapes[:, 0], tf.as_dtype(f.row_splits_dtype))
                return tf.RaggedTensor.from_row_lengths(inner, lengths, validate=False)
            if f.encoding == "raw":  # each element decodes its own bytes (`finishing`)
                return values, shapes
            return rows(), shapes
        return varshape

    def _decode_sparse(self, f: _Feature, values, parsed: dict, checks: _Checks):
        """A batch of sparse components as the rows `finishing` makes each element of: their
        values (raw: each element's bytes), indices (flattened) and dense shapes."""
        counts = (_raw_ragged(f, values, checks)[0] if f.encoding == "raw"
                  else values.row_lengths())
        shapes = _check_shapes(f, parsed[f.shape_key], checks)
        indices, rank = parsed[f.indices_key], len(f.shape)
        stored = indices.row_lengths()
        checks.add(tf.equal(stored, counts * rank), f,
                   f"the number of indices is not {rank} for each value", found=stored)
        # Each index within its element's dense shape: the i-th of a record in dim i % rank.
        # Each index's record and place in it come from one op. `value_rowids()` and a ragged
        # `reduce_max` took 152 of the 296 ops of a block's decoding for one sparse feature,
        # and each op costs again every time tf.data rewrites the dataset: for the demo's
        # keywords, making an iterator and reading an element took 26-27 ms so, 15-19 now.
        flat = indices.flat_values
        record, within = tf.unstack(tf.raw_ops.RaggedTensorToSparse(
            rt_nested_splits=[indices.row_splits], rt_dense_values=flat).sparse_indices, axis=1)
        bounds = tf.gather(tf.reshape(shapes, [-1]), record * rank + within % rank)
        fits = tf.logical_and(flat >= 0, flat < bounds)
        outside = tf.where(fits, _INT64_MIN, flat)
        # Of a record with no indices: int64's least, as for one whose indices all fit
        largest = tf.math.unsorted_segment_max(outside, record, tf.size(counts))
        # Which records fit is counted apart from `largest`: an index of int64's least is
        # outside too, and its record's largest is int64's least as well
        misfits = tf.math.unsorted_segment_sum(tf.cast(tf.logical_not(fits), tf.int32), record,
                                               tf.size(counts))
        checks.add(tf.equal(misfits, 0), f, "an index lies outside its dense shape",
                   found=largest)

        def rows():
            if f.encoding != "raw":
                values_rows = values.with_flat_values(self._restore(f, values.flat_values))
            else:
                values_rows = values
            return values_rows, indices, shapes
        return rows

    def _restore(self, f: _Feature, values):
        if not self.original or values.dtype == f.dtype.tf_dtype:
            return values
        return tf.cast(values, f.dtype.tf_dtype)

    def _rebuild_ragged(self, f: _Feature, counts, flat, parsed, checks: _Checks):
        """A batch of ragged components from their flat values (`flat()`, `counts` of them a
        record) and each level's row lengths."""
        splits_dtype = tf.as_dtype(f.row_splits_dtype)
        levels = [parsed[f.lengths_key(k)] for k in range(f.ragged_rank)]
        # Each element's values must fill its innermost rows, and each level its parent rows.
        sums = [_row_sums(lengths) for lengths in levels]
        # Row lengths are counts: none negative, and no sum that wraps in int64 (so summed as
        # float64 too), which could come to the right total and make splits that go back
        # (counted, as the negative ones' sum can wrap to 0 too). A record's "found" is its
        # negative lengths' sum (the length, where one is), else the sum that wrapped.
        for k, lengths in enumerate(levels):
            negative = lengths.with_flat_values(tf.cast(lengths.flat_values < 0, tf.int64))
            any_negative = _row_sums(negative) > 0
            below = _row_sums(lengths.with_flat_values(tf.minimum(lengths.flat_values, 0)))
            checks.add(tf.logical_and(tf.logical_not(any_negative), tf.equal(
                tf.cast(sums[k], tf.float64), _float_row_sums(lengths))), f,
                f"row lengths of level {k} are negative or too large",
                found=tf.where(any_negative, below, sums[k]))
        inner = math.prod(f.inner_shape)
        checks.add(tf.logical_and(
            tf.equal(sums[-1] * inner, counts),
            tf.equal(tf.cast(sums[-1], tf.float64) * inner, tf.cast(counts, tf.float64))), f,
            "the number of values does not match the row lengths", found=counts)
        for k in range(f.ragged_rank - 1):
            checks.add(tf.equal(sums[k], levels[k + 1].row_lengths()), f,
                       f"row lengths of level {k + 1} do not match level {k}")
        for k in range(f.ragged_rank):  # a known dim's rows must all be that long
            uniform = f.shape[k + 1]
            if uniform is not None:
                other = levels[k].with_flat_values(
                    tf.cast(tf.not_equal(levels[k].flat_values, uniform), tf.int64))
                checks.add(tf.equal(_row_sums(other), 0), f,
                           f"the header gives dim {k + 1} as {uniform}, but rows of other "
                           "lengths are stored", found=_row_sums(other))
        nrows = tf.cast(levels[0].row_lengths(), splits_dtype)
        if f.shape[0] is not None:
            checks.add(tf.equal(nrows, f.shape[0]), f,
                       f"rows per element differ from the header's {f.shape[0]}", found=nrows)

        def rebuild():
            # Rows of values counted, not inferred (-1), where an inner dim is 0
            value_rows = tf.reduce_sum(sums[-1]) if 0 in f.inner_shape else -1
            result = tf.reshape(flat(), [value_rows, *f.inner_shape])
            for k in reversed(range(f.ragged_rank)):
                uniform = f.shape[k + 1]
                if uniform is not None:  # level k stores a length for each of its rows
                    rows = tf.size(levels[k].flat_values, out_type=splits_dtype)
                    result = _uniform_rows(result, uniform, rows, splits_dtype)
                else:
                    result = tf.RaggedTensor.from_row_lengths(
                        result, tf.cast(levels[k].flat_values, splits_dtype), validate=False)
            if f.shape[0] is not None:  # nrows: a count for each element
                elements = tf.size(nrows, out_type=splits_dtype)
                return _uniform_rows(result, f.shape[0], elements, splits_dtype)
            return tf.RaggedTensor.from_row_lengths(result, nrows, validate=False)
        return rebuild


def _check_shapes(f: _Feature, shapes, checks: _Checks):
    """Checks stored shapes ([records, rank]) against the header's dims; returns them."""
    known = [d if d is not None else -1 for d in f.shape]
    checks.add(tf.logical_and(shapes >= 0, tf.logical_or(tf.equal(shapes, known),
                                                         tf.equal(known, -1))),
               f, f"a stored shape does not fit {list(f.shape)}", found=shapes)
    return shapes


def _uniform_rows(values, length: int, nrows, splits_dtype):
    """`values` in rows of `length`, partitioned in the row splits' dtype, `nrows` rows (a
    scalar of that dtype) given: a length of 0 cannot tell them from the values."""
    return tf.RaggedTensor.from_uniform_row_length(
        values, tf.constant(length, splits_dtype), nrows=nrows)


def _float_row_sums(ragged):
    """The sum of each row of a 2-D ragged tensor of integers, in float64, each row by itself:
    through `_row_sums`' running sum, one huge row's sum swallowed the rows after it in the
    block (their sums came to 0), which then failed their checks too."""
    return tf.math.unsorted_segment_sum(tf.cast(ragged.values, tf.float64),
                                        ragged.value_rowids(), ragged.nrows())


def _row_sums(ragged):
    """The sum of each row of a 2-D ragged tensor, as `tf.reduce_sum(ragged, axis=1)` gives it
    in 80 ops: 16 here (each op costs again every time tf.data rewrites the dataset)."""
    ends = tf.gather(tf.pad(tf.cumsum(ragged.values), [[1, 0]]), ragged.row_splits)
    return ends[1:] - ends[:-1]


class _Checks:
    """What the records of a block must satisfy, gathered while their features are decoded,
    and checked by one assertion: a "super_serial:" error naming the file, the record, the
    feature, and the failing value ("found N") of the first check (in feature order) that
    fails, at its first failing record. A check of the block as a whole (`per_record=False`)
    names no record.

    One assertion for all: each op in block decoding costs again every time an iterator is
    made, and separate assertions, each with its message, took about 13 ops a check.
    """

    def __init__(self, path, start):
        self.path, self.start = path, start  # the file, its block's first record (int64)
        self.conditions, self.found, self.problems, self.per_record = [], [], [], []

    def add(self, condition, feature: _Feature, problem: str, found=None, per_record=True):
        """`condition`: [records] or [records, n] booleans; `found`: numbers of that shape.
        Where the condition holds the block's one value for each record, `per_record=False`."""
        if found is not None:  # the failing values
            found = tf.where(condition, _INT64_MIN, tf.cast(found, tf.int64))
        if condition.shape.rank > 1:  # a record's, together
            condition = tf.reduce_all(condition, axis=1)
            found = None if found is None else tf.reduce_max(found, axis=1)
        self.conditions.append(condition)
        self.found.append(found)
        self.problems.append(f"{_named(feature.name)}: {problem}"
                             + (", found " if found is not None else ""))
        self.per_record.append(per_record)

    def assertion(self) -> list:
        """The assertion (none without checks), to be run before what the checks guard."""
        if not self.conditions:
            return []
        conditions = tf.stack(self.conditions)  # [checks, records]
        passed = tf.reduce_all(conditions, axis=1)  # each check's
        which = tf.argmin(tf.cast(passed, tf.int32))  # the first that fails
        # its first failing record, of its records and a failing one after them (a block
        # of none has checks too, and no argmin)
        after = tf.constant([[0, 1]], tf.int32)  # typed: numpy_behavior's are weak
        record = tf.argmin(tf.pad(tf.cast(tf.gather(conditions, which), tf.int32), after))
        found = tf.stack([tf.fill(tf.shape(self.conditions[0]), _INT64_MIN) if f is None
                          else f for f in self.found])
        value = tf.strings.as_string(tf.gather(tf.pad(tf.gather(found, which), after), record))
        has_found = tf.gather([f is not None for f in self.found], which)
        named = ["record ", tf.strings.as_string(self.start + record), ": "]
        if not all(self.per_record):  # (`verify`'s checks only: load's ops are fewer so)
            named = [tf.where(tf.gather(self.per_record, which), tf.strings.join(named), "")]
        message = tf.strings.join(["super_serial: ", self.path, ": ", *named,
                                   tf.gather(self.problems, which),
                                   tf.where(has_found, value, "")])
        return [tf.debugging.Assert(tf.reduce_all(passed), [message], summarize=1)]


def _check_range(f: _Feature, values, checks: _Checks):
    """Int64List values restored to a narrower dtype (bool, or int8 to uint32) must
    fit it: a header that does not match its records (edited, or another file's) would
    otherwise wrap them silently. `values`: [rows, *shape], or ragged [rows, None]. Checked for
    the block as a whole, from its least and greatest value (one or two passes over the
    values; a check of each value took 13-31% more time to load int32 or uint16 lists). Only
    `verify` checks this: loads of int32 lists took 5-15% longer even so."""
    dtype = f.dtype.tf_dtype
    low, high = (0, 1) if dtype == tf.bool else (dtype.min, dtype.max)
    flat, rows = _values_and_rows(values)
    if low == 0:  # one pass: as uint64, negative values are past any high
        greatest = tf.reduce_max(tf.bitcast(flat, tf.uint64))  # of no values: 0
        fits, found = greatest <= np.uint64(high), tf.bitcast(greatest, tf.int64)
    else:  # (NumPy's ints, as `_INT64_MIN`)
        least, greatest = tf.reduce_min(flat), tf.reduce_max(flat)  # of none: max, min
        fits = tf.logical_and(least >= np.int64(low), greatest <= np.int64(high))
        found = tf.where(greatest > np.int64(high), greatest, least)
    checks.add(tf.fill([rows], fits), f, f"a value does not fit {f.dtype.name} ({low} to {high})",
               found=tf.fill([rows], found), per_record=False)


def _values_and_rows(values) -> tuple:
    """A block's values, flat where ragged, and its number of records (int64)."""
    if isinstance(values, tf.RaggedTensor):
        return values.flat_values, values.nrows()
    return values, tf.shape(values, out_type=tf.int64)[0]


def _check_exact(f: _Feature, values, checks: _Checks):
    """FloatList values restored to float16 or bfloat16 (as the original module stored them)
    must be values of it: a header that does not match its records would otherwise round
    them, 70000.0 to inf, silently. As `_check_range`, for `verify` only, for the block."""
    flat, rows = _values_and_rows(values)
    back = tf.cast(tf.cast(flat, f.dtype.tf_dtype), tf.float32)
    same = tf.equal(tf.bitcast(back, tf.int32), tf.bitcast(flat, tf.int32))  # by bits: the
    # kernels flush subnormals to 0 when they compare floats (1e-40 == 0.0)
    exact = tf.reduce_all(tf.logical_or(same, tf.math.is_nan(flat)))
    checks.add(tf.fill([rows], exact), f, f"a value is not exactly a {f.dtype.name} (it would "
               "load rounded)", per_record=False)


def _raw_size(f: _Feature) -> int:
    return (f.dtype.raw_as or f.dtype.tf_dtype).size


def _raw_fixed(f: _Feature, strings, checks: _Checks):
    """Mirror of `_encode_list` for raw: checks [rows] byte strings, and returns the function
    that decodes them to [rows, *shape] values."""
    expected = math.prod(f.shape) * _raw_size(f)
    lengths = tf.strings.length(strings)
    checks.add(tf.equal(lengths, expected), f,
               f"expected {expected} bytes of {f.dtype.name} per record", found=lengths)

    def decode():
        rows = tf.shape(strings)[:1]
        if expected == 0:
            return tf.zeros([rows[0], *f.shape], f.dtype.tf_dtype)
        values = _bitcast(tf.io.decode_raw(strings, f.dtype.raw_as, little_endian=True), f)
        return tf.reshape(values, tf.concat([rows, tf.constant(f.shape, tf.int32)], 0))
    return decode


def _raw_ragged(f: _Feature, strings, checks: _Checks):
    """Raw values of varying count: checks [rows] byte strings, and returns the count of
    values in each and the function that decodes all their values, flat."""
    size = _raw_size(f)
    lengths = tf.cast(tf.strings.length(strings), tf.int64)
    checks.add(tf.equal(lengths % size, 0), f,
               f"byte count is not a multiple of {size} ({f.dtype.name})", found=lengths)

    def decode():
        flat = tf.io.decode_raw(tf.strings.reduce_join(strings), f.dtype.raw_as,
                                little_endian=True)
        return _bitcast(tf.reshape(flat, [-1]), f)
    return lengths // size, decode


def _bitcast(values, f: _Feature):
    return values if f.dtype.raw_as == f.dtype.tf_dtype else tf.bitcast(values, f.dtype.tf_dtype)


def verify(tfrecord_path, header_path=None, *, progress: bool = False) -> dict:
    """Reads every record and checks it against the header.

    Checks TFRecord checksums, file sizes and record counts, and that every feature of every
    record decodes as the header says; also, unlike `load`, that integers stored as int64 fit
    the narrower dtype they are restored to (a header edited from int64 to int16, say), and
    that a TFRecord reader reads each compressed file to its end (a second read of them).
    Not whether each file holds the records the header was written with: the header gives a
    file's name, size and record count, not a digest of its records (see README.md,
    "Guarantees").

    Args:
      tfrecord_path: As for `load`.
      header_path: As for `load`.
      progress: Show a progress bar on stderr (records checked, MB, MB/s).

    Returns:
      A summary: `{"num_records": ..., "files": [...], "header": header dict}`.

    Raises:
      HeaderError: The header is missing, cannot be read, or is invalid.
      CorruptDataError: The first problem found, naming the file (and record and feature).
      ValueError: `progress` is not a bool, or a path is not UTF-8 or is "".
      TypeError: A path is a tensor or of another type.
      SuperSerialError: Called outside eager mode, or in a process forked after
        TensorFlow's runtime started (where TensorFlow hangs).

    Example:
      >>> # the files of save's example, of one element
      >>> verify("data.tfrecord")["num_records"]  # doctest: +SKIP
      1
    """
    _check_eager("verify")
    _check_not_forked("verify")
    tfrecord_path = _fspath(tfrecord_path, "tfrecord_path")
    header_path = (_fspath(header_path, "header_path") if header_path is not None
                   else default_header_path(tfrecord_path))
    progress = _flag(progress, "progress")
    # One read of the header for the records checked and the summary, whatever a save in
    # another process puts in place meanwhile
    header, paths = _checked_header(header_path, tfrecord_path)
    # Blocks of about _TARGET_BLOCK_BYTES, by the records' size on disk where the header
    # gives it, and at least the header's block: batches of at least 256 records read 128 MB
    # at once where a block was 8 records of 500 kB, and batches of a block read 3 records at
    # a time where the spec's guess made blocks of 3 records of 63 bytes (3.5 times the time)
    total_bytes = sum(s.num_bytes for s in header.shards) if all(
        s.num_bytes is not None for s in header.shards) else None
    block = header.block_records
    if header.num_records and total_bytes is not None:
        block = max(block, _records_per_block(total_bytes // header.num_records, 1024))
    # Records are checked in blocks of that size, not made into batches (`_Reading.verifying`)
    dataset = _load(tfrecord_path, header_path, verifying=True, checked=(
        dataclasses.replace(header, block_records=block), paths)).with_options(_OWN_PIPELINE)
    # Bytes checked are estimated from records checked: records of a file are read in order.
    meter = _Progress("verify", "records", header.num_records, enabled=progress)
    count = 0
    try:
        for records in dataset:
            count += int(records)
            meter.update(count, _share(total_bytes, count, header.num_records))
        meter.update(count, total_bytes, force=True)
    except (tf.errors.OpError, UnicodeDecodeError) as e:
        if _is_not_an_example(e):  # (every UnicodeDecodeError)
            raise CorruptDataError(_not_an_example(header, tfrecord_path)) from None
        message = _tf_message(e)
        if _CHECK_NUMERICS.match(message):
            raise  # the program's, on saved NaNs
        raise CorruptDataError(_parse_failure(message, header)) from None
    finally:
        meter.close()
    if header.compression:
        _check_read_to_end(paths, header.compression, header.block_records)
    return {"num_records": count, "files": paths, "header": header.to_yaml()}


@tf.autograph.experimental.do_not_convert  # AutoGraph would read it from the file again
def _count_block(count, block):
    return count + tf.size(block, out_type=tf.int64)


def _check_read_to_end(paths: list, compression: str, block_records: int):
    """Raises CorruptDataError where a TFRecord reader fails on a compressed file after its
    last record: a damaged end of the compressed stream, past the records' own checksums.
    `load` (and verify's pass above) end a file's records at its first error and check their
    count, which such an error leaves right, but `tf.data.TFRecordDataset` fails on the file.
    All files are read in one pass (a pass for each took 10 ms a file); only where that
    fails, file by file, to name the one. Records are counted a block at a time: `reduce`
    calls its function for each element (19 us a record, 1.9 s for 100,000)."""
    def read_to_end(files):  # (files read in parallel: one by itself so took 2.6 times as long)
        parallel = min(len(files), _WRITER_THREADS) if len(files) > 1 else None
        tf.data.TFRecordDataset(files, compression, 1 << 20, num_parallel_reads=parallel).batch(
            block_records).reduce(np.int64(0), _count_block)

    try:
        read_to_end(paths)
        return
    except tf.errors.OpError:
        pass
    for path in paths:
        try:
            read_to_end([path])
        except tf.errors.OpError as e:
            raise CorruptDataError(f"{path}: its {compression} data is corrupt after its "
                                   f"last record, where a TFRecord reader fails: "
                                   f"{_tf_message(e)}") from None
    raise CorruptDataError(f"{paths[0]}: a TFRecord reader fails on the {len(paths)} "
                           f"{compression} files read together, and on none by itself")


# TensorFlow's parse errors for a record's feature (its file, the record's index in it, the
# feature's key; "Index" is the record's in the block parsed): for one of known shape holding
# another number of numbers, or of another type...
_MISCOUNTED = re.compile(r"Name: (.+):(\d+), Key: (.+), Index: \d+\.\s+Number of (\w+) values "
                         r"!= expected\.\s+Values size: (\d+) but output shape: \[([\d, ]*)\]")
_MISTYPED = re.compile(r"Name: (.+):(\d+), Key: (.+), Index: \d+\.\s+Data types don't match\. "
                       r"Data type: (\w+) but expected type: (\w+)")
_LISTS = {"float": "a FloatList", "int64": "an Int64List", "string": "a BytesList"}
# ... and for a string feature of known shape holding another number of strings: no count
_UNPARSED = re.compile(r"Name: (.+):(\d+), Key: (.+), Index: \d+\.\s+Can't parse serialized "
                       r"Example\.?$")


# What TensorFlow's `tf.debugging.enable_check_numerics()` raises where an op gives a NaN or
# an infinity: saved ones, parsed by verify, which called the files corrupt (helper-98)
# (at the start of the message, where a parse error of a feature so named could not put it)
_CHECK_NUMERICS = re.compile(r"\s*!!! Detected Infinity or NaN in output \d+ of ")


def _parse_failure(message: str, header: _Header) -> str:
    """`message`, TensorFlow's error parsing a record, in verify's words where it says what
    a feature of the record holds: "<file>: record <n>: feature 'x': expected 2 float values,
    found 3" (its "Index" read as a second record number), "... holds an Int64List, where the
    header gives a FloatList", or the strings counted (`_unparsed_strings`)."""
    found = _MISCOUNTED.search(message)
    if found:
        expected = math.prod(int(d) for d in found[6].split(",") if d.strip())
        return (f"{found[1]}: record {found[2]}: {_named(found[3])}: expected {expected} "
                f"{found[4]} value{'s' if expected != 1 else ''}, found {found[5]}")
    found = _MISTYPED.search(message)
    if found and found[4] in _LISTS and found[5] in _LISTS:
        return (f"{found[1]}: record {found[2]}: {_named(found[3])}: holds {_LISTS[found[4]]}, "
                f"where the header gives {_LISTS[found[5]]}")
    return _unparsed_strings(message, header)


def _unparsed_strings(message: str, header: _Header) -> str:
    """`message`, or where it is TensorFlow's "Can't parse serialized Example" for a string
    feature of known shape or a raw one (one string of its bytes), what that record holds:
    "<file>: record <n>: feature 's': expected 1 string, found 2" (the record read again, its
    strings counted)."""
    found = _UNPARSED.search(message)
    features = {f.name: f for f in header.features}
    feature = features.get(found[3]) if found else None
    if feature is None or not (feature.encoding == "raw" or (feature.encoding == "bytes"
                                                            and feature.kind == "fixed")):
        return message
    path, index = found[1], int(found[2])
    try:
        record = next(iter(tf.data.TFRecordDataset(path, header.compression or "")
                           .skip(index).take(1)))
        strings = tf.io.parse_single_example(
            record, {feature.name: tf.io.VarLenFeature(tf.string)})[feature.name]
    except (tf.errors.OpError, StopIteration, UnicodeDecodeError):
        return message
    raw = feature.encoding == "raw"
    expected = 1 if raw else math.prod(feature.shape)
    count = int(tf.size(strings.values))
    if count == expected:
        return message
    return (f"{path}: record {index}: {_named(feature.name)}: expected {expected} "
            f"string{'s' if expected != 1 else ''}{' (its raw bytes)' if raw else ''}, found "
            f"{count}")


def _is_not_an_example(error: Exception) -> bool:
    """Whether `error` is what iterating gives for a record that is no tf.train.Example:
    TensorFlow's error, which quotes the record whole, however long, and names no file (a
    JSON line, say), or, where the record is not UTF-8, the UnicodeDecodeError of decoding
    that message (tensorflow#5676)."""
    return isinstance(error, UnicodeDecodeError) or (
        isinstance(error, tf.errors.InvalidArgumentError)
        and "Could not parse example input, value: " in error.message)


def _not_an_example(header: _Header, tfrecord_path: str) -> str:
    """Which record is no tf.train.Example, where TensorFlow's error quotes the record's bytes
    and names no file (`_is_not_an_example`), or could not be decoded and so said nothing
    (tensorflow#5676): the first such record found reading the files again, one by one,
    parsed for a feature no record holds."""
    probe = {"super_serial: no feature": tf.io.VarLenFeature(tf.string)}

    def parses(records) -> bool:
        try:
            tf.io.parse_example(records, probe)
            return True
        except (UnicodeDecodeError, tf.errors.InvalidArgumentError):
            return False

    try:
        for path in _shard_paths(header, tfrecord_path):
            start = 0
            for batch in tf.data.TFRecordDataset(path, header.compression or "").batch(1024):
                if not parses(batch):
                    index = next(i for i, record in enumerate(batch) if not parses([record]))
                    return (f"{path}: record {start + index} is not a tf.train.Example "
                            "TensorFlow can parse")
                start += int(batch.shape[0])
    except tf.errors.OpError:  # the files cannot be read either: nothing more to say
        pass
    return f"{tfrecord_path}: a record is not a tf.train.Example TensorFlow can parse"


def _share(total: int | None, done: int, of: int | None) -> int | None:
    """`total` scaled by done/of, or None when either total is unknown."""
    if total is None or of is None:
        return None
    return total * min(done, of) // of if of else total


def _tf_message(error: tf.errors.OpError) -> str:
    """TensorFlow's error message without its op and node decorations."""
    text = error.message
    if text.startswith("{{function_node"):
        text = text.split("}}", 1)[-1]
    text = text.split("\n\t [[", 1)[0].split(" [Op:", 1)[0].strip()
    # tf.data's preamble for errors raised inside a map function
    text = re.sub(r"^Error in user-defined function passed to \S+ transformation with "
                  r"iterator: \S+: ", "", text)
    if "super_serial:" in text:  # our own assertion: "assertion failed: [super_serial: ...]"
        text = text[text.index("super_serial:") + len("super_serial:"):].strip()
        text = text[:-1] if text.endswith("]") else text
    # TensorFlow's record reader: "truncated record at 72322' failed with Read less bytes
    # than requested" (a stray quote, TF 2.18-2.21)
    text = re.sub(r"^truncated record at (\d+)' failed with (.+)$",
                  lambda m: f"truncated record at byte {m[1]} ({m[2][:1].lower()}{m[2][1:]})",
                  text)
    return text.replace("\\'", "'")  # tf.debugging.Assert escapes quotes

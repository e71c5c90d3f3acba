"""super_serial: save any tf.data.Dataset as standard TFRecords, and load it back exactly."""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from super_serial.core import (
        CorruptDataError,
        HeaderError,
        SchemaError,
        SuperSerialError,
        default_header_path,
        load,
        merge,
        read_header,
        save,
        verify,
    )

__version__ = "0.1.0"

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


def __getattr__(name: str):
    # The core, and with it TensorFlow, is imported on first use, so that `super-serial --help`
    # starts at once and the command line can quiet TensorFlow's logging before it loads.
    if name in __all__:
        return getattr(importlib.import_module("super_serial.core"), name)
    raise AttributeError(f"module 'super_serial' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))


# Whether this process was forked from one whose TensorFlow runtime had started, before it
# imported the core: TensorFlow's calls hang there, so the core's save, load and verify
# refuse to run (`core._check_not_forked`). Once imported, the core notes later forks itself.
_forked_after_tf = False


def _note_fork():
    global _forked_after_tf
    if "tensorflow" in sys.modules and "super_serial.core" not in sys.modules:
        from tensorflow.python.eager import context  # imported with tensorflow

        started = getattr(context.context(), "_context_handle", True) is not None
        _forked_after_tf = _forked_after_tf or started


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_note_fork)

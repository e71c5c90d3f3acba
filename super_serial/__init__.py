"""super_serial: save any tf.data.Dataset as standard TFRecords, and load it back exactly."""

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

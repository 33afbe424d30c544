"""The output guard and the atomic writer, for the file formats' modules (they live in the foundation layer).

See :mod:`fingrav_native._outputs`: the sensor characterisation, below the
files layer, writes through the same guard and writer.
"""

from __future__ import annotations

from fingrav_native._outputs import (
    OutputFolderMissingError,
    OutputNotWritableError,
    OutputPathError,
    Writes,
    archive_kind,
    atomic_output,
    check_distinct_outputs,
    check_output_path,
    file_kind,
    json_problem,
    json_scalar,
    strict_json,
    temporary_beside,
    write_atomically,
    write_json,
    write_text,
)

__all__ = ["OutputFolderMissingError", "OutputNotWritableError", "OutputPathError", "Writes", "archive_kind",
           "atomic_output", "check_distinct_outputs", "check_output_path", "file_kind", "json_problem",
           "json_scalar", "strict_json", "temporary_beside", "write_atomically", "write_json",
           "write_text"]

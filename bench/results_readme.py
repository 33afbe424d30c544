"""Shared by the benchmarks: replace one ``## `` section of bench/results/README.md.

Several benchmarks write their own section of one file, possibly at once:
each re-reads the file right before writing, replaces (or appends) only its
section, and swaps the file in atomically.
"""

from __future__ import annotations

import os
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def write_section(heading: str, text: str, path: Path | None = None) -> None:
    """Replace the section that starts with the line ``heading`` (e.g. ``"## Clock sync"``) by ``text``."""
    path = path or RESULTS / "README.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    cur = path.read_text() if path.exists() else "# Benchmark results\n"
    lines = cur.splitlines(keepends=True)
    start = next((i for i, ln in enumerate(lines) if ln.rstrip() == heading), None)
    if start is None:
        new = cur.rstrip("\n") + "\n\n" + text
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        new = "".join(lines[:start]) + text + ("\n" + "".join(lines[end:]) if end < len(lines) else "")
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(new if new.endswith("\n") else new + "\n")
    os.replace(tmp, path)

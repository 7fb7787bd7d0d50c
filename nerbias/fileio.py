"""Atomic file output (text, JSON, CSV): write to a temporary file beside the target, then rename.

A killed process therefore never leaves a half-written file under the final name.
"""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator


# Every task writes its config, interpolations resolved, under this name in its run directory.
RESOLVED_CONFIG = "config_resolved.yaml"


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path; on success it is renamed to ``path``, on failure removed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; final files get the usual permissions
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def atomic_write_text(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def atomic_write_json(path: str | Path, payload: Any) -> None:
    atomic_write_text(path, json.dumps(payload, indent=2, sort_keys=True) + "\n")


def write_csv(path: str | Path, frame: Any, float_format: str = "%.6g") -> Path:
    """A pandas DataFrame as CSV (no index), atomically; the one CSV writer of the project."""
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False, float_format=float_format)
    return Path(path)

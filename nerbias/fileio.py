"""Atomic file output (text, JSON, CSV): write to a temporary file beside the target, then rename.

A killed process therefore never leaves a half-written file under the final name.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

from nerbias.errors import NerbiasError


# Every task writes its config, interpolations resolved, under this name in its run directory.
RESOLVED_CONFIG = "config_resolved.yaml"


def _write_error(path: Path, error: OSError) -> NerbiasError:
    """A write failure as one sentence naming the file (full disk, read-only folder, no permission)."""
    reasons = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded",
               errno.EROFS: "read-only file system", errno.EACCES: "permission denied", errno.EPERM: "not permitted"}
    return NerbiasError(f"{path}: cannot write: {reasons.get(error.errno, error.strerror or str(error))}")


def check_writable(folder: str | Path) -> Path:
    """Create ``folder`` if needed and prove a file can be written there, before any work starts."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-check.", suffix=".tmp", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as error:
        raise _write_error(folder, error) from None
    return folder


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path; on success it is renamed to ``path``, on failure removed. A full disk
    or a read-only folder is a NerbiasError naming ``path``."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as error:
        raise _write_error(path, error) from None
    os.close(fd)
    tmp = Path(tmp_name)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; final files get the usual permissions
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as error:
        raise _write_error(path, error) from None
    finally:
        if tmp.exists():
            tmp.unlink()


@contextmanager
def atomic_files(paths: Sequence[str | Path]) -> Iterator[list[Path]]:
    """Temporary paths for several files that become final together, after the block: all of them,
    or (on any error in the block) none."""
    with ExitStack() as stack:
        yield [stack.enter_context(atomic_path(path)) for path in paths]


def remove_orphans(folder: str | Path) -> list[Path]:
    """Delete the temporary files that killed writes left in ``folder`` (``.<name>.*.tmp``); call it
    only on folders one process owns (a run directory), never on one shared by running jobs."""
    removed = []
    for path in Path(folder).glob(".*.tmp"):
        if path.is_file():
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


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


def code_version() -> dict[str, Any]:
    """The git commit of the code that is running (and whether its tree had uncommitted changes), for
    the provenance of results; empty when the package is not in a git checkout or git is missing."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return {"commit": commit, "dirty": bool(status.strip())}

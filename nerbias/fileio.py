"""Atomic file output (text, JSON, CSV): write to a temporary file beside the target, then rename.

A killed process therefore never leaves a half-written file under the final name.
"""

from __future__ import annotations

import errno
import functools
import glob
import hashlib
import json
import os
import sys
import tempfile
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from hydra.experimental.callback import Callback

from nerbias.errors import DataFormatError, NerbiasError


# Every task writes its config, interpolations resolved, under this name in its run directory.
RESOLVED_CONFIG = "config_resolved.yaml"
# The sections of a saved training config that define what is trained (training.run_identity: a resumed run must
# agree on all of them; study.recipe: the recipe search's jobs may differ in them only by its levers and seed).
RUN_DEFINING_KEYS = ("seed", "data", "embeddings", "model", "augment", "trainer")


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


class WritableRunDirectory(Callback):
    """Hydra callback (``configs/hydra/default.yaml``): the run directory (the sweep directory under
    ``-m``) must be writable before Hydra creates its log file there, which would otherwise fail with
    a traceback from the logging module. A directory that is not writable is one line naming it, exit 2."""

    def on_run_start(self, config: Any, **kwargs: Any) -> None:
        self._check(config, "hydra.run.dir")

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        self._check(config, "hydra.sweep.dir")

    @staticmethod
    def _check(config: Any, key: str) -> None:
        from hydra.core.hydra_config import HydraConfig
        from omegaconf import OmegaConf

        HydraConfig.instance().set_config(config)  # as Hydra's run_job does next: ${hydra:...} resolves
        try:
            folder = OmegaConf.select(config, key)
        except Exception:  # an interpolation that cannot resolve: Hydra reports it itself
            return
        try:
            check_writable(str(folder))
        except NerbiasError as error:
            print(f"error: {error}", file=sys.stderr)
            sys.exit(2)


@contextmanager
def exclusive_folder(folder: str | Path, what: str = "a training") -> Iterator[Path]:
    """Hold an exclusive lock on ``folder`` (flock on the directory itself: no file is written) while the
    block runs. A second process on the same folder is refused at once: two runs in one folder would write
    over each other's checkpoints and results. The system drops the lock when the process ends, however it
    ends (SIGKILL included), so a killed run never blocks its resumption."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock to take
        yield folder
        return
    handle = os.open(folder, os.O_RDONLY)
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise NerbiasError(f"{folder}: another process is running {what} in this folder; two at once would "
                               "overwrite each other's checkpoints and results (wait for it, or stop it first)") from None
        yield folder
    finally:
        os.close(handle)  # releases the lock


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


def remove_orphans(folder: str | Path, name: str | None = None) -> list[Path]:
    """Delete the temporary files that killed writes left in ``folder`` (``.<name>.*.tmp``); call it
    only on folders one process owns (a run directory). In a folder shared by running jobs (shards),
    pass ``name``: only the leftovers of that file, which this process is about to write, go."""
    removed = []
    pattern = f".{glob.escape(name)}.*.tmp" if name is not None else ".*.tmp"
    for path in Path(folder).glob(pattern):
        if path.is_file():
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def atomic_write_text(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_json(path: str | Path, payload: Any) -> None:
    atomic_write_text(path, json.dumps(payload, indent=2, sort_keys=True) + "\n")


def write_csv(path: str | Path, frame: Any, float_format: str = "%.6g") -> Path:
    """A pandas DataFrame as CSV (no index), atomically; every table the project saves goes through
    here except ``study.aggregate.write_aggregate_csv``, which keeps its own format (repr floats)."""
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False, float_format=float_format)
    return Path(path)


# A run's metrics.json lists its result files under this key: {file name: {"rows": ..., "sha256": ...}}.
FILE_RECORD = "files"


def _rows_and_digest(path: Path) -> tuple[int, str]:
    raw = path.read_bytes()
    return max(len(raw.splitlines()) - 1, 0), hashlib.sha256(raw).hexdigest()  # rows below the header


def record_files(written: Mapping[str, str | Path]) -> dict[str, dict[str, Any]]:
    """``{final name: {"rows", "sha256"}}`` of CSV files just written (``written``: final name -> the
    file as written, e.g. its temporary path), for the run's metrics.json."""
    record = {}
    for name, path in written.items():
        rows, digest = _rows_and_digest(Path(path))
        record[name] = {"rows": rows, "sha256": digest}
    return record


def check_recorded_files(folder: str | Path, record: Mapping[str, Mapping[str, Any]]) -> None:
    """Each file of ``record`` (what metrics.json says the run wrote) is there with the same rows and
    content; a truncated, edited or missing one is a DataFormatError naming it."""
    for name, expected in record.items():
        path = Path(folder) / name
        if not path.is_file():
            raise DataFormatError(path, "missing, though the run's metrics.json lists it")
        rows, digest = _rows_and_digest(path)
        if rows != expected.get("rows"):
            raise DataFormatError(path, f"{rows} rows, but the run wrote {expected.get('rows')} (metrics.json): "
                                        "truncated or edited; rerun the evaluation")
        if digest != expected.get("sha256"):
            raise DataFormatError(path, "content differs from what the run wrote (sha256 in metrics.json): "
                                        "edited or damaged; rerun the evaluation")


def file_fingerprint(path: Any) -> str | None:
    """sha256 of a file (a checkpoint, a Flair model) or of every file of a folder (a saved Hugging Face
    model: names and contents), so results of another model are told apart; None when there is no such path."""
    if not path or not Path(str(path)).exists():
        return None
    root = Path(str(path))
    files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
    digest = hashlib.sha256()
    for file in files:
        if root.is_dir():
            digest.update(str(file.relative_to(root)).encode() + b"\0")
        with open(file, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def record_hydra_run(cfg: Any, output_dir: str | Path) -> None:
    """Hydra's record of the run (``.hydra/config.yaml``, ``hydra.yaml``, ``overrides.yaml``, as Hydra writes
    them), written by a task once its checks passed, not by Hydra before them (configs/hydra/default.yaml
    sets ``output_subdir: null``): a refused command, say a rerun with another seed, leaves the record of the
    run in the directory as it was. Nothing outside a Hydra app."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    if not HydraConfig.initialized():
        return
    hydra_cfg = HydraConfig.instance().cfg
    for name, node in (("config.yaml", cfg), ("hydra.yaml", hydra_cfg),
                       ("overrides.yaml", hydra_cfg.hydra.overrides.task)):
        atomic_write_text(Path(output_dir) / ".hydra" / name, OmegaConf.to_yaml(node))


def config_digest(resolved: Any) -> str:
    """sha256 of a resolved config (a plain container), as ``config_resolved.yaml`` writes it: a finished
    run's metrics.json records it, so a rerun knows which config those results belong to."""
    import yaml

    return hashlib.sha256(yaml.safe_dump(resolved, sort_keys=False).encode("utf-8")).hexdigest()


@functools.cache
def code_version() -> dict[str, Any]:
    """The git commit of the code that is running (and whether any tracked file of its checkout had
    uncommitted changes), for the provenance of results; empty when the package is not in a git checkout or
    git is missing. Read once a process, at its first call: a commit made later, while a multirun's process
    goes on with the code it loaded, does not relabel its later jobs."""
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


def numeric_platform(device: Any = "cpu") -> dict[str, Any]:
    """What float arithmetic depends on besides the code and the seed: the same commit and seed give
    bit-identical training on one kind of CPU as a rule (an occasional repeat drifts by rounding: docs/training.md),
    but torch, MKL and oneDNN pick kernels by instruction set,
    so another CPU rounds differently and the trajectory drifts (docs/training.md, "Same seed, same result").
    ``cuda`` names the GPU only when ``device`` (where the computation runs) is one."""
    import platform

    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            cpu = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), cpu)
    except OSError:
        pass
    return {"torch": str(torch.__version__), "cpu": cpu,  # plain str: checkpoints load with weights_only=True
            "cpu_capability": str(torch.backends.cpu.get_cpu_capability()),
            "threads": torch.get_num_threads(),
            "cuda": torch.cuda.get_device_name(device) if torch.device(device).type == "cuda" else None}


def read_utf8_text(path: str | Path, what: str, byte_order_mark: bool = True) -> str:
    """A UTF-8 text file's content, or a DataFormatError naming ``path``: "<what> not found", or where
    the bytes stop being UTF-8. ``byte_order_mark``: tolerate the BOM spreadsheet programs write."""
    path = Path(path)
    if not path.is_file():
        raise DataFormatError(path, f"{what} not found")
    try:
        return path.read_bytes().decode("utf-8-sig" if byte_order_mark else "utf-8")
    except UnicodeDecodeError as error:
        raise DataFormatError(path, f"not valid UTF-8 ({error.reason} at byte {error.start})") from None

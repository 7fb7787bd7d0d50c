"""A study's results without its checkpoints: a small copy of a sweep that can be committed beside the
code, read by ``aggregate.py --study``, and restored into a sweep directory, whose finished jobs a rerun
then keeps (``tasks.finished_job``) instead of training them again.

``pack`` copies every job that finished training (its ``metrics.json`` holds ``test_f1``) and, in it,
every finished bias evaluation (a folder with ``metrics.json``). It leaves out what is large or not
ours to publish: checkpoints, ``*.conll`` (CoNLL-03 text, licensed), figures (``*.png``, drawn again by
``report.py``). CSVs over ``GZIP_OVER`` bytes (the census labels) are stored gzip-compressed. Each job's
``MANIFEST.sha256`` lists the sha256 of every file as the run wrote it (before compression), so
``unpack`` checks every byte it restores.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import shutil
from pathlib import Path
from typing import Any, Iterator

from hydra.experimental.callback import Callback

from nerbias.errors import NerbiasError
from nerbias.fileio import RESOLVED_CONFIG, atomic_write_bytes

log = logging.getLogger(__name__)

MANIFEST = "MANIFEST.sha256"
GZIP_OVER = 1 << 20          # bytes: larger CSVs are stored as <name>.gz
LEFT_OUT_DIRS = ("checkpoints", ".submitit", "wandb")
LEFT_OUT_SUFFIXES = (".pt", ".conll", ".png", ".tmp")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def finished_training(job: Path) -> bool:
    """A job folder whose training finished: its metrics.json, written last, holds the test F1."""
    metrics = job / "metrics.json"
    if not ((job / RESOLVED_CONFIG).is_file() and metrics.is_file()):
        return False
    try:
        return "test_f1" in json.loads(metrics.read_text(encoding="utf-8")).get("metrics", {})
    except (json.JSONDecodeError, AttributeError):
        return False


def _job_files(job: Path) -> Iterator[Path]:
    """The files of a finished job that the archive keeps (relative paths)."""
    for path in sorted(job.rglob("*")):
        relative = path.relative_to(job)
        evaluation = job / Path(*relative.parts[:2]) if relative.parts[0] == "bias" and len(relative.parts) > 2 \
            else None
        if not path.is_file() or any(part in LEFT_OUT_DIRS for part in relative.parts) \
                or path.suffix in LEFT_OUT_SUFFIXES or path.name == MANIFEST \
                or (evaluation is not None and not (evaluation / "metrics.json").is_file()):  # still running
            continue
        yield relative


def pack_job(job: Path, archive_job: Path) -> int:
    """Copy one finished job into ``archive_job`` (replaced whole, so a later pack with more evaluations
    supersedes an earlier one); returns the number of files."""
    staging = archive_job.with_name(archive_job.name + ".packing")
    if staging.exists():
        shutil.rmtree(staging)
    lines = []
    for relative in _job_files(job):
        data = (job / relative).read_bytes()
        lines.append(f"{_sha256(data)}  {relative.as_posix()}")
        target = staging / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if relative.suffix == ".csv" and len(data) > GZIP_OVER:
            target.with_name(target.name + ".gz").write_bytes(gzip.compress(data, mtime=0))
        else:
            target.write_bytes(data)
    (staging / MANIFEST).write_text("\n".join(lines) + "\n", encoding="utf-8")
    if archive_job.exists():
        shutil.rmtree(archive_job)
    staging.rename(archive_job)
    return len(lines)


def pack(sweep_dir: str | Path, archive_dir: str | Path) -> list[str]:
    """Pack every job of ``sweep_dir`` whose training finished; returns their names."""
    sweep_dir, archive_dir = Path(sweep_dir), Path(archive_dir)
    if not sweep_dir.is_dir():
        raise NerbiasError(f"{sweep_dir}: sweep directory not found")
    packed = []
    for job in sorted(p for p in sweep_dir.iterdir() if p.is_dir()):
        if finished_training(job):
            archive_dir.mkdir(parents=True, exist_ok=True)
            count = pack_job(job, archive_dir / job.name)
            log.info("packed %s: %d files", job.name, count)
            packed.append(job.name)
    return packed


class PackEachFinishedJob(Callback):
    """Hydra callback: pack each job of a sweep into ``archive_dir`` as soon as it ends well, so a sweep
    stopped at any point has every finished job archived (``scripts/mitigation_study.sh`` adds it when
    ``STUDY_ARCHIVE`` is set)."""

    def __init__(self, archive_dir: str) -> None:
        self.archive_dir = Path(archive_dir)

    def on_job_end(self, config: Any, job_return: Any, **kwargs: Any) -> None:
        from hydra.core.utils import JobStatus

        job = Path(config.hydra.runtime.output_dir)
        if job_return.status == JobStatus.COMPLETED and finished_training(job):
            self.archive_dir.mkdir(parents=True, exist_ok=True)
            log.info("packed %s into %s: %d files", job.name, self.archive_dir,
                     pack_job(job, self.archive_dir / job.name))


def _manifest(archive_job: Path) -> list[tuple[str, Path]]:
    path = archive_job / MANIFEST
    if not path.is_file():
        raise NerbiasError(f"{archive_job}: no {MANIFEST} (not a job packed by study_archive.py pack)")
    entries = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        digest, _, name = line.partition("  ")
        if len(digest) != 64 or not name or Path(name).is_absolute() or ".." in Path(name).parts:
            raise NerbiasError(f"{path}:{number}: not '<sha256>  <relative path>'")
        entries.append((digest, Path(name)))
    return entries


def stored_bytes(archive_job: Path, relative: Path, digest: str) -> bytes:
    """A file of a packed job as the run wrote it, checked against the manifest."""
    plain, compressed = archive_job / relative, archive_job / (str(relative) + ".gz")
    if plain.is_file():
        data = plain.read_bytes()
    elif compressed.is_file():
        data = gzip.decompress(compressed.read_bytes())
    else:
        raise NerbiasError(f"{plain}: listed in {archive_job / MANIFEST} but missing")
    if _sha256(data) != digest:
        raise NerbiasError(f"{plain}: content differs from {archive_job / MANIFEST} (damaged or edited)")
    return data


def unpack(archive_dir: str | Path, sweep_dir: str | Path) -> list[str]:
    """Restore every packed job into ``sweep_dir``. A file already there is kept when it is the same
    and is an error when it differs (another run's results: nothing is overwritten)."""
    archive_dir, sweep_dir = Path(archive_dir), Path(sweep_dir)
    jobs = sorted(p for p in archive_dir.iterdir() if (p / MANIFEST).is_file()) if archive_dir.is_dir() else []
    if not jobs:
        raise NerbiasError(f"{archive_dir}: no packed job (a folder with {MANIFEST})")
    for archive_job in jobs:  # check everything before writing anything
        for digest, relative in _manifest(archive_job):
            target = sweep_dir / archive_job.name / relative
            stored_bytes(archive_job, relative, digest)
            if target.is_file() and _sha256(target.read_bytes()) != digest:
                raise NerbiasError(f"{target}: differs from the packed job in {archive_job}; not overwritten "
                                   "(move the sweep directory aside, or unpack into another)")
    for archive_job in jobs:
        for digest, relative in _manifest(archive_job):
            target = sweep_dir / archive_job.name / relative
            if not target.is_file():
                atomic_write_bytes(target, stored_bytes(archive_job, relative, digest))
        log.info("restored %s", archive_job.name)
    return [job.name for job in jobs]


__all__ = ["MANIFEST", "PackEachFinishedJob", "finished_training", "pack", "pack_job", "stored_bytes", "unpack"]

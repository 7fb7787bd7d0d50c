"""A study's results without its checkpoints: a small copy of a sweep that can be committed beside the
code, read by ``aggregate.py --study``, and restored into a sweep directory, whose finished jobs a rerun
then keeps (``tasks.evaluations.finished_job``) instead of training them again.

``pack`` copies every job that finished training (its ``metrics.json`` holds ``test_f1``) and, in it,
every finished bias evaluation (a folder with ``metrics.json``). It leaves out what is large or not
ours to publish: checkpoints, CoNLL-03 text (``*.conll``, ``test_predictions_spans.tsv``: licensed),
figures (``*.png``, drawn again by ``report.py``). CSVs over ``COMPRESS_OVER`` bytes are stored
xz-compressed; a census labels table (name, template, label rows, template after template) is stored wide,
one row per name (``.wide.xz``: a tenth of the compressed long table). Each job's ``MANIFEST.sha256``
lists the sha256 of every file as the run wrote it, so ``unpack`` checks every byte it restores, and
``pack`` keeps the wide form only when it gives the same bytes back.
"""

from __future__ import annotations

import hashlib
import json
import logging
import lzma
import shutil
import tempfile
from itertools import repeat
from pathlib import Path
from typing import Any, Iterator

import yaml
from hydra.experimental.callback import Callback

from nerbias.errors import NerbiasError
from nerbias.fileio import RESOLVED_CONFIG
from nerbias.reporting.runs import recorded_run_dir
from nerbias.study.workers import map_in_processes

log = logging.getLogger(__name__)

MANIFEST = "MANIFEST.sha256"
# The job's checkpoints are left out (large; kept outside git) but their sha256 is kept, so a checkpoint found
# later can be shown to be the one that made these results (sha256sum -c from the job directory).
CHECKPOINTS = "CHECKPOINTS.sha256"
COMPRESS_OVER = 1 << 16      # bytes: larger CSVs are stored as <name>.xz
XZ, WIDE_XZ = ".xz", ".wide.xz"
LEFT_OUT_DIRS = ("checkpoints", ".submitit", "wandb")
LEFT_OUT_SUFFIXES = (".pt", ".conll", ".png", ".tmp")
LEFT_OUT_NAMES = ("test_predictions_spans.tsv",)   # CoNLL-03 test spans with their text
LONG_LABELS_HEADER = "name,template,label"


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
                or path.suffix in LEFT_OUT_SUFFIXES or path.name in (MANIFEST, CHECKPOINTS, *LEFT_OUT_NAMES) \
                or (evaluation is not None and not (evaluation / "metrics.json").is_file()):  # still running
            continue
        yield relative


def wide_labels(data: bytes) -> bytes | None:
    """A long census labels table as one row per name (``name,<template>,...``), or None when ``data`` is
    not such a table (each template's block lists the same names in the same order)."""
    lines = data.decode("utf-8").split("\n")
    if lines[0] != LONG_LABELS_HEADER or lines[-1] != "" or len(lines) < 3:
        return None
    blocks: dict[str, list[str]] = {}
    names: list[str] = []
    current = None
    for line in lines[1:-1]:
        cells = line.rsplit(",", 2)
        if len(cells) != 3:
            return None
        name, template, label = cells
        if template != current:
            if template in blocks or (blocks and len(blocks[current]) != len(names)):
                return None  # a template's rows not in one block, or a block shorter than the first
            blocks[template], current = [], template
        if len(blocks) == 1:
            names.append(name)
        elif len(blocks[template]) >= len(names) or names[len(blocks[template])] != name:
            return None
        blocks[template].append(label)
    if any(len(labels) != len(names) for labels in blocks.values()):
        return None
    header = ",".join(["name", *blocks])
    rows = [",".join([name, *(labels[i] for labels in blocks.values())]) for i, name in enumerate(names)]
    return ("\n".join([header, *rows]) + "\n").encode("utf-8")


def long_labels(wide: bytes) -> bytes:
    """The inverse of ``wide_labels``."""
    header, *rows = wide.decode("utf-8").split("\n")[:-1]
    templates = header.split(",")[1:]
    if not rows:
        return (LONG_LABELS_HEADER + "\n").encode("utf-8")
    name, *labels = zip(*(row.rsplit(",", len(templates)) for row in rows))
    blocks = ["\n".join(map(",".join, zip(name, repeat(template), column))) for template, column in zip(templates, labels)]
    return "\n".join([LONG_LABELS_HEADER, *blocks]).encode("utf-8") + b"\n"


def _stored_form(relative: Path, data: bytes) -> tuple[str, bytes]:
    """(suffix, bytes) a file is archived as (see the module docstring)."""
    if relative.suffix != ".csv" or len(data) <= COMPRESS_OVER:
        return "", data
    wide = wide_labels(data) if relative.name == "census_labels.csv" else None
    if wide is not None and long_labels(wide) == data:
        return WIDE_XZ, lzma.compress(wide, preset=9)
    return XZ, lzma.compress(data, preset=9)


def pack_job(job: Path, archive_job: Path) -> int:
    """Copy one finished job into ``archive_job`` (replaced whole, so a later pack with more evaluations
    supersedes an earlier one; left as it is when its manifest already lists the same files); returns the
    number of files written, 0 when nothing changed."""
    contents = {relative: (job / relative).read_bytes() for relative in _job_files(job)}  # read once: hashed
    lines = [f"{_sha256(data)}  {relative.as_posix()}" for relative, data in contents.items()]  # = stored
    manifest = "\n".join(lines) + "\n"
    if (archive_job / MANIFEST).is_file() and (archive_job / MANIFEST).read_text(encoding="utf-8") == manifest:
        return 0
    staging = archive_job.with_name(archive_job.name + ".packing")
    if staging.exists():
        shutil.rmtree(staging)
    for relative, data in contents.items():
        suffix, stored = _stored_form(relative, data)
        target = staging / (relative.as_posix() + suffix)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(stored)
    checkpoints = sorted((job / "checkpoints").glob("*.pt")) if (job / "checkpoints").is_dir() else []
    if checkpoints:
        staging.mkdir(parents=True, exist_ok=True)
        (staging / CHECKPOINTS).write_text("".join(f"{_sha256(path.read_bytes())}  checkpoints/{path.name}\n"
                                                   for path in checkpoints), encoding="utf-8")
    (staging / MANIFEST).write_text(manifest, encoding="utf-8")
    if archive_job.exists():
        shutil.rmtree(archive_job)
    staging.rename(archive_job)
    return len(contents)


def pack(sweep_dir: str | Path, archive_dir: str | Path) -> list[str]:
    """Pack every job of ``sweep_dir`` whose training finished; returns the names of those (re)written."""
    sweep_dir, archive_dir = Path(sweep_dir), Path(archive_dir)
    if not sweep_dir.is_dir():
        raise NerbiasError(f"{sweep_dir}: sweep directory not found")
    packed = []
    for job in sorted(p for p in sweep_dir.iterdir() if p.is_dir()):
        if finished_training(job):
            archive_dir.mkdir(parents=True, exist_ok=True)
            if pack_job(job, archive_dir / job.name):
                log.info("packed %s", job.name)
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
            try:  # silent when it works: the job's log file is still open, and packed already
                self.archive_dir.mkdir(parents=True, exist_ok=True)
                pack_job(job, self.archive_dir / job.name)
            except (OSError, NerbiasError) as error:  # the sweep goes on; `study_archive.py pack` can redo it
                log.warning("could not pack %s into %s: %s", job.name, self.archive_dir, error)


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
    plain = archive_job / relative
    xz, wide = plain.with_name(plain.name + XZ), plain.with_name(plain.name + WIDE_XZ)
    try:
        if plain.is_file():
            data = plain.read_bytes()
        elif xz.is_file():
            data = lzma.decompress(xz.read_bytes())
        elif wide.is_file():
            data = long_labels(lzma.decompress(wide.read_bytes()))
        else:
            raise NerbiasError(f"{plain}: listed in {archive_job / MANIFEST} but missing")
    except (lzma.LZMAError, UnicodeDecodeError, IndexError) as error:
        raise NerbiasError(f"{plain}: its stored copy cannot be read ({error})") from None
    if _sha256(data) != digest:
        raise NerbiasError(f"{plain}: content differs from {archive_job / MANIFEST} (damaged or edited)")
    return data


def is_archive(path: str | Path) -> bool:
    """Whether ``path`` holds packed jobs (folders with a manifest)."""
    return Path(path).is_dir() and any((job / MANIFEST).is_file() for job in Path(path).iterdir())


def packed_from(archive_job: Path) -> Path | None:
    """The job folder a packed job was run in (its saved ``paths.output_dir``), when it says."""
    for digest, relative in _manifest(archive_job):
        if relative == Path(RESOLVED_CONFIG):
            return recorded_run_dir(yaml.safe_load(stored_bytes(archive_job, relative, digest)) or {})
    return None


def check_archive_jobs(archive_dir: Path, jobs: list[Path]) -> None:
    """Refuse what would make a job count twice or count unverified: a folder that holds a run but no
    manifest, a job in a folder other than the one it ran in, two folders with the same manifest."""
    for folder in sorted(p for p in archive_dir.iterdir() if p.is_dir() and p not in jobs):
        if (folder / RESOLVED_CONFIG).is_file() or (folder / "metrics.json").is_file():
            raise NerbiasError(f"{folder}: a job without its {MANIFEST}, so its files cannot be checked; pack it "
                               "from its sweep (scripts/study_archive.py pack <sweep dir> <archive>) or move it out "
                               f"of {archive_dir}")
    seen: dict[str, Path] = {}
    for job in jobs:
        origin = packed_from(job)
        if origin is not None and origin.name != job.name:
            raise NerbiasError(f"{job}: its config says it ran in {origin}; a job copied or renamed would count twice "
                               f"or as another seed: name it {origin.name} again or move it out of {archive_dir}")
        manifest = (job / MANIFEST).read_text(encoding="utf-8")
        if manifest in seen:
            raise NerbiasError(f"{seen[manifest]} and {job}: the same job packed twice (identical {MANIFEST}); "
                               f"keep the folder its config names and remove the other")
        seen[manifest] = job


def _restore_job(archive_job: Path, target: Path) -> None:
    """Every file of one packed job, checked against its manifest, written under ``target``."""
    for digest, relative in _manifest(archive_job):
        path = target / relative
        data = stored_bytes(archive_job, relative, digest)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        except OSError as error:
            raise NerbiasError(f"{path}: cannot write ({error.strerror or error}); nothing was restored") from None


def unpack(archive_dir: str | Path, sweep_dir: str | Path, check_origin: bool = True) -> list[str]:
    """Restore the packed jobs that ``sweep_dir`` lacks; returns their names. A job folder already in
    ``sweep_dir`` is left as it is (it may be further on than its packed copy). With ``check_origin``,
    every job must go back to the folder it ran in: its bias evaluations' saved configs name its
    checkpoint by that path, so elsewhere a rerun would not recognise it as finished and would train it
    again. Everything is checked before anything is written there."""
    archive_dir, sweep_dir = Path(archive_dir), Path(sweep_dir)
    jobs = sorted(p for p in archive_dir.iterdir() if (p / MANIFEST).is_file()) if archive_dir.is_dir() else []
    if not jobs:
        raise NerbiasError(f"{archive_dir}: no packed job (a folder with {MANIFEST})")
    check_archive_jobs(archive_dir, jobs)
    missing = [job for job in jobs if not (sweep_dir / job.name).exists()]
    for archive_job in missing:
        origin = packed_from(archive_job) if check_origin else None
        if origin is not None and origin.resolve() != (sweep_dir / archive_job.name).resolve():
            raise NerbiasError(f"{archive_job}: ran in {origin}; unpack it into {origin.parent} (a job restored "
                               "elsewhere is not recognised as finished and would be trained again)")
    if not missing:
        staging = None
    else:  # each job checked and written into a staging folder of its own beside the sweep directory, on
        # every core; only when all of them are whole do they move into it
        sweep_dir = sweep_dir.resolve()
        sweep_dir.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{sweep_dir.name}.unpacking-", dir=sweep_dir.parent))
    try:
        map_in_processes(_restore_job, [(job, staging / job.name) for job in missing])
        if missing:
            sweep_dir.mkdir(parents=True, exist_ok=True)
        for archive_job in missing:
            (staging / archive_job.name).replace(sweep_dir / archive_job.name)
            log.info("restored %s", archive_job.name)
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
    kept = sorted(set(jobs) - set(missing))
    if kept:
        log.info("left as they are (already in %s): %s", sweep_dir, ", ".join(job.name for job in kept))
    return [job.name for job in missing]


__all__ = ["MANIFEST", "PackEachFinishedJob", "finished_training", "is_archive", "long_labels", "pack", "pack_job", "packed_from",
           "stored_bytes", "unpack", "wide_labels"]

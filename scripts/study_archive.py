"""Keep a study's results without its checkpoints (nerbias/study/archive.py), and bring them back.

    python scripts/study_archive.py pack <sweep dir> <archive dir>     # every job that finished training
    python scripts/study_archive.py unpack <archive dir> <sweep dir>   # the jobs it lacks; a rerun keeps them
    python scripts/study_archive.py check <sweep dir>                  # which finished jobs a rerun would keep (this code)

The archive is small enough to commit (results/mitigation_study/), and `aggregate.py --study` reads it as
it reads a sweep directory. A sweep restored with `unpack` into the directory it was packed from (the bias
evaluations' saved configs name their checkpoint by its path) skips its finished jobs when rerun.
"""

from __future__ import annotations

import argparse
import logging
import sys

from nerbias.errors import NerbiasError
from nerbias.study.archive import is_archive, pack, unpack


def kept_by_a_rerun(sweep_dir: str) -> dict[str, bool]:
    """job -> whether this code, rerunning the job with its saved overrides in its own directory, would keep
    its results (``tasks.evaluations.finished_job``: the same training and bias evaluations, configs saved by
    earlier code read as today's)."""
    from pathlib import Path

    import yaml
    from hydra import compose, initialize_config_dir

    from nerbias.building import register_resolvers
    from nerbias.fileio import RESOLVED_CONFIG
    from nerbias.tasks.evaluations import finished_job

    if is_archive(sweep_dir):  # packed files are not what a rerun reads: every job would look unfinished
        raise NerbiasError(f"{sweep_dir}: a study archive, not a sweep; unpack it into the sweep directory it was "
                           "packed from (scripts/study_archive.py unpack), then check that")
    register_resolvers()
    configs = str(Path(__file__).resolve().parents[1] / "configs")
    kept = {}
    for job in sorted(Path(sweep_dir).iterdir()):
        overrides_file, saved_file = job / ".hydra" / "overrides.yaml", job / RESOLVED_CONFIG
        if not (overrides_file.is_file() and saved_file.is_file()):
            continue
        saved = yaml.safe_load(saved_file.read_text(encoding="utf-8"))
        overrides = [o for o in yaml.safe_load(overrides_file.read_text(encoding="utf-8")) if not o.lstrip("+").startswith("hydra.")]
        overrides += [f"paths.{key}={saved['paths'][key]}" for key in ("data_dir", "output_dir")]
        with initialize_config_dir(config_dir=configs, version_base="1.3"):
            cfg = compose(config_name="train", overrides=overrides)
        kept[job.name] = finished_job(cfg, job) is not None
    return kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    packing = commands.add_parser("pack", help="copy a sweep's finished jobs, without checkpoints")
    packing.add_argument("sweep_dir")
    packing.add_argument("archive_dir")
    unpacking = commands.add_parser("unpack", help="restore packed jobs into a sweep directory")
    unpacking.add_argument("archive_dir")
    unpacking.add_argument("sweep_dir")
    checking = commands.add_parser("check", help="which finished jobs a rerun of the sweep would keep")
    checking.add_argument("sweep_dir")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        if args.command == "pack":
            jobs = pack(args.sweep_dir, args.archive_dir)
            print(f"packed {len(jobs)} new or changed finished jobs into {args.archive_dir}: {', '.join(jobs) or '-'}")
        elif args.command == "unpack":
            jobs = unpack(args.archive_dir, args.sweep_dir)
            print(f"restored {len(jobs)} jobs into {args.sweep_dir}: {', '.join(jobs) or '-'}")
        else:
            for job, kept in kept_by_a_rerun(args.sweep_dir).items():
                print(f"{job}: {'kept' if kept else 'runs again'}")
    except NerbiasError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

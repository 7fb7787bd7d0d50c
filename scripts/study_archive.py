"""Keep a study's results without its checkpoints (nerbias/study/archive.py), and bring them back.

    python scripts/study_archive.py pack <sweep dir> <archive dir>     # every job that finished training
    python scripts/study_archive.py unpack <archive dir> <sweep dir>   # the jobs it lacks; a rerun keeps them

The archive is small enough to commit (results/mitigation_study/), and `aggregate.py --study` reads it as
it reads a sweep directory. A sweep restored with `unpack` into the directory it was packed from (the bias
evaluations' saved configs name their checkpoint by its path) skips its finished jobs when rerun.
"""

from __future__ import annotations

import argparse
import logging
import sys

from nerbias.errors import NerbiasError
from nerbias.study.archive import pack, unpack


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    packing = commands.add_parser("pack", help="copy a sweep's finished jobs, without checkpoints")
    packing.add_argument("sweep_dir")
    packing.add_argument("archive_dir")
    unpacking = commands.add_parser("unpack", help="restore packed jobs into a sweep directory")
    unpacking.add_argument("archive_dir")
    unpacking.add_argument("sweep_dir")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        if args.command == "pack":
            jobs = pack(args.sweep_dir, args.archive_dir)
            print(f"packed {len(jobs)} new or changed finished jobs into {args.archive_dir}: {', '.join(jobs) or '-'}")
        else:
            jobs = unpack(args.archive_dir, args.sweep_dir)
            print(f"restored {len(jobs)} jobs into {args.sweep_dir}: {', '.join(jobs) or '-'}")
    except NerbiasError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

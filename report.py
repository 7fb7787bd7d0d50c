"""Render evaluate.py results as a static report (Markdown + PNG + CSV) with intervals and tests.

    python report.py <run_dir> [<run_dir> ...]        # runs of one model = training seeds
    python report.py /tmp/h4_census                    # census run: per-year female - male gaps
    python report.py <run_dir> --wandb-mode offline    # also log tables and figures to W&B

Writes report.md, report_*.png and report_*.csv into the first run directory (or --output-dir).
A run directory may also be an offline W&B run of evaluate.py (its logged tables are read back).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from nerbias.errors import NerbiasError


def parse_years(text: str | None) -> list[int] | None:
    """``1880-2018``, ``1900,1950,2000`` or a mix; None for every year."""
    if not text:
        return None
    years: list[int] = []
    for part in text.split(","):
        part = part.strip()
        bounds = part.split("-", 1)
        if part and not all(bound.strip().isdigit() for bound in bounds):
            raise NerbiasError(f"--census-years {text!r}: {part!r} is not a year or a range FIRST-LAST "
                               "(e.g. 1880-1900,1950,2018)")
        if len(bounds) == 2:
            first, last = (int(x) for x in bounds)
            if first > last:
                raise NerbiasError(f"--census-years {text!r}: the range {part!r} is empty (FIRST-LAST, FIRST <= LAST)")
            years.extend(range(first, last + 1))
        elif part:
            years.append(int(part))
    if not years:
        raise NerbiasError(f"--census-years {text!r}: no year given")
    return years


def check_arguments(args: argparse.Namespace) -> None:
    """Every option's value, before any file is read or written (one line each, exit 2)."""
    from nerbias.reporting.options import REPORT_RULES  # the rules ReportOptions states for these options

    for key, rule in REPORT_RULES.items():
        value = getattr(args, key)
        if not rule.allowed(value):
            raise NerbiasError(f"--{key.replace('_', '-')} {value}: must be {rule.description}")
    parse_years(args.census_years)


def build_parser() -> argparse.ArgumentParser:
    from nerbias.reporting.options import (AMBIGUITY_N_BOOT, CENSUS_N_BOOT, DEFAULT_CONFIDENCE, DEFAULT_N_BOOT,
                                          DEFAULT_N_PERMUTATIONS)
    from nerbias.data.ambiguity import AmbiguityRule  # the rule's defaults, stated once

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dirs", nargs="+", help="evaluate.py run directories (seeds of one model, or census runs)")
    parser.add_argument("--names", help="name list CSV (default: the one the run used, else the packaged list)")
    parser.add_argument("--output-dir", help="where to write (default: the first run directory)")
    parser.add_argument("--n-boot", type=int, default=DEFAULT_N_BOOT, help="bootstrap replicates (name corpora)")
    parser.add_argument("--n-permutations", type=int, default=DEFAULT_N_PERMUTATIONS, help="permutation resamples")
    parser.add_argument("--confidence", type=float, default=DEFAULT_CONFIDENCE, help="interval level")
    parser.add_argument("--seed", type=int, default=0, help="random seed of resampling")
    parser.add_argument("--census-boot", type=int, default=CENSUS_N_BOOT, help="bootstrap replicates per census year")
    parser.add_argument("--census-permutations", type=int, default=0,
                        help="per-year permutation tests of the census gap (0: off; slow)")
    parser.add_argument("--census-years", help="restrict census intervals to years, e.g. 1880-1900,1950,2018")
    parser.add_argument("--ssa", help="SSA names folder or names.zip (default: the run's corpus.ssa)")
    parser.add_argument("--predictions", help="published census predictions folder (default: the run's tagger.path)")
    parser.add_argument("--checkpoint", help="nerbias checkpoint: adds the t-SNE of the names' word vectors")
    parser.add_argument("--ambiguity-min-typed", type=int, default=AmbiguityRule.min_typed,
                        help="a name is ambiguous when typed --ambiguity-types this often in CoNLL-03 train ...")
    parser.add_argument("--ambiguity-types", default=",".join(AmbiguityRule.types), help="... as these types (comma-separated)")
    parser.add_argument("--ambiguity-casing", default=AmbiguityRule.casing, choices=["exact", "lower"],
                        help="... counting the exact-case or the lower-cased token")
    parser.add_argument("--ambiguity-no-gazetteer", action="store_true",
                        help="do not also count GeoNames places as ambiguous")
    parser.add_argument("--ambiguity-boot", type=int, default=AMBIGUITY_N_BOOT,
                        help="bootstrap replicates (over names) of the ambiguity regression")
    parser.add_argument("--wandb-mode", default="disabled", choices=["disabled", "offline", "online", "auto"],
                        help="log the report to W&B too (default: disabled)")
    parser.add_argument("--wandb-project", default="nerbias")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        check_arguments(args)
    except NerbiasError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from nerbias.loggers import NullLogger, WandbLogger
    from nerbias.reporting.report import ReportOptions, render_report

    options = ReportOptions(n_boot=args.n_boot, n_permutations=args.n_permutations, confidence=args.confidence,
                            seed=args.seed, census_boot=args.census_boot,
                            census_permutations=args.census_permutations,
                            census_years=parse_years(args.census_years), ssa=args.ssa, predictions=args.predictions,
                            checkpoint=args.checkpoint, ambiguity_boot=args.ambiguity_boot,
                            ambiguity_rule={"min_typed": args.ambiguity_min_typed,
                                            "types": [t.strip() for t in args.ambiguity_types.split(",") if t.strip()],
                                            "casing": args.ambiguity_casing,
                                            "gazetteer": not args.ambiguity_no_gazetteer})
    out_dir = Path(args.output_dir or args.run_dirs[0])
    if out_dir.is_dir():  # the log too, not only the console (report.log beside report.md)
        handler = logging.FileHandler(out_dir / "report.log", encoding="utf-8")
        handler.setFormatter(logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"))
        logging.getLogger().addHandler(handler)
    logger = NullLogger()
    if args.wandb_mode != "disabled":  # W&B is imported only when asked for: it costs seconds to start
        # A folder of its own: the report is its own W&B run, never a resumption of the evaluation's
        # (WandbLogger keeps one run id per save_dir).
        logger = WandbLogger(project=args.wandb_project, mode=args.wandb_mode, save_dir=out_dir / "report_wandb",
                             config={"run_dirs": [str(p) for p in args.run_dirs],
                                     **{k: (v if v is None or isinstance(v, (int, float, list)) else str(v))
                                        for k, v in vars(options).items()}},
                             name=f"report-{out_dir.name}", job_type="report")
    try:
        report = render_report(args.run_dirs, names_path=args.names, output_dir=out_dir, options=options,
                               logger=logger)
    except NerbiasError as error:
        logging.getLogger("report").error("%s", error)
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        logger.finish()
    print(report.read_text(encoding="utf-8"))
    print(f"report written to {report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

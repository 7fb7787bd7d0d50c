"""Aggregate a sweep: every metric as mean ± std over seeds, per swept configuration.

    python aggregate.py logs/train/multiruns/<time>       # writes aggregate.csv and aggregate.md there
    python aggregate.py <run dir> <run dir> ... -o <dir>  # any runs, e.g. from several sweeps
    python aggregate.py --study logs/train/mitigation_study  # the mitigation study: tables with intervals
"""

import sys

from nerbias.study.aggregate import main

if __name__ == "__main__":
    sys.exit(main())

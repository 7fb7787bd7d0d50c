"""The mitigation study of a sweep (experiment=mitigation_study): one table per corpus with intervals, the
claims family with Holm's adjustment, the papers' claims and the goal (docs/mitigation-study.md).

    python study.py logs/train/mitigation_study -o <dir>    # = python aggregate.py --study ...
    python study.py results/mitigation_study -o <dir>       # the archived study, read directly
"""

import sys

from nerbias.study.aggregate import study_main

if __name__ == "__main__":
    sys.exit(study_main())

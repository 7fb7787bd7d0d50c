#!/usr/bin/env bash
# Set up (with the flair extra), then run the whole test suite (pytest). Real-data tests use $NERBIAS_DATA_DIR or ../shared/data.
# One pytest worker per core (pytest-xdist; NERBIAS_TEST_WORKERS=0 runs in one process), whole files to a
# worker so that module fixtures are built once, and one torch thread per process: most tests are small
# and single-threaded, and two trainings side by side each on every core slow each other several times over.
set -euo pipefail
cd "$(dirname "$0")/.."
NERBIAS_EXTRAS="${NERBIAS_EXTRAS-flair}" bash scripts/setup.sh   # the flair extra too: its adapter's tests run
export WANDB_MODE="${WANDB_MODE:-disabled}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
export NERBIAS_WORKERS="${NERBIAS_WORKERS:-1}"  # the study's own processes: xdist has the cores
exec .venv/bin/python -m pytest -q -n "${NERBIAS_TEST_WORKERS:-auto}" --dist loadfile "$@"

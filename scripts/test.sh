#!/usr/bin/env bash
# Set up (with the flair extra), then run the whole test suite (pytest). Real-data tests use $NERBIAS_DATA_DIR or ../shared/data.
set -euo pipefail
cd "$(dirname "$0")/.."
NERBIAS_EXTRAS="${NERBIAS_EXTRAS-flair}" bash scripts/setup.sh   # the flair extra too: its adapter's tests run
export WANDB_MODE="${WANDB_MODE:-disabled}"
exec .venv/bin/python -m pytest -q "$@"

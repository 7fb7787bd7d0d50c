#!/usr/bin/env bash
# Set up, then run the whole test suite (pytest). Real-data tests use $NERBIAS_DATA_DIR or ../shared/data.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export WANDB_MODE="${WANDB_MODE:-disabled}"
exec .venv/bin/python -m pytest -q "$@"

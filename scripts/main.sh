#!/usr/bin/env bash
# Set up, then run the job the project exists for (experiment=paper): train the default model (GloVe 6B 50d +
# char CNN BiLSTM-CRF), score CoNLL-03 dev / test / lower-cased test, evaluate the best checkpoint on
# Winogender (100k balanced sample), In-Situ and the census benchmark (9 templates), cased and lower-cased,
# and write <run dir>/report.md with its figures.
#   bash scripts/main.sh                        # the whole job
#   bash scripts/main.sh smoke                  # the same pipeline, smoke-sized (experiment=paper_smoke)
#   bash scripts/main.sh logger=none seed=2     # extra arguments are Hydra overrides; they reach every step
# RUN_DIR=<dir> picks the run directory; rerunning with the same RUN_DIR resumes a killed job.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
experiment=paper
if [ "${1:-}" = smoke ]; then
  experiment=paper_smoke
  shift
fi
run_dir="${RUN_DIR:-logs/train/runs/$experiment-$(date +%Y-%m-%d_%H-%M-%S)}"
.venv/bin/python train.py "experiment=$experiment" "hydra.run.dir=$run_dir" trainer.resume=true "$@"
echo "report: $run_dir/report.md (CoNLL-03 metrics: $run_dir/metrics.json; bias runs: $run_dir/bias/)"

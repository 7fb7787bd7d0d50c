#!/usr/bin/env bash
# Set up, train the default configuration (GloVe 50d + char CNN BiLSTM-CRF on CoNLL-03),
# then evaluate the best checkpoint on CoNLL-03 dev and test. Extra arguments go to train.py.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
run_dir="${RUN_DIR:-logs/train/runs/main-$(date +%Y-%m-%d_%H-%M-%S)}"
.venv/bin/python train.py "hydra.run.dir=$run_dir" "$@"
.venv/bin/python evaluate.py "tagger.path=$run_dir/checkpoints/best.pt" "hydra.run.dir=$run_dir/evaluate"
echo "results: $run_dir/metrics.json and $run_dir/evaluate/metrics.json"

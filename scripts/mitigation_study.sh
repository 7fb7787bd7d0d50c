#!/usr/bin/env bash
# The mitigation study (docs/mitigation-study.md): set up, train the conditions of configs/mitigation/ on
# GloVe 6B 50d (seeds 1-5 for each, seeds outermost), evaluate each best checkpoint on Winogender, In-Situ,
# the census (held-out names), the OOV name set and the paired probes, cased and lower-cased, then write
# <sweep dir>/study/study.md: one table per corpus with intervals and paired differences from the baseline.
#   bash scripts/mitigation_study.sh                  # 50 jobs, one at a time: many hours on 2 CPU cores
#   bash scripts/mitigation_study.sh logger=none      # extra arguments are Hydra overrides for every job
# Then the ELMo-style model, trained to convergence and evaluated the same way, joins the tables as
# condition "elmo" (experiment=mitigation_study_elmo; 3.0-3.6 min an epoch; STUDY_ELMO=0 skips it).
# SWEEP_DIR=<dir> picks the sweep directory (default logs/train/mitigation_study). Rerunning the same
# command resumes: each job continues from its last checkpoint and finished evaluations are kept.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
sweep_dir="${SWEEP_DIR:-logs/train/mitigation_study}"
# STUDY_ARCHIVE=<dir> (e.g. results/mitigation_study): its packed jobs are restored first (a rerun keeps
# them without their checkpoints), and each job is packed there when it ends (scripts/study_archive.py).
callback=()   # expanded as ${callback[@]+...}: bash before 4.4 calls an empty array unbound under set -u
if [ -n "${STUDY_ARCHIVE:-}" ]; then
  mkdir -p "$STUDY_ARCHIVE"
  if compgen -G "$STUDY_ARCHIVE/*/MANIFEST.sha256" > /dev/null; then
    .venv/bin/python scripts/study_archive.py unpack "$STUDY_ARCHIVE" "$sweep_dir"
  fi
  callback=("+hydra.callbacks.study_archive._target_=nerbias.study.archive.PackEachFinishedJob"
            "+hydra.callbacks.study_archive.archive_dir=$(cd "$STUDY_ARCHIVE" && pwd)")
fi
.venv/bin/python train.py -m experiment=mitigation_study "hydra.sweep.dir=$sweep_dir" ${callback[@]+"${callback[@]}"} "$@"
if [ "${STUDY_ELMO:-1}" != 0 ]; then
  .venv/bin/python train.py experiment=mitigation_study_elmo seed=1 "hydra.run.dir=$sweep_dir/elmo-seed1" \
    trainer.resume=true ${callback[@]+"${callback[@]}"} "$@"
fi
# The evaluation names' ambiguity profile: the study scores each names corpus again without the ambiguous ones.
.venv/bin/python -m nerbias.bias.name_profile --no-census -o "$sweep_dir/name_profile.csv"
if [ -n "${STUDY_ARCHIVE:-}" ]; then cp "$sweep_dir/name_profile.csv" "$STUDY_ARCHIVE/"; fi
.venv/bin/python aggregate.py --study "$sweep_dir"

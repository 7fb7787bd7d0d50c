#!/usr/bin/env bash
# Behaviour unchanged? The same runs from an earlier commit and from this working tree, then every result file
# compared byte for byte (configs, logs and checkpoints' pickles aside; checkpoints by their tensors):
#   bash scripts/same_results.sh <earlier commit> <a trained best.pt> [out dir]
# The smoke training (seed 3), the checkpoint on CoNLL-03, Winogender (20,000), In-Situ, the probes, the census
# (template 4, lower-cased), Winogender in 3 shards, and the published CoreNLP census predictions. Needs
# NERBIAS_DATA_DIR; takes a few minutes on an idle machine. Prints "same"/"DIFFERENT" per file.
set -euo pipefail
rev=$1; checkpoint=$(realpath "$2"); out=$(realpath -m "${3:-same_results}")
here=$(cd "$(dirname "$0")/.." && pwd); py=${PYTHON:-$here/.venv/bin/python}
rm -rf "$out"; mkdir -p "$out"
git -C "$here" worktree add --detach "$out/earlier" "$rev" > /dev/null
trap 'git -C "$here" worktree remove --force "$out/earlier"' EXIT
export WANDB_MODE=disabled
for side in before after; do
  src=$here; [ $side = before ] && src=$out/earlier
  (
    cd "$src"; export PYTHONPATH=$src
    $py train.py experiment=smoke logger=none seed=3 hydra.run.dir=$out/$side/smoke > $out/$side-smoke.log 2>&1
    i=0
    for corpus in "conll2003" "winogender corpus.sample=20000" "insitu" "probes" \
                  "census corpus.template=4 corpus.lowercase=true" "winogender corpus.sample=6000 corpus.num_shards=3"; do
      i=$((i + 1)); set -- $corpus
      $py evaluate.py tagger.path=$checkpoint corpus=$corpus shards_dir=$out/$side/$i-$1/shards logger=none \
        hydra.run.dir=$out/$side/$i-$1 > $out/$side-$i.log 2>&1
    done
    $py evaluate.py tagger=precomputed corpus=census corpus.template=4 logger=none \
      hydra.run.dir=$out/$side/published > $out/$side-published.log 2>&1
  )
done
cd "$out"
for f in $(cd before && find . -type f ! -name "*.log" ! -name "config_resolved.yaml" ! -path "*/.hydra/*" ! -name "*.pt" | sort); do
  if cmp -s "before/$f" "after/$f"; then echo "same $f"; else echo "DIFFERENT $f"; fi
done
$py - <<'PY'
import torch
for name in ("best.pt", "last.pt"):
    a, b = (torch.load(f"{side}/smoke/checkpoints/{name}", weights_only=True)["model_state"] for side in ("before", "after"))
    same = a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    print("same" if same else "DIFFERENT", f"./smoke/checkpoints/{name} model_state ({len(a)} tensors)")
PY

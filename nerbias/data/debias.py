"""Hard de-biasing of word vectors (``embeddings.debias=hard``): Bolukbasi et al. (2016), with the
race subspace of Manzini et al. (2019, multiclass); and its control, normalisation alone
(``embeddings.normalize=true``).

1. **Normalise**: every vector is scaled to unit length (as in both papers; ``normalized``). This is all
   ``normalize=true`` does; ``debias=hard`` always does it first, so the two conditions differ only by
   steps 3 and 4 (step 2 changes no vector).
2. The **bias subspace** B: the gender direction is the first principal component of the definitional
   pairs' centred vectors (each pair minus its mean); the race directions are the first
   ``race_components`` principal components of the race sets' centred vectors; together they are
   orthonormalised (gender first).
3. **Neutralise** (``neutralize``): ``all`` (the default) removes B from every word outside the
   definitional sets, names included; ``neutral_only`` is Bolukbasi et al.'s original, which leaves the
   gender direction of gender-specific words (the packaged ``gender_specific`` list) alone and removes
   only the race directions from them. Either way a neutralised word keeps its part outside B
   (rescaled to unit length).
4. **Equalise**: the words of each definitional set share one part outside B and keep their (centred,
   rescaled) parts inside B, so that every word outside B is equally close to all of them. Sets that
   share a word (Manzini et al.'s ``africa`` is in three sets) must share that part too, so the sets are
   equalised jointly: each group of sets linked by shared words (``equality_classes``) is equalised as
   one set. Every set is then equalised, overlaps included (equalising set by set would overwrite the
   shared words and undo the earlier sets).

The sets are a data file of the package (``resources/debias_sets.json``, with their sources).
``bias_projection`` is the diagnostic: the mean norm of the given words' (unit) projections on B.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np

from nerbias.data.embeddings import keyed_vectors, unit_rows
from nerbias.errors import NerbiasError

if TYPE_CHECKING:  # gensim takes 0.7 s to import: only runs that de-bias or normalise vectors pay it
    from gensim.models import KeyedVectors

SETS_PATH = Path(__file__).resolve().parent / "resources" / "debias_sets.json"
NEUTRALIZE = ("all", "neutral_only")  # embeddings.debias_neutralize


def load_sets(path: str | Path = SETS_PATH) -> dict[str, Any]:
    return json.loads(Path(path).read_text(encoding="utf-8"))




def normalized(keyed: KeyedVectors) -> KeyedVectors:
    """A copy of ``keyed`` with every vector at unit length (``embeddings.normalize=true``)."""
    return keyed_vectors(keyed.index_to_key, unit_rows(keyed.vectors.astype(np.float64)))


def _present(keyed: KeyedVectors, sets: Iterable[Sequence[str]]) -> list[list[str]]:
    return [list(words) for words in sets if all(word in keyed.key_to_index for word in words)]


def definitional_sets(keyed: KeyedVectors, sets: dict[str, Any]) -> tuple[list[list[str]], list[list[str]]]:
    """The gender pairs and race sets whose every word ``keyed`` has (the others are skipped)."""
    return _present(keyed, sets["gender_pairs"]), _present(keyed, sets["race_sets"])


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


def subspace_of(keyed: KeyedVectors, sets: dict[str, Any] | None = None) -> tuple[np.ndarray, list[str]]:
    """The bias subspace of ``keyed``'s unit vectors and the names of its directions."""
    sets = sets or load_sets()
    gender, race = definitional_sets(keyed, sets)
    words = sorted({w for words in gender + race for w in words})
    index = {w: i for i, w in enumerate(words)}
    vectors = unit_rows(keyed[words].astype(np.float64)) if words else np.zeros((0, keyed.vector_size))
    subspace = bias_subspace(vectors, index, gender, race, int(sets.get("race_components", 2)))
    return subspace, direction_names(subspace, has_gender=bool(gender))


def direction_names(subspace: np.ndarray, has_gender: bool = True) -> list[str]:
    """Names of the subspace's rows: the gender direction first (QR keeps its direction), then the race
    directions, each made orthogonal to those before it."""
    race = len(subspace) - int(has_gender)
    return (["gender"] if has_gender else []) + [f"race_{k + 1}" for k in range(race)]


def direction_projections(vectors: np.ndarray, subspace: np.ndarray) -> np.ndarray:
    """Mean over the rows of |cosine| with each direction of the subspace (one value a direction)."""
    if not len(vectors):
        return np.full(len(subspace), np.nan)
    return np.abs(unit_rows(vectors) @ subspace.T).mean(axis=0)


def bias_projection(vectors: np.ndarray, subspace: np.ndarray) -> float:
    """Mean over the rows of |projection on B| (the norm of the part of each vector inside B)."""
    if not len(vectors):
        return float("nan")
    return float(np.linalg.norm(unit_rows(vectors) @ subspace.T, axis=1).mean())


def equality_classes(sets: Sequence[Sequence[str]]) -> list[list[str]]:
    """The sets merged wherever they share a word (connected components), words in order of appearance.

    Equalised sets share their part outside B; a word in two sets ties both sets to one part.
    """
    parent: dict[str, str] = {}

    def root(word: str) -> str:
        while parent[word] != word:
            parent[word] = parent[parent[word]]
            word = parent[word]
        return word

    for words in sets:
        for word in words:
            parent.setdefault(word, word)
        for word in words[1:]:
            parent[root(word)] = root(words[0])
    classes: dict[str, list[str]] = {}
    for word in parent:
        classes.setdefault(root(word), []).append(word)
    return list(classes.values())


def equalise(vectors: np.ndarray, rows: Sequence[int], subspace: np.ndarray) -> np.ndarray:
    """Unit vectors for ``rows`` (one equality class): one shared part outside B (their mean's), and
    each one's part inside B, centred on the class and rescaled so that every vector has unit length."""
    block = vectors[list(rows)]
    mean = block.mean(axis=0)
    mean_b = (mean @ subspace.T) @ subspace
    shared = mean - mean_b
    scale = np.sqrt(max(1.0 - float(shared @ shared), 0.0))
    inside = (block @ subspace.T) @ subspace - mean_b
    return shared + scale * unit_rows(inside)


def is_equalised(vectors: np.ndarray, subspace: np.ndarray, atol: float = 1e-5) -> bool:
    """Whether the rows (one set) share their part outside B and have one length, so that every vector
    outside B has the same cosine with each of them."""
    outside = vectors - (vectors @ subspace.T) @ subspace
    norms = np.linalg.norm(vectors, axis=1)
    return bool(np.allclose(outside, outside[0], atol=atol) and np.allclose(norms, norms[0], atol=atol))


def equalised_sets(keyed: KeyedVectors, sets: dict[str, Any], subspace: np.ndarray,
                   atol: float = 1e-5) -> dict[str, list[bool]]:
    """For each kind of definitional set (present in ``keyed``), which sets are equalised."""
    gender, race = definitional_sets(keyed, sets)
    return {kind: [is_equalised(keyed[words].astype(np.float64), subspace, atol) for words in found]
            for kind, found in (("gender_pairs", gender), ("race_sets", race))}


def hard_debias(keyed: KeyedVectors, sets: dict[str, Any] | None = None, neutralize: str = "all"
                ) -> tuple[KeyedVectors, np.ndarray, set[str]]:
    """A de-biased copy of ``keyed``, the bias subspace and the definitional words (left out of neutralising)."""
    if neutralize not in NEUTRALIZE:
        raise NerbiasError(f"debias: neutralize={neutralize!r}; choose one of {list(NEUTRALIZE)}")
    sets = sets or load_sets()
    vectors = unit_rows(keyed.vectors.astype(np.float64))
    index = keyed.key_to_index
    gender, race = definitional_sets(keyed, sets)
    subspace, _ = subspace_of(keyed, sets)
    definitional = {word for words in gender + race for word in words}
    neutral = np.array([word not in definitional for word in keyed.index_to_key])
    exempt = np.zeros(len(vectors), dtype=bool)  # gender-specific words: only the race directions removed
    if neutralize == "neutral_only" and gender:
        exempt[[index[w] for w in set(sets.get("gender_specific", [])) - definitional if w in index]] = True
    full = neutral & ~exempt
    vectors[full] -= (vectors[full] @ subspace.T) @ subspace
    vectors[exempt] -= (vectors[exempt] @ subspace[1:].T) @ subspace[1:]  # row 0 is the gender direction
    vectors[neutral] = unit_rows(vectors[neutral])
    for words in equality_classes(gender + race):
        rows = [index[w] for w in words]
        vectors[rows] = equalise(vectors, rows, subspace)
    return keyed_vectors(keyed.index_to_key, vectors), subspace, definitional

"""What de-biasing (or normalising) did to the evaluation names' vectors, at three stages: ``before``
(the pretrained vectors as loaded), ``initial`` (the table training starts from: de-biased, or only
normalised) and ``trained`` (the word table of the best checkpoint, after fine-tuning).

At each stage, two measures:

- **projection on the bias subspace** B (``nerbias.data.debias``): the mean norm of the names' unit
  vectors' part inside B, and the mean |cosine| with each direction. Hard de-biasing sets it to 0 at
  ``initial`` by construction; ``trained`` says whether fine-tuning brings it back.
- **residual bias** (Gonen & Goldberg 2019, "Lipstick on a Pig"): leave-one-out accuracy of a linear
  classifier predicting each name's gender and race group from its vector (scikit-learn: features
  standardised on the training fold, then L2 logistic regression, C=1). Removing B does not remove what
  is spread outside it; an accuracy above chance means the groups are still linearly recoverable.
  ``chance`` is the majority class's share of the names (what always guessing it scores).

Every run that normalises or de-biases writes ``debias_diagnostics.json`` (``before`` and ``initial`` when
training starts, ``trained`` when it ends); ``summary_row`` flattens it for the study tables.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping, Sequence

import numpy as np

from nerbias.data.debias import bias_projection, direction_projections

DIAGNOSTICS_FILE = "debias_diagnostics.json"
STAGES = ("before", "initial", "trained")
CLASSIFIER = ("leave-one-out accuracy; scikit-learn StandardScaler + LogisticRegression(C=1.0, L2), "
              "fitted on the other names; chance = the majority class's share")


def loo_accuracy(vectors: np.ndarray, labels: Sequence[str]) -> dict[str, Any]:
    """Leave-one-out accuracy of the linear classifier (``CLASSIFIER``) predicting ``labels`` from the rows
    of ``vectors``, with the chance rate; accuracy is None with fewer than two classes or a class of one
    name (leaving it out would leave nothing of its class to learn from)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import LeaveOneOut, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from threadpoolctl import threadpool_limits

    labels = np.asarray(labels)
    counts = Counter(labels.tolist())
    result = {"n": int(len(labels)), "classes": dict(sorted(counts.items())),
              "chance": max(counts.values()) / len(labels) if len(labels) else None, "accuracy": None}
    if len(counts) < 2 or min(counts.values()) < 2:
        return result
    model = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=5000))
    with threadpool_limits(1):  # ~100 tiny fits: BLAS threads only add overhead (10x on a busy machine)
        predicted = cross_val_predict(model, np.asarray(vectors, dtype=np.float64), labels, cv=LeaveOneOut())
    result["accuracy"] = float((predicted == labels).mean())
    return result


def stage(vectors: np.ndarray, labels: Mapping[str, Sequence[str]], subspace: np.ndarray | None,
          directions: Sequence[str]) -> dict[str, Any]:
    """Both measures for the rows of ``vectors`` (one name a row; ``labels``: target -> label per row)."""
    vectors = np.asarray(vectors, dtype=np.float64)
    projection = per_direction = None
    if subspace is not None:
        projection = bias_projection(vectors, subspace)
        per_direction = dict(zip(directions, map(float, direction_projections(vectors, subspace))))
    return {"names": int(len(vectors)), "mean_abs_projection": projection, "mean_abs_cosine": per_direction,
            "classifier": {target: loo_accuracy(vectors, values) for target, values in labels.items()}}


def name_keys(names: Sequence[str], lowercase: bool) -> list[str]:
    return [name.lower() if lowercase else name for name in names]


def report(method: str, names: Sequence[str], labels: Mapping[str, Mapping[str, str]], before: np.ndarray,
           initial: np.ndarray, subspace: np.ndarray | None, directions: Sequence[str], lowercase: bool,
           **details: Any) -> dict[str, Any]:
    """The diagnostics of a run when training starts (``names``: those the pretrained vectors have, one
    row of ``before`` and ``initial`` each). Holds the subspace and labels, so that ``add_trained_stage``
    needs nothing else."""
    per_target = {target: [mapping[name] for name in names] for target, mapping in labels.items()}
    return {
        "method": method, **details, "lowercase": bool(lowercase), "classifier_method": CLASSIFIER,
        "names": list(names), "labels": {target: dict(zip(names, values)) for target, values in per_target.items()},
        "subspace": None if subspace is None else {"directions": list(directions), "rows": subspace.tolist()},
        "stages": {"before": stage(before, per_target, subspace, directions),
                   "initial": stage(initial, per_target, subspace, directions)},
    }


def add_trained_stage(diagnostics: dict[str, Any], table: np.ndarray, words: Sequence[str], source: str
                      ) -> dict[str, Any]:
    """``diagnostics`` with its ``trained`` stage: the names' rows of a trained word table (``words``: the
    table's vocabulary, row by row), measured as the other stages (names missing from it are counted)."""
    index = {word: i for i, word in enumerate(words)}
    keys = name_keys(diagnostics["names"], diagnostics.get("lowercase", True))
    present = [(name, index[key]) for name, key in zip(diagnostics["names"], keys) if key in index]
    labels = {target: [mapping[name] for name, _ in present] for target, mapping in diagnostics["labels"].items()}
    space = diagnostics.get("subspace")
    subspace = np.asarray(space["rows"], dtype=np.float64) if space else None
    trained = stage(np.asarray(table, dtype=np.float64)[[row for _, row in present]], labels, subspace,
                    space["directions"] if space else [])
    trained.update(source=source, missing=[name for name, key in zip(diagnostics["names"], keys) if key not in index])
    return {**diagnostics, "stages": {**diagnostics["stages"], "trained": trained}}


def summary_row(diagnostics: Mapping[str, Any]) -> dict[str, Any]:
    """One flat row for a table: ``projection_<stage>``, ``<target>_accuracy_<stage>`` and
    ``<target>_chance`` (a stage the run has not reached is NaN)."""
    row: dict[str, Any] = {"method": diagnostics["method"]}
    stages = diagnostics["stages"]
    for name in STAGES:
        value = stages.get(name, {}).get("mean_abs_projection")
        row[f"projection_{name}"] = float("nan") if value is None else value
    for target in diagnostics["labels"]:
        for name in STAGES:
            value = stages.get(name, {}).get("classifier", {}).get(target, {}).get("accuracy")
            row[f"{target}_accuracy_{name}"] = float("nan") if value is None else value
        row[f"{target}_chance"] = stages["before"]["classifier"][target]["chance"]
    return row

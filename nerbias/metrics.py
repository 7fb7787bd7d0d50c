"""Entity-level precision / recall / F1 with seqeval in strict mode (equal to conlleval).

Strict mode on well-formed BIOES sequences counts exactly the exact-match chunks conlleval
counts on the same entities, and the constrained CRF only produces well-formed sequences.
"""

from __future__ import annotations

from typing import Sequence

from seqeval.metrics import classification_report
from seqeval.scheme import IOBES


def entity_scores(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> dict[str, float]:
    """``{"precision", "recall", "f1", "f1_PER", ...}`` as fractions in [0, 1] (BIOES input)."""
    report = classification_report(
        [list(s) for s in gold], [list(s) for s in predicted], mode="strict", scheme=IOBES,
        output_dict=True, zero_division=0,
    )
    micro = report["micro avg"]
    scores = {"precision": micro["precision"], "recall": micro["recall"], "f1": micro["f1-score"]}
    for label, values in report.items():
        if label.endswith(" avg"):
            continue
        scores[f"f1_{label}"] = values["f1-score"]
        scores[f"precision_{label}"] = values["precision"]
        scores[f"recall_{label}"] = values["recall"]
    return {key: float(value) for key, value in scores.items()}

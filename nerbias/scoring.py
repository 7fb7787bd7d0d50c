"""Scoring a tagger on CoNLL data: entity precision / recall / F1 and the prediction files, and CoNLL-03 as a
benchmark (``Conll2003Benchmark``, what ``corpus=conll2003`` names).

Entity-level scores come from seqeval in strict mode (equal to conlleval): strict mode on
well-formed BIOES sequences counts exactly the exact-match chunks conlleval counts on the same
entities, and the constrained CRF only produces well-formed sequences.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from nerbias.data.batching import bioes_tags
from nerbias.data.conll import Sentence, lowercased, write_conll
from nerbias.data.conll2003 import SPLIT_FILES, load_conll2003
from nerbias.data.tags import bioes_to_iob1
from nerbias.errors import NerbiasError
from nerbias.fileio import atomic_write_json, atomic_write_text, write_csv
from nerbias.models.tagger import NerTagger, Prediction

log = logging.getLogger(__name__)


def entity_scores(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> dict[str, float]:
    """``{"precision", "recall", "f1", "f1_PER", ...}`` as fractions in [0, 1] (BIOES input)."""
    # seqeval imports scikit-learn (0.9 s): paid by the runs that score CoNLL-03, not by every evaluation
    from seqeval.metrics import classification_report
    from seqeval.scheme import IOBES

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


def evaluate_split(tagger: NerTagger, sentences: Sequence[Sentence], batch_size: int, desc: str,
                   confidences: bool = False) -> tuple[dict[str, float], list[Prediction]]:
    """Tag ``sentences`` and score them against their gold entities."""
    predictions = tagger.predict([s.tokens for s in sentences], batch_size=batch_size, confidences=confidences,
                                 progress=True)
    scores = entity_scores([bioes_tags(s) for s in sentences], [p.tags for p in predictions])
    log.info("%s: precision %.4f recall %.4f F1 %.4f", desc, scores["precision"], scores["recall"], scores["f1"])
    return scores, predictions


CALIBRATION_BINS = 10


def span_correctness(sentences: Sequence[Sentence], predictions: Sequence[Prediction]) -> tuple[np.ndarray, np.ndarray]:
    """Every predicted span's confidence P(span | sentence) and whether it is a gold entity (same
    boundaries and type: the conlleval notion of a correct chunk)."""
    confidences, correct = [], []
    for sentence, prediction in zip(sentences, predictions):
        gold = {(span.start, span.end, span.label) for span in sentence.spans}
        for span, confidence in zip(prediction.spans, prediction.confidences):
            confidences.append(confidence)
            correct.append((span.start, span.end, span.label) in gold)
    return np.asarray(confidences, dtype=np.float64), np.asarray(correct, dtype=bool)


def calibration_table(confidences: np.ndarray, correct: np.ndarray,
                      bins: int = CALIBRATION_BINS) -> tuple[pd.DataFrame, float]:
    """Reliability table over equal-mass bins of the confidences (each bin: count, mean confidence,
    share correct) and the expected calibration error ``sum_b n_b / N |accuracy_b - confidence_b|``."""
    if not len(confidences):
        return pd.DataFrame(columns=["bin", "count", "confidence", "accuracy", "low", "high"]), float("nan")
    order = np.argsort(confidences, kind="stable")
    rows = []
    for number, members in enumerate(np.array_split(order, min(bins, len(order)))):
        rows.append({"bin": number, "count": len(members), "confidence": float(confidences[members].mean()),
                     "accuracy": float(correct[members].mean()), "low": float(confidences[members].min()),
                     "high": float(confidences[members].max())})
    table = pd.DataFrame(rows)
    ece = float((table["count"] * (table["accuracy"] - table["confidence"]).abs()).sum() / len(confidences))
    return table, ece


def write_predictions(output_dir: Path, name: str, sentences: Sequence[Sentence],
                      predictions: Sequence[Prediction]) -> None:
    """``<name>.conll`` (token, gold, predicted; IOB1 like the source, conlleval-ready) and
    ``<name>_spans.tsv`` (every predicted entity with its exact confidence)."""
    rows = []
    span_lines = ["sentence\tstart\tend\tlabel\tconfidence\ttext"]
    for number, (sentence, prediction) in enumerate(zip(sentences, predictions)):
        gold = bioes_to_iob1(bioes_tags(sentence))
        predicted = bioes_to_iob1(prediction.tags)
        rows.append([[token, g, p] for token, g, p in zip(sentence.tokens, gold, predicted)])
        for span, confidence in zip(prediction.spans, prediction.confidences):
            text = " ".join(sentence.tokens[span.start:span.end])
            span_lines.append(f"{number}\t{span.start}\t{span.end}\t{span.label}\t{confidence:.6f}\t{text}")
    write_conll(output_dir / f"{name}.conll", rows)
    atomic_write_text(output_dir / f"{name}_spans.tsv", "\n".join(span_lines) + "\n")


class Conll2003Benchmark:
    """``corpus=conll2003``: a checkpoint on CoNLL-03 dev / test (and lower-cased splits, ``<split>_lower``):
    metrics.json plus the prediction files of the splits in ``predictions`` (null: every scored split), with
    ``calibration`` their span calibration tables. Needs a tagger with a ``NerTagger`` inside (``ner_tagger``),
    scored in the tagger's batches (``batch_size``); ``run`` (the bias evaluations' shared settings) is not used.
    A training scores its best checkpoint with the same class (``Trainer.finish``: ``score``)."""

    def __init__(self, name: str, paper: str, data_dir: str | None, splits: Sequence[str] = ("dev", "test"),
                 lowercase_splits: Sequence[str] = (), verify_sizes: bool = True,
                 predictions: Sequence[str] | None = None, calibration: bool = False, run: Any = None):
        unknown = sorted((set(splits) | set(lowercase_splits or ())) - set(SPLIT_FILES))
        if unknown:
            raise NerbiasError(f"corpus.splits: no CoNLL-03 split {unknown[0]!r} (the splits: {', '.join(SPLIT_FILES)})")
        self.name, self.paper, self.data_dir = name, paper, data_dir
        self.splits, self.lowercase_splits = list(splits), list(lowercase_splits or [])
        self.verify_sizes = bool(verify_sizes)
        self.predictions = None if predictions is None else list(predictions)
        self.calibration = bool(calibration)

    def scored_splits(self, data: Mapping[str, list[Sentence]]) -> dict[str, list[Sentence]]:
        """The splits this benchmark scores, by name (``dev``, ``test``, ``test_lower``), from loaded ``data``."""
        scored = {split: data[split] for split in self.splits}
        scored.update({f"{split}_lower": lowercased(data[split]) for split in self.lowercase_splits})
        return scored

    def score(self, tagger: NerTagger, splits: Mapping[str, list[Sentence]], batch_size: int, output_dir: Path,
              desc: str = "") -> dict[str, float]:
        """``<split>_<metric>`` of each split; a split whose predictions are kept is tagged with span
        confidences and its ``<split>_predictions.conll`` / ``_spans.tsv`` written, and with ``calibration``
        its ``<split>_calibration.csv`` (metric ``<split>_span_ece`` unless no entity was predicted)."""
        metrics: dict[str, float] = {}
        calibrations = {}
        for split, sentences in splits.items():
            kept = self.predictions is None or split in self.predictions
            scores, predictions = evaluate_split(tagger, sentences, batch_size, f"{split}{desc}", confidences=kept)
            if kept:
                write_predictions(output_dir, f"{split}_predictions", sentences, predictions)
                if self.calibration:
                    calibrations[split] = calibration_table(*span_correctness(sentences, predictions))
            metrics.update({f"{split}_{key}": value for key, value in scores.items()})
        for split, (table, ece) in calibrations.items():
            write_csv(output_dir / f"{split}_calibration.csv", table)
            if len(table):  # no predicted entity: nothing to calibrate, and no NaN in the metrics
                metrics[f"{split}_span_ece"] = ece
        return metrics

    def evaluate(self, tagger: Any, output_dir: Path, logger: Any) -> dict[str, float]:
        if tagger.ner_tagger is None:
            raise NerbiasError(f"tagger {tagger.name} cannot be scored on CoNLL-03 (needs a checkpoint)")
        data = load_conll2003(self.data_dir, splits=list(dict.fromkeys(self.splits + self.lowercase_splits)),
                              verify_sizes=self.verify_sizes)
        metrics = self.score(tagger.ner_tagger, self.scored_splits(data), tagger.batch_size, output_dir)
        atomic_write_json(output_dir / "metrics.json", {"metrics": metrics, "checkpoint": str(tagger.path)})
        logger.summary(metrics)
        return metrics

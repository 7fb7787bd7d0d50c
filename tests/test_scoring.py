"""seqeval strict on BIOES equals conlleval's exact-match chunk counting on IOB1."""

import random

import pytest

from nerbias.scoring import entity_scores
from nerbias.data.tags import Span, iob1_to_spans, spans_to_bioes, spans_to_iob1


def conlleval_f1(gold_iob1, predicted_iob1):
    """conlleval's definition: a chunk is correct when start, end and type all match."""
    gold = {(i, s) for i, tags in enumerate(gold_iob1) for s in iob1_to_spans(tags)}
    pred = {(i, s) for i, tags in enumerate(predicted_iob1) for s in iob1_to_spans(tags)}
    correct = len(gold & pred)
    precision = correct / len(pred) if pred else 0.0
    recall = correct / len(gold) if gold else 0.0
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def random_spans(rng, length):
    spans, position = [], 0
    while position < length:
        if rng.random() < 0.3:
            end = min(length, position + rng.randint(1, 3))
            spans.append(Span(position, end, rng.choice(["PER", "LOC", "ORG", "MISC"])))
            position = end
        else:
            position += 1
    return spans


@pytest.mark.parametrize("seed", range(5))
def test_strict_seqeval_equals_conlleval_counts(seed):
    rng = random.Random(seed)
    lengths = [rng.randint(1, 12) for _ in range(60)]
    gold = [random_spans(rng, n) for n in lengths]
    # Predictions: gold with some spans dropped, shifted or retyped, plus random ones.
    predicted = [random_spans(rng, n) if rng.random() < 0.3 else list(spans) for spans, n in zip(gold, lengths)]
    scores = entity_scores([spans_to_bioes(s, n) for s, n in zip(gold, lengths)],
                           [spans_to_bioes(s, n) for s, n in zip(predicted, lengths)])
    expected = conlleval_f1([spans_to_iob1(s, n) for s, n in zip(gold, lengths)],
                            [spans_to_iob1(s, n) for s, n in zip(predicted, lengths)])
    assert scores["f1"] == pytest.approx(expected, abs=1e-12)
    assert 0 <= scores["f1_PER"] <= 1

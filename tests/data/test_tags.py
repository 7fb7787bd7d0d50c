import pytest

from nerbias.data.tags import (
    Span,
    bioes_to_iob1,
    bioes_to_spans,
    bio_to_spans,
    iob1_to_bioes,
    iob1_to_spans,
    parse_tag,
    spans_to_bio,
    spans_to_iob1,
)


def test_iob1_chunks_follow_the_conll_rules():
    tags = ["I-PER", "I-PER", "B-PER", "O", "I-LOC", "I-ORG", "B-ORG", "I-ORG"]
    assert iob1_to_spans(tags) == [Span(0, 2, "PER"), Span(2, 3, "PER"), Span(4, 5, "LOC"), Span(5, 6, "ORG"),
                                   Span(6, 8, "ORG")]
    assert iob1_to_bioes(tags) == ["B-PER", "E-PER", "S-PER", "O", "S-LOC", "S-ORG", "B-ORG", "E-ORG"]
    assert bioes_to_iob1(iob1_to_bioes(tags)) == tags


def test_round_trips_between_schemes():
    spans = [Span(0, 1, "PER"), Span(1, 4, "ORG"), Span(5, 7, "ORG"), Span(7, 8, "ORG")]
    bio = spans_to_bio(spans, 9)
    assert bio_to_spans(bio) == spans
    assert iob1_to_spans(spans_to_iob1(spans, 9)) == spans
    assert bioes_to_spans(iob1_to_bioes(spans_to_iob1(spans, 9))) == spans


@pytest.mark.parametrize("bad", ["PER", "X-PER", "B-", "I_PER", "b-PER", ""])
def test_ill_formed_tags_are_rejected(bad):
    with pytest.raises(ValueError):
        parse_tag(bad)

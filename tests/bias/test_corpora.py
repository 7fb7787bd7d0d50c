"""Winogender and In-Situ corpora: sizes, index round trips, shards, balanced samples, bad inputs, real data."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from nerbias.bias.types import NameSlot
from nerbias.data.conll import Sentence
from nerbias.bias.corpora import (
    CorpusIndexError,
    WinogenderCorpus,
    load_winogender_templates,
    tokenize,
)
from nerbias.bias.insitu import InSituCorpus
from nerbias.data.conll2003 import load_conll2003
from nerbias.errors import DataFormatError, NerbiasError
from nerbias.bias.names import load_names
from nerbias.data.tags import Span

HEADER = "occupation(0)\tother-participant(1)\tanswer\tsentence\n"
TEMPLATES = (
    HEADER
    + "technician\tcustomer\t1\tThe $OCCUPATION told the $PARTICIPANT that $NOM_PRONOUN could pay with cash.\n"
    + "accountant\ttaxpayer\t1\tThe $PARTICIPANT met with the $OCCUPATION to get help filing $POSS_PRONOUN taxes.\n"
)
FIVE = ["Amy", "Bob", "Cleo", "Dan", "Eve"]


def write(tmp_path: Path, text: str, name: str = "templates.tsv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def templates(tmp_path):
    return load_winogender_templates(write(tmp_path, TEMPLATES))


@pytest.fixture
def small(templates):
    return WinogenderCorpus(templates, FIVE)  # 2 templates x 5*4*3 triples = 120 sentences


# ---------------------------------------------------------------- tokenisation and templates


def test_tokenize_conll_style():
    assert tokenize("He couldn't pay; O'Brien's cross-examined x-ray cost $5, i.e. 1,000 or 10.5 (ok).") == [
        "He", "could", "n't", "pay", ";", "O'Brien", "'s", "cross-examined", "x-ray", "cost", "$", "5", ",",
        "i", ".", "e", ".", "1,000", "or", "10.5", "(", "ok", ")", "."]
    assert tokenize("$OCCUPATION's 911") == ["$OCCUPATION", "'s", "911"]


def test_templates_are_cleaned(templates):
    assert len(templates) == 2
    first, second = templates
    assert first.text == "$OCCUPATION told $PARTICIPANT that $NOM_PRONOUN could pay with cash ."
    assert first.slot_positions == (0, 2, 4) and first.pronoun == "$NOM_PRONOUN"
    assert (first.occupation, first.participant, first.answer, first.line) == ("technician", "customer", 1, 2)
    assert second.text == "$PARTICIPANT met with $OCCUPATION to get help filing $POSS_PRONOUN 's taxes ."
    assert second.slot_positions == (3, 0, 8) and second.line == 3


def test_dropped_words_can_include_articles(tmp_path):
    path = write(tmp_path, HEADER + "x\ty\t0\tThe $OCCUPATION met a $PARTICIPANT and $ACC_PRONOUN.\n")
    assert load_winogender_templates(path)[0].text == "$OCCUPATION met a $PARTICIPANT and $ACC_PRONOUN ."
    assert load_winogender_templates(path, ("the", "a"))[0].text == "$OCCUPATION met $PARTICIPANT and $ACC_PRONOUN ."


@pytest.mark.parametrize("text, message, line", [
    (TEMPLATES + "x\ty\t0\tThe $OCCUPATION saw $PARTICIPANT at $PLACE with $NOM_PRONOUN.\n",
     r"unknown placeholder '\$PLACE'", 4),
    ("", "file is empty", None),
    ("occupation\tsentence\n", "expected header", 1),
    (HEADER + "x\ty\t0\n", "expected 4 tab-separated fields, found 3", 2),
    (HEADER + "x\ty\t2\t$OCCUPATION saw $PARTICIPANT and $NOM_PRONOUN.\n", "answer must be 0 or 1", 2),
    (HEADER + "x\ty\t0\tThe $OCCUPATION cooked.\n", r"template needs \$OCCUPATION, \$PARTICIPANT and one pronoun", 2),
    (TEMPLATES + "chef\tguest\t0\tThe $OCCUPATION cooked for the $PARTICIPANT.\n",  # no pronoun slot
     r"template needs .* found 'The \$OCCUPATION cooked for the \$PARTICIPANT\.'", 4),
    (TEMPLATES + "x\ty\t0\tNobody cooked.\n", r"template needs \$OCCUPATION", 4),  # no slot at all
])
def test_bad_templates_name_file_and_line(tmp_path, text, message, line):
    path = write(tmp_path, text)
    with pytest.raises(DataFormatError, match=message) as caught:
        load_winogender_templates(path)
    assert caught.value.path == str(path) and caught.value.line == line
    assert str(caught.value).startswith(f"{path}:{line}:" if line else f"{path}:")


def test_missing_templates_file(tmp_path):
    with pytest.raises(DataFormatError, match="not found") as caught:
        load_winogender_templates(tmp_path / "absent.tsv")
    assert str(tmp_path / "absent.tsv") in str(caught.value)


# ---------------------------------------------------------------- Winogender corpus


def test_size_and_every_sentence(small, templates):
    assert len(small) == 2 * 5 * 4 * 3
    seen = set()
    for index in range(len(small)):
        sentence = small.sentence(index)
        template, names = small.decode(index)
        assert sentence.index == index and sentence.source == template
        assert len(set(names)) == 3
        assert small.index_of(template, *names) == index
        assert [slot.position for slot in sentence.slots] == list(templates[template].slot_positions)
        assert [sentence.tokens[slot.position] for slot in sentence.slots] == [slot.name for slot in sentence.slots]
        seen.add(sentence.tokens)
    assert len(seen) == len(small)  # all distinct
    assert small[0].text == "Amy told Bob that Cleo could pay with cash ."
    assert small[1].text == "Amy told Bob that Dan could pay with cash ."  # pronoun slot varies fastest
    assert small[-1 + len(small)].text == "Dan met with Eve to get help filing Cleo 's taxes ."
    assert all(small[i].source == 0 for i in range(60)) and all(small[i].source == 1 for i in range(60, 120))


def test_round_trip_on_a_large_corpus(templates):
    names = load_names().names
    corpus = WinogenderCorpus(templates, names)
    assert len(corpus) == 2 * 122 * 121 * 120
    rng = random.Random(0)
    for index in [0, 1, len(corpus) - 1] + [rng.randrange(len(corpus)) for _ in range(2000)]:
        sentence = corpus.sentence(index)
        ids = [names.index(slot.name) for slot in sentence.slots]
        assert corpus.index_of(sentence.source, *ids) == index
    assert [slot.name for slot in corpus[len(corpus) - 1].slots] == ["Syedtiastephen", "Stephen", "Ryan"]


def test_out_of_range_and_bad_arguments(small):
    for index in (-1, len(small)):
        with pytest.raises(CorpusIndexError):
            small.sentence(index)
    with pytest.raises(IndexError):  # also a plain IndexError, so corpora behave as sequences
        small[len(small)]
    with pytest.raises(NerbiasError, match="distinct"):
        small.index_of(0, 1, 1, 2)
    with pytest.raises(NerbiasError):
        small.index_of(2, 0, 1, 2)
    with pytest.raises(NerbiasError):
        list(small.iter_range(0, len(small) + 1))
    with pytest.raises(NerbiasError):
        small.shard_bounds(3, 3)
    with pytest.raises(NerbiasError):
        small.sample_indices(-1, 0)


@pytest.mark.parametrize("names, message", [
    ([], "at least 3 distinct names"),
    (["Amy", "Bob"], "at least 3 distinct names"),
    (["Amy", "Bob", "Amy"], "duplicate names"),
    (["Amy", "Bob", "Mary Ann"], "not a single token"),
])
def test_bad_name_lists(templates, names, message):
    with pytest.raises(NerbiasError, match=message):
        WinogenderCorpus(templates, names)


def test_no_templates():
    with pytest.raises(NerbiasError, match="no sources"):
        WinogenderCorpus([], FIVE)


def test_iter_range_streams_in_order(small):
    batches = list(small.iter_range(7, 50, batch_size=8))
    assert [len(batch) for batch in batches] == [8, 8, 8, 8, 8, 3]
    assert [s.index for batch in batches for s in batch] == list(range(7, 50))
    assert sum(len(batch) for batch in small.iter_range(batch_size=1000)) == len(small)
    assert list(small.iter_range(5, 5)) == []


@pytest.mark.parametrize("num_shards", [1, 2, 3, 7, 119, 120, 500])
def test_shards_cover_the_corpus_exactly_once(small, num_shards):
    bounds = [small.shard_bounds(num_shards, shard) for shard in range(num_shards)]
    covered = [index for start, stop in bounds for index in range(start, stop)]
    assert covered == list(range(len(small)))
    sizes = [stop - start for start, stop in bounds]
    assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("k", [0, 1, 4, 5, 37, 200])
def test_sample_balances_names(small, k):
    indices = small.sample_indices(k, seed=3)
    assert len(indices) == k and all(0 <= i < len(small) for i in indices)
    counts = Counter(slot.name for i in indices for slot in small[i].slots)
    per_name = [counts[name] for name in FIVE]
    assert sum(per_name) == 3 * k and max(per_name) - min(per_name) <= 1
    if 3 * k % len(FIVE) == 0:
        assert len(set(per_name)) <= 1
    assert all(len({slot.name for slot in small[i].slots}) == 3 for i in indices)


def test_sample_is_seeded_and_prefix_stable(small):
    assert small.sample_indices(50, seed=1) == small.sample_indices(50, seed=1)
    assert small.sample_indices(50, seed=1) != small.sample_indices(50, seed=2)
    assert small.sample_indices(80, seed=1)[:50] == small.sample_indices(50, seed=1)
    assert {small[i].source for i in small.sample_indices(100, seed=0)} == {0, 1}


def test_sample_balance_with_exactly_three_names(templates):
    corpus = WinogenderCorpus(templates, ["Amy", "Bob", "Cleo"])  # every triple is a permutation
    counts = Counter(slot.name for i in corpus.sample_indices(10, seed=0) for slot in corpus[i].slots)
    assert counts == {"Amy": 10, "Bob": 10, "Cleo": 10}


def test_lowercase_lowers_whole_sentence_but_not_slot_names(templates):
    lower = WinogenderCorpus(templates, FIVE, lowercase=True)
    sentence = lower[0]
    assert sentence.text == "amy told bob that cleo could pay with cash ."
    assert sentence.slots == (NameSlot(0, "Amy"), NameSlot(2, "Bob"), NameSlot(4, "Cleo"))
    assert WinogenderCorpus(templates, FIVE)[0].slots == sentence.slots
    with pytest.raises(NerbiasError, match="ignoring case"):
        WinogenderCorpus(templates, ["Amy", "Bob", "amy"], lowercase=True)


# ---------------------------------------------------------------- In-Situ corpus


def conll_sentence(text: str, spans: list[tuple[int, int, str]]) -> Sentence:
    return Sentence(tuple(text.split()), tuple(Span(*span) for span in spans))


CONLL = [
    conll_sentence("Charlton managed Ireland for 93 matches .", [(0, 1, "PER"), (2, 3, "LOC")]),  # both rules
    conll_sentence("Paul said so .", [(0, 1, "PER")]),  # too short
    conll_sentence("Coach Jack Charlton said Keane would play .", [(1, 3, "PER"), (4, 5, "PER")]),  # unique only
    conll_sentence("Keane and Irwin will both play today .", [(0, 1, "PER"), (2, 3, "PER")]),  # two one-token
    conll_sentence("Nobody is named in this sentence .", []),
    conll_sentence("The team said on Monday that Keane was fit again .", [(6, 7, "PER")]),  # both rules
]


def test_insitu_rules_and_layout():
    unique = InSituCorpus.from_conll(CONLL, FIVE)
    assert unique.rule == "single_token_unique"
    assert [base.source for base in unique.base_sentences] == [0, 2, 5]
    strict = InSituCorpus.from_conll(CONLL, FIVE, rule="no_other_person")
    assert [base.source for base in strict.base_sentences] == [0, 5]
    assert len(unique) == 3 * 5 and len(strict) == 2 * 5

    sentence = unique[1 * 5 + 3]  # base 1, name 3
    assert sentence.text == "Coach Jack Charlton said Dan would play ."
    assert sentence.slots == (NameSlot(4, "Dan"),) and sentence.source == 2 and sentence.index == 8
    assert unique.index_of(1, 3) == 8 and unique.decode(8) == (1, (3,))
    assert unique[0].text == "Amy managed Ireland for 93 matches ."


def test_insitu_shared_behaviour():
    corpus = InSituCorpus.from_conll(CONLL, FIVE, lowercase=True)
    assert corpus[0].text == "amy managed ireland for 93 matches ." and corpus[0].slots == (NameSlot(0, "Amy"),)
    assert [s.index for batch in corpus.iter_range(2, 13, 4) for s in batch] == list(range(2, 13))
    covered = [i for shard in range(4) for i in range(*corpus.shard_bounds(4, shard))]
    assert covered == list(range(len(corpus)))
    for k in (3, 10, 23):
        counts = Counter(corpus[i].slots[0].name for i in corpus.sample_indices(k, seed=0))
        assert sum(counts.values()) == k and max(counts[n] for n in FIVE) - min(counts[n] for n in FIVE) <= 1


def test_insitu_bad_inputs():
    with pytest.raises(NerbiasError, match="unknown In-Situ rule"):
        InSituCorpus.from_conll(CONLL, FIVE, rule="paper")
    with pytest.raises(NerbiasError, match="at least 1 distinct names"):
        InSituCorpus.from_conll(CONLL, [])
    with pytest.raises(NerbiasError, match="no sentence has more than 5 tokens"):
        InSituCorpus.from_conll(CONLL[1:2] + CONLL[3:5], FIVE)


# ---------------------------------------------------------------- real data


@pytest.mark.integration
def test_real_winogender(shared_data):
    templates = load_winogender_templates(shared_data / "winogender" / "templates.tsv")
    assert len(templates) == 120
    assert Counter(t.pronoun for t in templates) == {"$NOM_PRONOUN": 89, "$POSS_PRONOUN": 27, "$ACC_PRONOUN": 4}
    assert not any(token.lower() == "the" and next_token.startswith("$")
                   for t in templates for token, next_token in zip(t.tokens, t.tokens[1:]))
    names = load_names().names
    corpus = WinogenderCorpus(templates, names)
    assert len(corpus) == 120 * 122 * 121 * 120 == 212_572_800
    rng = random.Random(1)
    for index in [0, len(corpus) - 1] + [rng.randrange(len(corpus)) for _ in range(500)]:
        sentence = corpus[index]
        assert corpus.index_of(sentence.source, *(names.index(s.name) for s in sentence.slots)) == index
        assert all(sentence.tokens[s.position] == s.name for s in sentence.slots)
    assert corpus[0].text == "Aaliyah told Ebony that Jasmine could pay with cash ."


@pytest.mark.integration
def test_real_insitu_counts(shared_data):
    test = load_conll2003(shared_data, splits=("test",))["test"]
    names = load_names().names
    unique = InSituCorpus.from_conll(test, names, rule="single_token_unique")
    strict = InSituCorpus.from_conll(test, names, rule="no_other_person")
    assert len(unique.base_sentences) == 302 and len(strict.base_sentences) == 217
    assert {b.source for b in strict.base_sentences} <= {b.source for b in unique.base_sentences}
    assert len(unique) == 302 * 122
    for index in (0, 1, len(unique) - 1):
        sentence = unique[index]
        base = test[sentence.source]
        assert len(base.tokens) > 5 and sentence.tokens[:sentence.slots[0].position] == \
            base.tokens[:sentence.slots[0].position]
        assert unique.index_of(*unique.decode(index)[:1], names.index(sentence.slots[0].name)) == index


def _filled(corpus, index):
    """The sentence ``index`` rebuilt from the vectorised decoding and the source's tokens."""
    sources, names = corpus.decode_many([index])
    tokens, positions = corpus.source_tokens(int(sources[0]))
    filled = list(tokens)
    for position, name in zip(positions, names[0]):
        filled[position] = corpus.slot_tokens()[name]
    return tuple(filled), [corpus.names[n] for n in names[0]]


@pytest.mark.parametrize("lowercase", [False, True])
def test_vectorised_decoding_rebuilds_every_sentence(small, templates, lowercase):
    corpus = WinogenderCorpus(templates, small.names, lowercase=lowercase)
    rng = random.Random(0)
    large = WinogenderCorpus(templates, load_names().names, lowercase=lowercase)
    for c, indices in ((corpus, range(len(corpus))), (large, [0, len(large) - 1] + rng.sample(range(len(large)), 300))):
        sources, names = c.decode_many(list(indices))
        assert [(int(s), tuple(int(n) for n in row)) for s, row in zip(sources, names)] == [c.decode(i) for i in indices]
        for index in list(indices)[:200]:
            tokens, slot_names = _filled(c, index)
            sentence = c.sentence(index)
            assert tokens == sentence.tokens and slot_names == [slot.name for slot in sentence.slots]
    insitu = InSituCorpus.from_conll(CONLL, FIVE, lowercase=lowercase)
    for index in range(len(insitu)):
        assert _filled(insitu, index)[0] == insitu.sentence(index).tokens
    with pytest.raises(CorpusIndexError):
        corpus.decode_many([0, len(corpus)])

"""nerbias.models.fast_emissions: the fast path (cached token features, template prefixes shared between
sentences) is exact. Its LSTM outputs, emissions, slot labels and confidences equal the plain
batched computation, which defines them, for any rows; models it cannot speed up fall back.

The models are untrained (seeded random weights). That is enough to check exactness, as long as
the emissions are sharp enough that Viterbi labels change with the names placed in a template,
so ``sharpen`` scales them up and every outcome test checks that PER and non-PER labels both occur.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence

import pytest
import torch
from torch import Tensor, nn

from nerbias.models import fast_emissions as inference
from nerbias.bias.taggers import CheckpointSlotTagger
from nerbias.bias.types import BiasSentence, NameSlot, SlotOutcome, outcome_from_spans
from nerbias.data.conll import Sentence
from nerbias.bias.corpora import WinogenderCorpus, load_winogender_templates
from nerbias.bias.insitu import InSituBase, InSituCorpus
from nerbias.models.fast_emissions import (
    FastEmissions,
    TokenFeatureCache,
    _direction,
    shared_prefix_lstm,
)
from nerbias.models.embedders import ElmoEmbeddings
from nerbias.models.tagger import NerTagger
from nerbias.data.tags import Span


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest: tiny models run on one thread


# ---------------------------------------------------------------------------- tiny data and models

def conll(text: str, *spans: tuple[int, int, str]) -> Sentence:
    return Sentence(tuple(text.split()), tuple(Span(*span) for span in spans))


# Vocabulary for the tagger: the template words and every name below except the OOV one.
TRAIN = [
    conll("Maria told Jose that she could pay with cash .", (0, 1, "PER"), (2, 3, "PER")),
    conll("Emily met with Greg to get help filing his taxes at Paris .", (0, 1, "PER"), (3, 4, "PER"),
          (11, 12, "LOC")),
    conll("Ahmed called Anna and thanked her before Reuters paid the German left", (0, 1, "PER"), (2, 3, "PER"),
          (7, 8, "ORG"), (10, 11, "MISC")),
]
NAMES = ["Maria", "Jose", "Emily", "Greg", "Ahmed", "Syedtiastephen"]  # the last is not in the vocabulary
OOV_NAME = "Syedtiastephen"

HEADER = "occupation(0)\tother-participant(1)\tanswer\tsentence\n"
# Cleaned: lengths 10, 12, 6, 6; a slot at the first token of each, at the last token of the third
# (no final full stop); the last two have the same length, so the plain path pools them.
TEMPLATES = HEADER + "".join(line + "\n" for line in [
    "technician\tcustomer\t1\tThe $OCCUPATION told the $PARTICIPANT that $NOM_PRONOUN could pay with cash .",
    "accountant\ttaxpayer\t1\tThe $PARTICIPANT met with the $OCCUPATION to get help filing $POSS_PRONOUN taxes .",
    "nurse\tpatient\t0\tThe $OCCUPATION called the $PARTICIPANT and thanked $ACC_PRONOUN",
    "clerk\tvisitor\t0\tThe $PARTICIPANT paid the $OCCUPATION before $NOM_PRONOUN left",
])
PER_TEMPLATE = 6 * 5 * 4  # ordered triples of distinct names: sentences per template

MODEL = {"word_dim": 8, "char_dim": 4, "char_filters": 4, "char_widths": (2, 3), "lstm_hidden": 8}
TINY_ELMO = ElmoEmbeddings(char_cnn={"embedding": {"dim": 4}, "filters": [[1, 4], [2, 4]], "n_highway": 1},
                           lstm={"dim": 8, "projection_dim": 4, "n_layers": 1})


def name_probes() -> tuple[list[list[str]], list[int]]:
    """Every name, cased and lowercased, in every PER slot of the training sentences."""
    token_lists, positions = [], []
    for sentence in TRAIN:
        for span in sentence.spans:
            if span.label == "PER":
                for name in NAMES + [name.lower() for name in NAMES]:
                    token_lists.append([name if i == span.start else t for i, t in enumerate(sentence.tokens)])
                    positions.append(span.start)
    return token_lists, positions


def sharpen(tagger: NerTagger) -> None:
    """Make outcomes depend on the names. An untrained model's emissions are nearly flat, so the
    CRF transitions would decide alone: scale them up, then shift the S-PER bias so that S-PER
    beats every other tag for about half of the names placed in name slots."""
    model, person = tagger.model, tagger.tags.lookup("S-PER")
    model.eval()
    token_lists, positions = name_probes()
    with torch.no_grad():
        model.projection.weight.mul_(10.0)
        emissions = torch.stack([plain_emissions(tagger, [tokens])[0, position]
                                 for tokens, position in zip(token_lists, positions)])  # [probes, tags]
        others = torch.cat([emissions[:, :person], emissions[:, person + 1:]], dim=1).amax(dim=1)
        model.projection.bias[person] += (others - emissions[:, person]).median()


def build_tagger(seed: int = 0, lowercase_words: bool = True, **overrides) -> NerTagger:
    """An untrained, seeded, sharpened tagger in eval mode (before any FastEmissions copies weights)."""
    torch.manual_seed(seed)
    tagger = NerTagger.build(TRAIN, {**MODEL, **overrides}, lowercase_words=lowercase_words)
    sharpen(tagger)
    return tagger


@pytest.fixture(scope="module")
def tagger() -> NerTagger:
    return build_tagger()


@pytest.fixture(scope="module")
def templates(tmp_path_factory):
    path = tmp_path_factory.mktemp("winogender") / "templates.tsv"
    path.write_text(TEMPLATES, encoding="utf-8")
    return load_winogender_templates(path)


def test_fixture_templates_have_the_intended_shapes(templates):
    assert [len(t.tokens) for t in templates] == [10, 12, 6, 6]
    assert [t.slot_positions for t in templates] == [(0, 2, 4), (3, 0, 8), (0, 2, 5), (2, 0, 4)]
    assert OOV_NAME.lower() not in NerTagger.build(TRAIN, MODEL).words.index


# ---------------------------------------------------------------------------- helpers

def plain_emissions(tagger: NerTagger, token_lists: Sequence[Sequence[str]]) -> Tensor:
    """The definition: one padded batch through ``model.emissions``."""
    batch = tagger.encoder.batch(token_lists).to(tagger.device)
    with torch.inference_mode():
        return tagger.model.emissions(batch.words, batch.chars, batch.mask)


def reference_outcomes(tagger: NerTagger, sentences: Sequence[BiasSentence]) -> list[list[SlotOutcome]]:
    """Outcomes from the general-purpose API, sentence by sentence: Viterbi spans of the whole
    sentence (``NerTagger.predict``) and the S-PER marginal at each slot (``slot_probabilities``)."""
    predictions = tagger.predict([s.tokens for s in sentences], confidences=False)
    slots = [(s.tokens, slot.position) for s in sentences for slot in s.slots]
    marginals = iter(tagger.slot_probabilities([tokens for tokens, _ in slots], [position for _, position in slots]))
    return [[SlotOutcome(outcome_from_spans(prediction.spans, slot.position), next(marginals)) for slot in s.slots]
            for s, prediction in zip(sentences, predictions)]


def assert_same_outcomes(actual: list[list[SlotOutcome]], expected: list[list[SlotOutcome]], atol: float = 1e-4):
    assert len(actual) == len(expected)
    for row, (got, want) in enumerate(zip(actual, expected)):
        assert [o.label for o in got] == [o.label for o in want], f"sentence {row}"
        assert [o.confidence for o in got] == pytest.approx([o.confidence for o in want], abs=atol), f"sentence {row}"


def assert_mixed_outcomes(outcomes: list[list[SlotOutcome]]) -> None:
    """The comparison means something only if the labels vary: both PER and other outcomes occur."""
    recognised = Counter(o.recognised for slots in outcomes for o in slots)
    assert recognised[True] > 0 and recognised[False] > 0, recognised


def assert_names_matter(sentences: Sequence[BiasSentence], outcomes: list[list[SlotOutcome]]) -> None:
    """Some slot of some template is PER for one choice of names and not for another: the
    outcome depends on the names, which is what sharing template prefixes must get right."""
    seen: dict[tuple[int, int, int], set[bool]] = {}
    for sentence, slots in zip(sentences, outcomes):
        for slot, outcome in zip(sentence.slots, slots):
            seen.setdefault((len(sentence.tokens), sentence.source, slot.position), set()).add(outcome.recognised)
    assert any(len(values) == 2 for values in seen.values())


def chunk_kinds(slot_tagger: CheckpointSlotTagger, sentences: Sequence[BiasSentence]) -> set[bool]:
    """Which paths (shared prefixes: True, pooled plain batches: False) a ``tag`` call runs."""
    return {shared for _, shared in slot_tagger._chunks(sentences)}


def winogender_sentences(corpus: WinogenderCorpus, selection: str) -> list[BiasSentence]:
    if selection == "contiguous":
        # A whole template, a range that crosses into the next one, and a short tail of the
        # last template (few rows: pooled with the other template of length 6 when min_shared_rows=16).
        indices = list(range(PER_TEMPLATE + 40)) + list(range(4 * PER_TEMPLATE - 10, 4 * PER_TEMPLATE))
    else:
        indices = corpus.sample_indices(150, seed=3)  # generation order: templates interleaved
    return [corpus[i] for i in indices]


# ---------------------------------------------------------------------------- 1. shared_prefix_lstm

VOCAB, DIM, HIDDEN, NUM_NAMES, TIME = 20, 5, 4, 4, 8


def template_rows(slots: Sequence[int], time: int = TIME, seed: int = 0) -> Tensor:
    """One random template (ids >= NUM_NAMES) with every ordered choice of distinct names
    (ids < NUM_NAMES) at ``slots``: rows differ exactly at those columns, as in Winogender."""
    generator = torch.Generator().manual_seed(seed)
    template = torch.randint(NUM_NAMES, VOCAB, (time,), generator=generator)
    choices = torch.tensor(list(itertools.permutations(range(NUM_NAMES), len(slots))), dtype=torch.long)
    ids = template.repeat(len(choices), 1)
    if slots:
        ids[:, list(slots)] = choices
    return ids


def shuffled(ids: Tensor, seed: int = 1) -> Tensor:
    return ids[torch.randperm(len(ids), generator=torch.Generator().manual_seed(seed))]


ROW_CASES = {
    "all rows identical": lambda: template_rows([]).repeat(5, 1),
    "single row": lambda: template_rows([3])[:1],
    "one column, middle": lambda: template_rows([3]),
    "one column, first": lambda: template_rows([0]),
    "one column, last": lambda: template_rows([TIME - 1]),
    "two columns": lambda: template_rows([1, 5]),
    "two adjacent columns": lambda: template_rows([3, 4]),
    "three columns, first and last": lambda: template_rows([0, 4, TIME - 1]),
    "three adjacent columns at the end": lambda: template_rows([TIME - 3, TIME - 2, TIME - 1]),
    "winogender-like, random order": lambda: shuffled(template_rows([0, 2, 4])),
    "duplicate rows, random order": lambda: shuffled(torch.cat([template_rows([1, 5])] * 3)),
    "one-token sentences": lambda: template_rows([0], time=1),
    "every column differs": lambda: torch.randint(VOCAB, (9, TIME), generator=torch.Generator().manual_seed(2)),
}


def random_table(seed: int = 0) -> Tensor:
    return torch.randn(VOCAB, DIM, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("case", ROW_CASES)
def test_shared_prefix_lstm_equals_the_lstm_on_every_row(case):
    ids = ROW_CASES[case]()
    torch.manual_seed(0)
    lstm = nn.LSTM(DIM, HIDDEN, batch_first=True).eval()
    table = random_table()
    with torch.inference_mode():
        expected, _ = lstm(table[ids])
        actual = shared_prefix_lstm(lstm, table, ids)
    assert actual.shape == (len(ids), ids.shape[1], HIDDEN)
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("case", ["one column, first", "three columns, first and last",
                                  "duplicate rows, random order", "every column differs"])
def test_both_directions_of_a_bidirectional_lstm_as_fast_emissions_runs_them(case):
    """The right-to-left half of a BiLSTM = the reverse weights run left to right on the flipped rows."""
    ids = ROW_CASES[case]()
    torch.manual_seed(0)
    bilstm = nn.LSTM(DIM, HIDDEN, batch_first=True, bidirectional=True).eval()
    table = random_table()
    with torch.inference_mode():
        expected, _ = bilstm(table[ids])
        forward = shared_prefix_lstm(_direction(bilstm, ""), table, ids)
        backward = shared_prefix_lstm(_direction(bilstm, "_reverse"), table, ids.flip(1)).flip(1)
    torch.testing.assert_close(forward, expected[..., :HIDDEN], atol=1e-5, rtol=0)
    torch.testing.assert_close(backward, expected[..., HIDDEN:], atol=1e-5, rtol=0)


# ---------------------------------------------------------------------------- 2. FastEmissions and the cache

def template_token_lists(corpus: WinogenderCorpus, template: int, count: int = 40) -> list[tuple[str, ...]]:
    start = template * PER_TEMPLATE
    return [corpus[i].tokens for i in range(start, start + count)]


real_run_prefix_plan = inference.run_prefix_plan


@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("lowercase", [False, True])
@pytest.mark.parametrize("max_shared_work", [1.0, 0.0])  # always follow the prefix plan / never
def test_fast_emissions_equal_model_emissions(tagger, templates, shared, lowercase, max_shared_work, monkeypatch):
    corpus = WinogenderCorpus(templates, NAMES, lowercase=lowercase)
    fast = FastEmissions(tagger, max_shared_work=max_shared_work)
    assert fast.shared  # single-layer BiLSTM
    plans_run = []
    monkeypatch.setattr(inference, "run_prefix_plan",
                        lambda *args: plans_run.append(1) or real_run_prefix_plan(*args))
    one_template = template_token_lists(corpus, 0)
    # Rows need not share a template to be exact: two templates of length 6, interleaved.
    two_templates = [tokens for pair in zip(template_token_lists(corpus, 2, 15), template_token_lists(corpus, 3, 15))
                     for tokens in pair]
    for token_lists in (one_template, two_templates):
        actual = fast(fast.cache.ids(token_lists), shared=shared)
        torch.testing.assert_close(actual, plain_emissions(tagger, token_lists), atol=1e-4, rtol=0)
    assert bool(plans_run) == (shared and max_shared_work == 1.0)


def test_prefix_plan_work_on_one_template_and_on_unrelated_rows():
    one_template = template_rows((1, 4), time=8)
    plan = inference.prefix_plan(one_template)
    keys_at_second_cut = len(torch.unique(one_template[:, [1, 4]], dim=0))
    keys_at_first_cut = len(torch.unique(one_template[:, 1]))
    assert inference.plan_work(plan) == 1 * 1 + keys_at_first_cut * 3 + keys_at_second_cut * 4
    unrelated = torch.randperm(6 * 8).view(6, 8)  # every column differs: nothing to share
    assert inference.plan_work(inference.prefix_plan(unrelated)) == unrelated.numel()


def test_cached_token_features_equal_token_features_in_a_padded_batch(tagger):
    """A token's cached row (computed alone) equals its features inside a batch padded to longer
    words: the char CNN's padding must not leak (even and odd widths), OOV and long tokens included."""
    token_lists = [["Maria", "told", OOV_NAME, "that", "she", "could", "pay", "."],
                   ["x" * 40, "maria", "met", "ZZ", "'s", "cash", "Syedtiastephen", "!"]]
    cache = TokenFeatureCache(tagger)
    ids = cache.ids(token_lists)
    assert len(cache) == len({token for tokens in token_lists for token in tokens})
    assert ids[0, 2] == ids[1, 6]  # one row per distinct token
    batch = tagger.encoder.batch(token_lists)
    with torch.inference_mode():
        expected = tagger.model.token_features(batch.words, batch.chars)
    torch.testing.assert_close(cache.features(ids), expected, atol=1e-6, rtol=0)


def test_cache_starts_afresh_past_max_tokens_and_stays_exact(tagger, templates):
    corpus = WinogenderCorpus(templates, NAMES)
    fast = FastEmissions(tagger, max_tokens=14)
    sizes = []
    for template in (0, 1, 2, 3, 0):
        token_lists = template_token_lists(corpus, template, 30)
        ids = fast.cache.ids(token_lists)
        distinct = {token for tokens in token_lists for token in tokens}
        assert len(fast.cache) == len(fast.cache.table) and len(fast.cache) <= max(14, len(distinct))
        assert ids.max() < len(fast.cache.table)
        sizes.append(len(fast.cache))
        torch.testing.assert_close(fast(ids), plain_emissions(tagger, token_lists), atol=1e-4, rtol=0)
    assert any(later < earlier for earlier, later in itertools.pairwise(sizes))  # a reset did happen


# ---------------------------------------------------------------------------- 3. CheckpointSlotTagger fast vs plain

@pytest.mark.parametrize("min_shared_rows", [1, 16, 10**9])
@pytest.mark.parametrize("selection", ["contiguous", "sample"])
@pytest.mark.parametrize("lowercase", [False, True])
def test_fast_slot_tagger_gives_the_plain_outcomes_on_winogender(tagger, templates, lowercase, selection,
                                                                 min_shared_rows):
    sentences = winogender_sentences(WinogenderCorpus(templates, NAMES, lowercase=lowercase), selection)
    fast = CheckpointSlotTagger(tagger, batch_size=7, fast=True, min_shared_rows=min_shared_rows)
    plain = CheckpointSlotTagger(tagger, batch_size=7, fast=False)
    assert fast.fast is not None and plain.fast is None
    kinds = chunk_kinds(fast, sentences)
    if min_shared_rows == 1:
        assert kinds == {True}
    elif min_shared_rows == 10**9:
        assert kinds == {False}
    elif selection == "contiguous":
        assert kinds == {True, False}  # the 10-row tail of the last template is pooled
    expected = plain.tag(sentences)
    assert_mixed_outcomes(expected)
    assert_names_matter(sentences, expected)
    assert_same_outcomes(fast.tag(sentences), expected)


def test_plain_slot_tagger_agrees_with_predict_and_slot_probabilities(tagger, templates):
    """The plain path reads a slot's label off its own Viterbi tag; check it against whole-sentence spans."""
    sentences = winogender_sentences(WinogenderCorpus(templates, NAMES), "sample")
    expected = reference_outcomes(tagger, sentences)
    assert_mixed_outcomes(expected)
    assert_same_outcomes(CheckpointSlotTagger(tagger, batch_size=7, fast=False).tag(sentences), expected)
    assert_same_outcomes(CheckpointSlotTagger(tagger, batch_size=7, fast=True, min_shared_rows=1).tag(sentences),
                         expected)


def test_oov_name_and_cased_vocabulary_on_the_fast_path(templates):
    """A tagger with a cased word vocabulary: the cased and lowercased corpora hit different rows."""
    cased = build_tagger(seed=1, lowercase_words=False)
    for lowercase in (False, True):
        corpus = WinogenderCorpus(templates, NAMES, lowercase=lowercase)
        sentences = [corpus[i] for i in range(0, len(corpus), 3)]
        assert any(OOV_NAME in {slot.name for slot in s.slots} for s in sentences)
        expected = CheckpointSlotTagger(cased, batch_size=16, fast=False).tag(sentences)
        assert_mixed_outcomes(expected)
        assert_same_outcomes(CheckpointSlotTagger(cased, batch_size=16, min_shared_rows=4).tag(sentences), expected)


def insitu_base(text: str, position: int, source: int) -> InSituBase:
    return InSituBase(tuple(text.split()), position, source)


@pytest.mark.parametrize("min_shared_rows", [1, 16])
@pytest.mark.parametrize("lowercase", [False, True])
def test_fast_slot_tagger_gives_the_plain_outcomes_on_insitu(tagger, lowercase, min_shared_rows):
    bases = [insitu_base("Maria told Jose that she could pay with cash .", 0, 0),
             insitu_base("Ahmed called Anna and thanked Greg", 5, 1),  # slot at the last token
             insitu_base("Emily met with Greg to get help filing his taxes at Paris .", 3, 2),
             insitu_base("the German paid Emily before Reuters left", 3, 3)]
    corpus = InSituCorpus(bases, NAMES, lowercase=lowercase)
    sentences = [corpus[i] for i in range(len(corpus))]
    fast = CheckpointSlotTagger(tagger, batch_size=4, min_shared_rows=min_shared_rows)
    assert chunk_kinds(fast, sentences) == ({True} if min_shared_rows == 1 else {False})  # 6 rows per base
    expected = CheckpointSlotTagger(tagger, batch_size=4, fast=False).tag(sentences)
    assert_mixed_outcomes(expected)
    assert_names_matter(sentences, expected)
    assert_same_outcomes(fast.tag(sentences), expected)


def test_nothing_to_tag(tagger):
    assert CheckpointSlotTagger(tagger).tag([]) == []


# ---------------------------------------------------------------------------- tag_indices (no sentence objects)

def outcomes_from_indices(slot_tagger: CheckpointSlotTagger, corpus, indices) -> list[list[SlotOutcome]]:
    names, tags, confidences = slot_tagger.tag_indices(corpus, indices)
    assert names.tolist() == [list(corpus.decode(i)[1]) for i in indices]
    return [[SlotOutcome(slot_tagger.slot_labels[t], p) for t, p in zip(row_tags, row_conf)]
            for row_tags, row_conf in zip(tags.tolist(), confidences.tolist())]


@pytest.mark.parametrize("min_shared_rows", [1, 16, 10**9])
@pytest.mark.parametrize("selection", ["contiguous", "sample"])
@pytest.mark.parametrize("lowercase", [False, True])
def test_tag_indices_gives_what_tag_gives(tagger, templates, lowercase, selection, min_shared_rows):
    corpus = WinogenderCorpus(templates, NAMES, lowercase=lowercase)
    indices = [s.index for s in winogender_sentences(corpus, selection)]
    indices += indices[5:1:-1]  # repeats, out of order
    slot_tagger = CheckpointSlotTagger(tagger, batch_size=7, min_shared_rows=min_shared_rows)
    assert slot_tagger.can_tag_indices and not CheckpointSlotTagger(tagger, fast=False).can_tag_indices
    expected = CheckpointSlotTagger(tagger, batch_size=7, fast=False).tag([corpus[i] for i in indices])
    assert_mixed_outcomes(expected)
    assert_same_outcomes(outcomes_from_indices(slot_tagger, corpus, indices), expected)


def test_tag_indices_on_insitu_and_on_nothing(tagger):
    bases = [insitu_base("Maria told Jose that she could pay with cash .", 0, 7),
             insitu_base("Ahmed called Anna and thanked Greg", 5, 9)]
    corpus = InSituCorpus(bases, NAMES)
    slot_tagger = CheckpointSlotTagger(tagger, batch_size=4, min_shared_rows=4)
    indices = list(range(len(corpus)))
    expected = CheckpointSlotTagger(tagger, fast=False).tag([corpus[i] for i in indices])
    assert_same_outcomes(outcomes_from_indices(slot_tagger, corpus, indices), expected)
    names, tags, confidences = slot_tagger.tag_indices(corpus, [])
    assert names.shape == tags.shape == confidences.shape == (0, 1)


# ---------------------------------------------------------------------------- 4. fallbacks

def test_two_layer_lstm_runs_whole_sentences_from_cached_features(templates):
    """A second layer sees both directions of the first, so nothing is shared; still exact."""
    deep = build_tagger(seed=2, lstm_layers=2)
    fast = FastEmissions(deep)
    assert not fast.shared
    corpus = WinogenderCorpus(templates, NAMES)
    token_lists = template_token_lists(corpus, 1)
    torch.testing.assert_close(fast(fast.cache.ids(token_lists), shared=True), plain_emissions(deep, token_lists),
                               atol=1e-4, rtol=0)
    sentences = winogender_sentences(corpus, "sample")
    expected = CheckpointSlotTagger(deep, batch_size=7, fast=False).tag(sentences)
    assert_mixed_outcomes(expected)
    assert_same_outcomes(CheckpointSlotTagger(deep, batch_size=7, min_shared_rows=1).tag(sentences), expected)


def test_unconstrained_crf_reads_labels_from_whole_paths(templates):
    free = build_tagger(seed=3, constrain_transitions=False)
    fast = CheckpointSlotTagger(free, batch_size=7, min_shared_rows=1)
    assert fast.slot_labels is None and fast.fast is not None and not fast.can_tag_indices
    sentences = winogender_sentences(WinogenderCorpus(templates, NAMES), "contiguous")
    expected = reference_outcomes(free, sentences)
    assert_mixed_outcomes(expected)
    assert_same_outcomes(CheckpointSlotTagger(free, batch_size=7, fast=False).tag(sentences), expected)
    assert_same_outcomes(fast.tag(sentences), expected)


def test_elmo_tagger_takes_the_plain_path(templates):
    torch.manual_seed(4)
    elmo = NerTagger.build(TRAIN, {"lstm_hidden": 8}, embeddings=TINY_ELMO)
    sharpen(elmo)
    assert not FastEmissions.supports(elmo)
    with pytest.raises(ValueError, match="ELMo"):
        TokenFeatureCache(elmo)
    slot_tagger = CheckpointSlotTagger(elmo, batch_size=16, fast=True)
    assert slot_tagger.fast is None and not slot_tagger.can_tag_indices
    corpus = WinogenderCorpus(templates, NAMES)
    sentences = [corpus[i] for i in range(0, len(corpus), 12)]
    outcomes = slot_tagger.tag(sentences)
    assert [len(o) for o in outcomes] == [3] * len(sentences)
    assert_same_outcomes(outcomes, reference_outcomes(elmo, sentences))


def test_slot_outcomes_keep_slot_order(tagger):
    """Hand-made sentences of one template with slots listed out of position order."""
    tokens = ["Maria", "told", "Jose", "that", "Emily", "could", "pay", "."]
    sentences = []
    for names in itertools.permutations(["Maria", "Jose", "Emily", "Greg"], 3):
        filled = list(tokens)
        for position, name in zip((4, 0, 2), names):
            filled[position] = name
        sentences.append(BiasSentence(tuple(filled), tuple(NameSlot(p, n) for p, n in zip((4, 0, 2), names))))
    expected = reference_outcomes(tagger, sentences)
    assert_same_outcomes(CheckpointSlotTagger(tagger, batch_size=5, min_shared_rows=1).tag(sentences), expected)

"""What the layout promises beyond imports: version-1 checkpoints keep loading, configs build their
objects through ``_target_``, one tag-scheme reading for IOB1 and IOB2."""

from __future__ import annotations

import pytest
import torch

from helpers import compose_config
from nerbias.bias.published import PublishedPredictions
from nerbias.bias.corpora import WinogenderCorpus
from nerbias.bias.taggers import SpacySlotTagger
from nerbias.building import build
from nerbias.data.conll import Sentence
from nerbias.data.tags import Span, TagScheme, bio_to_spans, iob1_to_spans
from nerbias.errors import NerbiasError
from nerbias.loggers import NullLogger, WandbLogger, build_logger
from nerbias.models import checkpoint
from nerbias.models.embedders import ElmoEmbeddings, WordVectors
from nerbias.models.tagger import NerTagger, emissions_for

TRAIN = [Sentence(("Anna", "met", "Greg", "in", "Paris", "."), (Span(0, 1, "PER"), Span(2, 3, "PER"), Span(4, 5, "LOC")))]
TOKENS = [["Anna", "met", "Greg", "in", "Paris", "."], ["Greg", "left", "."]]
TINY = {"word_dim": 6, "char_dim": 4, "char_filters": 4, "lstm_hidden": 5}
TINY_ELMO = ElmoEmbeddings(char_cnn={"embedding": {"dim": 4}, "filters": [[1, 4], [2, 4]], "n_highway": 1},
                           lstm={"dim": 8, "projection_dim": 4, "n_layers": 1})


def as_version_1(payload: dict) -> dict:
    """A checkpoint as version 1 wrote it: embedder weights named words. / chars. / token_encoder."""
    renamed = {}
    for key, value in payload["model_state"].items():
        if key.startswith("embedder.words.") or key.startswith("embedder.chars."):
            key = key[len("embedder."):]
        elif key.startswith("embedder."):
            key = "token_encoder." + key[len("embedder."):]
        renamed[key] = value
    return {**payload, "model_state": renamed}


@pytest.mark.parametrize("embeddings", [None, TINY_ELMO], ids=["word+char", "elmo"])
def test_version_1_checkpoints_load_to_the_same_model(tmp_path, embeddings):
    torch.manual_seed(0)
    tagger = NerTagger.build(TRAIN, TINY, embeddings=embeddings)
    path = tmp_path / "v1.pt"
    old = as_version_1(tagger.state())
    assert not any(key.startswith("embedder.") for key in old["model_state"])
    with checkpoint.atomic_path(path) as tmp:
        torch.save({"format": checkpoint.FORMAT, "version": 1, **old}, tmp)
    loaded = NerTagger.load(path)
    expected, _ = emissions_for(tagger, TOKENS)
    got, _ = emissions_for(loaded, TOKENS)
    assert torch.equal(expected, got)


def test_an_unknown_checkpoint_version_is_refused(tmp_path):
    path = tmp_path / "v9.pt"
    torch.save({"format": checkpoint.FORMAT, "version": 9}, path)
    with pytest.raises(checkpoint.CheckpointError, match="version 9 is not supported"):
        checkpoint.load_checkpoint(path)


def test_every_group_builds_its_object_from_target(tmp_path):
    train = compose_config("train", [])
    assert isinstance(build(train.embeddings), WordVectors)
    assert isinstance(build(compose_config("train", ["embeddings=elmo"]).embeddings), ElmoEmbeddings)
    random_words = build(compose_config("train", ["embeddings=random"]).embeddings)
    assert isinstance(random_words, WordVectors) and not random_words.pretrained
    assert isinstance(build_logger(compose_config("train", ["logger=none"]).logger, {}, tmp_path), NullLogger)
    wandb = compose_config("train", ["logger.mode=disabled"]).logger
    assert wandb._target_.endswith("WandbLogger") and issubclass(type(build_logger(wandb, {}, tmp_path)), WandbLogger)
    evaluate = compose_config("evaluate", ["tagger=precomputed", "corpus=census"])
    assert isinstance(build(evaluate.tagger), PublishedPredictions)
    assert compose_config("evaluate", ["tagger=spacy"]).tagger._target_.endswith("SpacySlotTagger")
    templates = tmp_path / "templates.tsv"
    templates.write_text("occupation(0)\tother-participant(1)\tanswer\tsentence\n"
                         "nurse\tpatient\t0\tThe $OCCUPATION told the $PARTICIPANT that $NOM_PRONOUN could pay .\n")
    corpus = build(compose_config("evaluate", ["corpus=winogender", f"corpus.source.templates={templates}",
                                                   "corpus.source.expected_templates=null"]).corpus.source
                   )(names=["Anna", "Greg", "Maria"])
    assert isinstance(corpus, WinogenderCorpus) and len(corpus) == 6
    assert SpacySlotTagger.__name__ in compose_config("evaluate", ["tagger=spacy"]).tagger._target_


def test_build_names_what_is_wrong():
    with pytest.raises(NerbiasError, match="no _target_"):
        build({"kind": "glove"})
    with pytest.raises(NerbiasError, match="cannot be imported"):
        build({"_target_": "nerbias.no_such_module.Thing"})


@pytest.mark.parametrize("tags, spans", [
    (["I-PER", "I-PER", "B-PER", "O", "I-LOC"], [Span(0, 2, "PER"), Span(2, 3, "PER"), Span(4, 5, "LOC")]),
    (["B-PER", "I-PER", "I-LOC", "I-LOC", "B-LOC"], [Span(0, 2, "PER"), Span(2, 4, "LOC"), Span(4, 5, "LOC")]),
    (["O", "I-ORG", "B-MISC", "I-PER"], [Span(1, 2, "ORG"), Span(2, 3, "MISC"), Span(3, 4, "PER")]),
])
def test_iob1_and_iob2_share_one_reading(tags, spans):
    assert bio_to_spans is iob1_to_spans
    assert iob1_to_spans(tags) == spans
    assert TagScheme("iob1").spans(tags) == TagScheme("bio").spans(tags) == spans


def test_tag_scheme_knows_its_prefixes_and_span_tags():
    tags = ["O", "B-PER", "E-PER", "I-PER", "S-PER"]
    bioes = TagScheme("bioes", tags)
    assert bioes.prefixes == ("B", "I", "E", "S")
    assert bioes.span_tag_names(Span(0, 3, "PER")) == ["B-PER", "I-PER", "E-PER"]
    assert bioes.span_tags(Span(3, 4, "PER")) == [4]
    assert sorted(bioes.continuation_tags("PER")) == [2, 3]
    assert TagScheme("bio").span_tag_names(Span(0, 2, "LOC")) == ["B-LOC", "I-LOC"]
    with pytest.raises(ValueError, match="depend on its neighbours"):
        TagScheme("iob1").span_tag_names(Span(0, 1, "PER"))
    with pytest.raises(ValueError, match="unknown tag scheme"):
        TagScheme("bilou")


def test_vocabularies_are_stored_as_one_string_and_read_back_as_the_same_lists(tmp_path):
    """Version 4: weights_only unpickling of a list of 400k strings took 1-2 s of every load."""
    torch.manual_seed(0)
    tagger = NerTagger.build(TRAIN, TINY)
    state = tagger.state()
    path = tmp_path / "v4.pt"
    checkpoint.save_checkpoint(path, state)
    raw = torch.load(path, weights_only=True)
    assert raw["version"] == 4 and raw["vocab"]["words"] == "\n".join(state["vocab"]["words"])
    assert checkpoint.load_checkpoint(path)["vocab"] == {k: list(v) for k, v in state["vocab"].items()}
    with checkpoint.atomic_path(tmp_path / "v3.pt") as tmp:  # version 3 kept them as lists
        torch.save({"format": checkpoint.FORMAT, "version": 3, **state}, tmp)
    expected, _ = emissions_for(tagger, TOKENS)
    for saved in (path, tmp_path / "v3.pt"):
        assert torch.equal(emissions_for(NerTagger.load(saved), TOKENS)[0], expected)
    odd = {**state, "vocab": {**state["vocab"], "chars": ["a", "\n", "b"], "tags": []}}
    checkpoint.save_checkpoint(tmp_path / "odd.pt", odd)  # an item with a newline: kept as a list
    assert checkpoint.load_checkpoint(tmp_path / "odd.pt")["vocab"]["chars"] == ["a", "\n", "b"]
    assert checkpoint.load_checkpoint(tmp_path / "odd.pt")["vocab"]["tags"] == []

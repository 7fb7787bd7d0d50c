"""One builder for the token embedder (``bilstm_crf.build_token_embedder``): training builds the
embedder from the spec its ``embeddings`` source writes, a checkpoint stores that spec, and loading
calls the same builder with it; pretrained files are not read again, and building changes nothing
it was given."""

from __future__ import annotations

import copy

import pytest
import torch
from omegaconf import OmegaConf

from helpers import compose_config, make_tiny_conll, tiny_train_overrides
from nerbias.building import build
from nerbias.data.conll import Sentence
from nerbias.data.tags import Span
from nerbias.models import tagger as tagger_module
from nerbias.models.bilstm_crf import WORD_CHAR_EMBEDDER, WordCharEmbedder
from nerbias.models.checkpoint import FORMAT, atomic_path, save_checkpoint
from nerbias.models.elmo import ELMO_EMBEDDER, ElmoBiLM, ElmoTokenEncoder, elmo_options
from nerbias.models.embedders import ElmoEmbeddings, WordVectors
from nerbias.models.tagger import NerTagger, emissions_for
from nerbias.training.build import build_tagger
from test_elmo import write_official_elmo

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest: tiny models run on one thread

TRAIN = [Sentence(("Anna", "met", "Greg", "in", "Paris", "."),
                  (Span(0, 1, "PER"), Span(2, 3, "PER"), Span(4, 5, "LOC"))),
         Sentence(("The", "Bank", "of", "Japan", "said", "so", "."), (Span(1, 4, "ORG"),))]
TOKENS = [["Anna", "met", "Greg", "in", "Paris", "."], ["Xochitl", "left", "the", "bank", "."]]
MODEL = {"char_dim": 4, "char_filters": 4, "lstm_hidden": 5, "dropout": 0.0}
ELMO = {"char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 4], [2, 4]], "n_highway": 1},
        "lstm": {"dim": 8, "projection_dim": 4, "n_layers": 1}}


def write_vectors(path) -> str:
    words = ["anna", "paris", "the", "bank", "of"]
    rows = torch.randn(len(words), 6, generator=torch.Generator().manual_seed(1))
    path.write_text(f"{len(words)} 6\n" + "".join(f"{w} " + " ".join(f"{v:.5f}" for v in row.tolist()) + "\n"
                                                  for w, row in zip(words, rows)))
    return str(path)


def write_lm(path) -> str:
    """A biLM as pretrain_lm.py saves it (lm.pt), with weights unlike a fresh start."""
    torch.manual_seed(7)
    bilm = ElmoBiLM(elmo_options("small", ELMO))
    save_checkpoint(path, {"kind": "elmo-lm", "options": bilm.options, "bilm_state": bilm.state_dict()})
    return str(path)


def source(kind: str, folder):
    if kind == "random word vectors":
        return WordVectors(dim=6)
    if kind == "pretrained word vectors":
        return WordVectors(source="word2vec", path=write_vectors(folder / "vectors.txt"), dim=6)
    if kind == "elmo":
        return ElmoEmbeddings(**ELMO)
    return ElmoEmbeddings(pretrained_lm=write_lm(folder / "lm.pt"))


KINDS = ["random word vectors", "pretrained word vectors", "elmo", "pretrained elmo"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_checkpoint_is_rebuilt_by_the_builder_that_built_the_tagger(tmp_path, monkeypatch, kind):
    built = []
    builder = tagger_module.build_token_embedder

    def recording(spec, words, chars, initial=None):
        built.append((copy.deepcopy(dict(spec)), bool(initial)))
        return builder(spec, words, chars, initial)

    monkeypatch.setattr(tagger_module, "build_token_embedder", recording)
    torch.manual_seed(0)
    tagger = NerTagger.build(TRAIN, MODEL, embeddings=source(kind, tmp_path))
    save_checkpoint(tmp_path / "best.pt", tagger.state())
    for pretrained in ("vectors.txt", "lm.pt"):  # loading reads every value from the checkpoint
        (tmp_path / pretrained).unlink(missing_ok=True)
    loaded = NerTagger.load(tmp_path / "best.pt")

    (trained_spec, had_initial), (loaded_spec, loaded_initial) = built
    assert trained_spec == loaded_spec == tagger.embedder_spec == loaded.embedder_spec
    assert trained_spec["_target_"] == (ELMO_EMBEDDER if "elmo" in kind else WORD_CHAR_EMBEDDER)
    assert had_initial == kind.startswith("pretrained") and not loaded_initial
    assert type(loaded.model.embedder) is type(tagger.model.embedder)
    assert isinstance(tagger.model.embedder, ElmoTokenEncoder if "elmo" in kind else WordCharEmbedder)
    tagger.model.eval()
    assert torch.equal(emissions_for(tagger, TOKENS)[0], emissions_for(loaded, TOKENS)[0])
    for before, after in zip(tagger.predict(TOKENS), loaded.predict(TOKENS)):
        assert (before.tags, before.confidences) == (after.tags, after.confidences)


def test_pretrained_values_are_loaded_and_the_random_stream_is_as_without_them(tmp_path):
    """A pretrained source's files are read without drawing random numbers, so the BiLSTM-CRF on top
    starts where it would on a random embedder of the same options."""
    options_file, weight_file, _ = write_official_elmo(tmp_path, options=elmo_options("small", ELMO))
    lm = write_lm(tmp_path / "lm.pt")
    random = ElmoEmbeddings(**ELMO)
    sources = {"random": random, "lm.pt": ElmoEmbeddings(pretrained_lm=lm),
               "official": ElmoEmbeddings(options_file=str(options_file), weight_file=str(weight_file))}
    taggers, streams = {}, {}
    for name, embeddings in sources.items():
        torch.manual_seed(0)
        taggers[name] = NerTagger.build(TRAIN, MODEL, embeddings=embeddings)
        streams[name] = torch.get_rng_state()
    saved = torch.load(lm, weights_only=True)["bilm_state"]
    lm_bilm = taggers["lm.pt"].model.embedder.bilm.state_dict()
    assert all(torch.equal(lm_bilm[key], value) for key, value in saved.items())
    for name in ("lm.pt", "official"):
        assert torch.equal(streams[name], streams["random"]), name
        assert torch.equal(taggers[name].model.lstm.weight_ih_l0, taggers["random"].model.lstm.weight_ih_l0)
        assert not torch.equal(taggers[name].model.embedder.bilm.char_encoder.projection.weight,
                               taggers["random"].model.embedder.bilm.char_encoder.projection.weight)


TINY_ELMO = ["embeddings=elmo", "embeddings.char_cnn={embedding:{dim:4},filters:[[1,4],[2,4]],n_highway:1}",
             "embeddings.lstm={dim:8,projection_dim:4,n_layers:1}"]


@pytest.mark.parametrize("overrides", [["augment.adversarial=0.5"], TINY_ELMO],
                         ids=["adversarial word vectors", "elmo"])
def test_building_a_tagger_changes_nothing_it_was_given(tmp_path, overrides):
    data = make_tiny_conll(tmp_path / "data", sizes=(20, 5, 5))
    elmo = overrides[0] == "embeddings=elmo"
    base = [o for o in tiny_train_overrides(data) if not (elmo and o.startswith("embeddings"))]
    cfg = compose_config("train", base + overrides + [f"paths.output_dir={tmp_path}"])
    before = OmegaConf.to_container(cfg)
    embeddings, model = build(cfg.embeddings), build(cfg.model).as_mapping()
    run_config = OmegaConf.to_container(cfg, resolve=True)
    given = copy.deepcopy((model, run_config, vars(embeddings)))
    noise_types = build(cfg.augment).noise_types
    tagger, _ = build_tagger(build(cfg.data).load()["train"], embeddings, model, seed=cfg.seed, run_config=run_config,
                             noise_types=noise_types)
    assert OmegaConf.to_container(cfg) == before
    assert (model, run_config) == given[:2] and "noise_types" not in model
    assert {key: value for key, value in vars(embeddings).items() if not key.startswith("_")} == \
        {key: value for key, value in given[2].items() if not key.startswith("_")}
    assert list(tagger.model.config.noise_types) == list(noise_types)
    assert (tagger.model.mention_noise is not None) == bool(noise_types)
    state = tagger.state()
    state["embedder"]["_target_"] = "changed"  # the saved spec is a copy
    assert tagger.embedder_spec["_target_"] != "changed"


def as_version_2(payload: dict) -> dict:
    """A checkpoint as version 2 wrote it: no ``embedder`` spec; the embedder's options in
    ``model_config`` (the ELMo options under ``elmo``)."""
    spec = dict(payload["embedder"])
    target = spec.pop("_target_")
    config = dict(payload["model_config"])
    if target == ELMO_EMBEDDER:
        config["elmo"] = spec
    else:
        config.update(spec, elmo=None)
    return {key: value for key, value in payload.items() if key != "embedder"} | {"model_config": config}


@pytest.mark.parametrize("kind", ["random word vectors", "elmo"])
def test_version_2_checkpoints_load_to_the_same_model(tmp_path, kind):
    torch.manual_seed(0)
    tagger = NerTagger.build(TRAIN, {**MODEL, "char_encoder": "lstm", "char_lstm_hidden": 3},
                             embeddings=source(kind, tmp_path))
    path = tmp_path / "v2.pt"
    with atomic_path(path) as tmp:
        torch.save({"format": FORMAT, "version": 2, **as_version_2(tagger.state())}, tmp)
    loaded = NerTagger.load(path)
    assert loaded.embedder_spec == tagger.embedder_spec
    tagger.model.eval()
    assert torch.equal(emissions_for(tagger, TOKENS)[0], emissions_for(loaded, TOKENS)[0])

"""`embeddings=elmo`: a tiny ELMo tagger trains on the tiny fixture, its checkpoint loads with
weights_only and rebuilds the encoder, and names never seen get predictions from their characters."""

import json

import pytest
import torch
from omegaconf import OmegaConf

from helpers import compose_config, tiny_train_overrides
from nerbias.building import build
from nerbias.models.elmo import ElmoTokenEncoder
from nerbias.models.tagger import NerTagger
from nerbias.tasks import run_training

TINY_ELMO = [
    "embeddings=elmo",
    "embeddings.char_cnn={embedding:{dim:4},filters:[[1,4],[2,4]],n_highway:1}",
    "embeddings.lstm={dim:16,projection_dim:8,n_layers:1}",
]


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest: tiny models run on one thread


def tiny_elmo_config(data_dir, output_dir, extra=()):
    overrides = [o for o in tiny_train_overrides(data_dir) if not o.startswith(("embeddings", "model.char"))]
    return compose_config("train", overrides + TINY_ELMO + [f"paths.output_dir={output_dir}", *extra])


@pytest.fixture
def trained(tiny_data_dir, tmp_path):
    out = tmp_path / "run"
    metrics = run_training(tiny_elmo_config(tiny_data_dir, out), out)
    return out, metrics


@pytest.mark.slow
def test_elmo_tagger_trains_and_its_checkpoint_reloads(trained):
    out, metrics = trained
    saved = json.loads((out / "metrics.json").read_text())["metrics"]
    assert saved == pytest.approx(metrics)
    assert 0.0 <= saved["test_f1"] <= 1.0
    assert not (out / "embedding_coverage.json").exists()  # no word vocabulary to cover names
    payload = torch.load(out / "checkpoints" / "best.pt", weights_only=True)
    elmo = payload["embedder"]
    assert elmo["options"]["lstm"]["projection_dim"] == 8 and elmo["options"]["char_cnn"]["filters"] == [[1, 4], [2, 4]]
    assert elmo["freeze_lm"] is False
    assert any(key.startswith("embedder.bilm.") for key in payload["model_state"])
    assert not any(key.startswith(("words.", "chars.")) for key in payload["model_state"])

    tagger = NerTagger.load(out / "checkpoints" / "best.pt")
    assert isinstance(tagger.model.embedder, ElmoTokenEncoder)
    assert tagger.model.lstm.input_size == 16  # 2 x projection_dim
    tokens = [["Maria", "visited", "Paris", "."], ["Syedtiastephen", "told", "Xochitl", "that", "he", "could", "pay", "."]]
    predictions = tagger.predict(tokens)
    assert [len(p.tags) for p in predictions] == [4, 8]  # unseen names get tags from their characters alone
    for prediction in predictions:
        assert len(prediction.confidences) == len(prediction.spans)
        assert all(0.0 <= c <= 1.0 + 1e-6 for c in prediction.confidences)
    # A reloaded checkpoint predicts exactly what the trained model did.
    again = NerTagger.load(out / "checkpoints" / "best.pt")
    assert [p.tags for p in again.predict(tokens)] == [p.tags for p in predictions]
    probabilities = tagger.slot_probabilities(tokens, [0, 2])
    assert all(0.0 <= p <= 1.0 + 1e-6 for p in probabilities)


def test_elmo_batches_carry_elmo_character_ids(tiny_data_dir, tmp_path):
    from nerbias.data.conll2003 import load_conll2003
    from nerbias.data.elmo_chars import batch_to_char_ids
    from nerbias.training.build import build_tagger

    cfg = tiny_elmo_config(tiny_data_dir, tmp_path / "run")
    train = load_conll2003(tiny_data_dir, splits=("train",), verify_sizes=False)["train"]
    tagger, names = build_tagger(train, build(cfg.embeddings), OmegaConf.to_container(cfg.model), seed=cfg.seed)
    assert names is None
    batch = tagger.encoder.batch([["Ahmed", "met", "Zz"], ["Hi"]])
    assert torch.equal(batch.chars, batch_to_char_ids([["Ahmed", "met", "Zz"], ["Hi"]]))  # raw case, 50 ids
    assert not hasattr(tagger.model.embedder, "words")  # characters only: no word table, no char CNN


def test_frozen_elmo_trains_only_the_mix_and_tagger(tiny_data_dir, tmp_path):
    from nerbias.data.conll2003 import load_conll2003
    from nerbias.training.build import build_tagger

    cfg = tiny_elmo_config(tiny_data_dir, tmp_path / "run", ["embeddings.freeze_lm=true"])
    train = load_conll2003(tiny_data_dir, splits=("train",), verify_sizes=False)["train"]
    tagger, _ = build_tagger(train, build(cfg.embeddings), OmegaConf.to_container(cfg.model), seed=cfg.seed)
    encoder = tagger.model.embedder
    assert not any(p.requires_grad for p in encoder.bilm.parameters())
    assert all(p.requires_grad for p in encoder.scalar_mix.parameters())
    rebuilt = NerTagger.from_state(tagger.state())
    assert not any(p.requires_grad for p in rebuilt.model.embedder.bilm.parameters())


@pytest.mark.slow
def test_pretrained_lm_is_learned_saved_and_used_by_the_tagger(tiny_data_dir, tmp_path):
    from nerbias.models.elmo_weights import load_pretrained_lm
    from nerbias.training.lm_pretraining import pretrain

    text = tmp_path / "text.txt"
    text.write_text("Maria visited Paris on Monday .\nThe Bank of Japan said Greg was right .\n" * 20)
    lm_dir = tmp_path / "lm"
    cfg = compose_config("pretrain_lm", TINY_ELMO[1:] + [f"text={text}", "epochs=3", "batch_size=8", "lr=0.01",
                                                         "logger=none", f"paths.output_dir={lm_dir}",
                                                         f"paths.data_dir={tiny_data_dir}"])
    final = pretrain(cfg, lm_dir)
    history = json.loads((lm_dir / "metrics.json").read_text())["history"]
    assert history[-1]["lm_loss"] < history[0]["lm_loss"]
    assert final["perplexity"] == pytest.approx(history[-1]["perplexity"])
    payload = torch.load(lm_dir / "lm.pt", weights_only=True)
    assert payload["kind"] == "elmo-lm"
    lm = load_pretrained_lm(lm_dir / "lm.pt")

    out = tmp_path / "run"
    tagger_cfg = tiny_elmo_config(tiny_data_dir, out, [f"embeddings.pretrained_lm={lm_dir / 'lm.pt'}",
                                                      "embeddings.freeze_lm=true"])
    run_training(tagger_cfg, out)
    tagger = NerTagger.load(out / "checkpoints" / "best.pt")
    trained = tagger.model.embedder.bilm.state_dict()
    for key, value in lm.state_dict().items():  # frozen: the tagger kept the pretrained LM as it was
        assert torch.equal(trained[key], value), key


def test_pretrain_lm_rejects_bad_text(tmp_path):
    from nerbias.errors import DataFormatError
    from nerbias.training.lm_pretraining import read_text

    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine line\nbro\xffken\n")
    with pytest.raises(DataFormatError, match=r"bad.txt:2: not valid UTF-8"):
        read_text(bad)
    with pytest.raises(DataFormatError, match="not found"):
        read_text(tmp_path / "missing.txt")

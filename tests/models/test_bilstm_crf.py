"""Character features: the CNN (default) or Lample et al.'s character BiLSTM (``model.char_encoder``)."""

from __future__ import annotations

import pytest
import torch

from helpers import compose_config, tiny_train_overrides
from nerbias.data.conll import Sentence
from nerbias.data.tags import Span
from nerbias.errors import NerbiasError
from nerbias.models.bilstm_crf import CharCNN, CharLSTM, effective_model_options
from nerbias.models.checkpoint import load_checkpoint
from nerbias.models.fast_emissions import TokenFeatureCache
from nerbias.models.tagger import NerTagger
from nerbias.tasks import run_training
from nerbias.training.run_identity import check_same_run

TRAIN = [Sentence(("Maria", "visited", "Paris", "."), (Span(0, 1, "PER"), Span(2, 3, "LOC"))),
         Sentence(("The", "Bank", "of", "Japan", "said", "so", "."), (Span(1, 4, "ORG"),))]


def test_char_lstm_gives_each_word_its_own_last_states_in_a_padded_batch():
    """Brute force: each word run alone through the same LSTM, no padding anywhere. Padding words
    (all zeros) get zero features, and padding characters never reach either direction."""
    torch.manual_seed(0)
    encoder = CharLSTM(num_chars=12, char_dim=5, hidden=3)
    words = [[4, 5, 6], [7], [], [8, 9, 10, 11, 2], [3, 3]]  # one sentence of 3 words, one of 2 (+ padding)
    chars = torch.zeros(2, 3, 5, dtype=torch.long)
    for slot, ids in zip([(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)], words):
        chars[slot][: len(ids)] = torch.tensor(ids, dtype=torch.long)
    with torch.no_grad():
        got = encoder(chars)
        assert got.shape == (2, 3, 6)
        for slot, ids in zip([(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)], words):
            if not ids:
                assert torch.equal(got[slot], torch.zeros(6))
                continue
            outputs, _ = encoder.lstm(encoder.embedding(torch.tensor([ids])))
            forward_last, backward_last = outputs[0, -1, :3], outputs[0, 0, 3:]
            torch.testing.assert_close(got[slot], torch.cat([forward_last, backward_last]), atol=1e-6, rtol=0)
        assert torch.equal(got[1, 2], torch.zeros(6))


def test_char_cnn_without_gradients_runs_in_word_chunks_with_the_same_features(monkeypatch):
    """A large inference batch is encoded a chunk of words at a time (memory); each word's features
    depend only on its own characters, so the chunked features equal the one-pass ones, and with
    gradients on (training) the batch is still one pass."""
    torch.manual_seed(0)
    encoder = CharCNN(num_chars=20, char_dim=4, filters=6, widths=(2, 3))
    chars = torch.randint(1, 20, (3, 5, 7))
    chars[0, 4:] = 0  # padding words
    chars[1, :, 5:] = 0  # padding characters
    with torch.no_grad():
        whole = encoder(chars)
        monkeypatch.setattr(CharCNN, "INFERENCE_CHUNK", 4)
        passes = []
        original = encoder._word_features
        monkeypatch.setattr(encoder, "_word_features", lambda flat: passes.append(len(flat)) or original(flat))
        chunked = encoder(chars)
    assert passes == [4, 4, 4, 3]  # 15 words in chunks of 4
    assert torch.equal(chunked, whole)
    assert torch.equal(whole[0, 4], torch.zeros(12))
    passes.clear()
    encoder(chars).sum().backward()  # gradients kept: one pass, so autograd sees one graph
    assert passes == [15]


def test_a_tagger_builds_the_configured_character_encoder_and_caches_its_exact_features():
    cnn = NerTagger.build(TRAIN, {"word_dim": 8, "char_dim": 4, "char_filters": 4, "lstm_hidden": 8})
    lstm = NerTagger.build(TRAIN, {"word_dim": 8, "char_dim": 4, "char_encoder": "lstm", "char_lstm_hidden": 3,
                                   "lstm_hidden": 8})
    none = NerTagger.build(TRAIN, {"word_dim": 8, "char_encoder": None, "lstm_hidden": 8})
    assert isinstance(cnn.model.embedder.chars, CharCNN) and cnn.model.lstm.input_size == 8 + 4
    assert isinstance(lstm.model.embedder.chars, CharLSTM) and lstm.model.lstm.input_size == 8 + 6
    assert none.model.embedder.chars is None and none.model.lstm.input_size == 8
    # Bias evaluation computes a token's features alone and reuses them: exact only if padding never leaks.
    lstm.model.eval()
    token_lists = [["Maria", "told", "Syedtiastephen", "that", "x" * 40], ["maria", "met", "ZZ", "'s", "Maria"]]
    cache = TokenFeatureCache(lstm)
    ids = cache.ids(token_lists)
    batch = lstm.encoder.batch(token_lists)
    with torch.inference_mode():
        expected = lstm.model.token_features(batch.words, batch.chars)
    torch.testing.assert_close(cache.features(ids), expected, atol=1e-6, rtol=0)


def test_configs_written_before_char_encoder_mean_the_same_model():
    """Checkpoints and run directories from before ``char_encoder`` said ``char_cnn: true|false``."""
    current = {"char_encoder": "cnn", "char_dim": 30, "char_filters": 50, "char_widths": [3], "char_lstm_hidden": 25}
    legacy = {"char_cnn": True, "char_dim": 30, "char_filters": 50, "char_widths": [3]}
    assert effective_model_options(legacy) == effective_model_options(current) == {
        "char_encoder": "cnn", "char_dim": 30, "char_filters": 50, "char_widths": [3]}
    assert effective_model_options({"char_cnn": False, "char_filters": 50})["char_encoder"] is None
    assert effective_model_options({**current, "char_encoder": "lstm"}) == {
        "char_encoder": "lstm", "char_dim": 30, "char_lstm_hidden": 25}
    run = {"seed": 1, "model": legacy}
    check_same_run(run, {"seed": 1, "model": current}, "run")  # the same model: resumes
    check_same_run({"seed": 1, "model": current}, {"seed": 1, "model": {**current, "char_lstm_hidden": 9}}, "run")
    with pytest.raises(NerbiasError, match=r"was trained with model\."):
        check_same_run(run, {"seed": 1, "model": {**current, "char_encoder": "lstm"}}, "run")


@pytest.mark.slow
def test_char_lstm_model_config_trains_and_its_checkpoint_reloads(tiny_data_dir, tmp_path):
    out = tmp_path / "run"
    cfg = compose_config("train", tiny_train_overrides(tiny_data_dir) + [
        "model=bilstm_crf_char_lstm", "model.char_lstm_hidden=6", f"paths.output_dir={out}"])
    assert (cfg.model.char_encoder, cfg.model.lstm_hidden) == ("lstm", 16)  # the default model otherwise
    metrics = run_training(cfg, out)
    assert 0 <= metrics["test_f1"] <= 1
    payload = load_checkpoint(out / "checkpoints" / "best.pt")
    assert payload["embedder"]["char_encoder"] == "lstm" and payload["embedder"]["char_lstm_hidden"] == 6
    tagger = NerTagger.load(out / "checkpoints" / "best.pt")
    assert isinstance(tagger.model.embedder.chars, CharLSTM)
    assert len(tagger.predict([["Maria", "visited", "Paris", "."]])[0].tags) == 4


def test_an_unknown_char_encoder_is_refused_by_name(tiny_data_dir, tmp_path):
    from helpers import run_script

    result = run_script("train.py", tiny_train_overrides(tiny_data_dir) + [
        "model.char_encoder=rnn", f"hydra.run.dir={tmp_path / 'run'}"])
    assert result.returncode != 0
    assert "model.char_encoder='rnn': must be cnn, lstm or null" in result.stderr + result.stdout
    assert not (tmp_path / "run" / "metrics.json").exists()

"""Confidences of a trained model: exact, consistent with Viterbi and the token marginals."""

import pytest
import torch

from helpers import compose_config
from nerbias.data.conll2003 import load_conll2003
from nerbias.models.tagger import NerTagger, emissions_for
from nerbias.tasks import run_training


def train_smoke(data_dir, out):
    overrides = ["experiment=smoke", "logger=none", f"paths.data_dir={data_dir}", "trainer.device=cpu"]
    cfg = compose_config("train", overrides + [f"paths.output_dir={out}"])
    run_training(cfg, out)
    return NerTagger.load(out / "checkpoints" / "best.pt")


def check_confidences(tagger, token_lists):
    predictions = tagger.predict(token_lists, batch_size=16)
    emissions, mask = emissions_for(tagger, token_lists)
    crf = tagger.model.crf
    with torch.inference_mode():
        paths, best = crf.viterbi(emissions, mask)
        path_probability = (best - crf.log_partition(emissions, mask)).exp()
        marginals = crf.marginals(emissions, mask)
    s_tags = {tag[2:]: i for i, tag in enumerate(tagger.tags.items) if tag.startswith("S-")}
    checked = 0
    for row, prediction in enumerate(predictions):
        assert prediction.tags == [tagger.tags.items[i] for i in paths[row, :len(token_lists[row])].tolist()]
        assert len(prediction.confidences) == len(prediction.spans)
        for span, confidence in zip(prediction.spans, prediction.confidences):
            # P(span) sums P over every path containing it, the Viterbi path among them.
            assert path_probability[row].item() - 1e-5 <= confidence <= 1 + 1e-6
            if span.end - span.start == 1:
                assert confidence == pytest.approx(marginals[row, span.start, s_tags[span.label]].item(), abs=1e-5)
            checked += 1
    return checked


@pytest.mark.slow
def test_tiny_trained_model_confidences(tiny_trained_run):
    tagger = NerTagger.load(tiny_trained_run.checkpoint)
    tokens = [["Maria", "visited", "Paris", "on", "Monday", "."], ["The", "Bank", "of", "Japan", "said", "Greg", "."],
              ["German", "fans", "met", "in", "Lima", "."], ["Ahmed", "told", "Emily", "that", "he", "could", "pay", "."]]
    assert check_confidences(tagger, tokens) > 0
    slot = tagger.slot_probabilities(tokens, [0, 5, 4, 2])
    assert all(0.0 <= p <= 1.0 for p in slot)


@pytest.mark.slow
@pytest.mark.integration
def test_smoke_model_on_real_conll_test_sentences(shared_data, tmp_path):
    tagger = train_smoke(shared_data, tmp_path / "run")
    test = load_conll2003(shared_data, splits=("test",))["test"][:200]
    assert check_confidences(tagger, [s.tokens for s in test]) > 50

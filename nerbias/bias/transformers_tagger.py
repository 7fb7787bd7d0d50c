"""Hugging Face token-classification models as slot taggers (``tagger=transformers``).

Any ``AutoModelForTokenClassification`` with its tokenizer runs on the corpus's own words
(``is_split_into_words=True``): nothing is re-tokenised into words, and a word's label and its
probabilities are those of its **first sub-token** (``word_ids()``), the usual rule for sub-word
models (Devlin et al. 2019, the CoNLL-03 recipe). The model's labels are read in any of the
common schemes, BIO/IOB2, IOB1, BIOES, BILOU or plain IO (``B-PER``, ``I-PER``, ``S-PER``, ``U-PER``,
``PER``, ``B-PERSON``...), entities are made from the word labels leniently (as for every tagger),
and a name is recognised when its word is a one-word PERSON entity.

The confidence of a slot is the first sub-token's softmax probability of PERSON (``confidence``:
``any``: the sum over every PERSON label, i.e. P(the word is inside a PERSON entity); ``begin``:
only the labels that open one, B-/S-/U- or the IO label). It is a per-token probability, not the
span marginal our CRFs give: it does not say the entity ends at the word.

Length: a sentence whose sub-tokens do not fit the model's limit is an error by default
(``overflow=error``, naming the sentence); ``overflow=count`` labels the cut words outside every
entity, leaves their slots without a confidence and counts them (``truncated_words`` /
``truncated_slots``, logged). Words are never dropped silently, and an empty word is an input error.

A hub id (``dslim/bert-base-NER``) is read from the local Hugging Face cache when it is there; else
it is downloaded, which fails at once with a clear message when the hub cannot be reached.
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path
from typing import Any, Mapping, Sequence
from urllib.parse import urlparse

import torch

from nerbias.bias.labels import PERSON, PERSON_TYPES, canonical_tag, word_spans
from nerbias.bias.tagging import SlotTagger
from nerbias.bias.types import BiasSentence, SlotOutcome, outcome_from_spans
from nerbias.models.tagger import resolve_device
from nerbias.errors import NerbiasError, first_line
from nerbias.validation import check_key, check_values, one_of
from nerbias.fileio import file_fingerprint

log = logging.getLogger(__name__)

OVERFLOW = ("error", "count")
CONFIDENCE = ("any", "begin")


def canonical_labels(id2label: dict[int, str], person_types: Sequence[str] = PERSON_TYPES) -> list[str]:
    """The model's labels by id as canonical BIOES tags (``nerbias.bias.labels``); it needs a PERSON label."""
    out = []
    for index in range(len(id2label)):
        try:
            out.append(canonical_tag(str(id2label[index]), person_types))
        except NerbiasError as error:
            raise NerbiasError(f"model label {index}: {error}") from None
    if not any(label.endswith(f"-{PERSON}") for label in out):
        raise NerbiasError(f"the model has no PERSON label (labels: {[id2label[i] for i in range(len(id2label))]}); "
                           f"set tagger.person_types")
    return out


def _hub_reachable(timeout: float = 3.0) -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes"):
        return False
    endpoint = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:
        with socket.create_connection((endpoint.hostname, endpoint.port or 443), timeout=timeout):
            return True
    except OSError:
        return False


def load_token_classifier(model: str, revision: str | None = None) -> tuple[Any, Any]:
    """(tokenizer, model) from a local folder, the local hub cache, or the hub; one clear error otherwise."""
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    def load(**options):
        tokenizer = AutoTokenizer.from_pretrained(model, revision=revision, **options)
        return tokenizer, AutoModelForTokenClassification.from_pretrained(model, revision=revision, **options)

    path = Path(model).expanduser()
    if path.exists():
        if not path.is_dir():
            raise NerbiasError(f"tagger.model={model}: a file; give the model folder (config.json, weights, "
                               "tokenizer files)")
        try:
            return load(local_files_only=True)
        except Exception as error:
            raise NerbiasError(f"tagger.model={model}: not a token-classification model folder "
                               f"({type(error).__name__}: {first_line(error)})") from None
    if model.startswith((".", "/", "~")) or model.count("/") > 1:
        raise NerbiasError(f"tagger.model={model}: no such folder")
    try:
        return load(local_files_only=True)           # already in the Hugging Face cache
    except Exception:
        pass
    if not _hub_reachable():
        raise NerbiasError(f"tagger.model={model}: not a local folder, not in the Hugging Face cache, and the hub "
                           "cannot be reached (offline). Download it where there is internet "
                           f"(huggingface-cli download {model}) or give the path of a saved model")
    try:
        return load()
    except Exception as error:
        raise NerbiasError(f"tagger.model={model}: could not be loaded from the hub "
                           f"({type(error).__name__}: {first_line(error)})") from None


class TransformersSlotTagger(SlotTagger):
    """A Hugging Face token classifier on our words: first sub-token label and PERSON probability."""

    EXAMPLES = {"model": "a saved model folder or a hub id, e.g. tagger.model=dslim/bert-base-NER"}

    @classmethod
    def check_values(cls, values: Mapping[str, Any], prefix: str = "tagger.") -> None:
        """What its options may be alone (validation.validate checks a config's before any work)."""
        check_values(values, {"overflow": one_of(*OVERFLOW), "confidence": one_of(*CONFIDENCE)}, prefix)

    def __init__(self, model: str, device: str = "auto", batch_size: int = 64, max_length: int | None = None,
                 overflow: str = "error", confidence: str = "any", person_types: Sequence[str] = PERSON_TYPES,
                 revision: str | None = None, name: str | None = None, loaded: tuple[Any, Any] | None = None,
                 kind: str = "transformers"):
        self.kind = kind  # the label run names and tables use (the config's ``kind``)
        self.check_values({"overflow": overflow, "confidence": confidence})
        check_key("tagger.batch_size", batch_size)
        self.tokenizer, self.model = loaded if loaded is not None else load_token_classifier(model, revision)
        if not getattr(self.tokenizer, "is_fast", False):
            raise NerbiasError(f"tagger.model={model}: its tokenizer is not a fast tokenizer (word_ids() is needed)")
        self.device = resolve_device(device)
        self.model.to(self.device).eval()
        self.labels = canonical_labels(self.model.config.id2label, person_types)
        begin = [i for i, label in enumerate(self.labels) if label in ("B-PER", "S-PER")]
        inside = [i for i, label in enumerate(self.labels) if label.endswith("-PER")]
        io_only = not any(label[0] in "BES" for label in self.labels if label != "O")
        self.person_ids = inside if confidence == "any" or io_only else begin
        limits = [value for value in (max_length, getattr(self.tokenizer, "model_max_length", None),
                                      getattr(self.model.config, "max_position_embeddings", None))
                  if value is not None and int(value) < 1_000_000]  # tokenizers say 1e30 when unset
        self.max_length = min(int(v) for v in limits) if limits else 512
        self.batch_size = int(batch_size)
        self.overflow = overflow
        self.truncated_words = 0
        self.truncated_slots = 0
        self.name = name or f"transformers:{Path(model).name if Path(model).exists() else model}"
        # What changes its outcomes, as configured (shards of one evaluation must agree on it).
        self._configured = {"model": model, "confidence": confidence, "max_length": max_length, "overflow": overflow}

    def identity(self) -> dict[str, Any]:
        return {**self._configured, "fingerprint": file_fingerprint(self._configured["model"])}

    @staticmethod
    def _check_words(sentences: Sequence[BiasSentence], first: int) -> None:
        for offset, sentence in enumerate(sentences):
            for position, word in enumerate(sentence.tokens):
                if not word or not word.strip():
                    raise NerbiasError(f"sentence {first + offset} (source {sentence.source}): word {position} is "
                                       "empty; every word needs at least one character")

    @torch.inference_mode()
    def tag(self, sentences: Sequence[BiasSentence]) -> list[list[SlotOutcome]]:
        out: list[list[SlotOutcome]] = []
        for first in range(0, len(sentences), self.batch_size):
            out.extend(self._tag_batch(sentences[first:first + self.batch_size], first))
        return out

    def _tag_batch(self, batch: Sequence[BiasSentence], first: int) -> list[list[SlotOutcome]]:
        self._check_words(batch, first)
        words = [list(sentence.tokens) for sentence in batch]
        encoded = self.tokenizer(words, is_split_into_words=True, truncation=True, max_length=self.max_length,
                                 padding=True, return_tensors="pt")
        inputs = {key: value.to(self.device) for key, value in encoded.items()
                  if key in ("input_ids", "attention_mask", "token_type_ids")}
        try:
            logits = self.model(**inputs).logits
        except Exception as error:
            raise NerbiasError(f"{self.name}: the model failed on sentences {first}-{first + len(batch) - 1} "
                               f"({type(error).__name__}: {first_line(error)})") from None
        probabilities = torch.softmax(logits.float(), dim=-1)
        person = probabilities[..., self.person_ids].sum(-1).cpu().numpy()
        predicted = probabilities.argmax(-1).cpu().numpy()
        out = []
        for row, sentence in enumerate(batch):
            first_piece: dict[int, int] = {}
            for piece, word in enumerate(encoded.word_ids(row)):
                if word is not None and word not in first_piece:
                    first_piece[word] = piece
            cut = [w for w in range(len(sentence.tokens)) if w not in first_piece]
            if cut:
                if self.overflow == "error":
                    raise NerbiasError(
                        f"sentence {first + row} (source {sentence.source}): {len(cut)} of its {len(sentence.tokens)} "
                        f"words do not fit the model's {self.max_length} sub-tokens; shorten it or set "
                        "tagger.overflow=count")
                self.truncated_words += len(cut)
            tags = [self.labels[predicted[row, first_piece[w]]] if w in first_piece else "O"
                    for w in range(len(sentence.tokens))]
            spans = word_spans(tags)
            outcomes = []
            for slot in sentence.slots:
                if slot.position in first_piece:
                    outcomes.append(SlotOutcome(outcome_from_spans(spans, slot.position, PERSON),
                                                float(person[row, first_piece[slot.position]])))
                else:
                    self.truncated_slots += 1
                    outcomes.append(SlotOutcome(outcome_from_spans(spans, slot.position, PERSON), None))
            out.append(outcomes)
        if self.truncated_words:
            log.warning("%s: %d words (%d name slots) beyond the %d-sub-token limit so far, labelled O",
                        self.name, self.truncated_words, self.truncated_slots, self.max_length)
        return out

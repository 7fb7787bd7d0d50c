"""Flair sequence taggers as slot taggers (``tagger=flair``; the optional ``flair`` extra).

A trained ``flair.models.SequenceTagger`` runs on the corpus's own words (a ``flair.data.Sentence``
built from the token list, so nothing is re-tokenised). Its predicted spans give the outcome of each
slot, as for every tagger: a name is recognised when its word is a one-word PERSON span. The
confidence of a slot is the model's per-word PERSON probability, the sum of its PERSON tags'
probabilities (``return_probabilities_for_all_classes``), when the model gives one; else none.

Flair model files are pickles (Flair loads them with ``torch.load(weights_only=False)``), which can run
code: this adapter only loads a file the user names (``tagger.model=/path/to/final-model.pt``), never a
hub name that Flair would download, and says so. Install the extra with
``pip install -r requirements-flair.txt`` (it holds Flair to transformers < 5).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Sequence

from nerbias.bias.labels import PERSON, PERSON_TYPES, canonical_tag, word_spans
from nerbias.bias.tagging import SlotTagger
from nerbias.bias.types import BiasSentence, SlotOutcome, outcome_from_spans
from nerbias.errors import NerbiasError, first_line
from nerbias.validation import check_key
from nerbias.fileio import file_fingerprint
from nerbias.models.tagger import resolve_device

log = logging.getLogger(__name__)



def _flair():
    try:
        import flair  # noqa: F401
        from flair.data import Sentence
        from flair.models import SequenceTagger
    except ImportError as error:
        raise NerbiasError(f"tagger=flair needs the flair extra: pip install -r requirements-flair.txt "
                           f"({error})") from None
    return Sentence, SequenceTagger


def load_flair_tagger(model: str) -> Any:
    """A SequenceTagger from a model file the user gives (never a hub name)."""
    _, SequenceTagger = _flair()
    path = Path(str(model)).expanduser()
    if not path.is_file():
        raise NerbiasError(f"tagger.model={model}: no such file; give the path of a trained Flair SequenceTagger "
                           "(e.g. final-model.pt). Hub names are not downloaded: Flair model files are pickles, "
                           "so only files you trust are loaded")
    log.warning("loading %s with Flair, which unpickles it (torch.load weights_only=False): only use files you "
                "trust", path)
    try:
        tagger = SequenceTagger.load(str(path))
    except Exception as error:
        raise NerbiasError(f"tagger.model={model}: Flair could not load it ({type(error).__name__}: "
                           f"{first_line(error)})") from None
    if not isinstance(tagger, SequenceTagger):
        raise NerbiasError(f"tagger.model={model}: a {type(tagger).__name__}, not a SequenceTagger")
    return tagger


class FlairSlotTagger(SlotTagger):
    """A Flair SequenceTagger on our words: its spans, and its per-word PERSON probability."""

    EXAMPLES = {"model": "the path of a trained SequenceTagger, e.g. tagger.model=/models/ner-english/final-model.pt"}

    def __init__(self, model: str | None = None, batch_size: int = 32, device: str = "auto",
                 person_types: Sequence[str] = PERSON_TYPES, name: str | None = None, tagger: Any = None,
                 kind: str = "flair"):
        self.kind = kind  # the label run names and tables use (the config's ``kind``)
        Sentence, _ = _flair()
        import flair

        check_key("tagger.batch_size", batch_size)
        if tagger is None:
            if model is None:
                raise NerbiasError("tagger.model: the path of a trained Flair SequenceTagger is required")
            tagger = load_flair_tagger(model)
        flair.device = resolve_device(device)  # Flair keeps its device globally
        self.tagger = tagger.to(flair.device).eval()
        self._sentence = Sentence
        self.batch_size = int(batch_size)
        self.person_types = {t.upper() for t in person_types}
        self.label_type = tagger.label_type
        self.name = name or f"flair:{Path(str(model)).stem if model else 'model'}"
        self.model = model

    def identity(self) -> dict[str, Any]:
        return {"model": self.model, "fingerprint": file_fingerprint(self.model)}

    def _is_person(self, kind: str) -> bool:
        return kind.upper() in self.person_types

    def _is_person_tag(self, tag: str) -> bool:
        try:
            return canonical_tag(tag, tuple(self.person_types)).endswith(f"-{PERSON}")
        except NerbiasError:  # Flair's own entries (<unk>, <START>, <STOP>) are no entity type
            return False

    def _person_probability(self, token: Any) -> float | None:
        distribution = token.get_tags_proba_dist(self.label_type)
        if not distribution:
            return None
        total = 0.0
        for label in distribution:  # BIOES tags: "S-PER", "B-PER", ...; token-level models: "PER"
            if self._is_person_tag(label.value):
                total += float(label.score)
        return min(max(total, 0.0), 1.0)

    def tag(self, sentences: Sequence[BiasSentence]) -> list[list[SlotOutcome]]:
        if not sentences:
            return []
        for index, sentence in enumerate(sentences):
            for position, word in enumerate(sentence.tokens):
                if not word or not word.strip():
                    raise NerbiasError(f"sentence {index} (source {sentence.source}): word {position} is empty")
        flair_sentences = [self._sentence(list(s.tokens)) for s in sentences]
        for ours, theirs in zip(sentences, flair_sentences):
            if len(theirs) != len(ours.tokens):  # Flair split or merged a word: slot positions would shift
                raise NerbiasError(f"Flair made {len(theirs)} tokens of a {len(ours.tokens)}-word sentence "
                                   f"(source {ours.source})")
        try:
            self.tagger.predict(flair_sentences, mini_batch_size=self.batch_size,
                                return_probabilities_for_all_classes=True, label_name=self.label_type)
        except Exception as error:
            raise NerbiasError(f"{self.name}: the model failed ({type(error).__name__}: "
                               f"{first_line(error)})") from None
        out = []
        for ours, theirs in zip(sentences, flair_sentences):
            spans = []
            for span in theirs.get_spans(self.label_type):
                kind = span.get_label(self.label_type).value
                start = span.tokens[0].idx - 1           # Flair counts tokens from 1
                spans.append((start, start + len(span.tokens), PERSON if self._is_person(kind) else kind))
            if not spans:  # a token-level model (predict_spans off): entities from its per-word tags
                tags = [canonical_tag(token.get_label(self.label_type).value, tuple(self.person_types))
                        if token.get_labels(self.label_type) else "O" for token in theirs]
                spans = word_spans(tags)
            out.append([SlotOutcome(outcome_from_spans(spans, slot.position, PERSON),
                                    self._person_probability(theirs[slot.position]))
                        for slot in ours.slots])
        return out

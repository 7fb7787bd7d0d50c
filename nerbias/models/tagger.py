"""A trained tagger bundled with its vocabularies: build, save, load, predict with confidences."""

from __future__ import annotations

import copy
import logging
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch
from torch import Tensor
from tqdm.auto import tqdm

from nerbias.models.checkpoint import load_checkpoint
from nerbias.data.conll import ENTITY_TYPES, Sentence
from nerbias.data.batching import Encoder
from nerbias.errors import CheckpointError, NerbiasError
from nerbias.models.bilstm_crf import BiLSTMCRFTagger, TaggerConfig, build_token_embedder
from nerbias.models.embedders import WordVectors
from nerbias.data.tags import Span, bioes_tag_set, bioes_to_spans
from nerbias.data.vocab import Vocabulary

log = logging.getLogger(__name__)


@dataclass
class Prediction:
    """One sentence: BIOES tags, Viterbi spans and each span's exact probability."""

    tags: list[str]
    spans: list[Span]
    confidences: list[float] = field(default_factory=list)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def tagger_config_from(cfg: Mapping[str, Any]) -> TaggerConfig:
    """The BiLSTM-CRF's options among ``cfg`` (a ``model`` section or a checkpoint's ``model_config``)."""
    values = {key: value for key, value in cfg.items() if key in TaggerConfig.__dataclass_fields__}
    if "noise_types" in values:
        values["noise_types"] = tuple(values["noise_types"])
    return TaggerConfig(**values)


class NerTagger:
    """Model + vocabularies + encoder; the object evaluation code talks to."""

    def __init__(self, model: BiLSTMCRFTagger, words: Vocabulary, chars: Vocabulary, tags: Vocabulary,
                 lowercase_words: bool, embedder_spec: Mapping[str, Any], config: Mapping[str, Any] | None = None):
        self.model = model
        self.embedder_spec = copy.deepcopy(dict(embedder_spec))  # how model.embedder was built (plain data)
        self.words, self.chars, self.tags = words, chars, tags
        self.lowercase_words = lowercase_words
        self.config = dict(config or {})
        self.encoder = Encoder(words, chars, tags, lowercase_words, elmo_chars=model.embedder.elmo_chars,
                               noise_types=model.config.noise_types)

    # ------------------------------------------------------------------ construction
    @classmethod
    def build(cls, train: Sequence[Sentence], model_cfg: Mapping[str, Any], embeddings: Any = None,
              config: Mapping[str, Any] | None = None, seed: int = 0, lowercase_words: bool = True,
              noise_types: Sequence[str] = ()) -> "NerTagger":
        """Vocabularies from the training data (plus the embeddings' words), then the model: the
        token embedder the embeddings source specifies (``build_token_embedder``, the builder
        checkpoints are loaded with, plus the source's pretrained values), the BiLSTM-CRF of ``model_cfg``.

        ``embeddings`` is a token-embedder source (``nerbias.models.embedders``: what the
        ``embeddings`` config group builds); None means random word vectors of ``model_cfg``'s
        ``word_dim``, looked up lower-cased when ``lowercase_words``. ``noise_types``: the entity
        types of adversarial training's noise vectors (``TaggerConfig.noise_types``). Nothing passed
        in is changed.
        """
        if embeddings is None:
            dim = {"dim": model_cfg["word_dim"]} if "word_dim" in model_cfg else {}
            embeddings = WordVectors(lowercase=lowercase_words, **dim)
        lowercase = embeddings.lowercase
        normalise = (lambda w: w.lower()) if lowercase else (lambda w: w)
        words = Vocabulary.from_counts((normalise(t) for s in train for t in s.tokens),
                                       extra=embeddings.vocabulary_words())
        chars = Vocabulary.from_counts(c for s in train for t in s.tokens for c in t)
        types = sorted({span.label for s in train for span in s.spans} | set(ENTITY_TYPES))
        tags = Vocabulary(bioes_tag_set(types), with_specials=False)
        tagger_cfg = tagger_config_from(model_cfg)
        if noise_types:
            tagger_cfg = replace(tagger_cfg, noise_types=tuple(noise_types))
        spec = embeddings.embedder_spec(model_cfg)
        embedder = build_token_embedder(spec, words, chars, initial=embeddings.initial_weights(words, seed=seed))
        return cls(BiLSTMCRFTagger(embedder, tags.items, tagger_cfg), words, chars, tags, lowercase, spec, config)

    def state(self) -> dict[str, Any]:
        return {
            "model_state": self.model.state_dict(),
            "vocab": {"words": self.words.items, "chars": self.chars.items, "tags": self.tags.items},
            "lowercase_words": self.lowercase_words,
            "embedder": copy.deepcopy(self.embedder_spec),
            "model_config": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self.model.config).items()},
            "config": self.config,
        }

    @classmethod
    def from_state(cls, payload: Mapping[str, Any], source: str = "checkpoint") -> "NerTagger":
        """The tagger of a checkpoint's payload (``load_checkpoint`` migrates older layouts): the
        token embedder from its saved spec by ``build_token_embedder``, as in ``build``."""
        try:
            vocab = payload["vocab"]
            words, chars = Vocabulary(vocab["words"]), Vocabulary(vocab["chars"])
            tags = Vocabulary(vocab["tags"], with_specials=False)
            tagger_cfg = tagger_config_from(payload["model_config"])
            embedder = build_token_embedder(payload["embedder"], words, chars)
            model = BiLSTMCRFTagger(embedder, tags.items, tagger_cfg)
            model.load_state_dict(payload["model_state"])
            lowercase_words = payload["lowercase_words"]
        except (KeyError, RuntimeError, TypeError, ValueError, NerbiasError) as error:
            raise CheckpointError(f"{source}: incomplete or incompatible checkpoint ({error})") from None
        broken = [name for name, tensor in model.state_dict().items()
                  if tensor.is_floating_point() and bool((torch.isnan(tensor) | torch.isposinf(tensor)).any())]
        if broken:  # -inf may mark illegal CRF transitions; nan or +inf is a broken model
            raise CheckpointError(f"{source}: non-finite weights in {', '.join(broken[:5])}; refusing a broken model")
        model.eval()
        return cls(model, words, chars, tags, lowercase_words, payload["embedder"], payload.get("config"))

    @classmethod
    def load(cls, path: str | Path, device: str = "cpu") -> "NerTagger":
        tagger = cls.from_state(load_checkpoint(path), source=str(path))
        return tagger.to(resolve_device(device))

    def to(self, device: torch.device | str) -> "NerTagger":
        self.model.to(device)
        return self

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    # ------------------------------------------------------------------ prediction
    def _batches(self, token_lists: Sequence[Sequence[str]], batch_size: int):
        order = sorted(range(len(token_lists)), key=lambda i: len(token_lists[i]))
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            yield self.encoder.batch([token_lists[i] for i in rows], index=rows).to(self.device)

    @torch.inference_mode()
    def predict(self, token_lists: Sequence[Sequence[str]], batch_size: int = 256, confidences: bool = True,
                progress: bool = False) -> list[Prediction]:
        """Viterbi tags and spans of every sentence, each span with P(span | sentence)."""
        self.model.eval()
        results: list[Prediction | None] = [None] * len(token_lists)
        batches = self._batches(token_lists, batch_size)
        total = (len(token_lists) + batch_size - 1) // batch_size
        for batch in tqdm(batches, total=total, desc="predict", disable=not progress, leave=False):
            emissions = self.model.emissions(batch.words, batch.chars, batch.mask)
            paths, _ = self.model.crf.viterbi(emissions, batch.mask)
            lengths = batch.mask.sum(1).tolist()
            decoded = [[self.tags.items[i] for i in path[:n]] for path, n in zip(paths.tolist(), lengths)]
            span_lists = [bioes_to_spans(tags) for tags in decoded]
            scores: list[float] = []
            if confidences:
                rows = torch.tensor([r for r, spans in enumerate(span_lists) for _ in spans], dtype=torch.long,
                                    device=emissions.device)
                flat = [span for spans in span_lists for span in spans]
                scores = self.model.crf.span_log_confidences(emissions, batch.mask, rows, flat).exp().tolist()
            cursor = 0
            for row, (tags, spans) in enumerate(zip(decoded, span_lists)):
                conf = scores[cursor:cursor + len(spans)] if confidences else []
                cursor += len(spans)
                results[batch.index[row]] = Prediction(tags, spans, conf)
        return results  # type: ignore[return-value]

    @torch.inference_mode()
    def slot_probabilities(self, token_lists: Sequence[Sequence[str]], positions: Sequence[int],
                           label: str = "PER", batch_size: int = 256) -> list[float]:
        """P(token at ``positions[i]`` is a one-token ``label`` entity), Viterbi or not.

        In BIOES that is the marginal of the ``S-label`` tag at that position.
        """
        self.model.eval()
        tag = self.tags.lookup(f"S-{label}")
        out = [0.0] * len(token_lists)
        for batch in self._batches(token_lists, batch_size):
            emissions = self.model.emissions(batch.words, batch.chars, batch.mask)
            rows = torch.arange(len(batch.index))
            cols = torch.tensor([positions[i] for i in batch.index])
            for i, value in zip(batch.index, self.model.crf.marginal_at(emissions, batch.mask, rows, cols, tag).tolist()):
                out[i] = value
        return out


def emissions_for(tagger: NerTagger, token_lists: Sequence[Sequence[str]]) -> tuple[Tensor, Tensor]:
    """Emissions and mask of one padded batch, in the given order (for analysis and tests)."""
    batch = tagger.encoder.batch(token_lists).to(tagger.device)
    with torch.inference_mode():
        tagger.model.eval()
        return tagger.model.emissions(batch.words, batch.chars, batch.mask), batch.mask

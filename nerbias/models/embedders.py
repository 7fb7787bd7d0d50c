"""What the ``embeddings`` config group builds (its ``_target_``): the source of a tagger's token embedder.

A source knows how tokens are looked up (``lowercase``), which words it brings into the word
vocabulary, and what token embedder ``BiLSTMCRFTagger`` gets:

- ``embedder_spec(model)``: plain data, the embedder's factory (``_target_``) and its resolved
  options; ``bilstm_crf.build_token_embedder`` builds it, and a checkpoint stores it, so loading
  rebuilds the same embedder without the source files;
- ``initial_weights(words, seed)``: the values the source read from pretrained files, loaded over
  the embedder's random start (none for random vectors or an ELMo trained from scratch).

The sources:
- ``WordVectors`` (``embeddings=glove|conceptnet|random``): word vectors, pretrained from a file
  through gensim (``source``) or trained from scratch (``source: null``), + the character encoder
  (``model.char_encoder``: a CNN by default, a BiLSTM with ``lstm``, or none);
- ``ElmoEmbeddings`` (``embeddings=elmo``): the ELMo-style contextual encoder.
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch
from torch import Tensor

from nerbias.data.debias import (NEUTRALIZE, equalised_sets, hard_debias, load_sets, normalized,
                                 subspace_of)
from nerbias.data.debias_diagnostics import name_keys, report
from nerbias.data.embeddings import coverage, embedding_matrix, load_keyed_vectors
from nerbias.errors import NerbiasError
from nerbias.validation import POSITIVE_INTEGER, ConfigError, Rule, check_values, one_of
from nerbias.data.vocab import Vocabulary
from nerbias.models.bilstm_crf import word_char_spec

log = logging.getLogger(__name__)


def _rounded(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def effective_embedding_options(section: Mapping[str, Any]) -> dict[str, Any]:
    """An ``embeddings`` config section as it decides training: options at their defaults
    (``normalize`` unset or false, or implied by ``debias=hard``; ``debias_neutralize=all``) are left
    out, so a run saved before these options existed compares equal to the same run now."""
    section = dict(section)
    if not section.get("normalize") or section.get("debias") == "hard":
        section.pop("normalize", None)
    if section.get("debias_neutralize", "all") == "all":
        section.pop("debias_neutralize", None)
    return section


WORD_VECTOR_RULES: dict[str, Rule] = {
    "dim": POSITIVE_INTEGER, "debias": one_of(None, "hard", description="null or hard"),
    "debias_neutralize": one_of(*NEUTRALIZE),
    "normalize": Rule(lambda v: v is None or isinstance(v, bool), "true, false or null")}


class WordVectors:
    """Word vectors (+ the character encoder, CNN or BiLSTM): pretrained from ``source``/``path``, or random
    when ``source`` is None."""

    def __init__(self, source: str | None = None, path: str | None = None, dim: int = 50, lowercase: bool = True,
                 freeze: bool = False, include_pretrained_vocab: bool = True, debias: str | None = None,
                 normalize: bool | None = None, debias_neutralize: str = "all", coverage_names: str | None = None,
                 kind: str = "word_vectors"):
        self.kind = kind  # the label run names and tables use (the config's ``kind``)
        self.check_values({"dim": dim, "debias": debias, "normalize": normalize,
                           "debias_neutralize": debias_neutralize})
        if debias is None and debias_neutralize != "all":
            raise NerbiasError(f"embeddings.debias_neutralize={debias_neutralize} only applies with "
                               "embeddings.debias=hard")
        if debias and normalize is False:
            raise NerbiasError("embeddings.normalize=false: embeddings.debias=hard always normalises the vectors "
                               "(Bolukbasi et al. 2016); leave normalize null (or true)")
        if (debias or normalize) and source is None:
            option = "embeddings.debias=hard" if debias else "embeddings.normalize=true"
            raise NerbiasError(f"{option} needs pretrained vectors (embeddings.source)")
        self.source, self.path, self.dim = source, path, int(dim)
        self.lowercase, self.freeze = bool(lowercase), bool(freeze)
        self.include_pretrained_vocab = bool(include_pretrained_vocab)
        self.debias, self.debias_neutralize = debias, debias_neutralize
        self.normalize = bool(normalize) or debias == "hard"  # de-biasing implies unit vectors
        self.coverage_names = coverage_names  # the name list whose coverage training reports (null: the packaged one)
        self._keyed = None
        self._original = None  # the vectors as loaded, for the diagnostics (when normalised or de-biased)

    EXAMPLES = {"path": "the vectors file of embeddings.source, e.g. embeddings.path=/data/numberbatch-en-19.08.txt.gz"}

    @classmethod
    def check_values(cls, values: Mapping[str, Any], prefix: str = "embeddings.") -> None:
        """What each value may be alone, and a vectors file that is there (validation.validate checks a config's
        before any work); how they combine, ``__init__`` says."""
        check_values(values, WORD_VECTOR_RULES, prefix)
        path = values.get("path")
        if values.get("source") and path is not None and not Path(str(path)).is_file():
            raise ConfigError(f"{prefix}path={path}: no such file")

    @property
    def pretrained(self) -> bool:
        return self.source is not None

    @property
    def keyed(self):
        """The gensim KeyedVectors, loaded once on first use (normalised or de-biased as configured)."""
        if self._keyed is None and self.pretrained:
            self._keyed = load_keyed_vectors(self.source, self.path)
            log.info("%s: %d pretrained vectors of dimension %d", self.path or self.source,
                     len(self._keyed.index_to_key), self._keyed.vector_size)
            if self.normalize:
                self._original = self._keyed
            if self.debias == "hard":
                self._keyed, subspace, definitional = hard_debias(self._original, neutralize=self.debias_neutralize)
                log.info("hard de-biasing: %d bias directions, %d definitional words kept and equalised, "
                         "neutralised: %s", len(subspace), len(definitional), self.debias_neutralize)
            elif self.normalize:
                self._keyed = normalized(self._original)
                log.info("pretrained vectors normalised to unit length")
        return self._keyed

    def debias_diagnostics(self, labels: Mapping[str, Mapping[str, str]]) -> dict[str, Any] | None:
        """The evaluation names' projection on the bias subspace and the residual-bias classifier, before
        and after de-biasing (or normalising): ``nerbias.data.debias_diagnostics``. ``labels``: target
        (gender, race) -> name -> label. None when the vectors are neither normalised nor de-biased."""
        if not self.normalize:
            return None
        keyed = self.keyed
        names = list(next(iter(labels.values()))) if labels else []
        found = [name for name, key in zip(names, name_keys(names, self.lowercase))
                 if key in self._original.key_to_index]
        keys = name_keys(found, self.lowercase)
        subspace, directions = None, []
        try:  # the subspace de-biasing removes; normalise-only runs report the same measure
            subspace, directions = subspace_of(self._original)
        except NerbiasError as error:
            log.warning("no bias subspace for the diagnostics: %s", error)
        details = {"neutralize": self.debias_neutralize} if self.debias else {}
        if self.debias:
            details["equalised_sets"] = {kind: f"{sum(flags)} of {len(flags)}" for kind, flags in
                                         equalised_sets(keyed, load_sets(), subspace).items()}
        before, initial = (np.asarray([vectors[key] for key in keys], dtype=np.float64).reshape(len(keys), self.dim)
                           for vectors in (self._original, keyed))
        found_labels = {target: {name: of[name] for name in found} for target, of in labels.items()}
        diagnostics = report(self.debias or "normalize", found, found_labels, before, initial, subspace, directions,
                             self.lowercase, **details)
        before, initial = diagnostics["stages"]["before"], diagnostics["stages"]["initial"]
        log.info("evaluation names (%d of %d): bias-subspace projection %s before, %s after %s; linear classifier "
                 "(leave-one-out) %s", len(found), len(names), _rounded(before["mean_abs_projection"]),
                 _rounded(initial["mean_abs_projection"]), "de-biasing" if self.debias else "normalising",
                 "; ".join(f"{t} {_rounded(before['classifier'][t]['accuracy'])} -> "
                           f"{_rounded(initial['classifier'][t]['accuracy'])} (chance "
                           f"{_rounded(before['classifier'][t]['chance'])})" for t in labels))
        return diagnostics

    def vocabulary_words(self) -> list[str]:
        """Words added to the training vocabulary (names unseen in training keep their vectors)."""
        if not self.pretrained or not self.include_pretrained_vocab:
            return []
        words = self.keyed.index_to_key
        return list(dict.fromkeys(w.lower() for w in words)) if self.lowercase else list(words)

    def name_coverage(self, group_of: Mapping[str, str]) -> dict[str, Any] | None:
        """Which of these evaluation names (name -> group) the pretrained vocabulary lacks; None if random."""
        if not self.pretrained:
            return None
        found, missing = coverage(self.keyed, list(group_of), self.lowercase)
        return {"names": len(group_of), "found": len(found), "missing": missing,
                "missing_by_group": {n: group_of[n] for n in missing}}

    def embedder_spec(self, model: Mapping[str, Any]) -> dict[str, Any]:
        """A word table of this source's dimension + the character encoder of the ``model`` options."""
        return word_char_spec({**model, "word_dim": self.dim, "freeze_words": self.freeze})

    def initial_weights(self, words: Vocabulary, seed: int = 0) -> dict[str, Tensor]:
        """The pretrained rows of the word table (random where a word has no vector); none when random."""
        if not self.pretrained:
            return {}
        values, hits = embedding_matrix(self.keyed, words.items, self.dim, self.lowercase, seed=seed,
                                        source=str(self.path or self.source), unit_length=self.normalize,
                                        training_words=words.counted)
        log.info("word vocabulary %d, %d with pretrained vectors", len(words), hits)
        return {"words.weight": torch.from_numpy(values)}


class ElmoEmbeddings:
    """The ELMo-style encoder (``nerbias.models.elmo``): pretrained (``pretrained_lm``, or official
    ``options_file`` + ``weight_file``) or a preset ``size`` with ``char_cnn`` / ``lstm`` overrides."""

    def __init__(self, size: str = "small", options_file: str | None = None, weight_file: str | None = None,
                 pretrained_lm: str | None = None, char_cnn: Mapping | None = None, lstm: Mapping | None = None,
                 freeze_lm: bool = False, dropout: float = 0.0, lowercase: bool = False,
                 include_pretrained_vocab: bool = False, kind: str = "elmo"):
        self.kind = kind  # the label run names and tables use (the config's ``kind``)
        # include_pretrained_vocab is moot (no word vocabulary) and taken so that experiment=smoke, which
        # turns it off for word vectors, composes with embeddings=elmo.
        self.spec = {"size": size, "options_file": options_file, "weight_file": weight_file,
                     "pretrained_lm": pretrained_lm, "char_cnn": char_cnn, "lstm": lstm, "freeze_lm": freeze_lm,
                     "dropout": dropout}
        self.lowercase = bool(lowercase)
        self._resolved = None

    def vocabulary_words(self) -> list[str]:
        return []

    def name_coverage(self, group_of: Mapping[str, str]) -> None:
        return None  # every token is encoded from its characters: no vocabulary to miss a name

    def encoder(self):
        """The encoder alone, with its pretrained weights (``pretrain_lm.py`` trains its biLM)."""
        from nerbias.models.elmo_weights import build_elmo_encoder

        return build_elmo_encoder(self.spec)

    def _resolve(self) -> tuple[dict[str, Any], dict[str, Tensor] | None]:
        """The biLM's resolved options and pretrained weights, read once (``elmo_weights.resolve_elmo``)."""
        if self._resolved is None:
            from nerbias.models.elmo_weights import resolve_elmo

            self._resolved = resolve_elmo(self.spec)
        return self._resolved

    def embedder_spec(self, model: Mapping[str, Any]) -> dict[str, Any]:
        """The encoder of the resolved biLM options (the ``model`` options are the BiLSTM's only)."""
        from nerbias.models.elmo import ELMO_EMBEDDER

        if model.get("freeze_chars"):
            raise NerbiasError("model.freeze_chars=true: an ELMo tagger has no character encoder of its own (its "
                               "biLM reads the characters); freeze the biLM with embeddings.freeze_lm=true")

        return {"_target_": ELMO_EMBEDDER, "options": copy.deepcopy(self._resolve()[0]),
                "freeze_lm": bool(self.spec["freeze_lm"]),
                "dropout": float(self.spec["dropout"])}

    def initial_weights(self, words: Vocabulary, seed: int = 0) -> dict[str, Tensor]:
        """The pretrained biLM's weights; none for a biLM trained from scratch."""
        state = self._resolve()[1]
        return {f"bilm.{key}": value for key, value in (state or {}).items()}

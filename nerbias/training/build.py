"""The tagger a training config describes: its embeddings (the ``embeddings`` group's ``_target_``,
``nerbias.models.embedders``), the network (``model``), vocabularies from the training data."""

from __future__ import annotations

import logging
from typing import Any, Mapping, Sequence

from omegaconf import DictConfig, OmegaConf

from nerbias.building import build
from nerbias.data.conll import ENTITY_TYPES, Sentence
from nerbias.models.tagger import NerTagger

log = logging.getLogger(__name__)


def build_tagger(cfg: DictConfig, train: Sequence[Sentence], coverage_names: Mapping[str, str] | None = None,
                 name_labels: Mapping[str, Mapping[str, str]] | None = None) -> tuple[NerTagger, dict[str, Any] | None]:
    """The tagger and, for pretrained word vectors and given ``coverage_names`` (name -> group),
    which of those names the pretrained vocabulary lacks (the paper lists them per embedding).

    When the vectors are normalised or de-biased, the report's ``debias`` entry holds the names'
    diagnostics (``nerbias.data.debias_diagnostics``), the classifier predicting ``name_labels``
    (target -> name -> label; the names' groups when None)."""
    embeddings = build(cfg.embeddings)
    names = embeddings.name_coverage(coverage_names) if coverage_names else None
    diagnostics = getattr(embeddings, "debias_diagnostics", None)
    if names is not None and diagnostics is not None:
        report = diagnostics(name_labels or {"group": dict(coverage_names)})
        if report is not None:
            names["debias"] = report
    if names is not None:
        source = cfg.embeddings.get("path") or cfg.embeddings.get("source")
        log.info("%s covers %d of %d evaluation names; missing: %s", source, names["found"], names["names"],
                 ", ".join(f"{n} ({g})" for n, g in names["missing_by_group"].items()) or "none")
    adversarial = float(OmegaConf.select(cfg, "augment.adversarial", default=0) or 0) > 0
    tagger = NerTagger.build(train, OmegaConf.to_container(cfg.model, resolve=True), embeddings=embeddings,
                             config=OmegaConf.to_container(cfg, resolve=True), seed=cfg.seed,
                             noise_types=ENTITY_TYPES if adversarial else ())  # adversarial training's noise vectors
    return tagger, names

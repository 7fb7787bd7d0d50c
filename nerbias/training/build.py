"""A new tagger for training, from the objects the task built: the ``embeddings`` source (the group's
``_target_``, ``nerbias.models.embedders``), the ``model`` options, vocabularies from the training data."""

from __future__ import annotations

import logging
from typing import Any, Mapping, Sequence

from nerbias.data.conll import Sentence
from nerbias.models.tagger import NerTagger

log = logging.getLogger(__name__)


def build_tagger(train: Sequence[Sentence], embeddings: Any, model: Mapping[str, Any], seed: int,
                 run_config: Mapping[str, Any] | None = None, noise_types: Sequence[str] = (),
                 coverage_names: Mapping[str, str] | None = None,
                 name_labels: Mapping[str, Mapping[str, str]] | None = None) -> tuple[NerTagger, dict[str, Any] | None]:
    """The tagger (``NerTagger.build``: its token embedder is what ``embeddings`` specifies, built by the
    builder checkpoints are loaded with) and, for pretrained word vectors and given ``coverage_names``
    (name -> group), which of those names the pretrained vocabulary lacks (the paper lists them per
    embedding). ``run_config`` goes into every checkpoint; ``noise_types``: adversarial training's
    noise vectors (``Augmentation.noise_types``).

    When the vectors are normalised or de-biased, the report's ``debias`` entry holds the names'
    diagnostics (``nerbias.data.debias_diagnostics``), the classifier predicting ``name_labels``
    (target -> name -> label; the names' groups when None)."""
    names = embeddings.name_coverage(coverage_names) if coverage_names else None
    diagnostics = getattr(embeddings, "debias_diagnostics", None)
    if names is not None and diagnostics is not None:
        report = diagnostics(name_labels or {"group": dict(coverage_names)})
        if report is not None:
            names["debias"] = report
    if names is not None:
        source = getattr(embeddings, "path", None) or getattr(embeddings, "source", None)
        log.info("%s covers %d of %d evaluation names; missing: %s", source, names["found"], names["names"],
                 ", ".join(f"{n} ({g})" for n, g in names["missing_by_group"].items()) or "none")
    tagger = NerTagger.build(train, model, embeddings=embeddings, config=run_config, seed=seed,
                             noise_types=noise_types)
    return tagger, names

"""Bias evaluation, one module per concept:

- ``names``: name lists and each name's demographic group; ``name_profile``: each name's ambiguity profile.
- ``corpora``: the Winogender and In-Situ corpora; ``census``: the census benchmark; ``probes``: paired
  person / place probes.
- ``types``: the data types these share; ``labels``: other taggers' label schemes read as ours.
- ``tagging``: what a tagger can do (``Tagger``, ``SlotTagger``, ``CensusLabeller``); ``taggers``: slot
  taggers for our checkpoints and spaCy; ``flair_tagger`` and ``transformers_tagger``: Flair and Hugging
  Face models; ``published``: published census predictions (a census labeller).
- ``benchmarks``: one class per corpus, ``evaluate(tagger, output_dir, logger)``; ``runner``: their
  evaluation loop, shards and result tables; ``statistics``: per-name and per-group metrics; ``plots``: the
  figures.

Imports ``data`` and the top-level helpers (``fileio``, ``errors``, ``building``), and ``models`` only
from the tagger adapters; never ``training`` or ``reporting``."""

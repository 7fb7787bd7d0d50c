"""Bias evaluation: name lists, the Winogender / In-Situ / census corpora, slot taggers (ours,
spaCy, published predictions), per-name statistics, figures and the evaluation runner. Imports
``data``, and ``models`` only from the tagger adapters; never ``training`` or ``reporting``."""

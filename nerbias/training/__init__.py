"""Training: the tagger built from config, the training loop with exact resumption, LM pretraining.
Imports ``data``, ``models``, ``scoring`` and ``loggers``; never ``bias`` or ``reporting``."""

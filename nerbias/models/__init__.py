"""The tagger: CRF maths (constrained forward-backward), token embedders, the BiLSTM-CRF network,
the ELMo-style encoder, checkpoints, and exact fast emissions for bias templates. Imports ``data``."""

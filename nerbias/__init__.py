"""nerbias: BiLSTM-CRF taggers and demographic-bias evaluation for named-entity recognition."""

__version__ = "0.1.0"

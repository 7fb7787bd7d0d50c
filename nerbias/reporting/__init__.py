"""Reading run directories back: run readers, uncertainty (bootstrap, permutation tests), tables,
figures, the static report and notebooks (many runs: ``nerbias.study``). Never imports ``training`` or ``tasks``."""

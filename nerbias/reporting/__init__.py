"""Reading run directories back: run readers, uncertainty (bootstrap, permutation tests), tables,
figures, the static report, notebooks and sweep aggregation. Never imports ``training`` or ``tasks``."""

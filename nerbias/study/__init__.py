"""The study of many runs: a sweep's aggregate, the mitigation study's tables, claims and goal, and its archive.

It reads run directories through ``nerbias.reporting`` (one run's results and the statistics of a figure)
and never the trainer or the task layer (import rules: pyproject.toml)."""

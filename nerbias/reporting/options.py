"""The report's options and their defaults, apart from the code that uses them: the task layer checks
``bias_eval.report`` before any training, and should not import the statistics (scipy), the figures
(matplotlib) and the run readers to do it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from nerbias.data.ambiguity import AmbiguityRule
from nerbias.validation import LEVEL, POSITIVE_INTEGER, Rule, at_least, check_values

DEFAULT_N_BOOT = 2000
DEFAULT_N_PERMUTATIONS = 9999
DEFAULT_CONFIDENCE = 0.95
CENSUS_N_BOOT = 1000
AMBIGUITY_N_BOOT = 1000
# The mitigation study's bootstraps (aggregate.py --study): the published study tables were made with these.
# A p read off B replicates passes Holm's first threshold, 0.05 / (family size), only when its Monte-Carlo
# upper bound (about 10.6 / B when no replicate crosses 0; intervals.replicates_to_resolve) is below it:
# 16,000 resolve a family of up to 75 differences (the study's 8 conditions of 8 are 64), 20,000 up to 94.
# study.md says when the replicates are too few for the family (study.claims.replicate_resolution).
STUDY_N_BOOT = 20_000
STUDY_CENSUS_BOOT = 16_000  # drawn in chunks of (units x 250) weights: ~30k units a sex

REPORT_RULES: dict[str, Rule] = {"n_boot": POSITIVE_INTEGER, "n_permutations": POSITIVE_INTEGER,
                                 "census_boot": POSITIVE_INTEGER, "census_permutations": at_least(0),
                                 "confidence": LEVEL, "ambiguity_boot": POSITIVE_INTEGER, "seed": at_least(0)}


@dataclass
class ReportOptions:
    n_boot: int = DEFAULT_N_BOOT
    n_permutations: int = DEFAULT_N_PERMUTATIONS
    confidence: float = DEFAULT_CONFIDENCE
    seed: int = 0
    census_boot: int = CENSUS_N_BOOT
    census_permutations: int = 0  # per-year tests are slow and weak after Holm over 139 years: opt in
    census_years: Sequence[int] | None = None
    ssa: str | Path | None = None
    predictions: str | Path | None = None
    checkpoint: str | Path | None = None
    ambiguity_rule: dict | None = None  # AmbiguityRule's fields (min_typed, types, casing, gazetteer); None: default
    ambiguity_boot: int = AMBIGUITY_N_BOOT  # bootstrap replicates (over names) of the ambiguity regression

    def __post_init__(self) -> None:
        self.check_values(vars(self))

    @classmethod
    def check_values(cls, values: Mapping[str, Any], prefix: str = "bias_eval.report.") -> None:
        """What the options may be (validation.validate checks ``bias_eval.report`` before any work;
        report.py its command-line options, by the same rules)."""
        check_values(values, REPORT_RULES, prefix)
        AmbiguityRule.from_mapping(values.get("ambiguity_rule"))  # a bad rule is named before any work

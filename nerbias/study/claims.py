"""The study's claims family: every condition's difference from the baseline in the declared headline figures
(``HEADLINE``), Holm-adjusted, with the Monte-Carlo bounds of each p deciding whether the replicates can tell
(``claims_family``), each row's verdict in words, and the warning when the replicates are too few to decide it
(``replicate_resolution``). ``mitigation.claims_section`` prints it in study.md."""

from __future__ import annotations

import logging
from typing import Mapping

import numpy as np
import pandas as pd

from nerbias.bias.types import parse_corpus_label
from nerbias.reporting.intervals import COVERS_NAMES, monte_carlo_p_bounds, replicates_to_resolve
from nerbias.reporting.significance import holm_with_bounds
from nerbias.study.place_names import UNAMBIGUOUS_SUFFIX

log = logging.getLogger(__name__)

OOV_SUFFIX = "_oov"  # the OOV name set's evaluations: bias_eval.corpora.<corpus>_oov
UNDECIDED_BY_REPLICATES = "not decided by the replicates"


# The claims family (Holm): every condition's difference from the baseline in these figures, cased corpora.
# The best - worst gap is not in it: with names that are also places its intervals, and those of its
# differences, undercover (tests/reporting/test_intervals_coverage.py); gaps are reported, not claimed.
HEADLINE = {"conll": ("test_f1",), "names": ("ALL", "female_male_gap"), "oov": ("ALL",),
            "census": ("female_male_type1_w_gap",)}


def corpus_kind(label: str) -> str | None:
    """``names``, ``oov`` or ``census`` for a cased corpus label in the claims family; None for the rest."""
    corpus, lower = parse_corpus_label(label)
    if lower or corpus.startswith("probes") or corpus.endswith(UNAMBIGUOUS_SUFFIX):
        return None
    if corpus.startswith("census"):
        return "census"
    return "oov" if corpus.endswith(OOV_SUFFIX) else "names"


def claims_family(frames: dict[str, pd.DataFrame], baseline: str, alpha: float) -> pd.DataFrame:
    """The declared family (``HEADLINE``) of differences from the baseline, Holm-adjusted. Only differences
    whose interval covers the seeds (at least 2 seeds on each side) are claims; from one seed it covers the
    names only and says nothing of another training run.

    A p read off B replicates is known only to within its Monte-Carlo bounds (``holm_with_bounds``): a difference
    ``holds`` when it does so at the upper bounds; ``undecided`` marks one that holds at the lower bounds but not
    the upper: the replicates cannot decide it (more of them, ``--n-boot``, may).

    Adds ``p_holm``, ``holds`` and ``undecided`` to the rows of ``frames`` in place and returns the family."""
    rows = []
    # Every corpus table repeats the CoNLL figures: one claim each, from a census table only as a last resort
    # (it draws fewer replicates, census_boot), so the claim is the interval study.md and goal.csv print.
    conll_claimed: set[tuple[str, str]] = set()
    for label in sorted(frames, key=lambda label: corpus_kind(label) == "census"):
        frame = frames[label]
        kind = corpus_kind(label)
        if not kind or "p_value" not in frame:
            continue
        for index, row in frame.iterrows():  # a difference from one seed a side covers the names only: no claim
            if row["condition"] == baseline or pd.isna(row["p_value"]) or row.get("diff_covers") == COVERS_NAMES:
                continue
            if row["metric"] in HEADLINE["conll"]:
                if (row["condition"], row["metric"]) in conll_claimed:
                    continue
                conll_claimed.add((row["condition"], row["metric"]))
            elif row["metric"] not in HEADLINE[kind]:
                continue
            rows.append({"corpus": label, "index": index, "condition": row["condition"], "metric": row["metric"],
                         "diff": row["diff"], "diff_low": row["diff_low"], "diff_high": row["diff_high"],
                         "diff_covers": row["diff_covers"], "p_value": row["p_value"],
                         "p_value_low": row["p_value_low"], "p_value_high": row["p_value_high"],
                         "these_names_low": row.get("diff_these_names_low", np.nan),
                         "these_names_high": row.get("diff_these_names_high", np.nan)})
    family = pd.DataFrame(rows, columns=["corpus", "index", "condition", "metric", "diff", "diff_low", "diff_high",
                                         "diff_covers", "p_value", "p_value_low", "p_value_high", "these_names_low",
                                         "these_names_high"])
    family["p_holm"], family["holds"], family["undecided"] = holm_with_bounds(
        *(family[column].to_numpy(dtype=np.float64) for column in ("p_value", "p_value_low", "p_value_high")), alpha)
    for label, frame in frames.items():
        part = family[family["corpus"] == label]
        frame["p_holm"] = np.nan
        for column in ("holds", "undecided"):
            frame[column] = pd.Series([pd.NA] * len(frame), index=frame.index, dtype="object")
        for column in ("p_holm", "holds", "undecided"):
            frame.loc[part["index"].to_numpy(), column] = part[column].to_numpy()
    return family.drop(columns="index")


def claim_verdict(holds: bool, undecided: bool) -> str:
    """A claims-family row's verdict in words (``claims_family``'s ``holds`` and ``undecided``)."""
    return "holds" if holds else UNDECIDED_BY_REPLICATES if undecided else "does not hold"


def replicate_resolution(family: pd.DataFrame, replicate_counts: Mapping[str, int], alpha: float) -> list[str]:
    """Whether the replicates can decide the family at all: a p read off B replicates cannot be shown below
    its Monte-Carlo upper bound at k = 0 (``replicates_to_resolve``), so where that bound is above Holm's first
    threshold (``alpha`` / family size) no difference drawn from those replicates can hold if it ranks first,
    however small its true p. ``replicate_counts``: B for the ``names`` and the ``census`` tables (the
    aggregate's ``--n-boot`` and ``--census-boot``); exact (seed-only) p's need none. Logs a warning and says
    how many would do where they are too few."""
    drawn = family[family["p_value_high"] > family["p_value_low"]]  # an exact p is its own bounds
    if not len(drawn):
        return []
    threshold = alpha / len(family)
    options = {"names": "--n-boot", "census": "--census-boot"}
    parts, short = [], []
    for kind in dict.fromkeys("census" if corpus_kind(c) == "census" else "names" for c in drawn["corpus"]):
        count = replicate_counts[kind]
        floor = monte_carlo_p_bounds(0.0, count)[1]
        parts.append(f"{floor:.2g} with {count} {kind} replicates")
        if floor >= threshold:
            short.append(f"`{options[kind]} {replicates_to_resolve(threshold)}` or more for the {kind} tables")
    text = (f"Replicates against Holm: the family's first threshold is {alpha:g} / {len(family)} = {threshold:.2g}; "
            f"the Monte-Carlo upper bound of a p that no replicate crosses is {' and '.join(parts)}.")
    if short:
        log.warning("too few replicates to decide the claims family: %s", "; ".join(short))
        text += (" Too few: a difference whose p is at that floor cannot hold where it ranks first, however "
                 f"small its true p; {' and '.join(short)} resolve it.")
    return [text, ""]

"""Per-name and per-group bias metrics of Mishra et al. (2020), from streamed slot outcomes.

``NameStatistics`` accumulates, per name, the number of slots, how many were recognised
(exactly a one-token PERSON), what the others got instead, and the PERSON confidences: exact
count, min, max, sum and sum of squares, a fixed histogram, and the values themselves while a
name has at most ``exact_limit`` of them. Percentiles are numpy's default (linear
interpolation between order statistics, ``numpy.percentile``): exact while the values are
kept; beyond the limit each order statistic is read from the histogram (its bin's midpoint),
so the percentile is within half a bin, ``1 / (2 * bins)`` (5e-5 for the default 10,000 bins),
of the exact one. Memory is bounded (``exact_limit`` values per name), and two accumulators
merge exactly (shards) as long as the merged values fit under the limit.

Standard deviations (a name's confidence std; the spreads of name accuracy and median
confidence within a group, Tables 4 and 5) use ``ddof`` (``metrics.std_ddof``): 0, the
population std (numpy's default and this project's), or 1, the sample std (pandas' default).

Definitions (paper Section 2.3):
- accuracy of a name ``p(PER|n)`` = recognised / slots;
- group accuracy ``p_c = sum_n p(n) p(PER|n)``, with ``p(n)`` the name's share of the
  group's slots (uniform in balanced corpora, where it is the mean name accuracy);
- confidence statistics over the slots a tagger recognised (the paper's "entities which
  are predicted as person"); ``confidence_over=all`` uses every slot's P(PER) instead.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from nerbias.bias.types import RECOGNISED, BiasSentence, SlotOutcome
from nerbias.errors import DataFormatError
from nerbias.fileio import atomic_path
from nerbias.validation import POSITIVE_INTEGER, Rule, at_least, check_values, one_of
from nerbias.bias.names import NameList

PERSON_PROBABILITY = "person_probability"
CONFIDENCE_COLUMNS = ["conf_count", "conf_min", "conf_p25", "conf_median", "conf_mean", "conf_std"]


@dataclass
class _Name:
    slots: int = 0
    recognised: int = 0
    labels: Counter = field(default_factory=Counter)
    conf_count: int = 0
    conf_min: float = float("inf")
    conf_max: float = float("-inf")
    conf_sum: float = 0.0
    conf_sumsq: float = 0.0
    histogram: np.ndarray | None = None
    probability_slots: int = 0      # slots with a P(PER), whatever confidence_over says (calibration)
    probability_sum: float = 0.0    # their P(PER) summed
    values: list[np.ndarray] | None = field(default_factory=list)  # None once past exact_limit

    def exact_values(self) -> np.ndarray | None:
        """Every confidence seen, while they are kept (None past the limit)."""
        if self.values is None:
            return None
        if len(self.values) > 1:
            self.values = [np.concatenate(self.values)]
        return self.values[0] if self.values else np.zeros(0)


DEFAULT_EXACT_LIMIT = 250_000  # confidences kept per name: 2 MB each, percentiles exact up to here


# The ``metrics`` config node: how these statistics are taken (bins, confidence_over, exact_limit) and
# the ``ddof`` of their standard deviations.
METRICS_RULES: dict[str, Rule] = {
    "confidence_bins": POSITIVE_INTEGER, "confidence_over": one_of("recognised", "all"),
    "exact_percentiles_max": at_least(0), "std_ddof": one_of(0, 1, description="0 (population) or 1 (sample)")}


@dataclass(frozen=True)
class StatisticsOptions:
    """The ``metrics`` node (configs/evaluate.yaml): how each name's confidences are summarised."""

    confidence_over: str = "recognised"   # confidence statistics over recognised slots (the paper) or all
    confidence_bins: int = 10000          # histogram bins once past exact_percentiles_max
    exact_percentiles_max: int = DEFAULT_EXACT_LIMIT
    std_ddof: int = 0                     # standard deviations: 0 population, 1 sample

    def __post_init__(self) -> None:
        self.check_values(vars(self))

    @classmethod
    def check_values(cls, values: Mapping[str, object], prefix: str = "metrics.") -> None:
        """What the ``metrics`` settings may be (validation.validate checks a config's before any work)."""
        check_values(values, METRICS_RULES, prefix)

    def new_statistics(self) -> "NameStatistics":
        return NameStatistics(bins=self.confidence_bins, confidence_over=self.confidence_over,
                              exact_limit=self.exact_percentiles_max)


class NameStatistics:
    @classmethod
    def check_values(cls, values: Mapping[str, object], prefix: str = "metrics.") -> None:
        """What the ``metrics`` settings may be (validation.validate checks a config's before any work)."""
        check_values(values, METRICS_RULES, prefix)

    def __init__(self, bins: int = 10000, confidence_over: str = "recognised", exact_limit: int = DEFAULT_EXACT_LIMIT):
        self.check_values({"confidence_bins": bins, "confidence_over": confidence_over,
                           "exact_percentiles_max": exact_limit})
        self.bins = bins
        self.confidence_over = confidence_over
        self.exact_limit = int(exact_limit)
        self.names: dict[str, _Name] = defaultdict(_Name)

    def add(self, sentences: Sequence[BiasSentence], outcomes: Sequence[Sequence[SlotOutcome]]) -> None:
        confidences: dict[str, list[float]] = defaultdict(list)
        for sentence, slot_outcomes in zip(sentences, outcomes):
            for slot, outcome in zip(sentence.slots, slot_outcomes):
                stats = self.names[slot.name]
                stats.slots += 1
                if outcome.recognised:
                    stats.recognised += 1
                else:
                    stats.labels[outcome.label] += 1
                if outcome.confidence is not None:
                    stats.probability_slots += 1
                    stats.probability_sum += float(outcome.confidence)
                    if outcome.recognised or self.confidence_over == "all":
                        confidences[slot.name].append(outcome.confidence)
        for name, values in confidences.items():
            self._add_confidences(self.names[name], np.asarray(values, dtype=np.float64))

    def add_arrays(self, names: Sequence[str], name_indices: np.ndarray, labels: Sequence[str],
                   label_indices: np.ndarray, confidences: np.ndarray) -> None:
        """``add`` for outcomes as arrays (``CheckpointSlotTagger.tag_indices``): slot ``k`` holds
        ``names[name_indices[k]]`` labelled ``labels[label_indices[k]]`` with ``confidences[k]``."""
        name_indices, label_indices = np.ravel(name_indices), np.ravel(label_indices)
        confidences = np.ravel(confidences)
        recognised = np.array([label == RECOGNISED for label in labels])[label_indices]
        slots = np.bincount(name_indices, minlength=len(names))
        finite = ~np.isnan(confidences)
        probability_slots = np.bincount(name_indices[finite], minlength=len(names))
        probability_sum = np.bincount(name_indices[finite], weights=confidences[finite], minlength=len(names))
        hits = np.bincount(name_indices[recognised], minlength=len(names))
        other = np.bincount(name_indices[~recognised] * len(labels) + label_indices[~recognised],
                            minlength=len(names) * len(labels)).reshape(len(names), len(labels))
        keep = recognised if self.confidence_over == "recognised" else np.ones_like(recognised)
        order = np.argsort(name_indices[keep], kind="stable")
        kept_names, kept_values = name_indices[keep][order], confidences[keep][order]
        bounds = np.searchsorted(kept_names, np.arange(len(names) + 1))
        for n in np.flatnonzero(slots):
            stats = self.names[names[n]]
            stats.slots += int(slots[n])
            stats.recognised += int(hits[n])
            stats.probability_slots += int(probability_slots[n])
            stats.probability_sum += float(probability_sum[n])
            for label in np.flatnonzero(other[n]):
                stats.labels[labels[label]] += int(other[n, label])
            if bounds[n + 1] > bounds[n]:
                self._add_confidences(stats, kept_values[bounds[n]:bounds[n + 1]])

    def _add_confidences(self, stats: _Name, values: np.ndarray) -> None:
        if stats.histogram is None:
            stats.histogram = np.zeros(self.bins, dtype=np.int64)
        stats.conf_count += len(values)
        stats.conf_min = min(stats.conf_min, float(values.min()))
        stats.conf_max = max(stats.conf_max, float(values.max()))
        stats.conf_sum += float(values.sum())
        stats.conf_sumsq += float((values ** 2).sum())
        index = np.clip((values * self.bins).astype(np.int64), 0, self.bins - 1)
        stats.histogram += np.bincount(index, minlength=self.bins)
        self._keep(stats, [np.array(values, dtype=np.float64)])

    def _keep(self, stats: _Name, chunks: list[np.ndarray] | None) -> None:
        """Keep raw values while the name has at most ``exact_limit`` (then only the histogram)."""
        if stats.values is None or chunks is None or stats.conf_count > self.exact_limit:
            stats.values = None
        else:
            stats.values.extend(chunks)

    def merge(self, other: "NameStatistics") -> "NameStatistics":
        if other.bins != self.bins or other.confidence_over != self.confidence_over:
            raise ValueError("cannot merge statistics with different bins or confidence_over")
        self.exact_limit = min(self.exact_limit, other.exact_limit)
        for name, theirs in other.names.items():
            mine = self.names[name]
            mine.slots += theirs.slots
            mine.recognised += theirs.recognised
            mine.labels.update(theirs.labels)
            mine.probability_slots += theirs.probability_slots
            mine.probability_sum += theirs.probability_sum
            if theirs.conf_count:
                if mine.histogram is None:
                    mine.histogram = np.zeros(self.bins, dtype=np.int64)
                mine.histogram += theirs.histogram
                mine.conf_count += theirs.conf_count
                mine.conf_min = min(mine.conf_min, theirs.conf_min)
                mine.conf_max = max(mine.conf_max, theirs.conf_max)
                mine.conf_sum += theirs.conf_sum
                mine.conf_sumsq += theirs.conf_sumsq
                self._keep(mine, None if theirs.values is None else list(theirs.values))
        return self

    # ----------------------------------------------------------------- persistence (shards)
    def save(self, path: str | Path, metadata: Mapping[str, object]) -> None:
        """Write the statistics (and what produced them) atomically as one ``.npz`` file."""
        import json

        names = sorted(self.names)
        empty = np.zeros(self.bins, dtype=np.int64)
        arrays = {
            "names": np.array(names, dtype=object).astype(str),
            "slots": np.array([self.names[n].slots for n in names], dtype=np.int64),
            "recognised": np.array([self.names[n].recognised for n in names], dtype=np.int64),
            "conf": np.array([[self.names[n].conf_count, self.names[n].conf_min, self.names[n].conf_max,
                               self.names[n].conf_sum, self.names[n].conf_sumsq] for n in names],
                             dtype=np.float64).reshape(len(names), 5),
            "histogram": np.stack([self.names[n].histogram if self.names[n].histogram is not None else empty
                                   for n in names]) if names else np.zeros((0, self.bins), dtype=np.int64),
            "probability": np.array([[self.names[n].probability_slots, self.names[n].probability_sum] for n in names],
                                    dtype=np.float64).reshape(len(names), 2),
            "labels": np.array(json.dumps({n: dict(self.names[n].labels) for n in names})),
            "meta": np.array(json.dumps({"bins": self.bins, "confidence_over": self.confidence_over,
                                         "exact_limit": self.exact_limit, **metadata}, sort_keys=True)),
        }
        # Raw confidences of the names that still keep them: one flat array and per-name lengths (-1: none).
        kept = [self.names[n].exact_values() for n in names]
        arrays["value_counts"] = np.array([-1 if v is None else len(v) for v in kept], dtype=np.int64)
        arrays["values"] = np.concatenate([v for v in kept if v is not None] or [np.zeros(0)])
        arrays["checksum"] = np.array(_checksum(arrays))
        with atomic_path(path) as tmp:
            with open(tmp, "wb") as handle:
                np.savez_compressed(handle, **arrays)

    @classmethod
    def load(cls, path: str | Path) -> tuple["NameStatistics", dict]:
        """Statistics and metadata of a ``save``d file; a truncated, corrupt or altered file is a
        DataFormatError (its content checksum no longer matches)."""
        try:
            return cls._load(path)
        except DataFormatError:
            raise
        except Exception as error:  # zip, npy and json errors of a damaged file
            raise DataFormatError(path, f"unreadable statistics file ({type(error).__name__}: {error})") from None

    @classmethod
    def _load(cls, path: str | Path) -> tuple["NameStatistics", dict]:
        import json

        with np.load(path, allow_pickle=False) as data:
            if "checksum" in data:
                stored = str(data["checksum"])
                if stored != _checksum({key: data[key] for key in data.files if key != "checksum"}):
                    raise DataFormatError(path, "content checksum does not match: the file was altered or damaged")
            meta = json.loads(str(data["meta"]))
            stats = cls(bins=meta["bins"], confidence_over=meta["confidence_over"],
                        exact_limit=meta.get("exact_limit", 0))
            labels = json.loads(str(data["labels"]))
            value_counts = data["value_counts"] if "value_counts" in data else None
            values, offset = (data["values"] if value_counts is not None else None), 0
            for i, name in enumerate(data["names"].tolist()):
                entry = stats.names[name]
                entry.slots, entry.recognised = int(data["slots"][i]), int(data["recognised"][i])
                entry.labels = Counter(labels[name])
                if "probability" in data:  # statistics saved before calibration was measured have none
                    entry.probability_slots = int(data["probability"][i][0])
                    entry.probability_sum = float(data["probability"][i][1])
                count, low, high, total, squares = data["conf"][i].tolist()
                entry.conf_count, entry.conf_min, entry.conf_max = int(count), low, high
                entry.conf_sum, entry.conf_sumsq = total, squares
                entry.histogram = data["histogram"][i].copy() if count else None
                kept = -1 if value_counts is None else int(value_counts[i])
                entry.values = None if kept < 0 else [values[offset:offset + kept].copy()]
                offset += max(kept, 0)
        return stats, meta

    def percentile(self, stats: _Name, q: float) -> float:
        """``numpy.percentile(values, 100 q)`` (linear interpolation): exact from the kept values, else
        from the histogram with each order statistic at its bin's midpoint (within 1 / (2 bins))."""
        exact = stats.exact_values()
        if exact is not None and len(exact) == stats.conf_count:
            return float(np.percentile(exact, 100 * q))
        rank = q * (stats.conf_count - 1)
        low, fraction = int(np.floor(rank)), rank - np.floor(rank)
        cumulative = np.cumsum(stats.histogram)
        order = np.searchsorted(cumulative, [low + 1, min(low + 2, stats.conf_count)])  # bins of x_low, x_low+1
        values = np.clip((order + 0.5) / self.bins, stats.conf_min, stats.conf_max)
        return float(values[0] + fraction * (values[1] - values[0]))

    def std(self, stats: _Name, ddof: int = 0) -> float:
        if stats.conf_count - ddof <= 0:
            return float("nan")
        exact = stats.exact_values()
        if exact is not None and len(exact) == stats.conf_count:
            return float(np.std(exact, ddof=ddof))
        mean = stats.conf_sum / stats.conf_count
        return float(np.sqrt(max(stats.conf_sumsq - stats.conf_count * mean ** 2, 0.0) / (stats.conf_count - ddof)))

    def per_name(self, names: NameList, ddof: int = 0) -> pd.DataFrame:
        rows = []
        for name in names.names:
            stats = self.names.get(name)
            if stats is None or stats.slots == 0:
                continue
            row = {"name": name, "group": names.group_of[name], "sentences": stats.slots,
                   "recognised": stats.recognised, "accuracy": stats.recognised / stats.slots,
                   # mean P(PER) over every slot: with accuracy, the name's calibration (NaN: no confidences)
                   PERSON_PROBABILITY: (stats.probability_sum / stats.probability_slots
                                        if stats.probability_slots and stats.probability_slots == stats.slots
                                        else np.nan)}
            if stats.conf_count:
                row.update(conf_count=stats.conf_count, conf_min=stats.conf_min,
                           conf_p25=self.percentile(stats, 0.25), conf_median=self.percentile(stats, 0.5),
                           conf_mean=stats.conf_sum / stats.conf_count, conf_std=self.std(stats, ddof))
            else:
                row.update({column: (0 if column == "conf_count" else np.nan) for column in CONFIDENCE_COLUMNS})
            rows.append(row)
        return pd.DataFrame(rows, columns=["name", "group", "sentences", "recognised", "accuracy", *CONFIDENCE_COLUMNS,
                                           PERSON_PROBABILITY])

    def label_breakdown(self, names: NameList) -> pd.DataFrame:
        """What each name got when it was not recognised: one row per (name, label)."""
        rows = [{"name": name, "group": names.group_of[name], "label": label, "count": count,
                 "share": count / self.names[name].slots}
                for name in names.names if name in self.names
                for label, count in sorted(self.names[name].labels.items())]
        return pd.DataFrame(rows, columns=["name", "group", "label", "count", "share"])


def _checksum(arrays: Mapping[str, np.ndarray]) -> str:
    """sha256 over every array (key, dtype, shape, bytes), in key order."""
    import hashlib

    digest = hashlib.sha256()
    for key in sorted(arrays):
        array = np.ascontiguousarray(arrays[key])
        digest.update(f"{key}|{array.dtype.str}|{array.shape}|".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def _spread(values: pd.Series, prefix: str, ddof: int = 0) -> dict[str, float]:
    values = values.dropna()
    if values.empty:
        return {f"{prefix}_{k}": np.nan for k in ("min", "mean", "std", "median")}
    return {f"{prefix}_min": float(values.min()), f"{prefix}_mean": float(values.mean()),
            f"{prefix}_std": float(values.std(ddof=ddof)), f"{prefix}_median": float(values.median())}


def per_group(per_name: pd.DataFrame, names: NameList, ddof: int = 0) -> pd.DataFrame:
    """Group accuracy p_c (Tables 3, 7), spread of name accuracy (Table 4) and of median
    confidence (Table 5), and the share of names below the OOV name (Figures 1, 2, 4-8).
    Spreads' standard deviations use ``ddof`` (0: population, 1: sample).

    Rows: each group in list order, then ``ALL`` (every non-OOV name), then the OOV name.
    """
    oov = per_name[per_name["name"] == names.oov] if names.oov else per_name.iloc[0:0]
    oov_accuracy = float(oov["accuracy"].iloc[0]) if len(oov) else np.nan
    oov_p25 = float(oov["conf_p25"].iloc[0]) if len(oov) else np.nan
    rows = []
    groups = [(group, per_name[per_name["group"] == group]) for group in names.groups()]
    groups.append(("ALL", per_name[per_name["name"] != names.oov]))
    if len(oov):
        groups.append((names.group_of[names.oov], oov))
    for group, frame in groups:
        if frame.empty:
            continue
        weights = frame["sentences"] / frame["sentences"].sum()  # p(n) within the group
        row = {"group": group, "names": len(frame), "sentences": int(frame["sentences"].sum()),
               "accuracy": float((weights * frame["accuracy"]).sum())}
        row.update(_spread(frame["accuracy"], "name_accuracy", ddof))
        row.update(_spread(frame["conf_median"], "median_confidence", ddof))
        row.update(_spread(frame["conf_p25"], "p25_confidence", ddof))
        row["share_below_oov_accuracy"] = float((frame["accuracy"] < oov_accuracy).mean()) if len(oov) else np.nan
        row["share_below_oov_p25_confidence"] = (float((frame["conf_p25"] < oov_p25).mean())
                                                 if len(oov) and not np.isnan(oov_p25) else np.nan)
        rows.append(row)
    return pd.DataFrame(rows)


def summary_scalars(groups: pd.DataFrame, prefix: str) -> dict[str, float]:
    """Flat ``{prefix/<group>/accuracy: ...}`` for W&B summaries and metrics.json."""
    out = {}
    for row in groups.to_dict("records"):
        for key in ("accuracy", "name_accuracy_std", "median_confidence_median", "share_below_oov_accuracy"):
            value = row.get(key)
            if value is not None and not (isinstance(value, float) and np.isnan(value)):
                out[f"{prefix}/{row['group']}/{key}"] = float(value)
    return out

"""The bias benchmarks' evaluation loop and results (``bias.benchmarks`` runs them): a slot tagger over a
name-substitution corpus, seeded samples, shards, the result tables, plots and W&B summaries.

Outputs in the run directory (all written atomically):
- ``per_name.csv``: name, group, sentences (name slots), recognised, accuracy, confidence statistics;
- ``per_group.csv``: group accuracy, spread of name accuracy and of median confidence, shares below OOV;
- ``label_breakdown.csv``: what each name got when it was not recognised (LOC, ORG, none, partial:PER, ...);
- ``ecdf_accuracy_by_{group,gender,race}.png``, ``ecdf_conf_p25_by_group.png``;
- census: ``census_errors.csv`` (year, gender, template, type1_w, ... type3_u), ``census_labels.csv``,
  ``census_errors_template<K>.png``;
- probes (person vs place contexts): see ``nerbias.bias.probes``;
- with ``name_profile.enabled``, per_name.csv and census_labels.csv also carry each name's ambiguity
  profile (``nerbias.bias.name_profile``);
- ``metrics.json``: the summary scalars also sent to W&B.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from tqdm.auto import tqdm

from nerbias.bias.corpora import NameSubstitutionCorpus, shard_bounds
from nerbias.bias.name_profile import NameProfileJoin
from nerbias.bias.names import NameList
from nerbias.bias.plots import plot_ecdf
from nerbias.bias.statistics import NameStatistics, StatisticsOptions, per_group, summary_scalars
from nerbias.bias.tagging import SlotTagger
from nerbias.bias.types import corpus_label, corpus_title, partial_note, result_file_name
from nerbias.errors import NerbiasError
from nerbias.validation import POSITIVE_INTEGER, at_least, optional
from nerbias.fileio import FILE_RECORD, atomic_files, atomic_write_json, record_files, write_csv
from nerbias.loggers import NullLogger

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EvaluationRun:
    """What every benchmark of one evaluation takes besides its corpus node: the evaluation config's
    ``metrics`` and ``name_profile`` nodes and its shard settings (``shards_dir``: where the shards of a
    sharded evaluation go; ``merge_shards``: score nothing, merge the finished shards)."""

    metrics: StatisticsOptions = field(default_factory=StatisticsOptions)
    name_profile: NameProfileJoin = field(default_factory=NameProfileJoin)
    shards_dir: str | None = None
    merge_shards: bool = False


@dataclass(frozen=True)
class SampleSettings:
    """Which sentences of a name-substitution corpus are scored and how: a seeded ``sample`` (None: every
    sentence), in shards of ``num_shards`` (``shard``: one index, None: every unfinished one), tagged
    ``batch_size`` sentences a call."""

    sample: int | None = None
    seed: int = 0
    shard: int | None = None
    num_shards: int = 1
    batch_size: int = 1024


SAMPLE_RULES = {"sample": optional(POSITIVE_INTEGER, "every sentence"), "seed": at_least(0),
                "num_shards": POSITIVE_INTEGER, "batch_size": POSITIVE_INTEGER}


def selected_indices(settings: SampleSettings, corpus: NameSubstitutionCorpus, shard: int = 0,
                     num_shards: int = 1) -> tuple[Iterator[int], int, str]:
    """The indices shard ``shard`` of ``num_shards`` scores, streamed: of a seeded sample or
    of the whole corpus. Shards are contiguous parts of that sequence, together covering it
    exactly once. A sample is streamed in generation order and each chunk sorted (see
    ``sorted_chunks``), so batches are runs of one template while memory stays flat.
    """
    sample = settings.sample
    total = int(sample) if sample else len(corpus)
    start, stop = shard_bounds(total, num_shards, shard)
    if sample:
        stream = itertools.islice(corpus.iter_sample(total, int(settings.seed)), start, stop)
        what = f"sample of {sample} (seed {settings.seed})"
    else:
        stream = iter(range(start, stop))
        what = "whole corpus"
    if num_shards > 1:
        what += f", shard {shard + 1}/{num_shards}"
    return stream, stop - start, what


def sorted_chunks(indices: Iterator[int], chunk: int) -> Iterator[list[int]]:
    while True:
        block = sorted(itertools.islice(indices, chunk))
        if not block:
            return
        yield block


def count_outcomes(tagger: SlotTagger, corpus: NameSubstitutionCorpus, indices: Sequence[int], batch_size: int,
                   stats: NameStatistics, progress: Callable[[int], object] = lambda n: None) -> None:
    """Tag the sentences at ``indices`` in batches and add their slot outcomes to ``stats``.

    Our word + char checkpoints tag by index (arrays end to end, no sentence objects); other
    taggers get ``BiasSentence`` batches.
    """
    by_index = tagger.can_tag_indices
    for first in range(0, len(indices), batch_size):
        part = indices[first:first + batch_size]
        if by_index:
            names, tags, confidences = tagger.tag_indices(corpus, part)
            stats.add_arrays(corpus.names, names, tagger.slot_labels, tags, confidences)
        else:
            batch = [corpus.sentence(i) for i in part]
            stats.add(batch, tagger.tag(batch))
        progress(len(part))


def score_shard(label: str, settings: SampleSettings, statistics: StatisticsOptions, corpus: NameSubstitutionCorpus,
                tagger: SlotTagger, shard: int, num_shards: int) -> tuple[NameStatistics, int]:
    indices, count, what = selected_indices(settings, corpus, shard, num_shards)
    log.info("tagging %d sentences (%s) with %s", count, what, tagger.name)
    stats = statistics.new_statistics()
    with tqdm(total=count, desc=f"{label} sentences", unit="sent") as progress:
        for block in sorted_chunks(indices, chunk=max(settings.batch_size * 64, 65536)):
            count_outcomes(tagger, corpus, block, settings.batch_size, stats, progress.update)
    return stats, count


def shard_identity(label: str, settings: SampleSettings, corpus: NameSubstitutionCorpus, names: str | None,
                   tagger: SlotTagger) -> dict[str, Any]:
    """What must agree between the shards of one evaluation: corpus, sample, names, and the tagger (its
    name and what it declares, ``SlotTagger.identity``: a model file by content, how a Hugging Face
    tagger reads its confidence and length limit)."""
    return {"corpus": label, "lowercase": bool(corpus.lowercase), "sample": settings.sample,
            "seed": int(settings.seed), "num_shards": settings.num_shards, "rule": getattr(corpus, "rule", None),
            "names": str(names), "tagger": tagger.name,
            **{f"tagger_{key}": value for key, value in tagger.identity().items()}}


def read_shard(path: Path, shard: int, identity: dict[str, Any]) -> tuple[NameStatistics, dict[str, Any]]:
    """A finished shard's statistics, refused (NerbiasError naming the file) unless it is shard ``shard``
    of this very evaluation and its content checksum holds."""
    stats, meta = NameStatistics.load(path)
    if meta.get("shard") != shard:
        raise NerbiasError(f"{path}: holds shard {meta.get('shard')}, not {shard} (copied or renamed?)")
    differing = sorted(key for key in identity if meta.get(key) != identity[key])
    if differing:
        raise NerbiasError(f"{path}: shard of another evaluation: " +
                           ", ".join(f"{k} {meta.get(k)!r} vs {identity[k]!r}" for k in differing))
    return stats, meta


def merge_shards(label: str, lowercase: bool, run: EvaluationRun, names: NameList, shards_dir: Path, num_shards: int,
                 path_of, identity: dict[str, Any], output_dir: Path, logger: NullLogger) -> dict[str, Any]:
    finished = [i for i in range(num_shards) if path_of(i).exists()]
    if not finished:
        raise NerbiasError(f"{shards_dir}: no finished shard of {num_shards} to merge")
    merged, tagger_name, sentences = None, None, 0
    for i in finished:
        stats, meta = read_shard(path_of(i), i, identity)
        merged = stats if merged is None else merged.merge(stats)
        sentences += meta["sentences"]
        tagger_name = meta.get("tagger")
    missing = sorted(set(range(num_shards)) - set(finished))
    if missing:
        log.warning("merging %d of %d shards; missing: %s", len(finished), num_shards, missing)
    return write_name_results(merged, names, label, lowercase, run, output_dir, logger,
                              extra={"sentences": sentences, "tagger": tagger_name,
                                     "shards_merged": len(finished), "shards_missing": missing})


def write_name_results(stats: NameStatistics, names: NameList, label: str, lowercase: bool, run: EvaluationRun,
                       output_dir: Path, logger: NullLogger, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    ddof = int(run.metrics.std_ddof)
    if not any(entry.slots for entry in stats.names.values()):  # nothing final for an empty evaluation
        raise NerbiasError(f"{label}: the evaluation scored no sentence (corpus.sample, shard or batch "
                           "sizes leave nothing to tag); no result written")
    table = stats.per_name(names, ddof=ddof)
    groups = per_group(table, names, ddof=ddof)
    table = run.name_profile.attach(table)
    breakdown = stats.label_breakdown(names)
    prefix = corpus_label(label, lowercase)
    where = f"{corpus_title(label, lowercase)}, tagger {(extra or {}).get('tagger', '?')}"
    partial = partial_note(extra or {})
    if partial:  # where a reader looks: the file names and every figure's title
        where = f"{where} ({partial})"
    figures = {f"ecdf_accuracy_by_{by}": ("accuracy", by, f"{where}: name accuracy by {by}")
               for by in ("group", "gender", "race")
               if by == "group" or (names.gender_of if by == "gender" else names.race_of)}
    if table["conf_p25"].notna().any():
        figures["ecdf_conf_p25_by_group"] = ("conf_p25", "group",
                                             f"{where}: 25th percentile of each name's PERSON confidence")
    tables = {"per_name": table, "per_group": groups, "label_breakdown": breakdown}
    files = {key: result_file_name(key, ".csv", bool(partial)) for key in tables}
    files.update({key: result_file_name(key, ".png", bool(partial)) for key in figures})
    images = {key: output_dir / files[key] for key in figures}
    scalars = summary_scalars(groups, prefix)
    with atomic_files([output_dir / files[k] for k in tables] + list(images.values()) + [output_dir / "metrics.json"]
                      ) as tmp:
        for path, frame in zip(tmp, tables.values()):  # every result file final together, or none
            write_csv(path, frame)
        for path, (column, by, title) in zip(tmp[len(tables):], figures.values()):
            plot_ecdf(table, names, column, path, by=by, title=title)
        record = record_files({files[key]: path for key, path in zip(tables, tmp)})  # report.py checks them
        atomic_write_json(tmp[-1], {"metrics": scalars, **(extra or {}), FILE_RECORD: record})
    for key in files:  # the other kind's results (a partial merge after a full one, or back) are stale now
        (output_dir / result_file_name(key, Path(files[key]).suffix, not partial)).unlink(missing_ok=True)
    if partial:
        log.warning("results are PARTIAL (%s): written as %s", partial, ", ".join(files[k] for k in tables))
    logger.summary(scalars)
    logger.table(f"{prefix}/per_name", table)
    logger.table(f"{prefix}/per_group", groups)
    logger.table(f"{prefix}/label_breakdown", breakdown)
    for key, path in images.items():
        logger.image(f"{prefix}/{key}", path)
    print(groups[["group", "names", "sentences", "accuracy", "name_accuracy_min", "name_accuracy_std",
                  "median_confidence_median", "share_below_oov_accuracy"]].to_string(index=False))
    return scalars


__all__ = ["EvaluationRun", "SampleSettings", "count_outcomes", "merge_shards", "score_shard",
           "shard_identity", "write_name_results"]

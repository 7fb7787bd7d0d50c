"""Bias evaluation runs: a tagger on Winogender, In-Situ or census; tables, plots, W&B.

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

import functools
import itertools
import logging
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pandas as pd
from omegaconf import DictConfig
from tqdm.auto import tqdm

from nerbias.bias import census
from nerbias.bias.corpora import NameSubstitutionCorpus, shard_bounds
from nerbias.bias.name_profile import attach_profile
from nerbias.bias.names import NameList, load_names
from nerbias.bias.plots import plot_census_errors, plot_ecdf, plot_probe_recall
from nerbias.bias.probes import new_statistics, probe_scalars, probe_tables
from nerbias.bias.statistics import DEFAULT_EXACT_LIMIT, NameStatistics, per_group, summary_scalars
from nerbias.bias.types import corpus_label, corpus_title, partial_note, result_file_name
from nerbias.building import build
from nerbias.errors import NerbiasError
from nerbias.fileio import FILE_RECORD, atomic_files, atomic_write_json, record_files, remove_orphans, write_csv
from nerbias.loggers import NullLogger

log = logging.getLogger(__name__)


# What this module reads from a corpus node besides its ``_target_``'s parameters: the evaluation
# loop's settings (the census, built by no target, lists all of its own), the statistics' settings
# (``metrics``; the name profile join's are name_profile.PROFILE_KEYS): validation.check_config_keys.
CORPUS_LOOP_KEYS = ("name", "paper", "evaluate", "batch_size", "sample", "seed", "shard", "num_shards")
CENSUS_KEYS = ("name", "paper", "evaluate", "batch_size", "ssa", "first_year", "last_year", "template", "lowercase",
               "partial_person_is_person", "names", "pool_exclude")
METRICS_KEYS = ("confidence_over", "confidence_bins", "exact_percentiles_max", "std_ddof")


def build_corpus(cfg: DictConfig, names: NameList) -> NameSubstitutionCorpus:
    """The name-substitution corpus of the ``corpus`` group's ``_target_``, filled with ``names``."""
    return build(cfg, names=names.names)


def selected_indices(cfg: DictConfig, corpus: NameSubstitutionCorpus, shard: int = 0,
                     num_shards: int = 1) -> tuple[Iterator[int], int, str]:
    """The indices shard ``shard`` of ``num_shards`` scores, streamed: of a seeded sample or
    of the whole corpus. Shards are contiguous parts of that sequence, together covering it
    exactly once. A sample is streamed in generation order and each chunk sorted (see
    ``sorted_chunks``), so batches are runs of one template while memory stays flat.
    """
    sample = cfg.get("sample")
    total = int(sample) if sample else len(corpus)
    start, stop = shard_bounds(total, num_shards, shard)
    if sample:
        stream = itertools.islice(corpus.iter_sample(total, int(cfg.seed)), start, stop)
        what = f"sample of {sample} (seed {cfg.seed})"
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


def count_outcomes(tagger, corpus: NameSubstitutionCorpus, indices: Sequence[int], batch_size: int,
                   stats: NameStatistics, progress: Callable[[int], object] = lambda n: None) -> None:
    """Tag the sentences at ``indices`` in batches and add their slot outcomes to ``stats``.

    Our word + char checkpoints tag by index (arrays end to end, no sentence objects); other
    taggers get ``BiasSentence`` batches.
    """
    by_index = getattr(tagger, "can_tag_indices", False)
    for first in range(0, len(indices), batch_size):
        part = indices[first:first + batch_size]
        if by_index:
            names, tags, confidences = tagger.tag_indices(corpus, part)
            stats.add_arrays(corpus.names, names, tagger.slot_labels, tags, confidences)
        else:
            batch = [corpus.sentence(i) for i in part]
            stats.add(batch, tagger.tag(batch))
        progress(len(part))


def score_shard(cfg: DictConfig, corpus: NameSubstitutionCorpus, tagger, shard: int, num_shards: int
                ) -> tuple[NameStatistics, int]:
    indices, count, what = selected_indices(cfg.corpus, corpus, shard, num_shards)
    log.info("tagging %d sentences (%s) with %s", count, what, tagger.name)
    stats = NameStatistics(bins=cfg.metrics.confidence_bins, confidence_over=cfg.metrics.confidence_over,
                           exact_limit=cfg.metrics.get("exact_percentiles_max", DEFAULT_EXACT_LIMIT))
    with tqdm(total=count, desc=f"{cfg.corpus.name} sentences", unit="sent") as progress:
        for block in sorted_chunks(indices, chunk=max(cfg.corpus.batch_size * 64, 65536)):
            count_outcomes(tagger, corpus, block, cfg.corpus.batch_size, stats, progress.update)
    return stats, count


def file_fingerprint(path: Any) -> str | None:
    """sha256 of a tagger's file (a checkpoint, a Flair model) or of every file of its folder (a saved
    Hugging Face model: names and contents), so shards of another model never merge; None otherwise."""
    import hashlib

    if not path or not Path(str(path)).exists():
        return None
    root = Path(str(path))
    files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
    digest = hashlib.sha256()
    for file in files:
        if root.is_dir():
            digest.update(str(file.relative_to(root)).encode() + b"\0")
        with open(file, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def shard_identity(cfg: DictConfig, num_shards: int) -> dict[str, Any]:
    """What must agree between the shards of one evaluation: corpus, sample, names, tagger (by content,
    and how a Hugging Face tagger reads its confidence and length limit)."""
    c, t = cfg.corpus, cfg.tagger
    return {"corpus": c.name, "lowercase": bool(c.get("lowercase")), "sample": c.get("sample"),
            "seed": int(c.seed), "num_shards": num_shards, "rule": c.get("rule"), "names": str(c.get("names")),
            "tagger_kind": t.get("kind"), "tagger_path": str(t.get("path")), "tagger_model": t.get("model"),
            "tagger_fingerprint": file_fingerprint(t.get("path") or t.get("model")),
            "tagger_confidence": t.get("confidence"), "tagger_max_length": t.get("max_length"),
            "tagger_overflow": t.get("overflow")}


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


def evaluate_names(cfg: DictConfig, output_dir: Path, logger: NullLogger) -> dict[str, Any]:
    """Score one shard, every missing shard, or merge finished shards (``corpus.num_shards > 1``).

    Shard files ``<shards_dir>/shard-<i>-of-<n>.npz`` are written atomically and carry their
    identity (shard index and count, corpus, names, tagger by content) and a content checksum. A
    rerun skips the shards that are finished and valid, and redoes any that are unreadable,
    damaged or of another evaluation; a killed shard leaves no file under its final name.
    """
    names = load_names(cfg.corpus.get("names"))
    corpus = build_corpus(cfg.corpus, names)
    num_shards = int(cfg.corpus.get("num_shards", 1))
    shard = cfg.corpus.get("shard")
    if num_shards == 1:
        tagger = build(cfg.tagger)
        stats, count = score_shard(cfg, corpus, tagger, 0, 1)
        return write_name_results(stats, names, cfg, output_dir, logger,
                                  extra={"sentences": count, "tagger": tagger.name})
    shards_dir = Path(cfg.shards_dir)
    path_of = lambda i: shards_dir / f"shard-{i:05d}-of-{num_shards:05d}.npz"  # noqa: E731
    identity = shard_identity(cfg, num_shards)
    todo = [int(shard)] if shard is not None else list(range(num_shards))
    if not cfg.get("merge_shards"):  # merge_shards=true only merges what is finished
        missing = []
        for i in todo:
            if not path_of(i).exists():
                missing.append(i)
                continue
            try:
                read_shard(path_of(i), i, identity)
                log.info("shard %d/%d already done: %s", i + 1, num_shards, path_of(i))
            except NerbiasError as error:
                log.warning("redoing shard %d/%d: %s", i + 1, num_shards, error)
                missing.append(i)
        if missing:
            tagger = build(cfg.tagger)
            for i in missing:
                for orphan in remove_orphans(shards_dir, path_of(i).name):  # a killed earlier write of this shard
                    log.info("removed %s, left by a killed write", orphan)
                stats, count = score_shard(cfg, corpus, tagger, i, num_shards)
                stats.save(path_of(i), {**identity, "shard": i, "sentences": count, "tagger": tagger.name})
        if shard is not None:
            return {"shard": int(shard)}
    return merge_shards(cfg, names, shards_dir, num_shards, path_of, identity, output_dir, logger)


def merge_shards(cfg: DictConfig, names: NameList, shards_dir: Path, num_shards: int, path_of,
                 identity: dict[str, Any], output_dir: Path, logger: NullLogger) -> dict[str, Any]:
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
    return write_name_results(merged, names, cfg, output_dir, logger,
                              extra={"sentences": sentences, "tagger": tagger_name,
                                     "shards_merged": len(finished), "shards_missing": missing})


def write_name_results(stats: NameStatistics, names: NameList, cfg: DictConfig, output_dir: Path,
                       logger: NullLogger, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    ddof = int(cfg.metrics.get("std_ddof", 0))
    if not any(entry.slots for entry in stats.names.values()):  # nothing final for an empty evaluation
        raise NerbiasError(f"{cfg.corpus.name}: the evaluation scored no sentence (corpus.sample, shard or batch "
                           "sizes leave nothing to tag); no result written")
    table = stats.per_name(names, ddof=ddof)
    groups = per_group(table, names, ddof=ddof)
    table = attach_profile(table, cfg)
    breakdown = stats.label_breakdown(names)
    prefix = corpus_label(cfg.corpus.name, bool(cfg.corpus.get("lowercase")))
    where = f"{corpus_title(cfg.corpus.name, bool(cfg.corpus.get('lowercase')))}, tagger {(extra or {}).get('tagger', '?')}"
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


def tag_census_names(tagger, table: census.SsaTable, templates: Sequence[int], ccfg: DictConfig
                     ) -> tuple[dict[int, np.ndarray], float]:
    """Each distinct name's census label in each template (one sentence per name, reused across years),
    and the seconds spent inside the tagger."""
    names = table.names.tolist()
    labels, seconds = {}, 0.0
    partial_person_is_person = bool(ccfg.partial_person_is_person)  # read once: a config lookup costs microseconds
    census_label: dict[str, str] = {}  # outcome label -> census label; a handful of distinct labels
    for template in templates:
        sentences = census.census_sentences(names, template, lowercase=ccfg.lowercase)
        per_name = np.empty(len(names), dtype=object)
        batch_size = int(ccfg.batch_size)
        for first in tqdm(range(0, len(sentences), batch_size), desc=f"census template {template}", unit="batch"):
            batch = sentences[first:first + batch_size]
            started = time.perf_counter()
            tagged = tagger.tag(batch)
            seconds += time.perf_counter() - started
            for outcomes in tagged:
                label = outcomes[0].label
                if label not in census_label:
                    census_label[label] = census.outcome_to_census_label(label, partial_person_is_person)
            per_name[first:first + len(batch)] = [census_label[outcomes[0].label] for outcomes in tagged]
        labels[template] = per_name
    return labels, seconds


def label_census_by_tagging(tagger, table: census.SsaTable, templates: Sequence[int], ccfg: DictConfig
                            ) -> tuple[census.CensusOutcomes, pd.DataFrame, float]:
    """A sentence tagger's census outcomes, ``census_labels.csv`` and seconds inside the tagger."""
    log.info("census: %d distinct names x %d templates, each tagged once and reused across years",
             len(table.names), len(templates))
    labels, seconds = tag_census_names(tagger, table, templates, ccfg)
    label_table = pd.DataFrame({"name": np.tile(table.names, len(templates)),
                                "template": np.repeat(np.asarray(templates, dtype=np.int64), len(table.names)),
                                "label": np.concatenate([labels[template] for template in templates])})
    return census.CensusOutcomes.from_name_labels(table, labels), label_table, seconds


def evaluate_census(cfg: DictConfig, output_dir: Path, logger: NullLogger) -> dict[str, Any]:
    """The census benchmark with arrays: the SSA files read once into codes, each distinct name tagged
    once per template, the error types counted by grouped sums (census.CensusOutcomes.errors)."""
    started = time.perf_counter()
    ccfg = cfg.corpus
    years = range(int(ccfg.first_year), int(ccfg.last_year) + 1)
    table = census.load_ssa(ccfg.ssa, years=years)
    subset = str(ccfg.get("names") or "all")
    if subset != "all":
        excluded = [name for path in (ccfg.get("pool_exclude") or [None]) for name in load_names(path).names]
        total = len(table.names)
        table = census.select_names(table, subset, excluded)
        log.info("census: %s names only: %d of %d distinct names", subset, len(table.names), total)
    templates = [int(ccfg.template)] if ccfg.get("template") else list(census.TEMPLATES)
    tagger = build(cfg.tagger)
    tagger_name = tagger.name
    # A census labeller (published predictions) labels the rows itself; a sentence tagger tags each name.
    label = getattr(tagger, "label_census", None) or functools.partial(label_census_by_tagging, tagger, ccfg=ccfg)
    outcomes, label_table, tag_seconds = label(table, templates)
    errors = outcomes.errors()
    scalars: dict[str, Any] = {}
    by_template = list(errors.groupby("template"))
    images = [output_dir / f"census_errors_template{template}.png" for template, _ in by_template]
    for template, part in by_template:
        wide = part.pivot(index="year", columns="gender", values="type1_w")
        scalars[f"census/template{template}/years_female_type1_w_above_male"] = int((wide["F"] > wide["M"]).sum())
        for gender in ("F", "M"):
            for column in ("type1_w", "type1_u", "type2_w", "type3_w"):
                scalars[f"census/template{template}/{gender}/{column}_mean_over_years"] = float(
                    part.loc[part["gender"] == gender, column].mean())
    scalars["census/years"] = len(years)
    scalars["census/distinct_names"] = len(table.names)
    finals = [output_dir / "census_errors.csv", output_dir / "census_labels.csv", *images, output_dir / "metrics.json"]
    with atomic_files(finals) as tmp:  # every result file final together, or none
        write_csv(tmp[0], errors)
        write_csv(tmp[1], attach_profile(label_table, cfg))
        for path, (template, part) in zip(tmp[2:-1], by_template):
            plot_census_errors(part, path, template=template,
                               tagger=f"{tagger_name}{' (lower-cased sentences)' if ccfg.lowercase else ''}")
        atomic_write_json(tmp[-1], {"metrics": scalars, "tagger": tagger_name,
                                    FILE_RECORD: record_files({p.name: t for p, t in zip(finals[:2], tmp[:2])})})
    for (template, _), image in zip(by_template, images):
        logger.image(f"census/template{template}/errors", image)
    logger.summary(scalars)
    logger.table("census/errors", errors)
    for key, value in scalars.items():
        print(f"{key}: {value:.4f}" if isinstance(value, float) else f"{key}: {value}")
    wall = time.perf_counter() - started
    log.info("census: %.1f s in all: %.1f s inside the tagger, %.1f s outside it (%.0f%% of the wall time)",
             wall, tag_seconds, wall - tag_seconds, 100 * (wall - tag_seconds) / wall if wall else 0.0)
    return scalars


def evaluate_probes(cfg: DictConfig, output_dir: Path, logger: NullLogger) -> dict[str, Any]:
    """``corpus=probes``: every name in every person and place template; PERSON recall in person
    contexts, LOCATION recall in place contexts (``nerbias.bias.probes``)."""
    names = load_names(cfg.corpus.get("names"))
    probes = build_corpus(cfg.corpus, names)
    tagger = build(cfg.tagger)
    stats = {}
    for context, corpus in probes.corpora().items():
        log.info("probes: tagging %d %s-context sentences with %s", len(corpus), context, tagger.name)
        stats[context] = new_statistics(cfg.metrics)
        count_outcomes(tagger, corpus, list(range(len(corpus))), cfg.corpus.batch_size, stats[context])
    table, groups = probe_tables(stats["person"], stats["place"], names, ddof=int(cfg.metrics.get("std_ddof", 0)))
    table = attach_profile(table, cfg)
    lowercase = bool(cfg.corpus.get("lowercase"))
    prefix = corpus_label(cfg.corpus.name, lowercase)
    scalars = probe_scalars(groups, prefix)
    tables = {"per_name.csv": table, "per_group.csv": groups,
              "label_breakdown.csv": stats["person"].label_breakdown(names),
              "place_label_breakdown.csv": stats["place"].label_breakdown(names)}
    image = output_dir / "probes_recall.png"
    with atomic_files([output_dir / n for n in tables] + [image, output_dir / "metrics.json"]) as tmp:
        for path, frame in zip(tmp, tables.values()):  # every result file final together, or none
            write_csv(path, frame)
        plot_probe_recall(table, names, tmp[-2], title=f"{corpus_title(cfg.corpus.name, lowercase)}, tagger "
                                                      f"{tagger.name}: one point per name")
        atomic_write_json(tmp[-1], {"metrics": scalars, "tagger": tagger.name,
                                    "sentences": {c: len(corpus) for c, corpus in probes.corpora().items()}})
    logger.summary(scalars)
    logger.table(f"{prefix}/per_name", table)
    logger.table(f"{prefix}/per_group", groups)
    logger.image(f"{prefix}/probes_recall", image)
    print(groups[["group", "names", "accuracy", "place_recall"]].rename(
        columns={"accuracy": "person_recall"}).to_string(index=False))
    return scalars


# What each evaluation reads from its corpus node besides the node's ``_target_`` parameters (the
# corpus object's): validation.check_config_keys, through tasks.config_reads.
EVALUATION_KEYS = {evaluate_names: CORPUS_LOOP_KEYS, evaluate_probes: CORPUS_LOOP_KEYS, evaluate_census: CENSUS_KEYS}

__all__ = ["EVALUATION_KEYS", "evaluate_census", "evaluate_names", "evaluate_probes"]

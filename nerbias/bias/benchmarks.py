"""Every bias corpus is a benchmark: one class each, named by its corpus node's ``_target_``, built from the
node's keys (its constructor's arguments) and the evaluation's shared settings (``runner.EvaluationRun``),
with one entry point, ``evaluate(tagger, output_dir, logger) -> metrics``.

- ``NameSubstitutionBenchmark``: Winogender and In-Situ (any ``corpora.NameSubstitutionCorpus``, the node's
  ``source``), sharded or not;
- ``ProbesBenchmark``: the paired person / place probes (``probes.PairedProbes``);
- ``CensusBenchmark``: the census benchmark (any tagger's census labeller, ``tagging.Tagger.census_labeller``).

CoNLL-03 is ``scoring.Conll2003Benchmark`` (scoring lies above nothing in ``bias``), the dev probe
``dev_probe.DevProbeBenchmark``. A benchmark asks the tagger for what it needs (``slot_tagger``,
``census_labeller``, ``identity``) and never tests its type. Outputs: ``bias.runner``.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from nerbias.bias import census
from nerbias.bias.names import load_names
from nerbias.bias.plots import plot_census_errors, plot_probe_recall
from nerbias.bias.probes import probe_scalars, probe_tables
from nerbias.bias.runner import (SAMPLE_RULES, EvaluationRun, SampleSettings, count_outcomes, merge_shards, read_shard, score_shard,
                                 shard_identity, write_name_results)
from nerbias.bias.tagging import CensusOptions, Tagger
from nerbias.bias.types import corpus_label, corpus_title
from nerbias.bias.ssa import load_ssa
from nerbias.errors import NerbiasError
from nerbias.fileio import FILE_RECORD, atomic_files, atomic_write_json, record_files, remove_orphans, write_csv
from nerbias.loggers import NullLogger
from nerbias.validation import BOOLEAN, POSITIVE_INTEGER, ConfigError, Rule, check_values

log = logging.getLogger(__name__)

TEMPLATE = Rule(lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 9),
                "1-9, or null (all nine)")
CENSUS_RULES = {**census.CENSUS_RULES, "template": TEMPLATE, "batch_size": POSITIVE_INTEGER, "lowercase": BOOLEAN,
                "partial_person_is_person": BOOLEAN}


NAMES_RULES = {"lowercase": BOOLEAN, "batch_size": POSITIVE_INTEGER}


class _NamesInSentences:
    """What the benchmarks that put names into sentences share: the corpus label (``name``; ``paper`` is
    the W&B tag of the paper it comes from), the ``source`` of sentences (a partial that takes the names
    and the casing), the name list (``names``: a CSV, null for the packaged one) and the evaluation's
    shared settings (``run``)."""

    RULES: Mapping[str, Rule] = NAMES_RULES

    def __init__(self, name: str, paper: str, source: Callable[..., Any], names: str | None = None,
                 lowercase: bool = False, batch_size: int = 1024, run: EvaluationRun | None = None):
        self.check_values({"lowercase": lowercase, "batch_size": batch_size})
        given = sorted(set(getattr(source, "keywords", None) or ()) & {"names", "lowercase"})
        if given:  # the benchmark passes them when it builds the sentences: a value here would be overridden
            raise ConfigError(f"corpus.source.{given[0]}: set by the benchmark from corpus.{given[0]}; remove it")
        self.name, self.paper, self.source, self.names = str(name), paper, source, names
        self.lowercase, self.batch_size = bool(lowercase), int(batch_size)
        self.run = run or EvaluationRun()

    @classmethod
    def check_values(cls, values: Mapping[str, Any], prefix: str = "corpus.") -> None:
        """What the corpus node's values may be (validation checks every corpus node naming this benchmark,
        before any work; so does every construction)."""
        check_values(values, cls.RULES, prefix)

    def _start(self, tagger: Tagger):
        slot_tagger = tagger.slot_tagger(self.name)  # a tagger that cannot tag sentences stops here
        names = load_names(self.names)
        return slot_tagger, names, self.source(names=names.names, lowercase=self.lowercase)


class NameSubstitutionBenchmark(_NamesInSentences):
    """``corpus=winogender``, ``corpus=insitu``: names substituted into sentences, per-name accuracy and
    confidence; one shard, every missing shard, or a merge of finished shards (``corpus.num_shards > 1``).

    Shard files ``<shards_dir>/shard-<i>-of-<n>.npz`` are written atomically and carry their identity
    (shard index and count, corpus, names, the tagger's ``identity()``) and a content checksum. A rerun
    skips the shards that are finished and valid, and redoes any that are unreadable, damaged or of
    another evaluation; a killed shard leaves no file under its final name.
    """

    RULES = {**NAMES_RULES, **SAMPLE_RULES}

    def __init__(self, name: str, paper: str, source: Callable[..., Any], names: str | None = None,
                 lowercase: bool = False, sample: int | None = None, seed: int = 0, shard: int | None = None,
                 num_shards: int = 1, batch_size: int = 1024, run: EvaluationRun | None = None):
        super().__init__(name, paper, source, names, lowercase, batch_size, run)
        self.check_values({"sample": sample, "seed": seed, "shard": shard, "num_shards": num_shards})
        self.settings = SampleSettings(sample=sample, seed=seed, shard=shard, num_shards=num_shards,
                                       batch_size=batch_size)

    @classmethod
    def check_values(cls, values: Mapping[str, Any], prefix: str = "corpus.") -> None:
        super().check_values(values, prefix)
        shard, num_shards = values.get("shard"), values.get("num_shards", 1)
        if shard is not None and not (isinstance(shard, int) and 0 <= shard < num_shards):
            raise ConfigError(f"{prefix}shard={shard!r}: must be null or an integer in [0, {prefix}num_shards="
                              f"{num_shards})")

    def evaluate(self, tagger: Tagger, output_dir: Path, logger: NullLogger) -> dict[str, Any]:
        settings, run = self.settings, self.run
        slot_tagger, names, corpus = self._start(tagger)
        num_shards, shard = settings.num_shards, settings.shard
        if num_shards == 1:
            stats, count = score_shard(self.name, settings, run.metrics, corpus, slot_tagger, 0, 1)
            return write_name_results(stats, names, self.name, self.lowercase, run, output_dir, logger,
                                      extra={"sentences": count, "tagger": slot_tagger.name})
        if not run.shards_dir:
            raise NerbiasError("corpus.num_shards > 1 needs shards_dir (where the shards go)")
        shards_dir = Path(run.shards_dir)
        path_of = lambda i: shards_dir / f"shard-{i:05d}-of-{num_shards:05d}.npz"  # noqa: E731
        identity = shard_identity(self.name, settings, corpus, self.names, slot_tagger)
        todo = [int(shard)] if shard is not None else list(range(num_shards))
        if not run.merge_shards:  # merge_shards=true only merges what is finished
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
            for i in missing:
                for orphan in remove_orphans(shards_dir, path_of(i).name):  # a killed earlier write of this shard
                    log.info("removed %s, left by a killed write", orphan)
                stats, count = score_shard(self.name, settings, run.metrics, corpus, slot_tagger, i, num_shards)
                stats.save(path_of(i), {**identity, "shard": i, "sentences": count})
            if shard is not None:
                return {"shard": int(shard)}
        return merge_shards(self.name, self.lowercase, run, names, shards_dir, num_shards, path_of, identity,
                            output_dir, logger)


class ProbesBenchmark(_NamesInSentences):
    """``corpus=probes``: every name in every person and place template; PERSON recall in person
    contexts, LOCATION recall in place contexts (``nerbias.bias.probes``)."""

    def evaluate(self, tagger: Tagger, output_dir: Path, logger: NullLogger) -> dict[str, Any]:
        run = self.run
        slot_tagger, names, probes = self._start(tagger)
        stats = {}
        for context, corpus in probes.corpora().items():
            log.info("probes: tagging %d %s-context sentences with %s", len(corpus), context, slot_tagger.name)
            stats[context] = run.metrics.new_statistics()
            count_outcomes(slot_tagger, corpus, list(range(len(corpus))), self.batch_size, stats[context])
        table, groups = probe_tables(stats["person"], stats["place"], names, ddof=int(run.metrics.std_ddof))
        table = run.name_profile.attach(table)
        lowercase = self.lowercase
        prefix = corpus_label(self.name, lowercase)
        scalars = probe_scalars(groups, prefix)
        tables = {"per_name.csv": table, "per_group.csv": groups,
                  "label_breakdown.csv": stats["person"].label_breakdown(names),
                  "place_label_breakdown.csv": stats["place"].label_breakdown(names)}
        image = output_dir / "probes_recall.png"
        with atomic_files([output_dir / n for n in tables] + [image, output_dir / "metrics.json"]) as tmp:
            for path, frame in zip(tmp, tables.values()):  # every result file final together, or none
                write_csv(path, frame)
            plot_probe_recall(table, names, tmp[-2], title=f"{corpus_title(self.name, lowercase)}, tagger "
                                                          f"{slot_tagger.name}: one point per name")
            atomic_write_json(tmp[-1], {"metrics": scalars, "tagger": slot_tagger.name,
                                        "sentences": {c: len(corpus) for c, corpus in probes.corpora().items()}})
        logger.summary(scalars)
        logger.table(f"{prefix}/per_name", table)
        logger.table(f"{prefix}/per_group", groups)
        logger.image(f"{prefix}/probes_recall", image)
        print(groups[["group", "names", "accuracy", "place_recall"]].rename(
            columns={"accuracy": "person_recall"}).to_string(index=False))
        return scalars


class CensusBenchmark:
    """``corpus=census``, with arrays: the SSA files read once into codes, each distinct name labelled once
    per template (by the tagger's census labeller), the error types counted by grouped sums
    (census.CensusOutcomes.errors). ``names``: ``all`` (the paper) or ``heldout`` (only names name
    substitution never trains on, outside the training half of the pool that avoids ``pool_exclude``)."""

    def __init__(self, name: str, paper: str, ssa: str, first_year: int = 1880, last_year: int = 2018,
                 template: int | None = None, lowercase: bool = False, partial_person_is_person: bool = True,
                 batch_size: int = 1024, names: str = "all", pool_exclude: Sequence[str | None] = (None,),
                 run: EvaluationRun | None = None):
        self.check_values({"template": template, "lowercase": lowercase, "batch_size": batch_size, "names": names,
                           "partial_person_is_person": partial_person_is_person})
        self.name, self.paper, self.ssa = str(name), paper, ssa
        self.first_year, self.last_year, self.template = int(first_year), int(last_year), template
        self.lowercase, self.partial_person_is_person = bool(lowercase), bool(partial_person_is_person)
        self.batch_size, self.names, self.pool_exclude = int(batch_size), str(names or "all"), list(pool_exclude or [None])
        self.run = run or EvaluationRun()

    @classmethod
    def check_values(cls, values: Mapping[str, Any], prefix: str = "corpus.") -> None:
        """What the census corpus's keys may be (validation checks every corpus node naming this benchmark)."""
        check_values(values, CENSUS_RULES, prefix)

    def evaluate(self, tagger: Tagger, output_dir: Path, logger: NullLogger) -> dict[str, Any]:
        started = time.perf_counter()
        years = range(self.first_year, self.last_year + 1)
        table = load_ssa(self.ssa, years=years)
        subset = self.names
        if subset != "all":
            excluded = [name for path in self.pool_exclude for name in load_names(path).names]
            total = len(table.names)
            table = census.select_names(table, subset, excluded)
            log.info("census: %s names only: %d of %d distinct names", subset, len(table.names), total)
        templates = [int(self.template)] if self.template else list(census.TEMPLATES)
        labeller = tagger.census_labeller(CensusOptions(lowercase=self.lowercase, batch_size=self.batch_size,
                                                        partial_person_is_person=self.partial_person_is_person))
        outcomes, label_table, tag_seconds = labeller.label(table, templates)
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
        finals = [output_dir / "census_errors.csv", output_dir / "census_labels.csv", *images,
                  output_dir / "metrics.json"]
        with atomic_files(finals) as tmp:  # every result file final together, or none
            write_csv(tmp[0], errors)
            write_csv(tmp[1], self.run.name_profile.attach(label_table))
            for path, (template, part) in zip(tmp[2:-1], by_template):
                plot_census_errors(part, path, template=template,
                                   tagger=f"{tagger.name}{' (lower-cased sentences)' if self.lowercase else ''}")
            atomic_write_json(tmp[-1], {"metrics": scalars, "tagger": tagger.name,
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


__all__ = ["CensusBenchmark", "NameSubstitutionBenchmark", "ProbesBenchmark"]

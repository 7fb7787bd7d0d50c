"""The static report of ``report.py``: Markdown + PNG + CSV with intervals and tests.

For one model on one corpus, its runs being training seeds (``names_section``: Tables 3-5 and 7,
the gaps, permutation tests, ECDFs and the t-SNE of Figure 3), or for census runs, one after
another (``census_section``: per-year female - male gaps). ``render_report`` writes
``report.md`` plus ``report_*.png`` / ``report_*.csv`` into the first run directory and logs the
same to W&B.

Runs are read by ``nerbias.reporting.runs``, statistics are in ``nerbias.reporting.uncertainty`` and
``nerbias.reporting.census_uncertainty``.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from nerbias.bias.names import NameList
from nerbias.bias.statistics import PERSON_PROBABILITY
from nerbias.bias.plots import census_sentence, plot_census_errors
from nerbias.errors import NerbiasError
from nerbias.fileio import atomic_write_text, remove_orphans, write_csv
from nerbias.data.ambiguity import AmbiguityRule
from nerbias.loggers import NullLogger
from nerbias.reporting.ambiguity import (
    ambiguity_by_group, ambiguity_regression, census_ambiguity, census_gap_split, has_profile, pooled_names,
)
from nerbias.reporting.group_effects import MIN_GROUP_SLOTS, MIN_NAMES, group_contrasts, group_effect_test
from nerbias.reporting.figures import (
    checkpoint_name_vectors, plot_census_bands, plot_census_gap, plot_ecdf_grid, plot_group_accuracy, plot_name_tsne,
)
from nerbias.reporting.options import ReportOptions
from nerbias.reporting.census_uncertainty import (
    CENSUS_MEASURES, bootstrap_census, census_gap_summary, permutation_census,
)
from nerbias.reporting.runs import Run, census_outcomes, load_run, name_table, names_for
from nerbias.reporting.tables import (
    REPRESENTATIVE_YEARS, accuracy_display, census_year_table, label_breakdown_table, markdown_table, spread_display,
)
from nerbias.reporting.significance import gender_permutation_test, pairwise_permutation_tests
from nerbias.reporting.uncertainty import NameTable, bootstrap_group_accuracy, bootstrap_spread

log = logging.getLogger(__name__)


def ambiguity_lines(section: "Section", frames: Sequence[pd.DataFrame], out_dir: Path, options: ReportOptions) -> None:
    """The gap, explained: ambiguous vs unambiguous names per group, and the regression (reporting/ambiguity.py)."""
    rule = AmbiguityRule.from_mapping(options.ambiguity_rule)
    table = pooled_names(frames, rule)
    section.lines += ["## The gap, explained: names that are also places or organisations", "",
                      f"A name is *ambiguous* when its token is {rule.describe()} (report option "
                      "`ambiguity_rule`; docs/ambiguity.md).", ""]
    section.add_table("ambiguity", ambiguity_by_group(table), out_dir)
    coefficients, groups, gaps = ambiguity_regression(table, n_boot=options.ambiguity_boot,
                                                      confidence=options.confidence, seed=options.seed)
    section.lines += [f"Logistic regression of recognition on group (one coefficient each) and {gaps['features']} "
                      "(binomial GLM, each name's slots as trials, +0.5 pseudo-slots; statsmodels). Coefficients "
                      "without intervals: Wald intervals treat slots as independent and are too narrow, and no "
                      "interval of these coefficients was shown by simulation to hold (docs/group-statistics.md).", ""]
    section.add_table("ambiguity_regression", coefficients[["term", "coefficient"]], out_dir)
    section.lines += ["Group accuracy observed, the model's fit, and its prediction with the ambiguity features at 0 "
                      "(adjusted; GloVe rank as observed):", ""]
    # per-group bootstrap intervals of one group's figure are not shown to hold (docs/group-statistics.md)
    section.add_table("ambiguity_adjusted", groups.drop(columns=[c for c in groups.columns if "_ci_" in c]), out_dir)
    gap = {kind: f"{gaps[f'{kind}_gap']:.4f}" for kind in ("observed", "fitted", "adjusted")}
    section.lines += [f"**Best - worst group gap: observed {gap['observed']}; the model's fit {gap['fitted']}; with "
                      f"ambiguity accounted for (features at 0) {gap['adjusted']}** (no intervals: the bootstrap of a "
                      "max - min is not consistent; docs/group-statistics.md).", ""]
    section.scalars.update({"report/ambiguity/observed_gap": gaps["observed_gap"],
                            "report/ambiguity/fitted_gap": gaps["fitted_gap"],
                            "report/ambiguity/adjusted_gap": gaps["adjusted_gap"]})


@dataclass
class Section:
    lines: list[str] = field(default_factory=list)
    images: dict[str, Path] = field(default_factory=dict)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    scalars: dict[str, float] = field(default_factory=dict)

    def add_table(self, key: str, frame: pd.DataFrame, out_dir: Path, display: pd.DataFrame | None = None) -> None:
        self.tables[key] = frame
        write_csv(out_dir / f"report_{key}.csv", frame)
        self.lines += [markdown_table(frame if display is None else display), ""]

    def add_image(self, key: str, path: Path | None, caption: str) -> None:
        if path is None:
            return
        self.images[key] = path
        self.lines += [f"![{caption}]({path.name})", "", f"*{caption}*", ""]


def calibration_by_group(table: NameTable, **kw) -> pd.DataFrame | None:
    """Per group and ALL: mean P(PER) over the slots, accuracy, and their difference with an interval
    (the group bootstrap run on the per-name excess P(PER) - recognised); None without confidences."""
    if PERSON_PROBABILITY not in table.columns or not np.isfinite(table.values(PERSON_PROBABILITY)).all():
        return None
    probability = table.values(PERSON_PROBABILITY) * table.sentences
    excess = dataclasses.replace(table, recognised=probability - table.recognised)
    gap = bootstrap_group_accuracy(excess, "group", **kw, accuracy=False).table(with_all=True)
    mean_probability = bootstrap_group_accuracy(dataclasses.replace(table, recognised=probability), "group",
                                                **{**kw, "n_boot": 2}).table(with_all=True)
    accuracy = bootstrap_group_accuracy(table, "group", **{**kw, "n_boot": 2}).table(with_all=True)
    return pd.DataFrame({"group": gap["group"], "names": gap["names"], "mean_P_PER": mean_probability["accuracy"],
                         "accuracy": accuracy["accuracy"], "calibration_gap": gap["accuracy"],
                         "ci_low": gap["ci_low"], "ci_high": gap["ci_high"]})


def group_interval_rule(confidence: float) -> str:
    return (f"{confidence:.0%} intervals; **names like these** (a t on log(1 - accuracy), names part + seeds "
            f"part; reporting/group_effects.py) for a group of at least {MIN_NAMES} names from 1 seed or from 3 and "
            "more, **these names** (a t over the training seeds) otherwise where the group has the slots a seed "
            f"the t needs ({MIN_GROUP_SLOTS[2]:,} with 2 seeds, {MIN_GROUP_SLOTS[3]:,} with 3 or more), none "
            "else: below those sizes a group whose accuracy hangs on one or two rare low names, or a few names' "
            "lumpy counts, is covered far below 95 % (docs/group-statistics.md). The `estimand` column says which.")


def group_effect_section(section: Section, table: NameTable, out_dir: Path, options: ReportOptions) -> None:
    """The report's opening: the permutation test of no group effect, then each group against the others."""
    labels = table.facet("group")
    accuracy = table.values("accuracy")
    members = {g: np.flatnonzero(labels == g) for g in table.facet_labels("group")}
    section.lines += ["## Is there a group effect?", ""]
    try:
        effect = group_effect_test(np.nanmean(accuracy, axis=0), labels, options.n_permutations, options.seed)
    except NerbiasError as error:  # e.g. every group of one name: nothing to permute
        section.lines += [f"Not tested: {error}.", ""]
        return
    section.scalars.update({"report/group_effect_p": effect["p_value"]})
    section.lines += [
        f"Permutation test of no group effect over names: **p = {effect['p_value']:.3g}** ({effect['names']} "
        f"names in {effect['groups']} groups; statistic the between-group sum of squares of the names' accuracy, "
        f"names permuted across groups with sizes kept, {effect['permutations']} permutations). H0 is that the "
        "group labels are exchangeable among the names, so the p holds whatever the shape of the groups.", "",
        "Each group's accuracy minus the mean of the other groups', intervals simultaneous over the groups "
        "(Bonferroni, for these names: a t over the seeds; none from one seed, nor where a group has too few "
        "slots a seed for the t to hold, docs/group-statistics.md):", ""]
    slots = {g: float(np.nansum(table.sentences[:, idx], axis=1).min()) for g, idx in members.items()}
    section.add_table("group_contrasts", group_contrasts(accuracy, members, options.confidence, slots), out_dir)


def names_section(runs: Sequence[Run], names: NameList, out_dir: Path, options: ReportOptions) -> Section:
    table = name_table(runs, names)
    log.info("%s: bootstrap intervals (B=%d) and permutation tests (%d resamples) over %d names", runs[0].path,
             options.n_boot, options.n_permutations, len(names.names))
    model = runs[0].label if len({r.label for r in runs}) == 1 else " + ".join(dict.fromkeys(r.label for r in runs))
    tables = {model: table}
    section = Section()
    kw = dict(n_boot=options.n_boot, confidence=options.confidence, seed=options.seed)
    level = "names and training seeds (crossed)" if table.n_seeds > 1 else "names within each group"
    partial = "; ".join(f"{run.path.name}: {run.partial}" for run in runs if run.partial)
    section.lines += [
        f"# Bias report: {model} on {runs[0].corpus_title}" + (f" (PARTIAL, {partial})" if partial else ""), "",
        f"- runs: {len(runs)} ({', '.join(str(r.path) for r in runs)})",
        f"- names: {len(table.names)} in {len(table.facet_labels('group'))} groups"
        + (f", OOV name {table.oov_name}" if table.oov_name else ""),
        f"- intervals: per group, {group_interval_rule(options.confidence)} Pooled figures (ALL, the spreads, "
        f"ECDF bands): {options.confidence:.0%} percentile bootstrap, B = {options.n_boot}, resampling {level}",
        "- estimand: *names like these* is the population of names a group's list stands for; *these names* the "
        "listed names themselves, over training seeds",
        f"- tests: permutation of group labels among names (scipy.stats.permutation_test, "
        f"{options.n_permutations} resamples, two-sided); pairwise p-values Holm-adjusted over all pairs", "",
    ]

    group_effect_section(section, table, out_dir, options)
    boot = bootstrap_group_accuracy(table, "group", **kw)
    groups = boot.table(with_all=True)
    shares = [r.tables["per_group"] for r in runs if "share_below_oov_accuracy" in r.tables.get("per_group", {})]
    if shares:  # per_group's share of names below the OOV name, mean over runs (no interval)
        below = pd.concat(shares).groupby("group")["share_below_oov_accuracy"].mean()
        groups["share_below_oov_accuracy"] = groups["group"].map(below)
    section.lines += ["## Accuracy by group (Tables 3 / 7)", ""]
    oov = table.oov_value("accuracy")
    if oov is not None:
        section.lines += [f"OOV name ({table.oov_name}) accuracy: {oov:.4f}", ""]
    section.add_table("group_accuracy", groups, out_dir, accuracy_display(groups))
    section.lines += [f"Intervals per group: {group_interval_rule(options.confidence)}", ""]
    gap = boot.gap()
    section.lines += [f"Gap, best ({gap['best']}) minus worst ({gap['worst']}) group: {gap['gap']:.4f}, without an "
                      "interval (a max - min of group means, whose bootstrap is not consistent; the group-effect test "
                      "and the simultaneous contrasts above are the inference).", ""]
    section.scalars["report/gap"] = gap["gap"]
    for row in groups.itertuples(index=False):
        section.scalars.update({f"report/{row.group}/accuracy": row.accuracy,
                                f"report/{row.group}/ci_low": row.ci_low, f"report/{row.group}/ci_high": row.ci_high})
    section.add_image("group_accuracy", plot_group_accuracy(tables, out_dir / "report_group_accuracy.png", **kw,
                                                            title=f"{runs[0].corpus_title}: accuracy p_c by group"),
                      "Accuracy by group with 95% intervals (per group: the estimand of the table above)")

    for by in ("gender", "race"):
        if not table.has_facet(by):
            continue
        facet = bootstrap_group_accuracy(table, by, **kw)
        frame = facet.table()
        section.lines += [f"## Accuracy by {by}", ""]
        section.add_table(f"{by}_accuracy", frame, out_dir, accuracy_display(frame))
        facet_gap = facet.gap()
        section.lines += [f"Gap, best ({facet_gap['best']}) minus worst ({facet_gap['worst']}): "
                          f"{facet_gap['gap']:.4f} (no interval; the permutation tests below)", ""]
        section.scalars[f"report/{by}_gap"] = facet_gap["gap"]

    section.lines += ["## Permutation tests", ""]
    if table.has_facet("gender"):
        gender = gender_permutation_test(table, n_resamples=options.n_permutations, seed=options.seed)
        section.lines += ["Female vs male names (difference = female - male weighted accuracy):", ""]
        section.add_table("permutation_gender", gender, out_dir)
        section.scalars["report/female_minus_male"] = float(gender["difference"].iloc[0])
        section.scalars["report/female_minus_male_p"] = float(gender["p_value"].iloc[0])
    pairs = pairwise_permutation_tests(table, "group", n_resamples=options.n_permutations, seed=options.seed)
    tested = int(pairs["p_value"].notna().sum())
    section.lines += [f"Every pair of groups ({tested} tests of {len(pairs)} pairs; `p_holm` controls the "
                      "family-wise error over the tests that ran; `note` says why a pair was not tested):", ""]
    section.add_table("permutation_pairs", pairs, out_dir)

    calibration = calibration_by_group(table, **kw)
    if calibration is not None:
        section.lines += ["## Calibration by group", "",
                          "Every slot holds a person, so a group's mean P(PER) over its slots minus its accuracy is its "
                          "calibration gap (> 0: over-confident); intervals resample names within groups.", ""]
        section.add_table("calibration_by_group", calibration, out_dir)

    section.lines += ["## Spread of name accuracy (Table 4)", ""]
    spread = bootstrap_spread(table, "accuracy", **kw)
    section.add_table("spread_accuracy", spread, out_dir, spread_display(spread))
    if "conf_median" in table.columns and not np.all(np.isnan(table.values("conf_median"))):
        section.lines += ["## Spread of median PERSON confidence (Table 5)", ""]
        confidence_spread = bootstrap_spread(table, "conf_median", **kw)
        section.add_table("spread_conf_median", confidence_spread, out_dir, spread_display(confidence_spread))

    breakdown = label_breakdown_table(runs)
    if breakdown is not None:
        section.lines += ["## What unrecognised names got instead (share of slots, mean over runs)", ""]
        section.add_table("label_breakdown", breakdown, out_dir)

    if has_profile(runs[0].per_name):
        ambiguity_lines(section, [run.per_name for run in runs], out_dir, options)
    section.lines += ["## Distributions (Figures 1, 2, 4-8)", ""]
    for by in ("group", "gender", "race"):
        if table.has_facet(by):
            path = plot_ecdf_grid(tables, out_dir / f"report_ecdf_accuracy_by_{by}.png", "accuracy", by,
                                  title=f"{runs[0].corpus_title}, {model}: name accuracy by {by}", **kw)
            section.add_image(f"ecdf_accuracy_by_{by}", path, f"ECDF of name accuracy by {by}")
    path = plot_ecdf_grid(tables, out_dir / "report_ecdf_conf_p25_by_group.png", "conf_p25", "group",
                          title=f"{runs[0].corpus_title}, {model}: 25th percentile of each name's PERSON confidence", **kw)
    section.add_image("ecdf_conf_p25_by_group", path, "ECDF of the 25th-percentile PERSON confidence by group")
    if options.checkpoint:
        vectors = checkpoint_name_vectors(options.checkpoint, table.names)
        path = plot_name_tsne(vectors, dict(zip(table.names, table.groups)), out_dir / "report_tsne_names.png",
                              seed=options.seed)
        section.add_image("tsne_names", path, f"t-SNE of the names' word vectors in {options.checkpoint} (Figure 3)")
    return section


def census_section(run: Run, out_dir: Path, options: ReportOptions) -> Section:
    section = Section()
    errors = run.tables["census_errors"]
    templates = sorted(int(t) for t in errors["template"].unique())
    log.info("%s: census bootstrap per year (B=%d), templates %s", run.path, options.census_boot, templates)
    years = sorted(int(y) for y in errors["year"].unique())
    section.lines += [f"# Census benchmark report: {run.label}", "",
                      f"- run: {run.path}", f"- templates: {templates}; years {years[0]}-{years[-1]} ({len(years)})"]
    try:
        outcomes = census_outcomes(run, options.ssa, options.predictions)
    except Exception as error:  # no SSA files or labels here: curves without bands, said so
        log.warning("census intervals skipped: %s", error)
        section.lines += [f"- intervals: not computed ({error})", ""]
        for template in templates:
            path = plot_census_errors(errors, out_dir / f"report_census_errors_template{template}.png",
                                      template=template, tagger=run.label)
            section.add_image(f"census_errors_template{template}", path, f"Template {template}: errors by year")
        return section
    section.lines += [
        f"- intervals: {options.confidence:.0%} percentile bootstrap, B = {options.census_boot}, resampling each "
        "year's names of each sex with replacement, the same names for every template (exact, via multinomial "
        "draws over (count, outcomes) classes); female and male drawn independently, gap = female - male in each "
        "replicate; years are not pooled", ""]
    boot = bootstrap_census(outcomes, n_boot=options.census_boot, confidence=options.confidence, seed=options.seed,
                            years=options.census_years)
    section.tables["census_bootstrap"] = boot
    write_csv(out_dir / "report_census_bootstrap.csv", boot)
    section.lines += [f"## Female - male gap: years whose {options.confidence:.0%} interval lies above or below 0", ""]
    summary = pd.concat([census_gap_summary(boot, measure) for measure in CENSUS_MEASURES], ignore_index=True)
    section.add_table("census_gap_summary", summary, out_dir)
    for row in summary.itertuples(index=False):
        prefix = f"report/census/template{row.template}/{row.measure}"
        section.scalars.update({f"{prefix}/years_female_worse": row.years_female_worse,
                                f"{prefix}/years_male_worse": row.years_male_worse})
    for measure in ("type1_w", "type1_u"):
        section.lines += [f"## {measure}: representative years", ""]
        section.add_table(f"census_years_{measure}", census_year_table(boot, measure), out_dir)
    for row in boot[boot["measure"] == "type1_w"].itertuples(index=False):
        if row.year in REPRESENTATIVE_YEARS:
            section.scalars[f"report/census/template{row.template}/{row.year}/type1_w_gap"] = row.gap
    if options.census_permutations:
        tests = permutation_census(outcomes, "type1_w", n_resamples=options.census_permutations, seed=options.seed,
                                   years=options.census_years)
        section.lines += [f"## Permutation test per year (type1_w, {options.census_permutations} shuffles of the "
                          "sex labels; `p_holm` over the years of a template)", "",
                          f"Years with p_holm < 0.05: {int((tests['p_holm'] < 0.05).sum())} of {len(tests)}", ""]
        section.tables["census_permutation"] = tests
        write_csv(out_dir / "report_census_permutation.csv", tests)
    labels = run.tables.get("census_labels")
    if has_profile(labels):
        rule = AmbiguityRule.from_mapping(options.ambiguity_rule)
        split = census_ambiguity(outcomes, labels, rule)
        section.lines += ["## Type-2 errors (tagged, not PERSON) by sex and name ambiguity", "",
                          f"A name is *ambiguous* when its token is {rule.describe()}. `_w`: weighted by baby counts, "
                          "years pooled; `_u`: each name once. `type2_from_ambiguous`: share of the type-2 errors "
                          "that fall on ambiguous names.", ""]
        section.add_table("census_ambiguity", split, out_dir)
        section.lines += ["Female - male type-2 rate, all names vs unambiguous names only:", ""]
        section.add_table("census_ambiguity_gap", census_gap_split(split), out_dir)
    section.lines += ["## Figures", ""]
    for template in templates:
        section.add_image(f"census_errors_template{template}",
                          plot_census_bands(boot, out_dir / f"report_census_errors_template{template}.png", template,
                                            title=f"{run.label}: census template {template} "
                                                  f"(\"{census_sentence(template)}\"), error rates by year, 95% "
                                                  "bootstrap bands over names"),
                          f"Template {template}: error rates by year, female vs male, 95% bands")
        section.add_image(f"census_gap_template{template}",
                          plot_census_gap(boot, out_dir / f"report_census_gap_template{template}.png", template,
                                          title=f"{run.label}: census template {template}, female - male gap by year "
                                                "(above 0: female names mis-tagged more), 95% bootstrap interval"),
                          f"Template {template}: female - male gap by year with its 95% interval")
    return section


def render_report(run_dirs: Sequence[str | Path], names_path: str | Path | None = None,
                  output_dir: str | Path | None = None, options: ReportOptions | None = None,
                  logger: NullLogger | None = None) -> Path:
    """Write ``report.md`` (+ PNG and CSV files) into ``output_dir`` (default: the first run
    directory) and log tables, figures and scalars to ``logger``. Returns the report's path.

    Name-corpus runs are taken as training seeds of one model on one corpus; census runs are
    reported one after another.
    """
    options = options or ReportOptions()
    logger = logger or NullLogger()
    runs = [load_run(path) for path in run_dirs]
    if not runs:
        raise NerbiasError("no run directory given")
    kinds = {run.kind for run in runs}
    if len(kinds) > 1:
        raise NerbiasError("mix of census and name-corpus runs: report them separately")
    out_dir = Path(output_dir or runs[0].path)
    out_dir.mkdir(parents=True, exist_ok=True)
    # report.md is written last and an earlier one goes first: a killed rerun never leaves an old report.md
    # beside new tables, nor a killed write's temporary file
    (out_dir / "report.md").unlink(missing_ok=True)
    remove_orphans(out_dir)
    if kinds == {"names"}:
        sections = [names_section(runs, names_for(runs, names_path), out_dir, options)]
    else:
        sections = [census_section(run, out_dir, options) for run in runs]
    text = "\n".join(line for section in sections for line in section.lines).rstrip() + "\n"
    report = out_dir / "report.md"
    atomic_write_text(report, text)
    try:  # W&B is a copy of what is on disk: a failure there is a warning, never a lost report
        for section in sections:
            logger.summary(section.scalars)
            for key, frame in section.tables.items():
                logger.table(f"report/{key}", frame)
            for key, path in section.images.items():
                logger.image(f"report/{key}", path)
        logger.artifact("bias-report", "report", report)
    except Exception as error:
        log.warning("W&B logging of the report failed (%s); the report is on disk", error)
    return report


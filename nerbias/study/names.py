"""The figures of one names corpus (Winogender, In-Situ, the OOV set, the probes) for every condition of a
study: group accuracies, ALL, female - male, White - each other race, calibration, place recall, the watched
names, the spread of median confidence, the noise floor and the group-effect test; each with its name-bootstrap
replicates (names drawn within groups, one draw for every condition). ``mitigation`` gives them intervals."""

from __future__ import annotations

import warnings

import numpy as np

from nerbias.bias.statistics import PERSON_PROBABILITY
from nerbias.errors import NerbiasError
from nerbias.reporting.group_effects import group_effect_test
from nerbias.reporting.intervals import DrawnNames, Statistic, inflate, noise_floor, ratio_statistic
from nerbias.study.place_names import PLACE_RECALL, place_recall_statistic, watched_name_statistics
from nerbias.study.groups import CALIBRATION_PREFIX, GROUP_EFFECT_PERMUTATIONS
from nerbias.study.runs import (REFERENCE_RACE, Figures, StudyRun, add_conll_statistics, race_gap_metric,
                                seed_ids)
from nerbias.reporting.uncertainty import NameTable, split_group

def _between(first: Statistic, second: Statistic, size: int) -> Statistic:
    """``first - second`` of two name pools of one condition: per seed, and per replicate (the pools' names
    are drawn independently, so the replicates' difference has the pools' summed variance)."""
    slots = [s.slots for s in (first, second) if s.slots is not None]
    return Statistic(first.point - second.point, first.seeds, first.seed_values - second.seed_values,
                     first.name_replicates - second.name_replicates, size, (-1.0, 1.0),
                     slots=min(slots) if slots else None)


def _name_statistics(table: NameTable, members: dict[str, np.ndarray], draws: dict[str, DrawnNames],
                     seeds: tuple[int, ...], ddof: int, floor_permutations: int, seed: int) -> Figures:
    """Group accuracies, ALL, female and male and their gap, White - each other race, OOV and the
    median-confidence spread of one condition."""
    out = Figures(groups=list(members))
    rec, sen = table.recognised, table.sentences                       # (S, N)
    size = int(min(len(idx) for idx in members.values()))               # names per group, for the small-sample factor
    every, all_draws = np.concatenate(list(members.values())), DrawnNames.joined(list(draws.values()))
    pooled: dict[str, list[str]] = {"ALL": list(members), "Female": [], "Male": []}
    for group, idx in members.items():
        out.add(group, ratio_statistic(rec, sen, idx, draws[group], seeds, len(idx)))
        gender = split_group(group)[1]
        if gender:
            pooled[gender].append(group)
    for key, groups in pooled.items():
        if groups:
            idx = np.concatenate([members[g] for g in groups])
            out.add(key, ratio_statistic(rec, sen, idx, DrawnNames.joined([draws[g] for g in groups]), seeds, size))
    if "Female" in out.statistics and "Male" in out.statistics:
        out.add("female_male_gap", _between(out.statistics["Female"], out.statistics["Male"], size))
    race_of = {group: split_group(group)[0] for group in members}
    races = {race for race in race_of.values() if race}
    if REFERENCE_RACE in races:  # Mishra et al.'s "White names are recognised best": the reference against each race
        pools = {race: [g for g in members if race_of[g] == race] for race in sorted(races)}
        statistics = {race: ratio_statistic(rec, sen, np.concatenate([members[g] for g in groups]),
                                            DrawnNames.joined([draws[g] for g in groups]), seeds, size)
                      for race, groups in pools.items()}
        for race in sorted(races - {REFERENCE_RACE}):
            out.add(race_gap_metric(race), _between(statistics[REFERENCE_RACE], statistics[race], size))
    if PERSON_PROBABILITY in table.columns and np.isfinite(table.values(PERSON_PROBABILITY)).all():
        # mean P(PER) minus accuracy, slot-weighted: every slot is a person, so this is the calibration gap
        excess = table.values(PERSON_PROBABILITY) * sen - rec
        for group, idx in {**members, "ALL": np.concatenate(list(members.values()))}.items():
            drawn = draws[group] if group in draws else all_draws
            out.add(CALIBRATION_PREFIX + group, ratio_statistic(excess, sen, idx, drawn, seeds,
                                                                 len(idx) if group in members else size, (-1.0, 1.0)))
    place = place_recall_statistic(table, every, all_draws, seeds, size)
    if place is not None:
        out.add(PLACE_RECALL, place)
    for key, statistic in watched_name_statistics(table, seeds).items():
        out.add(key, statistic)
    if len(members) > 1:
        out.floor = noise_floor(rec, sen, list(members.values()), floor_permutations, seed)
        labels = np.empty(rec.shape[1], dtype=object)
        for group, idx in members.items():
            labels[idx] = group
        every_name = np.concatenate(list(members.values()))
        with np.errstate(invalid="ignore", divide="ignore"):
            name_accuracy = np.nanmean(rec[:, every_name] / sen[:, every_name], axis=0)
        try:
            effect = group_effect_test(name_accuracy, labels[every_name], GROUP_EFFECT_PERMUTATIONS, seed)
            out.floor["group_effect_p"] = effect["p_value"]
        except NerbiasError:  # every group of one name: nothing to permute, no p
            out.floor["group_effect_p"] = float("nan")
    if "accuracy" in table.oov:
        oov = np.asarray(table.oov["accuracy"], dtype=np.float64)
        out.add("OOV", Statistic(float(oov.mean()), seeds, oov, bounds=(0.0, 1.0)))
    if "conf_median" in table.columns:
        medians = table.values("conf_median")                          # (S, N), NaN: never recognised
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # names never recognised have no confidence
            by_name = np.nanmean(medians, axis=0)
            point = float(np.nanstd(by_name[every], ddof=ddof))
            per_seed = np.nanstd(medians[:, every], axis=1, ddof=ddof)
            resampled = np.nanstd(by_name[all_draws.indices], axis=1, ddof=ddof)
        if np.isfinite(point) and np.isfinite(per_seed).all():
            out.add("median_confidence_std", Statistic(point, seeds, per_seed, inflate(point, resampled, size), size))
    return out


def names_corpus_figures(tables: dict[str, NameTable], n_boot: int, seed: int, ddof: int,
                         runs: dict[str, list[StudyRun]], floor_permutations: int = 1000) -> dict[str, Figures]:
    first = next(iter(tables.values()))
    for condition, table in tables.items():
        if table.names != first.names:
            raise NerbiasError(f"condition {condition} was scored on other names than {next(iter(tables))}")
    groups = list(dict.fromkeys(first.groups))
    members = {g: np.flatnonzero(np.asarray(first.groups, dtype=object) == g) for g in groups}
    rng = np.random.default_rng(seed)
    draws = {g: DrawnNames(idx[rng.integers(0, len(idx), size=(n_boot, len(idx)))]) for g, idx in members.items()}
    out = {}
    for condition, table in tables.items():
        out[condition] = _name_statistics(table, members, draws, seed_ids(runs[condition]), ddof,
                                          floor_permutations, seed)
        add_conll_statistics(out[condition], runs[condition])
    return out


__all__ = ["names_corpus_figures"]

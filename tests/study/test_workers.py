"""The study's process pool: results in order, a piece's error named, $NERBIAS_WORKERS checked."""

from __future__ import annotations

import os
import time

import pytest

from nerbias.errors import DataFormatError, NerbiasError
from nerbias.study.workers import WORKERS_VARIABLE, default_workers, map_in_processes


def square_with_pid(value: int) -> tuple[int, int]:
    return value * value, os.getpid()


def refuse(value: int) -> None:
    raise DataFormatError("per_name.csv", f"bad row {value}", 3)


def refuse_odd(value: int) -> int:
    if value % 2:
        refuse(value)
    return value


def refuse_or_sleep(value: int) -> None:
    if value:
        time.sleep(60)
    refuse(value)


def test_two_workers_give_the_results_in_order_from_other_processes():
    results = map_in_processes(square_with_pid, [(v,) for v in range(6)], workers=2)
    assert [square for square, _ in results] == [0, 1, 4, 9, 16, 25]
    assert os.getpid() not in {pid for _, pid in results}


def test_one_worker_runs_in_this_process():
    assert {pid for _, pid in map_in_processes(square_with_pid, [(1,), (2,)], workers=1)} == {os.getpid()}


def test_an_error_in_a_worker_keeps_its_message():
    with pytest.raises(NerbiasError, match=r"per_name.csv:3: bad row 1"):
        map_in_processes(refuse_odd, [(1,), (2,)], workers=2)  # one piece fails: which error is raised is fixed


@pytest.mark.parametrize("value", ["0", "two", "-1"])
def test_a_bad_worker_count_is_refused_naming_the_variable(monkeypatch, value):
    monkeypatch.setenv(WORKERS_VARIABLE, value)
    with pytest.raises(NerbiasError, match=WORKERS_VARIABLE):
        default_workers()


def test_the_worker_count_comes_from_the_variable(monkeypatch):
    monkeypatch.setenv(WORKERS_VARIABLE, "3")
    assert default_workers() == 3


def test_an_error_stops_the_other_pieces_at_once():
    started = time.monotonic()
    with pytest.raises(NerbiasError, match="bad row 0"):
        map_in_processes(refuse_or_sleep, [(1,), (0,)], workers=2)
    assert time.monotonic() - started < 30  # not the 60 s the other piece would take

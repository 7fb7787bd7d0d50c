"""The study's independent pieces (jobs to restore, corpora to score) spread over the machine's cores.

Each worker process is started from a fork server (forking a process that already runs pyarrow's or
BLAS's threads can deadlock the child) and runs its numerical libraries on one thread, so two workers on
two cores do not stall each other. With one core, or one piece, everything runs in this process.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from typing import Any, Callable, Sequence

from nerbias.errors import NerbiasError

# Modules the fork server imports once, so a worker starts without importing pandas and scipy again.
_PRELOAD = ["nerbias.study.mitigation"]


WORKERS_VARIABLE = "NERBIAS_WORKERS"


def default_workers() -> int:
    """``$NERBIAS_WORKERS``, else the cores this process may run on (a Slurm or taskset limit included). The
    test suite sets 1: pytest-xdist already runs a test file on each core."""
    value = os.environ.get(WORKERS_VARIABLE, "").strip()
    if value:
        if not value.isdigit() or int(value) < 1:
            raise NerbiasError(f"${WORKERS_VARIABLE}={value!r}: expected a whole number of processes, 1 or more")
        return int(value)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _one_thread() -> None:
    from threadpoolctl import threadpool_limits
    threadpool_limits(limits=1)


def _call(function: Callable[..., Any], arguments: tuple) -> Any:
    try:
        return function(*arguments)
    except NerbiasError as error:  # its subclasses' own arguments do not survive the trip back
        raise NerbiasError(str(error)) from None


def map_in_processes(function: Callable[..., Any], arguments: Sequence[tuple], workers: int | None = None) -> list:
    """``[function(*a) for a in arguments]``, in order, over up to ``workers`` processes (default: ``default_workers``).
    ``function`` must be importable by name (a module-level function). An error names what the piece
    raised; the other pieces are cancelled."""
    workers = min(len(arguments), default_workers() if workers is None else workers)
    if workers <= 1:
        return [function(*a) for a in arguments]
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PRELOAD)
    pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_one_thread)
    try:
        futures = [pool.submit(_call, function, a) for a in arguments]
        wait(futures, return_when=FIRST_EXCEPTION)  # the first error, whichever piece raises it
        failed = next((future for future in futures if future.done() and future.exception() is not None), None)
        if failed is not None:
            failed.result()
        results = [future.result() for future in futures]
    except BaseException:  # an error or Ctrl-C: stop the other pieces now, not when they end (minutes)
        processes = list(getattr(pool, "_processes", {}).values())  # the executor offers no public handle
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.terminate()
        raise
    pool.shutdown()
    return results


__all__ = ["WORKERS_VARIABLE", "default_workers", "map_in_processes"]

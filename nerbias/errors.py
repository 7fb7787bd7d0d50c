"""Errors a user can fix: bad files, bad configs. Entry points turn them into one clear line."""

from __future__ import annotations

from pathlib import Path


def first_line(error: BaseException) -> str:
    """The first line of a library's error message, at most 300 characters: enough to name the cause in
    a one-line refusal, without the library's traceback text or advice ("" for an empty message)."""
    text = str(error)
    return text.splitlines()[0][:300] if text.strip() else ""


class NerbiasError(Exception):
    """A problem with the user's input; the message says what and where."""


class DataFormatError(NerbiasError):
    """A malformed input file, located by path and (1-based) line number when known."""

    def __init__(self, path: str | Path, message: str, line: int | None = None):
        self.path = str(path)
        self.line = line
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


class CheckpointError(NerbiasError):
    """A file that is not a nerbias checkpoint, or one from an incompatible version."""


class Terminated(KeyboardInterrupt):
    """SIGTERM (Slurm at preemption and at the time limit, ``kill``), raised wherever the process is, as
    Ctrl-C raises KeyboardInterrupt: whatever catches Ctrl-C to stop cleanly catches it too."""


class Interrupted(NerbiasError):
    """Stopped on request, with what to rerun. Exits 130 after Ctrl-C (128 + SIGINT, the shell's code)
    and 143 after SIGTERM (128 + 15), so a sweep driver tells a stop from bad input (2)."""

    def __init__(self, message: str, exit_code: int = 130):
        super().__init__(message)
        self.exit_code = exit_code

    @classmethod
    def by(cls, stop: KeyboardInterrupt, where: str, advice: str = "") -> "Interrupted":
        """The one line for ``stop`` (Ctrl-C or SIGTERM) ``where`` it happened: 'terminated at epoch 3; ...'."""
        terminated = isinstance(stop, Terminated)
        return cls(f"{'terminated' if terminated else 'interrupted'}{' ' + where if where else ''}{advice}",
                   143 if terminated else 130)


def _raise_terminated(signum, frame):
    raise Terminated()


def run_or_exit(task, *args, log_name: str = "nerbias"):
    """Run an entry point's task; a user error becomes one clear line on stderr and exit code 2, Ctrl-C
    one line and exit code 130, SIGTERM one line and 143. SIGTERM is taken over only from its default:
    under submitit, which handles it (and requeues on Slurm's preemption signal), it is left alone."""
    import logging
    import signal
    import sys
    import threading

    in_main_thread = threading.current_thread() is threading.main_thread()
    if in_main_thread and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        try:
            return task(*args)
        except KeyboardInterrupt as stop:  # a stop outside a step that says more (the trainer names its epoch)
            raise Interrupted.by(stop, "") from None
    except NerbiasError as error:
        logging.getLogger(log_name).error("%s", error)  # into the run's log file
        print(f"error: {error}", file=sys.stderr)
        sys.exit(getattr(error, "exit_code", 2))

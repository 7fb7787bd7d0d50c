"""Errors a user can fix: bad files, bad configs. Entry points turn them into one clear line."""

from __future__ import annotations

from pathlib import Path


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


class Interrupted(NerbiasError):
    """Ctrl-C: stopped on request, with what to rerun. Exits 130 (128 + SIGINT, the shell's code for
    Ctrl-C), so a sweep driver tells a stop from bad input (2)."""

    exit_code = 130


def run_or_exit(task, *args, log_name: str = "nerbias"):
    """Run an entry point's task; a user error becomes one clear line on stderr and exit code 2, and
    Ctrl-C one line and exit code 130."""
    import logging
    import sys

    try:
        try:
            return task(*args)
        except KeyboardInterrupt:  # Ctrl-C outside a step that says more (the trainer names its epoch)
            raise Interrupted("interrupted") from None
    except NerbiasError as error:
        logging.getLogger(log_name).error("%s", error)  # into the run's log file
        print(f"error: {error}", file=sys.stderr)
        sys.exit(getattr(error, "exit_code", 2))

"""Executing the notebooks in ``notebooks/`` headless (tests, batch jobs), with parameters, through papermill.

The notebooks compare several models side by side through ``nerbias.reporting.runs``,
``tables`` and ``figures``; the static report of one model is ``nerbias.reporting.report``.
From the shell: ``.venv/bin/papermill notebooks/<name>.ipynb <out>.ipynb -y '<parameters as YAML>'``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from nerbias.errors import NerbiasError
from nerbias.fileio import atomic_path


def run_notebook(path: str | Path, parameters: Mapping[str, Any] | None = None, output_path: str | Path | None = None,
                 cwd: str | Path | None = None, timeout: int = 600, kernel_name: str = "python3"):
    """Execute a notebook with papermill: ``parameters`` go into a cell after the one tagged
    ``parameters``. The kernel runs in ``cwd`` (default: the repository root), where relative paths
    start. Returns the executed notebook; ``output_path`` also saves it (atomically). A failing cell
    is a NerbiasError naming the notebook and the cell's error."""
    import nbformat
    import papermill
    from papermill.exceptions import PapermillExecutionError

    cwd = Path(cwd) if cwd else Path(__file__).resolve().parents[2]
    try:
        notebook = papermill.execute_notebook(str(path), None, parameters=dict(parameters or {}), cwd=str(cwd),
                                              kernel_name=kernel_name, execution_timeout=timeout, progress_bar=False,
                                              log_output=False)
    except PapermillExecutionError as error:
        raise NerbiasError(f"{path}: cell {error.exec_count} failed: {error.ename}: {error.evalue}") from None
    if output_path:
        with atomic_path(output_path) as tmp:
            nbformat.write(notebook, str(tmp))
    return notebook

"""Executing the notebooks in ``notebooks/`` headless (tests, batch jobs), with parameters.

The notebooks compare several models side by side through ``nerbias.reporting.runs``,
``tables`` and ``figures``; the static report of one model is ``nerbias.reporting.report``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from nerbias.fileio import atomic_path


def run_notebook(path: str | Path, parameters: Mapping[str, Any] | None = None, output_path: str | Path | None = None,
                 cwd: str | Path | None = None, timeout: int = 600, kernel_name: str = "python3"):
    """Execute a notebook headless with nbclient; ``parameters`` go into a cell inserted after the
    one tagged ``parameters`` (papermill's convention, so papermill runs the same notebooks).
    The kernel runs in ``cwd`` (default: the repository root), where relative paths start.
    Returns the executed notebook; ``output_path`` also saves it."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(str(path), as_version=4)
    if parameters:
        source = "# Parameters\n" + "\n".join(f"{key} = {value!r}" for key, value in parameters.items())
        cell = nbformat.v4.new_code_cell(source, metadata={"tags": ["injected-parameters"]})
        tagged = [i for i, c in enumerate(notebook.cells) if "parameters" in c.get("metadata", {}).get("tags", [])]
        notebook.cells.insert(tagged[0] + 1 if tagged else 0, cell)
    cwd = Path(cwd) if cwd else Path(__file__).resolve().parents[2]
    NotebookClient(notebook, timeout=timeout, kernel_name=kernel_name,
                   resources={"metadata": {"path": str(cwd)}}).execute()
    if output_path:
        with atomic_path(output_path) as tmp:
            nbformat.write(notebook, str(tmp))
    return notebook

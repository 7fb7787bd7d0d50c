"""The layout of docs/architecture.md holds: import rules (import-linter), module sizes, no sys.path hacks."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
MAX_MODULE_LINES = 600


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` on the package under ``root`` (its pyproject.toml holds the contracts)."""
    return subprocess.run([str(LINT_IMPORTS), "--config", str(root / "pyproject.toml"), "--no-cache"],
                          cwd=root, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def package_copy(tmp_path_factory) -> Path:
    """A copy of the package and its contracts, to break on purpose."""
    root = tmp_path_factory.mktemp("layout")
    shutil.copytree(ROOT / "nerbias", root / "nerbias", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


def test_the_import_rules_hold():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize("module, bad_import, contract", [
    ("data/vocab.py", "import nerbias.models.crf", "each floor imports only the floors below it"),
    ("training/build.py", "from nerbias.bias import names", "each floor imports only the floors below it"),
    ("bias/corpora.py", "import nerbias.models.tagger", "only the tagger adapters import a model"),
    ("reporting/uncertainty.py", "import nerbias.training.trainer", "never the trainer or the task layer"),
    ("reporting/runs.py", "import nerbias.study.mitigation", "each floor imports only the floors below it"),
    ("study/runs.py", "import nerbias.training.trainer", "The study reads run directories"),
])
def test_a_wrong_import_breaks_a_contract(package_copy, module, bad_import, contract):
    path = package_copy / "nerbias" / module
    original = path.read_text(encoding="utf-8")
    path.write_text(original + f"\n{bad_import}  # deliberately against the rules\n", encoding="utf-8")
    try:
        result = lint_imports(package_copy)
    finally:
        path.write_text(original, encoding="utf-8")
    assert result.returncode != 0
    assert "BROKEN" in result.stdout and contract in result.stdout, result.stdout


def import_cycles(package: str) -> list[list[str]]:
    """The groups of modules that import one another in a circle, imports inside functions included
    (grimp reads every import statement; Tarjan's strongly connected components)."""
    import grimp

    graph = grimp.build_graph(package, cache_dir=None)
    edges = {module: graph.find_modules_directly_imported_by(module) for module in graph.modules}
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for imported in edges[module]:
            if imported not in order:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], order[imported])
        if low[module] == order[module]:
            group = stack[stack.index(module):]
            del stack[stack.index(module):]
            if len(group) > 1:
                cycles.append(sorted(group))

    for module in sorted(edges):
        if module not in order:
            visit(module)
    return cycles


def test_no_modules_import_each_other_in_a_circle():
    assert import_cycles("nerbias") == []


def test_no_module_is_too_long():
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "nerbias").rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_the_readme_is_a_front_door():
    """The two commands, what the toolkit does, headline lines and links; reference material lives in docs/."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) < 120, f"README.md has {len(lines)} lines"
    for link in re.findall(r"\]\((docs/[^)#]+)", "\n".join(lines)):
        assert (ROOT / link).is_file(), link


def test_nothing_edits_sys_path():
    """The project is installed (pyproject.toml); only a test conftest may touch sys.path."""
    offenders = []
    for path in [*ROOT.glob("*.py"), *(ROOT / "nerbias").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py"),
                 *(ROOT / "notebooks").glob("*.ipynb"), *(ROOT / "tests").rglob("*.py")]:
        if path.name in ("conftest.py", Path(__file__).name):
            continue
        if "sys.path.insert" in path.read_text(encoding="utf-8") or "sys.path.append" in path.read_text(encoding="utf-8"):
            offenders.append(str(path.relative_to(ROOT)))
    assert not offenders, offenders

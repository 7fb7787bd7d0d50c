"""One ``report.md`` for a whole paper run: CoNLL-03 scores of the best checkpoint, then the report of
every bias evaluation under ``<run dir>/bias/<corpus>[_lower]/`` (each also kept in its own folder)."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd

from nerbias.bias.types import corpus_title, parse_corpus_label
from nerbias.fileio import atomic_write_text
from nerbias.reporting.figures import plot_reliability
from nerbias.reporting.report import ReportOptions, render_report
from nerbias.reporting.tables import markdown_table

log = logging.getLogger(__name__)

CONLL_ROWS = (("dev", "dev"), ("test", "test"), ("test_lower", "test, every token lower-cased"))
ENTITY_TYPES = ("PER", "LOC", "ORG", "MISC")
_LINK = re.compile(r"(!?\[[^\]]*\]\()(?![a-z]+://|/)([^)]+)\)")


def conll_table(metrics: Mapping[str, float]) -> pd.DataFrame:
    """Entity P / R / F1 (seqeval strict = conlleval) per scored split, with F1 per type."""
    rows = []
    for key, title in CONLL_ROWS:
        if f"{key}_f1" not in metrics:
            continue
        row = {"split": title, "precision": metrics[f"{key}_precision"], "recall": metrics[f"{key}_recall"],
               "F1": metrics[f"{key}_f1"]}
        row.update({f"F1 {kind}": metrics.get(f"{key}_f1_{kind}") for kind in ENTITY_TYPES})
        rows.append(row)
    return pd.DataFrame(rows)


def calibration_lines(run_dir: Path, metrics: Mapping[str, float]) -> list[str]:
    """The test split's span calibration (``test_calibration.csv``, written by training): table, ECE, figure."""
    path = run_dir / "test_calibration.csv"
    if not path.is_file() or "test_span_ece" not in metrics:
        return []
    table = pd.read_csv(path)
    figure = plot_reliability(table, run_dir / "report_reliability.png", metrics["test_span_ece"],
                              "CoNLL-03 test: predicted entities")
    return ["## Calibration of span confidences (CoNLL-03 test)", "",
            f"Every predicted entity's exact confidence P(span | sentence) against whether it is a gold entity, in "
            f"{len(table)} equal-mass bins. Expected calibration error (share-weighted |accuracy - confidence|): "
            f"**{metrics['test_span_ece']:.4f}**.", "", markdown_table(table, digits=4), "",
            f"![Reliability diagram]({figure.name})", ""]


def _nested(text: str, prefix: str) -> str:
    """A sub-report's Markdown under its corpus heading: headings two levels down, links into its folder."""
    text = re.sub(r"^(#+) ", lambda m: "##" + m.group(1) + " ", text, flags=re.MULTILINE)
    return _LINK.sub(lambda m: f"{m.group(1)}{prefix}/{m.group(2)})", text)


def render_run_report(run_dir: str | Path, bias_dirs: Sequence[str | Path], options: ReportOptions,
                      checkpoint: str | Path | None = None) -> Path:
    """``<run_dir>/report.md``: the CoNLL-03 table, then each bias run's report (rendered into its folder)."""
    run_dir = Path(run_dir)
    metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))["metrics"]
    lines = [f"# {run_dir.name}: CoNLL-03 and name bias", "",
             "## CoNLL-03 English, best checkpoint (entity level, seqeval strict = conlleval)", "",
             markdown_table(conll_table(metrics), digits=4), ""]
    lines += calibration_lines(run_dir, metrics)
    for bias_dir in map(Path, bias_dirs):
        corpus, lowercase = parse_corpus_label(bias_dir.name)
        title = corpus_title(corpus, lowercase)
        names_options = ReportOptions(**{**vars(options), "checkpoint": checkpoint if corpus != "census" else None})
        log.info("report: %s", title)
        sub_report = render_report([bias_dir], output_dir=bias_dir, options=names_options)
        lines += [f"## {title}", "", _nested(sub_report.read_text(encoding="utf-8"), bias_dir.relative_to(run_dir).as_posix()), ""]
    report = run_dir / "report.md"
    atomic_write_text(report, "\n".join(lines).rstrip() + "\n")
    return report

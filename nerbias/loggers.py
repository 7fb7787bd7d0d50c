"""Experiment logging to Weights & Biases, never allowed to stop a run.

``logger=wandb`` logs config, per-epoch metrics, final metrics, tables, images and the
checkpoint as an artifact. ``mode`` is online, offline, disabled or auto (online when an
API key is configured, offline otherwise). Any W&B failure becomes a warning.
"""

from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path
from typing import Any, Mapping

from nerbias.building import build
from nerbias.validation import check_values, one_of

log = logging.getLogger(__name__)


class NullLogger:
    """``logger=none``: logs nothing. It takes the W&B logger's settings too and ignores them, so an
    experiment that names its W&B project runs unchanged with ``logger=none``."""

    run = None

    @classmethod
    def check_values(cls, values: Mapping[str, Any], prefix: str = "logger.") -> None:
        """What the settings may be (validation.validate checks a config's before any work)."""
        check_values(values, {"mode": one_of(*MODES, description=", ".join(MODES))}, prefix)

    def __init__(self, config: Mapping[str, Any] | None = None, save_dir: str | Path | None = None,
                 project: str | None = None, mode: str | None = None, name: str | None = None,
                 group: str | None = None, tags: list[str] | None = None, entity: str | None = None,
                 job_type: str | None = None, kind: str = "none"):
        self.kind = kind  # the label run names and tables use (the config's ``kind``)

    def log(self, metrics: Mapping[str, Any], step: int | None = None) -> None: ...

    def summary(self, metrics: Mapping[str, Any]) -> None: ...

    def table(self, key: str, frame: Any) -> None: ...

    def image(self, key: str, path: str | Path) -> None: ...

    def artifact(self, name: str, kind: str, path: str | Path) -> None: ...

    def use_artifact(self, name: str, kind: str, path: str | Path) -> None: ...

    def finish(self) -> None: ...


MODES = ("auto", "online", "offline", "disabled")


def model_artifact_name(run_name: str | None) -> str:
    """The W&B artifact a training run logs its best checkpoint as; evaluations consume it by this name."""
    return f"model-{run_name or 'nerbias'}"


def _resolve_mode(mode: str) -> str:
    """``auto``: online when a W&B key is configured (``$WANDB_API_KEY`` or ``wandb login``'s netrc
    entry for the W&B host), offline otherwise; read without W&B's internal API."""
    if mode != "auto":
        return mode
    if os.environ.get("WANDB_API_KEY"):
        return "online"
    import netrc
    from urllib.parse import urlparse

    host = urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname
    try:
        return "online" if netrc.netrc().authenticators(host) else "offline"
    except (OSError, netrc.NetrcParseError):
        return "offline"


class WandbLogger(NullLogger):
    def __init__(self, project: str, mode: str = "auto", config: Mapping[str, Any] | None = None,
                 save_dir: str | Path = ".", name: str | None = None, group: str | None = None,
                 tags: list[str] | None = None, entity: str | None = None, job_type: str | None = None,
                 kind: str = "wandb"):
        self.kind = kind  # the label run names and tables use (the config's ``kind``)
        self.check_values({"mode": mode})
        self.run = None
        self.mode = _resolve_mode(mode)
        try:
            import wandb

            Path(save_dir).mkdir(parents=True, exist_ok=True)
            # One W&B run per run directory: a resumed or requeued job continues the same run.
            id_file = Path(save_dir) / "wandb_run_id.txt"
            run_id = id_file.read_text().strip() if id_file.is_file() else secrets.token_hex(4)
            self.run = wandb.init(project=project, entity=entity, mode=self.mode, config=dict(config or {}),
                                  dir=str(save_dir), name=name, group=group, tags=tags, job_type=job_type,
                                  id=run_id, resume="allow", reinit="create_new")
            id_file.write_text(run_id + "\n")
        except Exception as error:
            log.warning("W&B could not start (%s); continuing without it", error)

    def _safely(self, what: str, action) -> None:
        if self.run is None:
            return
        try:
            action()
        except Exception as error:
            log.warning("W&B %s failed (%s); continuing", what, error)

    def log(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        self._safely("log", lambda: self.run.log(dict(metrics), step=step))

    def summary(self, metrics: Mapping[str, Any]) -> None:
        def update():
            for key, value in metrics.items():
                self.run.summary[key] = value
        self._safely("summary", update)

    def table(self, key: str, frame: Any) -> None:
        import wandb

        self._safely("table", lambda: self.run.log({key: wandb.Table(dataframe=frame)}))

    def image(self, key: str, path: str | Path) -> None:
        import wandb

        self._safely("image", lambda: self.run.log({key: wandb.Image(str(path))}))

    def artifact(self, name: str, kind: str, path: str | Path) -> None:
        import wandb

        def upload():
            artifact = wandb.Artifact(name, type=kind)
            artifact.add_file(str(path))
            self.run.log_artifact(artifact)
        self._safely("artifact", upload)

    def use_artifact(self, name: str, kind: str, path: str | Path) -> None:
        """Record ``path`` as this run's input (lineage): online, W&B links the artifact the training
        run logged under ``name`` (matched by content); offline, where W&B cannot use artifacts, the
        run's config names it (``input_artifacts``: name, type, sha256), so the link survives a sync."""
        import hashlib

        import wandb

        def use():
            if self.mode == "offline":
                digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
                self.run.config.update({"input_artifacts": [{"name": name, "type": kind, "sha256": digest,
                                                             "path": str(path)}]}, allow_val_change=True)
                return
            artifact = wandb.Artifact(name, type=kind)
            artifact.add_file(str(path))
            self.run.use_artifact(artifact)
        self._safely("use_artifact", use)

    def finish(self) -> None:
        self._safely("finish", lambda: self.run.finish())


def build_logger(cfg: Mapping[str, Any] | None, run_config: Mapping[str, Any], save_dir: str | Path) -> NullLogger:
    """From the ``logger`` config group (its ``_target_``); no group (``None``) gives a NullLogger."""
    if not cfg:
        return NullLogger()
    return build(cfg, config=run_config, save_dir=save_dir)


def read_offline_run(run_dir: str | Path) -> dict[str, Any]:
    """Read back what an offline W&B run recorded: ``{"config", "history", "summary", "artifacts", "used", "name", "tags"}``.

    The ``run-*.wandb`` file is a LevelDB-style log of ``wandb_internal_pb2.Record``
    messages (7-byte header, 32 KiB blocks, records split FULL/FIRST/MIDDLE/LAST).
    W&B ships no Python reader for it any more; this one lets tests and reports check
    logged values without a server.
    """
    import json
    import struct

    from wandb.proto import wandb_internal_pb2

    files = sorted(Path(run_dir).glob("run-*.wandb"))
    if not files:
        raise FileNotFoundError(f"{run_dir}: no run-*.wandb file")
    data = files[0].read_bytes()
    block, header = 32768, 7
    if data[:4] != b":W&B":
        raise ValueError(f"{files[0]}: not a W&B transaction log")
    payloads, pending, offset = [], b"", header
    while offset + 7 <= len(data):
        left_in_block = block - offset % block
        if left_in_block < 7:  # block trailer padding
            offset += left_in_block
            continue
        _checksum, length, kind = struct.unpack("<IHB", data[offset:offset + 7])
        if kind == 0 and length == 0:
            offset += left_in_block
            continue
        if offset + 7 + length > len(data):
            break  # a record still being written: read what is complete
        chunk = data[offset + 7:offset + 7 + length]
        offset += 7 + length
        if kind == 1:
            payloads.append(chunk)
        elif kind == 2:
            pending = chunk
        elif kind == 3:
            pending += chunk
        elif kind == 4:
            payloads.append(pending + chunk)
            pending = b""
    config: dict[str, Any] = {}
    history: list[dict[str, Any]] = []
    summary: dict[str, Any] = {}
    artifacts: list[dict[str, str]] = []
    used: list[dict[str, str]] = []  # artifacts the run consumed (use_artifact)
    identity: dict[str, Any] = {"name": None, "tags": []}
    for payload in payloads:
        record = wandb_internal_pb2.Record()
        try:
            record.ParseFromString(payload)
        except Exception:  # protobuf's DecodeError: a torn write at the end of a live log
            break
        which = record.WhichOneof("record_type")
        if which == "history":
            history.append({item.key or "/".join(item.nested_key): json.loads(item.value_json)
                            for item in record.history.item})
        elif which == "summary":
            for item in record.summary.update:
                summary[item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
        elif which == "artifact":
            artifacts.append({"name": record.artifact.name, "type": record.artifact.type})
        elif which == "use_artifact":
            used.append({"name": record.use_artifact.name, "type": record.use_artifact.type})
        if which == "run":
            identity = {"name": record.run.display_name, "tags": list(record.run.tags)}
        if which in ("config", "run"):
            updates = record.config.update if which == "config" else record.run.config.update
            for item in updates:
                config[item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
    return {"config": config, "history": history, "summary": summary, "artifacts": artifacts, "used": used,
            **identity}

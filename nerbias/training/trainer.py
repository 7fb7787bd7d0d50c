"""The training loop: early stopping on dev F1, best/last checkpoints, exact resumption.

Every source of randomness is a torch generator whose state goes into ``last.pt``, and a
checkpoint is written at each epoch end, so a killed run rerun with ``trainer.resume=true``
continues from the last finished epoch and ends with the same metrics as an
uninterrupted run with the same seed.
"""

from __future__ import annotations

import ctypes
import gc
import json
import logging
import math
import time
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import torch
from tqdm.auto import tqdm

from nerbias.data.batching import iterate_batches
from nerbias.data.conll import Sentence
from nerbias.data.debias_diagnostics import DIAGNOSTICS_FILE, add_trained_stage
from nerbias.errors import CheckpointError, Interrupted, NerbiasError
from nerbias.fileio import atomic_write_bytes, atomic_write_json, code_version, config_digest, numeric_platform
from nerbias.loggers import NullLogger, model_artifact_name
from nerbias.models.checkpoint import checkpoint_word_table, load_checkpoint, save_checkpoint
from nerbias.models.tagger import NerTagger, resolve_device
from nerbias.scoring import Conll2003Benchmark, evaluate_split
from nerbias.training.augment import Augmentation
from nerbias.training.run_identity import check_same_run
from nerbias.validation import (NON_NEGATIVE_NUMBER, POSITIVE_INTEGER, POSITIVE_NUMBER, Rule, check_values,
                                optional)

log = logging.getLogger(__name__)


TRAINER_RULES: dict[str, Rule] = {
    "batch_size": POSITIVE_INTEGER, "eval_batch_size": POSITIVE_INTEGER, "max_epochs": POSITIVE_INTEGER,
    "patience": POSITIVE_INTEGER, "grad_clip": optional(POSITIVE_NUMBER, "no clipping"),
    "embedding_lr": optional(POSITIVE_NUMBER), "lr_decay": optional(NON_NEGATIVE_NUMBER)}


@dataclass(frozen=True)
class TrainerSettings:
    """The ``trainer`` group. ``TRAINER_RULES`` say what each value may be; ``validation.validate`` checks
    them before any work (``check_values``), and so does every construction. ``optimizer``: the dense
    parameters' torch optimizer, a partial that takes them (``_partial_: true`` in the config); None:
    Adam at its defaults."""

    batch_size: int = 32
    eval_batch_size: int = 256
    max_epochs: int = 50
    patience: int = 8            # early stopping: epochs without a dev F1 improvement
    grad_clip: float | None = 5.0
    embedding_lr: float | None = None
    lr_decay: float | None = None
    device: str = "auto"
    resume: bool | str = False   # true: <run dir>/checkpoints/last.pt; or a checkpoint path
    optimizer: Callable[[list[torch.nn.Parameter]], torch.optim.Optimizer] | None = None

    def __post_init__(self) -> None:
        self.check_values(vars(self))

    @classmethod
    def check_values(cls, values: Mapping[str, Any], prefix: str = "trainer.") -> None:
        check_values(values, TRAINER_RULES, prefix)

    @property
    def resuming(self) -> bool:
        return self.resume not in (False, None, "false")

    @property
    def dense_optimizer(self) -> Callable[[list[torch.nn.Parameter]], torch.optim.Optimizer]:
        return self.optimizer or torch.optim.Adam


# The history's measured times: two runs of one seed on one machine differ in these only.
TIMING_KEYS = ("train_sentences_per_second", "epoch_seconds")


# How a training scores its best checkpoint: the whole dev and test splits and test lower-cased; test's
# predictions, with span confidences, and their calibration.
BEST_CHECKPOINT_SCORING = Conll2003Benchmark("conll2003", "conll2003", data_dir=None, splits=("dev", "test"),
                                             lowercase_splits=("test",), predictions=("test",), calibration=True)


def record_trained_table(diagnostics_path: Path, checkpoint: Path) -> None:
    """Add the ``trained`` stage to a run's de-biasing diagnostics (if it has any): the evaluation names'
    rows of ``checkpoint``'s word table, as fine-tuning left them."""
    if not diagnostics_path.is_file():
        return
    table, words = checkpoint_word_table(checkpoint)
    written = json.loads(diagnostics_path.read_text(encoding="utf-8"))  # this run's own file, from its start
    diagnostics = add_trained_stage(written, table.numpy(), words, source=checkpoint.name)
    atomic_write_json(diagnostics_path, diagnostics)
    trained = diagnostics["stages"]["trained"]
    log.info("evaluation names in the trained table: bias-subspace projection %s; linear classifier %s",
             trained["mean_abs_projection"], {t: c["accuracy"] for t, c in trained["classifier"].items()})


def release_memory(collect: bool = True) -> None:
    """Hand freed heap pages back to the OS (glibc's ``malloc_trim``), after a garbage collection
    (``collect``). The trainer trims after each epoch, so that its batches' freed pages do not pile up
    over the epochs (they are freed by reference counting: no collection needed, which would cost a
    walk of every object); the tasks collect and trim after training and after each evaluation, so
    that the bias evaluations in the same process do not stack on the training's peak."""
    if collect:
        gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the collection alone
        pass


class TaggerOptimizer:
    """The configured optimizer for dense parameters, SparseAdam for a sparse word table.

    Fine-tuning a 400k x 50 table with dense Adam costs more than the whole network; sparse
    gradients touch only the rows of a batch. Gradient clipping applies to dense parameters.
    ``trainer.lr_decay`` (Ma & Hovy 2016) sets every learning rate at epoch ``e`` (from 0) to
    ``lr / (1 + lr_decay * e)``; it is a function of the epoch alone, so a resumed run gets it right.
    """

    def __init__(self, model: torch.nn.Module, settings: TrainerSettings):
        words = getattr(model.embedder, "words", None)
        sparse = [words.weight] if words is not None and words.sparse and words.weight.requires_grad else []
        dense = [p for p in model.parameters() if p.requires_grad and all(p is not q for q in sparse)]
        self.dense_params = dense
        self.grad_clip = settings.grad_clip
        self.dense = settings.dense_optimizer(dense)
        lr = settings.embedding_lr or self.dense.defaults["lr"]
        self.sparse = torch.optim.SparseAdam(sparse, lr=lr) if sparse else None
        self.lr_decay = settings.lr_decay or 0.0
        self._base_lrs = [[group["lr"] for group in opt.param_groups] for opt in self._optimizers()]

    def _optimizers(self) -> list[torch.optim.Optimizer]:
        return [self.dense] + ([self.sparse] if self.sparse is not None else [])

    def start_epoch(self, epoch: int) -> None:
        """Set the learning rates for ``epoch`` (0-based) from the configured ones."""
        for opt, base_lrs in zip(self._optimizers(), self._base_lrs):
            for group, base in zip(opt.param_groups, base_lrs):
                group["lr"] = base / (1.0 + self.lr_decay * epoch)

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.dense.zero_grad(set_to_none=set_to_none)
        if self.sparse is not None:
            self.sparse.zero_grad(set_to_none=set_to_none)

    def clip_and_step(self) -> None:
        if self.grad_clip:
            torch.nn.utils.clip_grad_norm_(self.dense_params, self.grad_clip)
        self.dense.step()
        if self.sparse is not None:
            self.sparse.step()

    def state_dict(self) -> dict[str, Any]:
        return {"dense": self.dense.state_dict(), "sparse": self.sparse.state_dict() if self.sparse else None}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.dense.load_state_dict(state["dense"])
        if self.sparse is not None and state.get("sparse") is not None:
            self.sparse.load_state_dict(state["sparse"])


class Trainer:
    """``fit`` trains, checkpoints every epoch, stops early, then scores the best checkpoint.

    The task builds what the trainer runs and hands it over: ``settings`` (the ``trainer`` group, with
    its optimizer), ``new_tagger`` (the training
    sentences -> a new tagger and the names' coverage report, or None; ``training/build.build_tagger``),
    ``augmentation`` (``nerbias.training.augment``: each epoch's training sentences) and the run's
    resolved config (``run_config``), which goes into every checkpoint and must match a checkpoint
    being resumed. The coverage report (``embedding_coverage.json``) and, for normalised or de-biased
    vectors, the names' diagnostics (``debias_diagnostics.json``, completed from the best checkpoint's
    word table at the end) are written at the start. A trainer fits once.
    """

    def __init__(self, settings: TrainerSettings,
                 new_tagger: Callable[[Sequence[Sentence]], tuple[NerTagger, dict[str, Any] | None]],
                 output_dir: str | Path, seed: int, run_config: Mapping[str, Any],
                 augmentation: Augmentation | None = None, run_name: str | None = None):
        self.settings = settings
        self.new_tagger = new_tagger
        self.seed = int(seed)
        self.run_config = run_config
        self.run_name = run_name
        self.augmentation = augmentation or Augmentation()
        self.output_dir = Path(output_dir)
        self.checkpoint_dir = self.output_dir / "checkpoints"
        self.device = resolve_device(settings.device)
        self._start: tuple[Path | None, dict[str, Any] | None] | None = None  # check_start's verdict

    def _checkpoint_payload(self, tagger: NerTagger, optimizer, epoch: int, best_f1: float, best_epoch: int,
                            bad_epochs: int, history: list, shuffle_gen: torch.Generator,
                            platforms: list[dict[str, Any]], codes: list[dict[str, Any]]) -> dict[str, Any]:
        payload = tagger.state()
        payload["trainer_state"] = {
            "epoch": epoch, "best_f1": best_f1, "best_epoch": best_epoch, "bad_epochs": bad_epochs,
            "history": history, "platforms": platforms, "codes": codes, "optimizer": optimizer.state_dict(),
            "torch_rng": torch.get_rng_state(), "shuffle_rng": shuffle_gen.get_state(),
        }
        if torch.cuda.is_available():
            payload["trainer_state"]["cuda_rng"] = torch.cuda.get_rng_state_all()
        return payload

    def fit(self, data: Mapping[str, list[Sentence]], logger: NullLogger | None = None) -> dict[str, float]:
        """Train on ``data`` (``Conll2003Data.load``'s splits) from a new tagger, or continue the run's checkpoint."""
        settings = self.settings
        logger = logger or NullLogger()
        torch.manual_seed(self.seed)
        shuffle_gen = torch.Generator().manual_seed(self.seed)
        last_path = self.checkpoint_dir / "last.pt"
        start_epoch, best_f1, best_epoch, bad_epochs, history = 0, -math.inf, -1, 0, []
        platforms: list[dict[str, Any]] = []  # each attempt's kind of processor, when it differs from the last
        codes: list[dict[str, Any]] = []      # each attempt's commit (fileio.code_version), when it changed

        if self._start is None:
            self.check_start()
        resume_from, payload = self._start
        self._start = None  # the payload's tensors are the tagger's now
        foreign_best = self._foreign_best(resume_from) if resume_from is not None else None
        if foreign_best is not None and not (self.checkpoint_dir / "best.pt").is_file():
            # continuing another run in a new folder: its best epoch so far comes along, so the run is whole
            # whether or not a later epoch improves on it
            atomic_write_bytes(self.checkpoint_dir / "best.pt", foreign_best.read_bytes())
        if resume_from is not None:
            tagger = NerTagger.from_state(payload, source=str(resume_from)).to(self.device)
        else:
            tagger, names = self.new_tagger(data["train"])
            self.new_tagger = None  # used once: what its embeddings source read (pretrained vectors) is freed now
            tagger.to(self.device)
            diagnostics = names.pop("debias", None) if names is not None else None
            (self.output_dir / DIAGNOSTICS_FILE).unlink(missing_ok=True)  # none left from an earlier attempt
            if diagnostics is not None:
                atomic_write_json(self.output_dir / DIAGNOSTICS_FILE, diagnostics)
            if names is not None:
                atomic_write_json(self.output_dir / "embedding_coverage.json", names)
                logger.summary({"embedding_names_found": names["found"], "embedding_names_missing": names["missing"]})
        model = tagger.model
        optimizer = TaggerOptimizer(model, settings)
        if resume_from is not None:
            state = payload.get("trainer_state")
            if state is None:
                raise CheckpointError(f"{resume_from}: has no trainer state to resume from")
            optimizer.load_state_dict(state["optimizer"])
            torch.set_rng_state(state["torch_rng"])
            shuffle_gen.set_state(state["shuffle_rng"])
            if "cuda_rng" in state and torch.cuda.is_available():
                torch.cuda.set_rng_state_all(state["cuda_rng"])
            start_epoch, best_f1, best_epoch = state["epoch"] + 1, state["best_f1"], state["best_epoch"]
            bad_epochs, history = state["bad_epochs"], list(state["history"])
            platforms = list(state.get("platforms", []))  # absent from checkpoints written before it was kept
            codes = list(state.get("codes", [{}]))  # a checkpoint from before it was kept: its code unknown
            log.info("resumed from %s after epoch %d (best dev F1 %.4f)", resume_from, state["epoch"] + 1, best_f1)

        n_params = sum(p.numel() for p in model.parameters())
        platform = numeric_platform(self.device)
        if not platforms or platforms[-1] != platform:
            platforms.append(platform)
        code = code_version()
        if not codes or codes[-1] != code:
            codes.append(code)
        log.info("model: %d parameters on %s (%s, %s kernels, %d threads, torch %s)", n_params, self.device,
                 platform["cuda"] or platform["cpu"], platform["cpu_capability"], platform["threads"],
                 platform["torch"])
        stop = bad_epochs >= settings.patience
        epoch = start_epoch
        try:
            epochs = tqdm(range(start_epoch, settings.max_epochs), desc="epochs", initial=start_epoch,
                          total=settings.max_epochs)
            for epoch in epochs:
                if stop:
                    break
                started = time.perf_counter()
                model.train()
                optimizer.start_epoch(epoch)
                total_loss, n_batches, n_sentences = 0.0, 0, 0
                train = self.augmentation.epoch(data["train"], self.seed, epoch)
                batches = iterate_batches(train, tagger.encoder, settings.batch_size, shuffle=True, generator=shuffle_gen)
                total = math.ceil(len(train) / settings.batch_size)
                for batch in tqdm(batches, total=total, desc=f"epoch {epoch + 1}", leave=False):
                    batch = batch.to(self.device)
                    optimizer.zero_grad(set_to_none=True)
                    loss = model.loss(batch.words, batch.chars, batch.mask, batch.tags, batch.noise)
                    if not torch.isfinite(loss):  # a dead model must not end looking trained
                        raise NerbiasError(f"epoch {epoch + 1}, batch {n_batches + 1}: the training loss is "
                                           f"{loss.item()} (not finite); the run stops here (last good state: "
                                           f"{last_path} if it exists). Lower trainer.optimizer.lr or check the data "
                                           "and embeddings")
                    loss.backward()
                    optimizer.clip_and_step()
                    total_loss += loss.item()
                    n_batches += 1
                    n_sentences += len(batch.index)
                if n_batches == 0:
                    raise NerbiasError(f"epoch {epoch + 1} had no training batches (empty training data?); "
                                       "nothing is written")
                train_seconds = time.perf_counter() - started
                dev_scores, _ = evaluate_split(tagger, data["dev_epoch"], settings.eval_batch_size,
                                               f"dev (epoch {epoch + 1})")
                record = {"epoch": epoch + 1, "train_loss": total_loss / max(n_batches, 1), "dev_f1": dev_scores["f1"],
                          "dev_sentences": len(data["dev_epoch"]),  # what the early-stopping F1 covers
                          "train_sentences_per_second": n_sentences / train_seconds,
                          # the epoch's training and dev scoring, wall time (its checkpoint writes not counted)
                          "epoch_seconds": time.perf_counter() - started,
                          "lr": optimizer.dense.param_groups[0]["lr"]}
                history.append(record)
                improved = dev_scores["f1"] > best_f1
                if improved:
                    best_f1, best_epoch, bad_epochs = dev_scores["f1"], epoch, 0
                else:
                    bad_epochs += 1
                payload = self._checkpoint_payload(tagger, optimizer, epoch, best_f1, best_epoch, bad_epochs, history,
                                                   shuffle_gen, platforms, codes)
                try:
                    if improved:
                        best = dict(payload)
                        best.pop("trainer_state")
                        save_checkpoint(self.checkpoint_dir / "best.pt", best)
                    save_checkpoint(last_path, payload)
                except NerbiasError as error:  # a full disk, a read-only folder: the epoch is lost, not the run
                    raise NerbiasError(f"{error} (epoch {epoch + 1} is not saved; once it can be written, rerun "
                                       "with trainer.resume=true)") from None
                release_memory(collect=False)
                logger.log(record, step=epoch + 1)
                epochs.set_postfix(loss=f"{record['train_loss']:.3f}", dev_f1=f"{dev_scores['f1']:.4f}")
                log.info("epoch %d: loss %.4f, dev F1 %.4f (best %.4f at epoch %d), %.0f sentences/s",
                         epoch + 1, record["train_loss"], dev_scores["f1"], best_f1, best_epoch + 1,
                         record["train_sentences_per_second"])
                stop = bad_epochs >= settings.patience
                if stop:
                    log.info("early stopping: no dev improvement for %d epochs", bad_epochs)

            epoch = None  # training is over: the best checkpoint is scored
            return self.finish(data, history, logger, platforms, codes)
        except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM: every checkpoint on disk is whole (atomic writes)
            where = f"at epoch {epoch + 1}" if epoch is not None else "while scoring the best checkpoint"
            raise Interrupted.by(stop, where, "; resume with trainer.resume=true") from None

    def check_start(self) -> None:
        """Every refusal a start can meet, before the task writes anything into the run directory: a fresh
        run over another run's checkpoints, a resume of another configuration. Keeps the checkpoint to
        resume from for ``fit``."""
        resume_from = self._resume_path()
        payload = None
        if resume_from is None:  # a fresh run never writes over another run's checkpoints
            taken = [p for p in (self.checkpoint_dir / "last.pt", self.checkpoint_dir / "best.pt") if p.exists()]
            if taken and not self._own_lone_best(taken):
                raise NerbiasError(f"{self.output_dir} holds another run's checkpoint ({taken[0].name}): resume it "
                                   "with trainer.resume=true, or choose a new hydra.run.dir")
        else:
            payload = load_checkpoint(resume_from)
            check_same_run(payload.get("config") or {}, self.run_config, resume_from)
            if self._foreign_best(resume_from) is None and not (self.checkpoint_dir / "best.pt").is_file():
                raise NerbiasError(f"{resume_from}: no best.pt beside it, and this run has none: the best epoch so "
                                   "far would be lost; resume from a last.pt whose run folder holds its best.pt")
        self._start = (resume_from, payload)

    def _foreign_best(self, resume_from: Path) -> Path | None:
        """The best.pt of another run whose last.pt this run continues (``trainer.resume=<path>``), if any."""
        best = resume_from.parent / "best.pt"
        same = resume_from.parent.resolve() == self.checkpoint_dir.resolve()
        return best if not same and best.is_file() else None

    def _own_lone_best(self, taken: Sequence[Path]) -> bool:
        """True for ``trainer.resume=true`` over a ``best.pt`` without ``last.pt``: the first epoch writes
        best.pt, then last.pt, so a run killed (or out of disk) between the two leaves best.pt alone.
        With no trainer state to continue from, the run starts again from scratch; being seeded, it
        rewrites the same best.pt and ends as an uninterrupted run would. best.pt must be this
        configuration's (else check_same_run refuses it)."""
        if self.settings.resume not in (True, "true") or [p.name for p in taken] != ["best.pt"]:
            return False
        best = taken[0]
        check_same_run(load_checkpoint(best).get("config") or {}, self.run_config, best)
        log.info("%s without last.pt: the run was stopped during its first checkpoint write; starting again from "
                 "scratch (the same seed rewrites the same best.pt)", best)
        return True

    def _resume_path(self) -> Path | None:
        resume = self.settings.resume
        if not self.settings.resuming:
            return None
        path = self.checkpoint_dir / "last.pt" if resume in (True, "true") else Path(str(resume))
        if not path.is_file():
            if resume in (True, "true"):
                log.info("trainer.resume=true but %s does not exist yet: starting fresh", path)
                return None
            raise NerbiasError(f"trainer.resume: {path} does not exist")
        return path

    def finish(self, data: dict[str, list[Sentence]], history: list, logger: NullLogger,
               platforms: list[dict[str, Any]], codes: list[dict[str, Any]]) -> dict[str, float]:
        """Score the best checkpoint on the whole dev and test splits, and on test lower-cased
        (``test_lower_*``); write metrics, predictions, artifacts. ``platforms``: the kinds of processor
        the attempts trained on (metrics.json ``platforms``; ``platform`` is the one that finished); ``codes``:
        their commits as each started (``codes``; ``code`` is the one that finished)."""
        best_path = self.checkpoint_dir / "best.pt"
        if not best_path.is_file():
            raise NerbiasError(f"{best_path}: no best checkpoint (did training run any epoch?)")
        tagger = NerTagger.load(best_path, device=str(self.device))
        record_trained_table(self.output_dir / DIAGNOSTICS_FILE, best_path)
        metrics = BEST_CHECKPOINT_SCORING.score(tagger, BEST_CHECKPOINT_SCORING.scored_splits(data),
                                                self.settings.eval_batch_size, self.output_dir, desc=" (best)")
        metrics["epochs"] = len(history)
        metrics["best_epoch"] = max(range(len(history)), key=lambda i: history[i]["dev_f1"]) + 1 if history else 0
        atomic_write_json(self.output_dir / "metrics.json", {"metrics": metrics, "history": history,
                                                             "code": codes[-1], "codes": codes,
                                                             "platform": platforms[-1], "platforms": platforms,
                                                             "config_sha256": config_digest(self.run_config)})
        logger.summary(metrics)
        logger.artifact(model_artifact_name(self.run_name), "model", best_path)
        log.info("test F1 %.4f (lower-cased %.4f, dev %.4f); metrics in %s", metrics["test_f1"],
                 metrics["test_lower_f1"], metrics["dev_f1"], self.output_dir / "metrics.json")
        return metrics

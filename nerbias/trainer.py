"""The training loop: early stopping on dev F1, best/last checkpoints, exact resumption.

Every source of randomness is a torch generator whose state goes into ``last.pt``, and a
checkpoint is written at each epoch end, so a killed run rerun with ``trainer.resume=true``
continues from the last finished epoch and ends with the same metrics as an
uninterrupted run with the same seed.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from nerbias.checkpoint import load_checkpoint, save_checkpoint
from nerbias.conll import Sentence, write_conll
from nerbias.data import bioes_tags, iterate_batches, load_conll2003
from nerbias.embeddings import embedding_matrix, load_keyed_vectors
from nerbias.errors import CheckpointError, NerbiasError
from nerbias.io import atomic_write_json, atomic_write_text
from nerbias.loggers import NullLogger, build_logger
from nerbias.metrics import entity_scores
from nerbias.tagger import NerTagger, Prediction, resolve_device
from nerbias.tags import bioes_to_iob1

log = logging.getLogger(__name__)


def load_data(cfg: Mapping[str, Any]) -> dict[str, list[Sentence]]:
    """CoNLL-03 splits from ``data.data_dir``, optionally cut to the first N sentences."""
    splits = load_conll2003(cfg["data_dir"], verify_sizes=cfg.get("verify_sizes", True))
    limits = {"train": cfg.get("max_train_sentences"), "dev": cfg.get("max_eval_sentences"),
              "test": cfg.get("max_eval_sentences")}
    for split, limit in limits.items():
        if limit:
            splits[split] = splits[split][:limit]
    for split, sentences in splits.items():
        log.info("%s: %d sentences, %d tokens", split, len(sentences), sum(len(s) for s in sentences))
    return splits


def name_coverage(keyed, emb: DictConfig) -> dict[str, Any]:
    """Which evaluation names the pretrained vocabulary lacks (the paper lists them per embedding)."""
    from nerbias.embeddings import coverage
    from nerbias.names import load_names

    names = load_names(emb.get("coverage_names"))
    listed = [n for n in names.names if n != names.oov]
    found, missing = coverage(keyed, listed, emb.lowercase)
    return {"names": len(listed), "found": len(found), "missing": missing,
            "missing_by_group": {n: names.group_of[n] for n in missing}}


def build_tagger(cfg: DictConfig, train: Sequence[Sentence]) -> tuple[NerTagger, dict[str, Any] | None]:
    """Vocabularies and model from config; pretrained vectors from ``embeddings``.

    Returns the tagger and, for pretrained word embeddings, the coverage of the evaluation names
    (``embeddings=elmo`` has no word vocabulary: every token is encoded from its characters).
    """
    emb = cfg.embeddings
    resolved = OmegaConf.to_container(cfg, resolve=True)
    model_cfg = dict(OmegaConf.to_container(cfg.model, resolve=True))
    if emb.kind == "elmo":
        model_cfg["elmo"] = {key: value for key, value in OmegaConf.to_container(emb, resolve=True).items()
                             if key in ("size", "pretrained_lm", "options_file", "weight_file", "char_cnn", "lstm",
                                        "freeze_lm", "dropout")}
        return NerTagger.build(train, model_cfg, lowercase_words=emb.get("lowercase", False), config=resolved), None
    model_cfg["word_dim"] = emb.dim
    model_cfg["freeze_words"] = emb.get("freeze", False)
    if emb.kind == "random":
        return NerTagger.build(train, model_cfg, lowercase_words=emb.lowercase, config=resolved), None
    source = emb.get("path") or emb.source
    keyed = load_keyed_vectors(emb.source, emb.get("path"))
    log.info("%s: %d pretrained vectors of dimension %d", source, len(keyed.index_to_key), keyed.vector_size)
    names = name_coverage(keyed, emb)
    log.info("%s covers %d of %d evaluation names; missing: %s", source, names["found"], names["names"],
             ", ".join(f"{n} ({g})" for n, g in names["missing_by_group"].items()) or "none")
    pretrained_words = keyed.index_to_key if emb.get("include_pretrained_vocab", True) else []
    if emb.lowercase:
        pretrained_words = list(dict.fromkeys(w.lower() for w in pretrained_words))

    def matrix(words: list[str]) -> torch.Tensor:
        values, hits = embedding_matrix(keyed, words, emb.dim, emb.lowercase, seed=cfg.seed, source=str(source))
        log.info("word vocabulary %d, %d with pretrained vectors", len(words), hits)
        return torch.from_numpy(values)

    tagger = NerTagger.build(train, model_cfg, pretrained_words=pretrained_words, lowercase_words=emb.lowercase,
                             config=resolved, word_matrix_fn=matrix)
    return tagger, names


def evaluate_split(tagger: NerTagger, sentences: Sequence[Sentence], batch_size: int, desc: str,
                   confidences: bool = False) -> tuple[dict[str, float], list[Prediction]]:
    predictions = tagger.predict([s.tokens for s in sentences], batch_size=batch_size, confidences=confidences,
                                 progress=True)
    scores = entity_scores([bioes_tags(s) for s in sentences], [p.tags for p in predictions])
    log.info("%s: precision %.4f recall %.4f F1 %.4f", desc, scores["precision"], scores["recall"], scores["f1"])
    return scores, predictions


def write_predictions(output_dir: Path, name: str, sentences: Sequence[Sentence],
                      predictions: Sequence[Prediction]) -> None:
    """``<name>.conll`` (token, gold, predicted; IOB1 like the source, conlleval-ready) and
    ``<name>_spans.tsv`` (every predicted entity with its exact confidence)."""
    rows = []
    span_lines = ["sentence\tstart\tend\tlabel\tconfidence\ttext"]
    for number, (sentence, prediction) in enumerate(zip(sentences, predictions)):
        gold = bioes_to_iob1(bioes_tags(sentence))
        predicted = bioes_to_iob1(prediction.tags)
        rows.append([[token, g, p] for token, g, p in zip(sentence.tokens, gold, predicted)])
        for span, confidence in zip(prediction.spans, prediction.confidences):
            text = " ".join(sentence.tokens[span.start:span.end])
            span_lines.append(f"{number}\t{span.start}\t{span.end}\t{span.label}\t{confidence:.6f}\t{text}")
    write_conll(output_dir / f"{name}.conll", rows)
    atomic_write_text(output_dir / f"{name}_spans.tsv", "\n".join(span_lines) + "\n")


# Config sections that define what is trained; a resumed run must agree on all of them.
RUN_DEFINING_KEYS = ("seed", "data", "embeddings", "model")


def check_same_run(saved: Mapping[str, Any], current: Mapping[str, Any], path: Path) -> None:
    """Refuse to continue another configuration's weights (e.g. a sweep rerun in another order)."""
    differing = [key for key in RUN_DEFINING_KEYS if saved.get(key) != current.get(key)]
    if differing:
        raise NerbiasError(f"{path}: was trained with a different {', '.join(differing)} than this run; "
                           "resume only the same configuration (or start a new run directory)")


class TaggerOptimizer:
    """The configured optimizer for dense parameters, SparseAdam for a sparse word table.

    Fine-tuning a 400k x 50 table with dense Adam costs more than the whole network; sparse
    gradients touch only the rows of a batch. Gradient clipping applies to dense parameters.
    """

    def __init__(self, model: torch.nn.Module, tcfg: DictConfig):
        words = getattr(model, "words", None)
        sparse = [words.weight] if words is not None and words.sparse and words.weight.requires_grad else []
        dense = [p for p in model.parameters() if p.requires_grad and all(p is not q for q in sparse)]
        self.dense_params = dense
        self.grad_clip = tcfg.grad_clip
        self.dense = instantiate(tcfg.optimizer)(dense)
        lr = tcfg.get("embedding_lr") or tcfg.optimizer.lr
        self.sparse = torch.optim.SparseAdam(sparse, lr=lr) if sparse else None

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
    def __init__(self, cfg: DictConfig, output_dir: str | Path):
        self.cfg = cfg
        self.tcfg = cfg.trainer
        self.output_dir = Path(output_dir)
        self.checkpoint_dir = self.output_dir / "checkpoints"
        self.device = resolve_device(self.tcfg.device)

    def _checkpoint_payload(self, tagger: NerTagger, optimizer, epoch: int, best_f1: float, best_epoch: int,
                            bad_epochs: int, history: list, shuffle_gen: torch.Generator) -> dict[str, Any]:
        payload = tagger.state()
        payload["trainer_state"] = {
            "epoch": epoch, "best_f1": best_f1, "best_epoch": best_epoch, "bad_epochs": bad_epochs,
            "history": history, "optimizer": optimizer.state_dict(),
            "torch_rng": torch.get_rng_state(), "shuffle_rng": shuffle_gen.get_state(),
        }
        if torch.cuda.is_available():
            payload["trainer_state"]["cuda_rng"] = torch.cuda.get_rng_state_all()
        return payload

    def fit(self, logger: NullLogger | None = None) -> dict[str, float]:
        cfg, tcfg = self.cfg, self.tcfg
        logger = logger or NullLogger()
        torch.manual_seed(cfg.seed)
        shuffle_gen = torch.Generator().manual_seed(cfg.seed)
        data = load_data(cfg.data)
        last_path = self.checkpoint_dir / "last.pt"
        start_epoch, best_f1, best_epoch, bad_epochs, history = 0, -math.inf, -1, 0, []

        resume_from = self._resume_path()
        if resume_from is not None:
            payload = load_checkpoint(resume_from)
            check_same_run(payload.get("config") or {}, OmegaConf.to_container(cfg, resolve=True), resume_from)
            tagger = NerTagger.from_state(payload, source=str(resume_from)).to(self.device)
        else:
            tagger, names = build_tagger(cfg, data["train"])
            tagger.to(self.device)
            if names is not None:
                atomic_write_json(self.output_dir / "embedding_coverage.json", names)
                logger.summary({"embedding_names_found": names["found"], "embedding_names_missing": names["missing"]})
        model = tagger.model
        optimizer = TaggerOptimizer(model, tcfg)
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
            log.info("resumed from %s after epoch %d (best dev F1 %.4f)", resume_from, state["epoch"] + 1, best_f1)

        n_params = sum(p.numel() for p in model.parameters())
        log.info("model: %d parameters on %s", n_params, self.device)
        stop = bad_epochs >= tcfg.patience
        epochs = tqdm(range(start_epoch, tcfg.max_epochs), desc="epochs", initial=start_epoch, total=tcfg.max_epochs)
        for epoch in epochs:
            if stop:
                break
            started = time.perf_counter()
            model.train()
            total_loss, n_batches, n_sentences = 0.0, 0, 0
            batches = iterate_batches(data["train"], tagger.encoder, tcfg.batch_size, shuffle=True,
                                      generator=shuffle_gen)
            total = math.ceil(len(data["train"]) / tcfg.batch_size)
            for batch in tqdm(batches, total=total, desc=f"epoch {epoch + 1}", leave=False):
                batch = batch.to(self.device)
                optimizer.zero_grad(set_to_none=True)
                loss = model.loss(batch.words, batch.chars, batch.mask, batch.tags)
                loss.backward()
                optimizer.clip_and_step()
                total_loss += loss.item()
                n_batches += 1
                n_sentences += len(batch.index)
            train_seconds = time.perf_counter() - started
            dev_scores, _ = evaluate_split(tagger, data["dev"], tcfg.eval_batch_size, f"dev (epoch {epoch + 1})")
            record = {"epoch": epoch + 1, "train_loss": total_loss / max(n_batches, 1), "dev_f1": dev_scores["f1"],
                      "train_sentences_per_second": n_sentences / train_seconds}
            history.append(record)
            improved = dev_scores["f1"] > best_f1
            if improved:
                best_f1, best_epoch, bad_epochs = dev_scores["f1"], epoch, 0
            else:
                bad_epochs += 1
            payload = self._checkpoint_payload(tagger, optimizer, epoch, best_f1, best_epoch, bad_epochs, history,
                                               shuffle_gen)
            if improved:
                best = dict(payload)
                best.pop("trainer_state")
                save_checkpoint(self.checkpoint_dir / "best.pt", best)
            save_checkpoint(last_path, payload)
            logger.log(record, step=epoch + 1)
            epochs.set_postfix(loss=f"{record['train_loss']:.3f}", dev_f1=f"{dev_scores['f1']:.4f}")
            log.info("epoch %d: loss %.4f, dev F1 %.4f (best %.4f at epoch %d), %.0f sentences/s",
                     epoch + 1, record["train_loss"], dev_scores["f1"], best_f1, best_epoch + 1,
                     record["train_sentences_per_second"])
            stop = bad_epochs >= tcfg.patience
            if stop:
                log.info("early stopping: no dev improvement for %d epochs", bad_epochs)

        return self.finish(data, history, logger)

    def _resume_path(self) -> Path | None:
        resume = self.tcfg.get("resume", False)
        if resume in (False, None, "false"):
            return None
        path = self.checkpoint_dir / "last.pt" if resume in (True, "true") else Path(str(resume))
        if not path.is_file():
            if resume in (True, "true"):
                log.info("trainer.resume=true but %s does not exist yet: starting fresh", path)
                return None
            raise NerbiasError(f"trainer.resume: {path} does not exist")
        return path

    def finish(self, data: dict[str, list[Sentence]], history: list, logger: NullLogger) -> dict[str, float]:
        """Score the best checkpoint on dev and test; write metrics, predictions, artifacts."""
        best_path = self.checkpoint_dir / "best.pt"
        if not best_path.is_file():
            raise NerbiasError(f"{best_path}: no best checkpoint (did training run any epoch?)")
        tagger = NerTagger.load(best_path, device=str(self.device))
        batch_size = self.tcfg.eval_batch_size
        dev_scores, _ = evaluate_split(tagger, data["dev"], batch_size, "dev (best)")
        test_scores, test_predictions = evaluate_split(tagger, data["test"], batch_size, "test (best)",
                                                       confidences=True)
        write_predictions(self.output_dir, "test_predictions", data["test"], test_predictions)
        metrics = {f"dev_{k}": v for k, v in dev_scores.items()}
        metrics.update({f"test_{k}": v for k, v in test_scores.items()})
        metrics["epochs"] = len(history)
        metrics["best_epoch"] = max(range(len(history)), key=lambda i: history[i]["dev_f1"]) + 1 if history else 0
        atomic_write_json(self.output_dir / "metrics.json", {"metrics": metrics, "history": history})
        logger.summary(metrics)
        logger.artifact(f"model-{self.cfg.get('run_name') or 'nerbias'}", "model", best_path)
        log.info("test F1 %.4f (dev %.4f); metrics in %s", metrics["test_f1"], metrics["dev_f1"],
                 self.output_dir / "metrics.json")
        return metrics


CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"


def bias_evaluation_configs(cfg: DictConfig, checkpoint: Path) -> list[tuple[str, DictConfig]]:
    """One evaluate-style config per (corpus, casing) of ``cfg.bias_eval``.

    Corpus settings come from ``configs/corpus/<name>.yaml`` (the same files evaluate.py uses),
    with ``bias_eval.corpus_overrides.<name>`` on top.
    """
    spec = cfg.bias_eval
    runs = []
    for name in spec.corpora:
        for lowercase in spec.lowercase:
            corpus = OmegaConf.load(CONFIG_DIR / "corpus" / f"{name}.yaml")
            corpus = OmegaConf.merge(corpus, spec.get("corpus_overrides", {}).get(name, {}), {"lowercase": lowercase})
            eval_cfg = OmegaConf.create({
                "paths": OmegaConf.to_container(cfg.paths, resolve=True), "seed": cfg.seed, "corpus": corpus,
                "tagger": {"kind": "checkpoint", "path": str(checkpoint), "device": cfg.trainer.device,
                           "batch_size": cfg.trainer.eval_batch_size},
                "metrics": OmegaConf.to_container(spec.metrics), "shards_dir": None, "merge_shards": False})
            runs.append((f"{name}{'_lower' if lowercase else ''}", eval_cfg))
    return runs


def run_training(cfg: DictConfig, output_dir: str | Path) -> dict[str, float]:
    """Train and score on CoNLL-03; then, when ``bias_eval`` is set, evaluate the best checkpoint
    on the bias corpora into ``<run dir>/bias/<corpus>[_lower]/``, logged to the same W&B run."""
    resolved = OmegaConf.to_container(cfg, resolve=True)
    logger = build_logger(resolved.get("logger"), resolved, save_dir=output_dir)
    try:
        metrics = Trainer(cfg, output_dir).fit(logger)
        if cfg.get("bias_eval"):
            from nerbias.bias_eval import run_bias_evaluation

            checkpoint = Path(output_dir) / "checkpoints" / "best.pt"
            for name, eval_cfg in bias_evaluation_configs(cfg, checkpoint):
                log.info("bias evaluation: %s", name)
                run_dir = Path(output_dir) / "bias" / name
                run_dir.mkdir(parents=True, exist_ok=True)
                metrics.update(run_bias_evaluation(eval_cfg, run_dir, logger))
        return metrics
    finally:
        logger.finish()

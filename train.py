"""Train a BiLSTM-CRF tagger on CoNLL-03 (see configs/train.yaml)."""

import logging
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from nerbias.errors import NerbiasError

log = logging.getLogger("train")


@hydra.main(version_base="1.3", config_path="configs", config_name="train")
def main(cfg: DictConfig) -> float:
    from nerbias.trainer import run_training

    try:
        metrics = run_training(cfg, HydraConfig.get().runtime.output_dir)
    except NerbiasError as error:
        log.error("%s", error)  # into the run's log file
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    return metrics["dev_f1"]  # for Hydra sweepers that optimise a value


if __name__ == "__main__":
    main()

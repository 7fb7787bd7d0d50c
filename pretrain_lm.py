"""Pretrain the ELMo-style biLM on raw text (see configs/pretrain_lm.yaml)."""

import logging
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from nerbias.errors import NerbiasError

log = logging.getLogger("pretrain_lm")


@hydra.main(version_base="1.3", config_path="configs", config_name="pretrain_lm")
def main(cfg: DictConfig) -> None:
    from nerbias.lm_pretraining import pretrain

    try:
        pretrain(cfg, HydraConfig.get().runtime.output_dir)
    except NerbiasError as error:
        log.error("%s", error)
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()

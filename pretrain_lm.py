"""Pretrain the ELMo-style biLM on raw text (see configs/pretrain_lm.yaml)."""


import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from nerbias.building import register_resolvers
from nerbias.errors import run_or_exit

register_resolvers()  # ${run_id:} in configs/hydra: a unique default run directory


@hydra.main(version_base="1.3", config_path="configs", config_name="pretrain_lm")
def main(cfg: DictConfig) -> None:
    from nerbias.training.lm_pretraining import pretrain

    run_or_exit(pretrain, cfg, HydraConfig.get().runtime.output_dir, log_name="pretrain_lm")


if __name__ == "__main__":
    main()

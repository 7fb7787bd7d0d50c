"""Train a BiLSTM-CRF tagger on CoNLL-03 (see configs/train.yaml)."""


import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from nerbias.building import register_resolvers
from nerbias.errors import run_or_exit

register_resolvers()  # ${run_id:} in configs/hydra: a unique default run directory


@hydra.main(version_base="1.3", config_path="configs", config_name="train")
def main(cfg: DictConfig) -> float:
    from nerbias.tasks import run_training

    metrics = run_or_exit(run_training, cfg, HydraConfig.get().runtime.output_dir, log_name="train")
    return metrics["dev_f1"]  # for Hydra sweepers that optimise a value


if __name__ == "__main__":
    main()

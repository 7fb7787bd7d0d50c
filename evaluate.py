"""Evaluate a tagger on a corpus (see configs/evaluate.yaml)."""

import os

# oneDNN caches one LSTM primitive (with its workspace) per input shape, up to 1024; the
# bias corpora produce many (batch, length) shapes, so a small cache keeps memory flat.
os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "16")

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from nerbias.building import register_resolvers
from nerbias.errors import run_or_exit

register_resolvers()  # ${run_id:} in configs/hydra: a unique default run directory


@hydra.main(version_base="1.3", config_path="configs", config_name="evaluate")
def main(cfg: DictConfig) -> None:
    from nerbias.tasks import run_evaluation

    run_or_exit(run_evaluation, cfg, HydraConfig.get().runtime.output_dir, log_name="evaluate")


if __name__ == "__main__":
    main()

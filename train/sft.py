"""Old import path of the training code, kept only for the modules outside train/ that still import it
(``demo.py``, ``preflight.py``, ``bench/``, ``tests/test_hardware.py``, ``tests/test_distill.py``).

The code lives in :mod:`.silver_data`, :mod:`.encoding`, :mod:`.balance`, :mod:`.trainer`,
:mod:`.hf_configs`, :mod:`.model_card`, :mod:`.run` and :mod:`.cli`; import from those. Delete this file
once nothing imports ``vista_distill.train.sft``.
"""

from .hf_configs import build_quantization_config, training_device, training_hardware, training_precision
from .model_card import SUMMARY_NAME
from .run import prepare_stage, stage_output_dir, train_stages
from .silver_data import load_silver

__all__ = ["SUMMARY_NAME", "build_quantization_config", "load_silver", "prepare_stage", "stage_output_dir",
           "train_stages", "training_device", "training_hardware", "training_precision"]

"""Train the stage 3 adapter (why unverifiable: OUT-OF-SCOPE / CONTRADICTED / LACKING EVIDENCE /
ABSTENTION) from a recipe's silver data.

    accelerate launch train/stage3.py --config recipes/smollm2-135m-cpu.yaml [--train.max_steps 50]
    python train/stage3.py --config recipes/smollm2-135m-cpu.yaml train.learning_rate=1e-4

Multi-GPU: add `--config_file recipes/accelerate/{ddp,fsdp,deepspeed_zero3}.yaml` after `accelerate launch`.
"""

import os
import sys

if __name__ == "__main__":
    # Run as a file, this folder would come first on sys.path and its modules (cli.py, sft.py) could
    # shadow top-level ones; the code lives in the installed package.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        from vista_distill.train.sft import main
    except ImportError as e:
        sys.exit(f"error: vista_distill is not importable ({e}); install the clone first: pip install -e .")
    sys.exit(main("stage3"))

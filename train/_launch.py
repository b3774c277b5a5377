"""Entry point shared by ``train/stage{1,2,3}.py`` when they are run as files (``accelerate launch``)."""

import os
import sys


def launch(stage: str) -> None:
    # Run as a file, train/ comes first on sys.path and its modules (cli.py, run.py...) could shadow
    # top-level ones; the code lives in the installed package.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        from vista_distill.train.cli import main
    except ImportError as e:
        sys.exit(f"error: vista_distill is not importable ({e}); install the clone first: pip install -e .")
    sys.exit(main(stage))

"""Shared fixtures. Tests run without ../shared: they use the bundled sample and their own fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import SAMPLE, start_vllm_install

if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    # parallel workers share the cores: one torch thread each (and in the commands they start), as two
    # threads fighting for one core run several times slower than one
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


# A test that asks for one of these fixtures needs the embedded SmolLM2-135M's own answers: it is ``slow``.
EMBEDDED_FIXTURES = {"embedded_backend", "trained_student"}


@pytest.hookimpl(tryfirst=True)   # before ``-m`` deselects
def pytest_collection_modifyitems(session, config, items) -> None:
    """Mark the tests of the embedded model ``slow``: they run in the README's full test command, not in plain
    ``python -m pytest``. Then put the files of real servers first and the other slow ones next: a few long files
    started last would leave one worker running them alone at the end (``--no-loadscope-reorder`` in addopts keeps
    this order)."""
    for item in items:
        if EMBEDDED_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    rank: dict[str, int] = {}
    for item in items:
        marks = {m.name for m in item.iter_markers()}
        r = 0 if "server" in marks else 1 if marks & {"slow", "browser"} else 2
        rank[item.nodeid.split("::")[0]] = min(r, rank.get(item.nodeid.split("::")[0], 2))
    items.sort(key=lambda item: rank[item.nodeid.split("::")[0]])   # stable: collection order within a rank


def pytest_collection_finish(session) -> None:
    """When tests that serve through vLLM are selected, install its CPU build now, in the background (a few minutes
    the first time), so the install overlaps the tests that run before them."""
    if any(Path(str(item.fspath)).name == "test_vllm_student.py" for item in session.items):
        start_vllm_install()


@pytest.fixture(scope="session")
def sample_path() -> Path:
    return SAMPLE


@pytest.fixture(scope="session")
def embedded_backend():
    """The embedded SmolLM2-135M in fp32 (deterministic enough for exact batched-vs-single checks)."""
    from vista_distill.backends.transformers import TransformersBackend

    return TransformersBackend(dtype="float32", batch_size=8)


@pytest.fixture(scope="session")
def tiny_smollm2(tmp_path_factory) -> Path:
    """The embedded model's architecture and tokenizer at two layers and random weights (tests/helpers.py)."""
    from helpers import build_tiny_smollm2

    return build_tiny_smollm2(tmp_path_factory.mktemp("tiny-smollm2"))


@pytest.fixture(scope="session")
def trained_student(tmp_path_factory):
    """Three stage adapters trained 3 steps on the bundled sample's silver data (float32, rank 8, last four
    layers), and the recipe they were trained with: the student the served-student tests serve."""
    from filelock import FileLock

    from vista_distill.config import load_recipe

    # one training for the whole session: pytest-xdist's workers share their base temp folder's parent; the first
    # trains under the lock, the others read what it saved
    base = tmp_path_factory.getbasetemp()
    tmp = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "trained-student"
    with FileLock(str(tmp) + ".lock"):
        if not (tmp / "trained").exists():
            _train_student(tmp)
            (tmp / "trained").touch()
    return load_recipe(tmp / "recipe.yaml"), tmp / "ck"


@pytest.fixture(scope="session")
def trained_tiny_student(tmp_path_factory):
    """Three stage adapters trained 3 steps on the bundled sample's silver data on a tiny random SmolLM2 that vLLM's
    CPU attention takes (``helpers.VLLM_SHRINK``), and their recipe: the student of the served tests of serving
    mechanics (replicas, evidence heads), where what the model says does not matter."""
    from helpers import VLLM_SHRINK, build_tiny_smollm2

    from vista_distill.config import load_recipe

    tmp = tmp_path_factory.mktemp("trained-tiny-student")
    _train_student(tmp, build_tiny_smollm2(tmp / "model", shrink=VLLM_SHRINK))
    return load_recipe(tmp / "recipe.yaml"), tmp / "ck"


def _train_student(tmp: Path, model: Path | None = None) -> None:
    import torch
    import yaml
    from helpers import distill_sample

    from vista_distill.config import load_recipe
    from vista_distill.train.run import train_stages

    tmp.mkdir(parents=True, exist_ok=True)
    silver = distill_sample(tmp / "silver")
    raw = {"name": "served", "student": {"dtype": "float32", "model": str(model) if model else None},
           "lora": {"r": 8, "alpha": 16, "layers_to_transform": None if model else [-4, -3, -2, -1]},
           "train": {"output_dir": str(tmp / "ck"), "silver_dir": str(silver), "max_steps": 3, "max_length": 384,
                     "learning_rate": 2e-3, "per_device_train_batch_size": 4, "use_cpu": True, "save_steps": 100,
                     "eval_steps": 100, "logging_steps": 1, "cpu_threads": 1}}
    path = tmp / "recipe.yaml"
    path.write_text(yaml.safe_dump(raw))
    recipe = load_recipe(path)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train_stages(recipe, "all")
    finally:
        torch.set_num_threads(before)

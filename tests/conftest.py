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
    from vista_distill.local_backend import TransformersBackend

    return TransformersBackend(dtype="float32", batch_size=8)

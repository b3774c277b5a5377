"""``VistaScorer.from_pretrained``: stage adapters from a local folder or a Hub repository (the Hub's own cache
layout, read offline by huggingface_hub in a child process, as the Hub is not reachable from the test machines),
with the base model and prompt style taken from what the adapters carry."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from helpers import score_sample

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _labels(records: list[dict]) -> list:
    return [[c["text"], c.get("category")] for r in records for c in r.get("claims") or []]


def test_from_pretrained_reads_what_a_local_adapters_folder_carries(trained_student):
    from vista_distill.scorer import VistaScorer

    recipe, adapters = trained_student
    scorer = VistaScorer.from_pretrained(adapters=adapters, dtype="float32", threads=None, batch_size=8)
    assert scorer.config.style == recipe.pipeline.student_prompt_style == "compact"
    assert set(scorer.backend.adapters) == {"stage1", "stage2", "stage3"}
    from vista_distill.backends.model_loading import resolve_model

    assert scorer.backend.model_path == resolve_model(None)   # training_summary.json: base_model_arg None, the embedded
    records = score_sample(scorer.backend, recipe)
    assert records and _labels(records)
    with pytest.raises(FileNotFoundError, match="adapters folder not found"):
        VistaScorer.from_pretrained(adapters=adapters / "missing")


def test_from_pretrained_loads_a_hub_repository_from_the_cache(trained_student, tmp_path):
    _, adapters = trained_student
    cache = tmp_path / "hub"
    repo = cache / "models--someone--vista-student"
    shutil.copytree(adapters, repo / "snapshots" / COMMIT, ignore=shutil.ignore_patterns("checkpoint-*"))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    script = (
        "import json\n"
        "from vista_distill.scorer import VistaScorer\n"
        "s = VistaScorer.from_pretrained(adapters='someone/vista-student', dtype='float32', threads=None)\n"
        "print(json.dumps({'style': s.config.style, 'adapters': {k: str(v) for k, v in s.backend.adapters.items()},\n"
        "                  'heads': sorted(s.backend.heads)}))\n")
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600,
                         check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["style"] == "compact"
    assert got["adapters"] == {s: str(repo / "snapshots" / COMMIT / s) for s in ("stage1", "stage2", "stage3")}
    # the repository's stage folders, with the evidence heads they carry, as the local folder gives them
    from vista_distill.backends.adapters import find_stage_adapters
    from vista_distill.backends.evidence_head import EvidenceHead

    assert got["heads"] == sorted(s for s, p in find_stage_adapters(adapters).items() if EvidenceHead.load(p))

"""docs/add-backend.md: the page's backend, written in the two verbs, runs on a tiny random model of the embedded
SmolLM2's architecture, gives the shipped in-process backend's label answers through the one label layer, and runs
the pipeline."""

from __future__ import annotations

import re

import pytest
from helpers import ROOT, SAMPLE

from vista_distill.pipeline.protocol import Fields
from vista_distill.pipeline.templates import get_template, stage_request

PAGE = ROOT / "docs" / "add-backend.md"


def _page_backend() -> type:
    block = re.search(r"<!-- example-backend -->\s*```python\n(.*?)\n```", PAGE.read_text(encoding="utf-8"), re.S)
    assert block, "docs/add-backend.md: no code block under <!-- example-backend -->"
    scope: dict = {}
    exec(compile(block.group(1), str(PAGE), "exec"), scope)   # noqa: S102 - the page's own example
    return scope["PlainBackend"]


def test_the_pages_backend_answers_as_the_shipped_one(tiny_smollm2):
    from vista_distill.backends.transformers import TransformersBackend

    plain = _page_backend()(str(tiny_smollm2))
    shipped = TransformersBackend(str(tiny_smollm2), dtype="float32", threads=1)
    ref = "The Eiffel Tower is in Paris. It was completed in 1889."
    requests = [stage_request(get_template(stage, "compact"), Fields(claim=c, reference=ref, background=("A fact.",)),
                              labels=get_template(stage, "compact").labels)
                for stage in ("stage2", "stage3") for c in ("It is in Paris.", "I love towers.")]
    mine, theirs = plain.run(requests), shipped.run(requests)
    assert [a.label for a in mine] == [b.label for b in theirs]
    for a, b in zip(mine, theirs):
        assert a.probs == pytest.approx(b.probs, abs=1e-4) and set(a.probs) == set(b.probs)
    (gen,) = plain.run([stage_request(get_template("stage1", "compact"), Fields(target="Paris is big.",
                                                                                history=(("user", "Hi"),)),
                                      max_new_tokens=6)])
    assert gen.completion_tokens > 0 and gen.label is None


def test_the_pipeline_runs_through_the_pages_backend(tiny_smollm2):
    from vista_distill.data.io import read_conversations
    from vista_distill.pipeline.engine import EngineConfig
    from vista_distill.scoring.run import run_pipeline

    conversations = read_conversations(SAMPLE)[:1]
    cfg = EngineConfig(style="compact", claims="gold")
    records, _ = run_pipeline(conversations, cfg, _page_backend()(str(tiny_smollm2)))
    scored = [r for r in records if r.get("scored")]
    assert scored and all(c["stage2"]["label"] in ("VERIFIED", "UNVERIFIABLE") for r in scored for c in r["claims"])

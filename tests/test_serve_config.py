"""publish/serve_config.py pieces that need no server: the LoRA rank vLLM is told (it accepts only some)."""

from __future__ import annotations

import pytest

from vista_distill.publish.serve_config import ServeConfigError, vllm_max_lora_rank


def test_vllm_is_told_a_max_lora_rank_it_accepts():
    # vLLM's --max-lora-rank takes 1, 8, 16, 32, ...: a rank-2 adapter (vLLM exited with an argument error at start
    # when told 2) is served under 8
    assert [vllm_max_lora_rank(r) for r in (1, 2, 8, 9, 16, 17, 512)] == [1, 8, 8, 16, 16, 32, 512]
    with pytest.raises(ServeConfigError, match="ranks up to 512"):
        vllm_max_lora_rank(513)

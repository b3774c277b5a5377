"""The one way a recipe's student or base model becomes a backend, for the scorer, ``score``, ``eval`` and the demo.

On servers when there are any (``--server`` URLs, else ``student.servers``): :func:`.server.server_backend`, the
student's adapters under their served names. Otherwise in process: :class:`.transformers.TransformersBackend` with
the recipe's model-loading settings (model, precision, 4-bit, chat-template options, attention), with the stage
adapters for the student. The teacher is built from its own section (:func:`.teacher.build_teacher`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:   # annotations only: the recipe object sits above this layer
    from ..config import Recipe
    from ..pipeline.protocol import Backend

Role = Literal["student", "base"]
# label answers an eval's in-process backends keep for prompts asked again (its evidence probes:
# backends/label_memo.py); ``score`` keeps none, so a resumed run computes what the uninterrupted one did
LABEL_MEMO = 4096


def backend_for(recipe: Recipe, role: Role = "student", *,
                adapters: str | Path | Mapping[str, str | Path] | None = None,
                servers: Sequence[str] | None = None, cache_dir: str | None = None, **local: Any) -> Backend:
    """The recipe's ``role`` as a backend. ``adapters``: the student's stage adapters (a folder with ``stage1/``
    ... or ``{stage: dir}``; in process only); ``servers``: OpenAI-compatible URLs (default ``student.servers``);
    ``cache_dir``: where served answers are cached; ``local``: in-process settings over the recipe's
    (:class:`.backend_options.BackendOptions` fields, None: the recipe's): ``batch_size`` (default
    ``eval.batch_size``), ``threads`` (default: as the process is set), ``dtype`` (default ``student.dtype``),
    ``label_memo``."""
    if role not in ("student", "base"):
        raise ValueError(f"role must be 'student' or 'base', got {role!r} (the teacher: backends.teacher)")
    s = recipe.student
    if servers or s.servers:
        from .server import server_backend

        folder = adapters if isinstance(adapters, (str, Path)) else None   # where the evidence heads are
        return server_backend(recipe, role, servers=servers, cache_dir=cache_dir, adapters=folder)
    from .backend_options import BackendOptions
    from .transformers import TransformersBackend

    options = BackendOptions(dtype=s.dtype, load_in_4bit=s.load_in_4bit, batch_size=recipe.eval.batch_size,
                             chat_template_kwargs=s.chat_template_kwargs, attn_implementation=s.attn_implementation,
                             merge_adapters=s.merge_adapters)
    return TransformersBackend(s.model, adapters=adapters if role == "student" else None, options=options,
                               **{k: v for k, v in local.items() if v is not None})

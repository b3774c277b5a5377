"""The teacher named by a recipe's ``teacher`` section, wrapped for caching, self-consistency and
provenance.

* ``openai``: :class:`OpenAIBackend`, caching each call as it completes;
* ``transformers``: the local :class:`~vista_distill.backends.transformers.TransformersBackend` behind
  :class:`CachedBackend` (cached per batch);
* ``labels``: human claim labels (:class:`LabelsBackend`), with ``teacher.fallback`` (a model on
  ``base_url`` when one is set, else a local model) for the requests the labels do not cover.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..data.schema import Conversation
from ..pipeline.protocol import Backend
from ..runtime.exit_codes import UsageError
from .cache import CallCache
from .openai_compat import OpenAIBackend, redact_url
from .wrappers import CachedBackend, VotingBackend

if TYPE_CHECKING:   # annotations only: the recipe object sits above this layer
    from ..config import Recipe, TeacherConfig


@dataclass
class Teacher:
    """The backend chain to hand to the engine, the innermost backend (stats, progress) and a name."""

    backend: Backend
    core: Any
    name: str
    description: dict[str, Any]


def _openai(cfg: TeacherConfig, model: str | None, cache: CallCache) -> OpenAIBackend:
    if not cfg.base_url:
        raise UsageError("teacher.base_url is required for an OpenAI-compatible teacher "
                           "(e.g. http://127.0.0.1:8000/v1)")
    if not model:
        raise UsageError("teacher.model is required for an OpenAI-compatible teacher (the served model name)")
    return OpenAIBackend(model, cfg.base_url, cfg, cache=cache)   # the section is the backend's OpenAISettings


def local_identity(model: str | None, dtype: str, chat_template_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """What keys a local teacher's cached answers: the weights and chat template it renders with (digests
    of the files on disk, see :mod:`.fingerprint`; a hub id not downloaded yet: its name and
    revision), the template variables, the resolved dtype and greedy decoding. A local folder is keyed by
    its content, not its path, so a moved or copied model keeps its cache."""
    from .fingerprint import model_fingerprint
    from .model_loading import is_embedded, resolve_model

    path = resolve_model(model)   # the embedded model: its converted copy in the cache (converted once)
    if is_embedded(model):
        name = "embedded:SmolLM2-135M"
    else:
        name = "local folder" if Path(model).expanduser().is_dir() else model
    return {"backend": "transformers", "model": name, **model_fingerprint(path), "dtype": dtype,
            "chat_template_kwargs": dict(chat_template_kwargs), "decoding": "greedy"}


def _local(cfg: TeacherConfig, model: str | None, cache: CallCache) -> CachedBackend:
    from ..runtime.hardware import resolve_dtype
    from .transformers import TransformersBackend

    # The resolved dtype (not "auto") keys the cache: answers computed in bf16 and in fp32 differ.
    dtype = resolve_dtype(cfg.dtype, where="teacher.dtype").dtype
    return CachedBackend(lambda: TransformersBackend(model, dtype=dtype, batch_size=cfg.batch_size,
                                                     threads=cfg.threads,
                                                     chat_template_kwargs=cfg.chat_template_kwargs), cache,
                         local_identity(model, dtype, cfg.chat_template_kwargs), name="transformers")


def build_teacher(recipe: Recipe, conversations: Iterable[Conversation], cache: CallCache) -> Teacher:
    """The teacher backend of ``recipe`` (see the module docstring)."""
    cfg = recipe.teacher
    desc: dict[str, Any] = {"backend": cfg.backend, "model": cfg.model, "prompt_style": cfg.prompt_style,
                            "temperature": cfg.temperature, "seed": cfg.seed}
    if cfg.backend == "openai":
        core: Any = _openai(cfg, cfg.model, cache)
        name = f"openai:{cfg.model}"
        desc["base_url"] = redact_url(core.base_url)
        chain: Any = core
    elif cfg.backend == "transformers":
        core = chain = _local(cfg, cfg.model, cache)
        name = f"transformers:{cfg.model or 'SmolLM2-135M-Instruct'}"
        desc["dtype"] = core.identity["dtype"]
    elif cfg.backend == "labels":
        from .human_labels import LabelsBackend

        fallback = None
        name = "labels"
        if cfg.fallback:
            fallback = _openai(cfg, cfg.fallback, cache) if cfg.base_url else _local(cfg, cfg.fallback, cache)
            name = f"labels+{'openai' if cfg.base_url else 'transformers'}:{cfg.fallback}"
            desc["fallback"] = cfg.fallback
        chain = LabelsBackend(conversations, fallback=fallback)
        core = fallback if fallback is not None else chain
    else:
        raise UsageError(f"teacher.backend must be openai, transformers or labels, got {cfg.backend!r}")
    k = recipe.distill.self_consistency_k
    if k > 1:
        if not isinstance(chain, OpenAIBackend):
            raise UsageError(f"distill.self_consistency_k = {k} needs teacher.backend openai (samples from a "
                               f"server); {cfg.backend!r} is deterministic")
        chain = VotingBackend(chain, k, recipe.distill.self_consistency_temperature)
        desc["self_consistency"] = {"k": k, "temperature": recipe.distill.self_consistency_temperature}
    desc["name"] = name
    return Teacher(chain, core, name, desc)

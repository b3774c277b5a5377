"""Fingerprints of a local model's files and chat template, for the teacher's call-cache key.

Cached answers are only valid for the exact weights and prompt rendering that produced them, so the
key of a local (``transformers``) teacher holds a digest of the model folder's files and of the
tokenizer's chat template. Hashing a 16 GB checkpoint would take minutes, so each file is identified by
its size and a sha256 over sampled parts (the first and last MiB, which hold the safetensors/GGUF
header with every tensor's name, shape and offset, plus 16 blocks spread over the rest); files up to
2 MiB (configs, tokenizer, index) are hashed whole. The digest depends on content only (no paths or
modification times), so a copy of the model finds the same entries.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

CHUNK = 1 << 20        # bytes read at each end of a large file
SAMPLES = 16           # further blocks spread over a large file
SAMPLE_SIZE = 1 << 16
HUB_REVISION = "main"  # what transformers loads for a hub id without a revision


def file_digest(path: str | os.PathLike) -> str:
    """sha256 of a file's size and content: whole up to 2 MiB, else its ends plus ``SAMPLES`` blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        h.update(f"{size}\n".encode())
        if size <= 2 * CHUNK:
            h.update(f.read())
            return h.hexdigest()
        step = (size - 2 * CHUNK) // (SAMPLES + 1)
        offsets = [0, *(CHUNK + step * (i + 1) for i in range(SAMPLES)), size - CHUNK]
        for off in offsets:
            f.seek(off)
            h.update(f.read(CHUNK if off in (0, size - CHUNK) else SAMPLE_SIZE))
    return h.hexdigest()


def folder_digest(folder: str | os.PathLike) -> str:
    """sha256 over ``file_digest`` of every file directly in ``folder`` (symlinks followed, as in a hub
    snapshot; hidden files and sub-folders such as checkpoints are left out), by name."""
    folder = Path(folder)
    files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    if not files:
        raise FileNotFoundError(f"{folder}: no model files in this folder")
    h = hashlib.sha256()
    for p in files:
        h.update(f"{p.name}\0{file_digest(p)}\n".encode())
    return h.hexdigest()


def chat_template_digest(folder: str | os.PathLike) -> str:
    """sha256 of the tokenizer's ``chat_template`` as transformers loads it ("none" when it has none,
    so the prompt renderer's fallback applies)."""
    from transformers import AutoTokenizer

    template = AutoTokenizer.from_pretrained(str(folder)).chat_template
    if template is None:
        return "none"
    text = template if isinstance(template, str) else json.dumps(template, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def local_folder(model: str) -> Path | None:
    """The folder holding ``model``: the path itself, or the hub cache's snapshot of the id (no network)."""
    path = Path(model).expanduser()
    if path.is_dir():
        return path
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(model, revision=HUB_REVISION, local_files_only=True))
    except Exception as e:   # not a valid id, or not downloaded: both mean "not on disk"
        log.debug("%s: not on disk (%s)", model, e)
        return None


def model_fingerprint(model: str) -> dict[str, Any]:
    """What identifies the answers of the local model ``model`` (a folder or a hub id):
    ``{"files": digest, "chat_template": digest}`` when its files are on disk (``files`` covers the
    weights, config and tokenizer files of the folder), else
    ``{"revision": "main"}`` (a hub id not downloaded yet: only its name and revision are known)."""
    folder = local_folder(model)
    if folder is None:
        return {"revision": HUB_REVISION}
    return {"files": folder_digest(folder), "chat_template": chat_template_digest(folder)}


__all__ = ["file_digest", "folder_digest", "chat_template_digest", "local_folder", "model_fingerprint"]

"""Hub-ready artifacts out: an adapters folder (``stage1/ stage2/ stage3/``, each with its model card) or a
silver-data folder (one dataset per stage, each with its dataset card) pushed with huggingface_hub.

``push(folder, repo)`` uploads what a user of the repo needs — adapters, tokenizer files, cards, summaries,
datasets — and never the training checkpoints, optimizer states or the teacher's call cache. ``repo`` is a
Hub repo id (``user/name``: ``HfApi.upload_folder``, token from ``HF_TOKEN`` or the login) or a local folder
(``file://PATH`` or an existing directory path): the same selection of files is copied there, which is how
the upload is tested offline.
"""

from __future__ import annotations

import shutil
from pathlib import Path

IGNORE = ["*checkpoint-*/*", "*optimizer.pt", "*scheduler.pt", "*rng_state*", "*training_args.bin",
          "calls/*", "*.part", "*.lock", "serve/*"]


def files_to_push(folder: str | Path) -> list[str]:
    """The folder's files a push sends (relative POSIX paths), in the order of ``upload_folder``."""
    from huggingface_hub.utils import filter_repo_objects

    root = Path(folder)
    rel = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    return list(filter_repo_objects(rel, ignore_patterns=IGNORE))


def _local_target(repo: str) -> Path | None:
    if repo.startswith("file://"):
        return Path(repo.removeprefix("file://"))
    p = Path(repo)
    return p if p.is_absolute() or p.exists() or repo.startswith(".") else None


def push(folder: str | Path, repo: str, *, repo_type: str = "model", private: bool = False,
         commit_message: str = "vista-distill upload") -> str:
    """Push ``folder`` to ``repo`` (see the module docstring); returns where it went."""
    root = Path(folder)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: nothing to push (not a folder)")
    files = files_to_push(root)
    from ..data.vocabulary import ALL_STAGES

    if any((root / s / "adapter_config.json").is_file() for s in ALL_STAGES):
        from ..backends.adapters import find_stage_adapters

        find_stage_adapters(root)   # stage adapters: every one readable, finite and whole before it leaves
    if not any(f.endswith("README.md") for f in files):
        raise FileNotFoundError(f"{root}: no README.md card to push (train or distill writes them)")
    target = _local_target(repo)
    if target is not None:
        for f in files:
            dst = target / f
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / f, dst)
        return str(target)
    from huggingface_hub import HfApi

    api = HfApi()
    api.create_repo(repo, repo_type=repo_type, private=private, exist_ok=True)
    info = api.upload_folder(folder_path=str(root), repo_id=repo, repo_type=repo_type, ignore_patterns=IGNORE,
                             commit_message=commit_message)
    return str(getattr(info, "commit_url", repo))


__all__ = ["IGNORE", "files_to_push", "push"]

"""What ``vista-distill data fetch`` knows of a benchmark: where it comes from, under what licence, and the
files it lays out under the data root. Each benchmark's entry is its module's ``FETCH`` (:mod:`..benchmarks`).

A :class:`Source` lists what goes in one benchmark folder: :class:`Remote` files (a repository file
pinned to a commit, a Hugging Face Hub file, or a member of a zip / tar.gz archive), :class:`Subset`
files cut out of a downloaded file (the development splits of single-file releases: the module's
``DEV_KEYS``), and :class:`Manual` files that cannot be downloaded automatically (the entry
says how to get them). An entry's commit is the one the development copies were taken from and its sha256
values are those copies' hashes, so a mismatch means upstream changed the file (or the download broke).
:func:`.fetch.registry` is the built-in catalogue (each benchmark module's ``FETCH``);
:func:`load_registry_file` reads one from JSON (``data fetch --registry``).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GITHUB_RAW = "https://raw.githubusercontent.com"


@dataclass(frozen=True)
class Remote:
    """One file downloaded from ``url`` (or taken as ``member`` out of the archive at ``url``)."""

    dest: str                      # path under the data root, starting with the benchmark folder
    url: str                       # official URL of the file, or of the archive that holds it
    sha256: str | None = None      # of the file as written; None: recorded on first download
    member: str | None = None      # path inside the zip / tar.gz archive at ``url``
    archive_sha256: str | None = None
    hub: bool = False              # a Hugging Face Hub file: send the user's token, if any


@dataclass(frozen=True)
class Subset:
    """A JSON list cut out of the downloaded file ``source``: the items whose key is in ``keep``.

    ``key`` names the item field that identifies an item; None identifies items by content
    (:func:`fingerprint`). The output is ``json.dumps(items, indent=1)`` in the order of ``keep``.
    """

    dest: str
    source: str
    keep: tuple[Any, ...]
    key: str | None = None
    sha256: str | None = None
    note: str = ""


@dataclass(frozen=True)
class Manual:
    """A file fetch cannot download; ``instructions`` say how to get it."""

    dest: str
    instructions: str


@dataclass(frozen=True)
class Source:
    """Where one benchmark comes from, under what licence, and the layout it produces."""

    name: str                      # the folder under the data root
    title: str
    home: str                      # the official location, for people
    licence: str
    commit: str                    # may the files be committed to the project? ("yes", "no: why", "never: why")
    remotes: tuple[Remote, ...]
    subsets: tuple[Subset, ...] = ()
    manual: tuple[Manual, ...] = ()
    note: str = ""
    warning: str = ""              # printed whenever the benchmark is fetched

    def layout(self) -> list[str]:
        """Every path (under the data root) this benchmark produces."""
        return [r.dest for r in self.remotes] + [s.dest for s in self.subsets] + [m.dest for m in self.manual]


def gh(repo: str, commit: str, path: str) -> str:
    """The raw URL of ``path`` in GitHub repository ``repo`` at ``commit``."""
    return f"{GITHUB_RAW}/{repo}/{commit}/{path}"


def hub_url(repo_id: str, filename: str, revision: str = "main") -> str:
    """The download URL of a Hub dataset file (honours ``HF_ENDPOINT``)."""
    from huggingface_hub import hf_hub_url

    return hf_hub_url(repo_id, filename, repo_type="dataset", revision=revision)


def fingerprint(item: Any) -> str:
    """A content key for JSON items without ids: sha256 of their canonical JSON, 16 hex digits."""
    text = json.dumps(item, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def repo_files(repo: str, commit: str, folder: str, files: Iterable[tuple[str, str | None]],
               under: str = "") -> tuple[Remote, ...]:
    """Remotes for repository ``files`` ((path, sha256) pairs) placed at ``folder/under/path``."""
    return tuple(Remote(f"{folder}/{under}{path}", gh(repo, commit, path), sha) for path, sha in files)


def load_registry_file(path: str | os.PathLike) -> dict[str, Source]:
    """Sources from a JSON file: ``{"NAME": {"title", "home", "licence", "commit", "remotes": [...],
    "subsets": [...], "manual": [...], "note", "warning"}}`` with the fields of the dataclasses."""
    p = Path(path)
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise RegistryError(f"{p}: cannot read the registry ({e})") from e
    if not isinstance(raw, dict):
        raise RegistryError(f"{p}: expected a JSON object of benchmark name -> definition")
    out = {}
    for name, d in raw.items():
        try:
            out[name] = Source(
                name, d.get("title", name), d["home"], d.get("licence", "unknown"), d.get("commit", "unknown"),
                tuple(Remote(**r) for r in d.get("remotes", ())),
                tuple(Subset(**{**s, "keep": tuple(s["keep"])}) for s in d.get("subsets", ())),
                tuple(Manual(**m) for m in d.get("manual", ())), d.get("note", ""), d.get("warning", ""))
        except (KeyError, TypeError) as e:
            raise RegistryError(f"{p}: benchmark {name!r}: bad definition ({type(e).__name__}: {e})") from e
        for f in out[name].layout():
            if Path(f).parts[0] != name or ".." in Path(f).parts:
                raise RegistryError(f"{p}: benchmark {name!r}: {f!r} must lie under {name}/")
    return out


class RegistryError(ValueError):
    """A registry file that cannot be used."""


def describe(source: Source) -> str:
    """The ``--list`` entry of one benchmark: location, licence, whether committable, layout."""
    lines = [f"{source.name}: {source.title}",
             f"  from:     {source.home}",
             f"  licence:  {source.licence}",
             f"  commit:   {source.commit}"]
    if source.warning:
        lines.append(f"  warning:  {source.warning}")
    lines.append("  layout:")
    for r in source.remotes:
        origin = f"{r.url} [{r.member}]" if r.member else r.url
        lines.append(f"    {r.dest}  <-  {origin}")
    for s in source.subsets:
        lines.append(f"    {s.dest}  <-  cut from {s.source} ({s.note or f'{len(s.keep)} items'})")
    for m in source.manual:
        lines.append(f"    {m.dest}  (manual: {m.instructions})")
    if source.note:
        lines.append(f"  note:     {source.note}")
    return "\n".join(lines)

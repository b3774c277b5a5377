"""``vista-distill data fetch``: download benchmarks from their official locations into a data root.

Every benchmark lives in one folder of the root (``begin/``, ``fade/``, ...), laid out the way the
recipes name their sources (``begin/wow/begin_dev_wow.tsv``); each benchmark module's ``FETCH``
(:mod:`..benchmarks`, with the types of :mod:`.catalogue`) lists what goes there and where it comes from,
:mod:`.downloader` moves the bytes, :class:`Fetcher` puts them in place and keeps the record.

Downloads stream through httpx with retries (tenacity), are written atomically (temporary file in
the destination folder, then rename) and checked against the sha256 recorded here when there is
one. ``DIR/<benchmark>/FETCHED.json`` records url, time, size and sha256 of every file written, so
a second run downloads nothing. ``mirror`` (a base URL or a local folder) replaces the official
host and keeps the URL's path: ``https://raw.githubusercontent.com/google/BEGIN-dataset/<commit>/
wow/begin_dev_wow.tsv`` is looked up as ``MIRROR/google/BEGIN-dataset/<commit>/wow/
begin_dev_wow.tsv``. Without a network every missing file gets one line saying what to download
and where to put it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ...runtime.exit_codes import BAD_INPUT, PROBLEMS
from ..benchmarks import fetch_sources
from ..io import atomic_write_text
from .catalogue import (
    Manual,
    RegistryError,
    Remote,
    Source,
    Subset,
    describe,
    fingerprint,
    load_registry_file,
)
from .downloader import Downloader, FetchError, Offline, extract, mirrored, sha256_file, temp_beside

RECORD = "FETCHED.json"


def registry() -> dict[str, Source]:
    """Every benchmark fetch knows, by folder name: each benchmark module's ``FETCH`` (:mod:`..benchmarks`)."""
    return fetch_sources()


def lookup(name: str, sources: dict[str, Source] | None = None) -> Source:
    """The source called ``name`` (``vista-human`` and ``vista_human`` both work)."""
    sources = registry() if sources is None else sources
    for candidate in (name, name.replace("-", "_"), name.replace("_", "-")):
        if candidate in sources:
            return sources[candidate]
    raise KeyError(f"unknown benchmark {name!r}; known: {', '.join(sorted(sources))}")


def _now() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


@dataclass
class Outcome:
    """What one fetch did: files written, kept, and the problems (one line each)."""

    written: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    offline: list[str] = field(default_factory=list)
    offline_dests: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    manual: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.offline and not self.errors


class Fetcher:
    """Fetch sources into ``root``; ``log`` receives progress lines."""

    def __init__(self, root: str | os.PathLike, *, mirror: str | None = None, verify: bool = True,
                 force: bool = False, log: Callable[[str], None] = print, timeout: float = 60.0) -> None:
        self.root = Path(root).expanduser()
        self.mirror = mirror
        self.verify = verify
        self.force = force
        self.log = log
        self.downloader = Downloader(mirror, timeout)

    # -- records ---------------------------------------------------------------------------------

    def _record_path(self, source: Source) -> Path:
        return self.root / source.name / RECORD

    def _load_records(self, source: Source) -> dict[str, dict[str, Any]]:
        p = self._record_path(source)
        if not p.is_file():
            return {}
        try:
            files = json.loads(p.read_text(encoding="utf-8")).get("files", {})
        except (json.JSONDecodeError, AttributeError):
            self.log(f"{p}: not valid JSON; checking every file again")
            return {}
        return files if isinstance(files, dict) else {}

    def _save_records(self, source: Source, files: dict[str, dict[str, Any]]) -> None:
        doc = {"benchmark": source.name, "home": source.home, "licence": source.licence,
               "commit": source.commit, "paths": "relative to the data root", "files": files}
        p = self._record_path(source)
        p.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(p, json.dumps(doc, indent=1, ensure_ascii=False) + "\n")

    def _current(self, dest: str, expected: str | None, records: dict[str, dict[str, Any]]) -> bool:
        """Is ``dest`` already in place? Adopts files placed by hand (recording their hash)."""
        path = self.root / dest
        if self.force or not path.is_file():
            return False
        rec = records.get(dest)
        size = path.stat().st_size
        if rec and rec.get("size") != size:
            self.log(f"{dest}: changed since it was fetched; fetching it again")
            return False
        digest = sha256_file(path)
        if rec and rec.get("sha256") != digest:
            self.log(f"{dest}: changed since it was fetched; fetching it again")
            return False
        if self.verify and expected and digest != expected:
            self.log(f"{dest}: present but not the official file (sha256 {digest[:12]}..., expected "
                     f"{expected[:12]}...); fetching it again")
            return False
        if not rec:
            records[dest] = {"sha256": digest, "size": size, "fetched_at": _now(), "adopted": True}
            self.log(f"{dest}: already present, kept (sha256 recorded)")
        return True

    def close(self) -> None:
        self.downloader.close()

    # -- one benchmark -------------------------------------------------------------------------------

    def _offline_line(self, host: str, r: Remote) -> str:
        what = f"download {r.url}, take {r.member} out of it," if r.member else f"download {r.url}"
        return f"offline: cannot reach {host}; {what} and save it as {self.root / r.dest}"

    def fetch(self, source: Source) -> Outcome:
        """Bring ``source``'s files up to date under the root."""
        out = Outcome()
        if source.warning:
            self.log(f"WARNING: {source.warning}")
        records = self._load_records(source)
        pending = [r for r in source.remotes if not self._current(r.dest, r.sha256, records)]
        out.kept += [r.dest for r in source.remotes if r not in pending]
        by_url: dict[str, list[Remote]] = {}
        for r in pending:
            by_url.setdefault(r.url, []).append(r)
        for url, group in by_url.items():
            self._fetch_url(url, group, records, out)
        for s in source.subsets:
            self._cut(s, records, out)
        for m in source.manual:
            if not (self.root / m.dest).exists():
                out.manual.append(f"manual: {self.root / m.dest}: {m.instructions}")
        if out.written or any(r.get("adopted") for r in records.values()):
            self._save_records(source, records)
        return out

    def _fetch_url(self, url: str, group: list[Remote], records: dict[str, dict[str, Any]], out: Outcome) -> None:
        where = mirrored(url, self.mirror)
        first = group[0]
        archive = first.member is not None
        tmp = temp_beside(self.root / (first.dest + (".archive" if archive else "")))
        try:
            self.log(f"downloading {where}" + (f" (for {', '.join(r.dest for r in group)})" if archive else ""))
            digest = self.downloader.download(where, tmp, first.hub)
            if archive:
                expected = next((r.archive_sha256 for r in group if r.archive_sha256), None)
                if self.verify and expected and digest != expected:
                    raise FetchError(f"{url}: archive sha256 {digest} does not match the recorded {expected}; "
                                     "nothing was written (upstream changed or the download broke; --no-verify "
                                     "accepts it)")
                for r in group:
                    part = temp_beside(self.root / r.dest)
                    try:
                        self._place(r, part, extract(tmp, r.member or "", part, url), records, out, where)
                    except FetchError as e:
                        out.errors.append(f"error: {r.dest}: {e}")
                    finally:
                        part.unlink(missing_ok=True)
            else:
                for r in group[1:]:  # the same file wanted at several places
                    part = temp_beside(self.root / r.dest)
                    shutil.copyfile(tmp, part)
                    self._place(r, part, digest, records, out, where)
                    part.unlink(missing_ok=True)
                self._place(first, tmp, digest, records, out, where)
        except Offline as e:
            out.offline += [self._offline_line(e.host, r) for r in group]
            out.offline_dests.update(r.dest for r in group)
        except FetchError as e:
            out.errors += [f"error: {r.dest}: {e}" for r in group]
        finally:
            tmp.unlink(missing_ok=True)

    def _place(self, r: Remote, tmp: Path, digest: str, records: dict[str, dict[str, Any]], out: Outcome,
               where: str | Path) -> None:
        """Check ``tmp`` against the recorded sha256 and move it to ``r.dest``."""
        if self.verify and r.sha256 and digest != r.sha256:
            out.errors.append(f"error: {r.dest}: sha256 {digest} does not match the recorded {r.sha256} for "
                              f"{r.url}; nothing was written (upstream changed the file or the download broke; "
                              "--no-verify accepts it)")
            return
        dest = self.root / r.dest
        size = tmp.stat().st_size
        os.replace(tmp, dest)
        rec: dict[str, Any] = {"url": r.url}
        if r.member:
            rec["member"] = r.member
        if str(where) != r.url:
            rec["from"] = str(where)
        rec.update(sha256=digest, size=size, fetched_at=_now())
        records[r.dest] = rec
        out.written.append(r.dest)

    def _cut(self, s: Subset, records: dict[str, dict[str, Any]], out: Outcome) -> None:
        """Write subset ``s`` from its downloaded source file."""
        src = self.root / s.source
        src_rec = records.get(s.source)
        if self._current(s.dest, s.sha256, records) and (
                not src_rec or records[s.dest].get("source_sha256") in (None, src_rec.get("sha256"))):
            out.kept.append(s.dest)
            return
        if not src.is_file():
            line = (f"{self.root / s.dest} is cut from {src}; once that file is in place, run "
                    f"`vista-distill data fetch {s.dest.split('/')[0]} --to {self.root}` again")
            if s.source in out.offline_dests:
                out.offline.append(f"offline: {line}")
            else:
                out.errors.append(f"error: {line}")
            return
        try:
            items = json.loads(src.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            out.errors.append(f"error: {s.dest}: cannot read {src} as JSON ({e})")
            return
        if not isinstance(items, list):
            out.errors.append(f"error: {s.dest}: {src} is not a JSON list; the official file changed shape")
            return
        index: dict[Any, Any] = {}
        for item in items:
            k = fingerprint(item) if s.key is None else (item.get(s.key) if isinstance(item, dict) else None)
            index.setdefault(k, item)
        missing = [k for k in s.keep if k not in index]
        if missing:
            out.errors.append(f"error: {s.dest}: {len(missing)} of the {len(s.keep)} items of the split are not in "
                              f"{src} (first: {missing[0]!r}); the official file changed")
            return
        text = json.dumps([index[k] for k in s.keep], indent=1)
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        if self.verify and s.sha256 and digest != s.sha256:
            out.errors.append(f"error: {s.dest}: sha256 {digest} of the cut does not match the recorded {s.sha256}; "
                              "nothing was written (--no-verify accepts it)")
            return
        dest = self.root / s.dest
        dest.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(dest, text)
        records[s.dest] = {"derived_from": s.source, "items": len(s.keep), "key": s.key or "content fingerprint",
                           "source_sha256": sha256_file(src), "sha256": digest,
                           "size": dest.stat().st_size, "fetched_at": _now()}
        out.written.append(s.dest)


def run(names: list[str], root: str | os.PathLike, *, mirror: str | None = None, verify: bool = True,
        force: bool = False, sources: dict[str, Source] | None = None,
        out: Any = None, err: Any = None) -> int:
    """Fetch ``names`` (or ``all``) into ``root``; print progress to ``out`` and one line per problem
    to ``err``. Returns 0 when every automatic file is in place, 1 (problems) when some could not be fetched or
    verified, 2 (bad input) for an unknown benchmark: :mod:`...runtime.exit_codes`."""
    out = out or sys.stdout
    err = err or sys.stderr
    sources = registry() if sources is None else sources
    try:
        chosen = list(sources.values()) if names == ["all"] else [lookup(n, sources) for n in names]
    except KeyError as e:
        print(f"error: {e.args[0]}", file=err)
        return BAD_INPUT
    fetcher = Fetcher(root, mirror=mirror, verify=verify, force=force, log=lambda s: print(s, file=out, flush=True))
    status = 0
    try:
        for source in chosen:
            result = fetcher.fetch(source)
            for line in result.manual:
                print(line, file=out)
            for line in result.offline + result.errors:
                print(line, file=err)
            if result.ok:
                print(f"{source.name}: {len(result.written)} file(s) written, {len(result.kept)} already in place "
                      f"under {fetcher.root / source.name}", file=out)
                if source.warning:
                    print(f"WARNING: {source.warning}", file=out)
            else:
                status = PROBLEMS
    finally:
        fetcher.close()
    return status


__all__ = ["FetchError", "Fetcher", "Manual", "Offline", "Outcome", "RegistryError", "Remote", "Source", "Subset",
           "describe", "fingerprint", "load_registry_file", "lookup", "mirrored", "registry", "run"]

"""How ``vista-distill data fetch`` moves bytes: a :class:`Downloader` copies an official URL (or its place
in a mirror) to a temporary file, with retries, and takes single members out of zip / tar archives,
hashing what it writes as it goes."""

from __future__ import annotations

import hashlib
import os
import tarfile
import tempfile
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

ATTEMPTS = 3
CHUNK = 1 << 20


class Offline(Exception):
    """The host of a URL cannot be reached (DNS failure, connection refused, proxy down)."""

    def __init__(self, host: str) -> None:
        super().__init__(host)
        self.host = host


class FetchError(Exception):
    """A download or check failed in a way a retry will not fix."""


class _Transient(Exception):
    """An HTTP status worth retrying (5xx, 429)."""


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def _write(chunks: Iterable[bytes], tmp: Path) -> str:
    """Write ``chunks`` to ``tmp``; return their sha256."""
    h = hashlib.sha256()
    with open(tmp, "wb") as out:
        for chunk in chunks:
            out.write(chunk)
            h.update(chunk)
    return h.hexdigest()


def _is_url(s: str) -> bool:
    return urlsplit(s).scheme in ("http", "https")


def mirrored(url: str, mirror: str | None) -> str | Path:
    """Where to get ``url``: itself, or the same path under a mirror (base URL or local folder)."""
    if not mirror:
        return url
    rel = urlsplit(url).path.lstrip("/")
    if _is_url(mirror):
        return mirror.rstrip("/") + "/" + rel
    return Path(mirror.removeprefix("file://")).expanduser() / unquote(rel)


def temp_beside(dest: Path) -> Path:
    """An empty temporary file in ``dest``'s folder (same file system, so the final rename is atomic)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(name, 0o666 & ~umask)  # mkstemp creates 0600; give the file the permissions open() would
    return Path(name)


class Downloader:
    """Copies URLs to temporary files: from ``mirror`` (base URL or local folder) when one is given, else
    from the official host, which is given up on for the rest of the run once it cannot be reached."""

    def __init__(self, mirror: str | None = None, timeout: float = 60.0) -> None:
        self.mirror = mirror
        self.timeout = timeout
        self._unreachable: set[str] = set()
        self._client: Any = None

    def _http(self) -> Any:
        if self._client is None:
            import httpx

            self._client = httpx.Client(follow_redirects=True, timeout=httpx.Timeout(self.timeout, connect=15.0),
                                        headers={"User-Agent": "vista-distill-fetch"})
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def download(self, where: str | Path, tmp: Path, hub: bool) -> str:
        """Copy ``where`` (URL or local mirror file) to ``tmp``; return its sha256."""
        if isinstance(where, Path):
            if not where.is_file():
                raise FetchError(f"{where}: not in the mirror")
            with open(where, "rb") as src:
                return _write(iter(lambda: src.read(CHUNK), b""), tmp)
        host = urlsplit(where).netloc
        if host in self._unreachable:
            raise Offline(host)
        headers = {}
        if hub and not self.mirror:
            from huggingface_hub import get_token

            token = get_token()
            if token:
                headers["Authorization"] = f"Bearer {token}"
        try:
            return self._get(where, tmp, headers)
        except Offline:
            self._unreachable.add(host)
            raise

    def _get(self, url: str, tmp: Path, headers: dict[str, str]) -> str:
        import httpx
        from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential

        host = urlsplit(url).netloc

        @retry(retry=retry_if_exception_type((httpx.TransportError, _Transient)),
               stop=stop_after_attempt(ATTEMPTS), wait=wait_exponential(multiplier=0.5, max=8), reraise=True)
        def attempt() -> str:
            with self._http().stream("GET", url, headers=headers) as r:
                if r.status_code in (429,) or r.status_code >= 500:
                    raise _Transient(f"HTTP {r.status_code}")
                if r.status_code >= 400:
                    raise FetchError(f"{url}: HTTP {r.status_code} {r.reason_phrase}")
                return _write(r.iter_bytes(CHUNK), tmp)

        try:
            return attempt()
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.ProxyError) as e:
            raise Offline(host) from e
        except httpx.TransportError as e:
            raise FetchError(f"{url}: download failed after {ATTEMPTS} attempts ({type(e).__name__}: {e})") from e
        except _Transient as e:
            raise FetchError(f"{url}: {e} after {ATTEMPTS} attempts") from e


def extract(archive: Path, member: str, tmp: Path, url: str) -> str:
    """Copy one member of a zip or tar(.gz) archive to ``tmp``; return its sha256."""

    def pump(src: Any) -> str:
        return _write(iter(lambda: src.read(CHUNK), b""), tmp)

    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            try:
                info = zf.getinfo(member)
            except KeyError:
                raise FetchError(f"{url}: the archive has no member {member!r}") from None
            with zf.open(info) as src:
                return pump(src)
    if not tarfile.is_tarfile(archive):
        raise FetchError(f"{url}: not a zip or tar archive")
    with tarfile.open(archive, "r:*") as tf:
        info = None
        for name in (member, f"./{member}"):
            try:
                info = tf.getmember(name)
                break
            except KeyError:
                continue
        if info is None or not info.isfile():
            raise FetchError(f"{url}: the archive has no file member {member!r}")
        src = tf.extractfile(info)
        assert src is not None  # a regular file always has a stream
        with src:
            return pump(src)

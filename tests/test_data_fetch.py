"""``vista-distill data fetch`` end to end: the real CLI in a subprocess, a real HTTP server on 127.0.0.1
serving a mirror (plain file, zip, tar.gz), a local-folder mirror, checksums, idempotence, offline."""

from __future__ import annotations

import functools
import hashlib
import http.server
import io
import json
import os
import re
import socket
import subprocess
import sys
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from vista_distill.data.download import fetch

REPO = Path(__file__).resolve().parent.parent
OFFICIAL = "https://files.example.org/org/toy/abc123"


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full_env = dict(os.environ)
    full_env.pop("VISTA_DISTILL_DATA", None)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "vista_distill", "data", "fetch", *args], check=False,
                          capture_output=True, text=True, env=full_env, cwd=REPO, timeout=120)


ROWS = [{"id": i, "text": f"row {i}"} for i in range(5)]
FILES = {  # dest -> bytes, as the toy benchmark lays them out
    "toy/plain.txt": b"a plain file\n",
    "toy/zipped/a.jsonl": b'{"a": 1}\n{"a": 2}\n',
    "toy/zipped/b.txt": b"second member of the zip\n",
    "toy/rows.json": json.dumps(ROWS).encode(),
}
DEV = [3, 1]


def build_mirror(mirror: Path, *, plain_sha: str | None = None) -> Path:
    """Write the toy benchmark's files under ``mirror`` at the official URLs' paths; return its registry."""
    base = mirror / urlsplit(OFFICIAL).path.lstrip("/")
    base.mkdir(parents=True, exist_ok=True)
    (base / "plain.txt").write_bytes(FILES["toy/plain.txt"])
    with zipfile.ZipFile(base / "bundle.zip", "w") as zf:
        zf.writestr("inner/a.jsonl", FILES["toy/zipped/a.jsonl"])
        zf.writestr("inner/b.txt", FILES["toy/zipped/b.txt"])
        zf.writestr("inner/unused.bin", b"\0" * 64)
    with tarfile.open(base / "pack.tar.gz", "w:gz") as tf:
        for name, data in (("pack/rows.json", FILES["toy/rows.json"]), ("pack/other.txt", b"not wanted")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    dev_text = json.dumps([r for k in DEV for r in ROWS if r["id"] == k], indent=1)
    registry = {"toy": {
        "title": "a toy benchmark", "home": "https://files.example.org/org/toy", "licence": "CC0",
        "commit": "yes",
        "remotes": [
            {"dest": "toy/plain.txt", "url": f"{OFFICIAL}/plain.txt",
             "sha256": plain_sha or sha(FILES["toy/plain.txt"])},
            {"dest": "toy/zipped/a.jsonl", "url": f"{OFFICIAL}/bundle.zip", "member": "inner/a.jsonl",
             "sha256": sha(FILES["toy/zipped/a.jsonl"])},
            {"dest": "toy/zipped/b.txt", "url": f"{OFFICIAL}/bundle.zip", "member": "inner/b.txt"},
            {"dest": "toy/rows.json", "url": f"{OFFICIAL}/pack.tar.gz", "member": "pack/rows.json",
             "archive_sha256": sha((base / "pack.tar.gz").read_bytes())},
        ],
        "subsets": [{"dest": "toy/dev.json", "source": "toy/rows.json", "keep": DEV, "key": "id",
                     "sha256": sha(dev_text.encode())}],
        "manual": [{"dest": "toy/huge/", "instructions": "ask the authors"}],
    }}
    path = mirror.parent / f"registry-{mirror.name}.json"
    path.write_text(json.dumps(registry))
    return path


class Server:
    """A real HTTP server on 127.0.0.1 serving ``root``, counting GET requests."""

    def __init__(self, root: Path) -> None:
        hits: list[str] = []

        class Handler(http.server.SimpleHTTPRequestHandler):
            def do_GET(self) -> None:
                hits.append(self.path)
                super().do_GET()

            def log_message(self, *args: object) -> None:
                pass

        self.hits = hits
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                                     functools.partial(Handler, directory=str(root)))
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Server, Path, Path]]:
    mirror = tmp_path / "mirror"
    registry = build_mirror(mirror)
    server = Server(mirror)
    try:
        yield server, registry, mirror
    finally:
        server.close()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_layout(root: Path) -> dict:
    for dest, data in FILES.items():
        assert (root / dest).read_bytes() == data, dest
    dev = json.loads((root / "toy/dev.json").read_text())
    assert [r["id"] for r in dev] == DEV
    assert not (root / "toy/zipped/unused.bin").exists() and not (root / "toy/other.txt").exists()
    assert not [p for p in root.rglob("*") if p.name.endswith((".part", ".tmp"))], "temporary files left behind"
    record = json.loads((root / "toy" / "FETCHED.json").read_text())
    for dest in [*FILES, "toy/dev.json"]:
        rec = record["files"][dest]
        assert rec["sha256"] == sha((root / dest).read_bytes()) and rec["size"] == (root / dest).stat().st_size
        assert rec["fetched_at"]
    assert record["files"]["toy/plain.txt"]["url"] == f"{OFFICIAL}/plain.txt"
    assert record["files"]["toy/zipped/b.txt"]["member"] == "inner/b.txt"
    assert record["files"]["toy/dev.json"]["derived_from"] == "toy/rows.json"
    return record


def test_fetch_through_http_mirror_then_nothing_to_do(served, tmp_path):
    server, registry, _ = served
    root = tmp_path / "root"
    r = cli("toy", "--to", str(root), "--mirror", server.url, "--registry", str(registry))
    assert r.returncode == 0, r.stderr
    record = check_layout(root)
    # one request per official file: the zip is downloaded once for its two members
    assert sorted(server.hits) == ["/org/toy/abc123/bundle.zip", "/org/toy/abc123/pack.tar.gz",
                                   "/org/toy/abc123/plain.txt"]
    assert record["files"]["toy/plain.txt"]["from"] == server.url + "org/toy/abc123/plain.txt"
    assert "manual:" in r.stdout and "ask the authors" in r.stdout and "5 file(s) written" in r.stdout

    again = cli("toy", "--to", str(root), "--mirror", server.url, "--registry", str(registry))
    assert again.returncode == 0, again.stderr
    assert len(server.hits) == 3, "a second run must download nothing"
    assert "0 file(s) written, 5 already in place" in again.stdout
    assert json.loads((root / "toy" / "FETCHED.json").read_text()) == record

    # a file changed locally is fetched again, and only that one
    (root / "toy/plain.txt").write_bytes(b"edited")
    third = cli("toy", "--to", str(root), "--mirror", server.url, "--registry", str(registry))
    assert third.returncode == 0, third.stderr
    assert server.hits[3:] == ["/org/toy/abc123/plain.txt"]
    assert (root / "toy/plain.txt").read_bytes() == FILES["toy/plain.txt"]


def test_fetch_from_local_folder_mirror_and_data_root_from_env(tmp_path):
    mirror = tmp_path / "mirror"
    registry = build_mirror(mirror)
    root = tmp_path / "root"
    r = cli("toy", "--mirror", str(mirror), "--registry", str(registry), env={"VISTA_DISTILL_DATA": str(root)})
    assert r.returncode == 0, r.stderr
    check_layout(root)
    assert json.loads((root / "toy/FETCHED.json").read_text())["files"]["toy/plain.txt"]["from"] == str(
        mirror / "org/toy/abc123/plain.txt")


def test_checksum_mismatch_writes_nothing(tmp_path):
    mirror = tmp_path / "mirror"
    registry = build_mirror(mirror, plain_sha="0" * 64)
    root = tmp_path / "root"
    r = cli("toy", "--to", str(root), "--mirror", str(mirror), "--registry", str(registry))
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: toy/plain.txt: sha256 " + sha(FILES["toy/plain.txt"]))
    assert "0" * 64 in lines[0] and f"{OFFICIAL}/plain.txt" in lines[0]
    assert not (root / "toy/plain.txt").exists()
    assert (root / "toy/zipped/a.jsonl").read_bytes() == FILES["toy/zipped/a.jsonl"]  # the others still land
    ok = cli("toy", "--to", str(root), "--mirror", str(mirror), "--registry", str(registry), "--no-verify")
    assert ok.returncode == 0, ok.stderr
    assert (root / "toy/plain.txt").read_bytes() == FILES["toy/plain.txt"]


def test_offline_one_line_per_file_then_files_placed_by_hand_are_kept(tmp_path):
    mirror = tmp_path / "mirror"
    registry = build_mirror(mirror)
    root = tmp_path / "root"
    dead = f"http://127.0.0.1:{closed_port()}/"
    r = cli("toy", "--to", str(root), "--mirror", dead, "--registry", str(registry))
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 5, lines  # four downloads and the split cut from one of them
    expect = {"toy/plain.txt": f"download {OFFICIAL}/plain.txt and save it as {root / 'toy/plain.txt'}",
              "toy/zipped/a.jsonl": f"download {OFFICIAL}/bundle.zip, take inner/a.jsonl out of it, and save it "
                                    f"as {root / 'toy/zipped/a.jsonl'}",
              "toy/zipped/b.txt": f"take inner/b.txt out of it, and save it as {root / 'toy/zipped/b.txt'}",
              "toy/rows.json": f"download {OFFICIAL}/pack.tar.gz, take pack/rows.json out of it, and save it as "
                               f"{root / 'toy/rows.json'}"}
    for dest, text in expect.items():
        assert sum(text in line for line in lines) == 1, (dest, lines)
    assert all(line.startswith("offline: ") for line in lines)
    assert any(f"{root / 'toy/dev.json'} is cut from {root / 'toy/rows.json'}" in line for line in lines)
    assert not (root / "toy/plain.txt").exists()

    # the user follows two of the lines by hand; the next run keeps those files and cuts the split
    (root / "toy/plain.txt").write_bytes(FILES["toy/plain.txt"])
    (root / "toy/rows.json").write_bytes(FILES["toy/rows.json"])
    r2 = cli("toy", "--to", str(root), "--mirror", dead, "--registry", str(registry))
    assert r2.returncode == 1
    lines2 = r2.stderr.strip().splitlines()
    assert len(lines2) == 2 and all("bundle.zip" in line for line in lines2), lines2
    assert [r["id"] for r in json.loads((root / "toy/dev.json").read_text())] == DEV
    record = json.loads((root / "toy/FETCHED.json").read_text())["files"]
    assert record["toy/plain.txt"]["adopted"] and record["toy/plain.txt"]["sha256"] == sha(FILES["toy/plain.txt"])


def test_builtin_benchmark_offline_names_official_urls(tmp_path):
    root = tmp_path / "root"
    r = cli("begin", "--to", str(root), "--mirror", f"http://127.0.0.1:{closed_port()}/")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    source = fetch.registry()["begin"]
    assert len(lines) == len(source.remotes)
    for remote in source.remotes:
        assert sum(f"download {remote.url} and save it as {root / remote.dest}" in line for line in lines) == 1
    assert any("raw.githubusercontent.com/google/BEGIN-dataset/" in line for line in lines)


def test_builtin_benchmark_through_mirror_gives_recipe_layout_and_checks_hashes(served, tmp_path):
    server, _, mirror = served
    source = fetch.registry()["dialfact"]
    for remote in source.remotes:
        p = mirror / urlsplit(remote.url).path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"stand-in for {remote.dest}\n")
    strict = cli("dialfact", "--to", str(tmp_path / "strict"), "--mirror", server.url)
    assert strict.returncode == 1
    bad = strict.stderr.strip().splitlines()
    assert len(bad) == len(source.remotes) and all("does not match the recorded" in line for line in bad)
    assert not (tmp_path / "strict/dialfact/scripts/testsmall.jsonl").exists()

    root = tmp_path / "root"
    r = cli("dialfact", "--to", str(root), "--mirror", server.url, "--no-verify")
    assert r.returncode == 0, r.stderr
    assert (root / "dialfact/scripts/testsmall.jsonl").read_text() == "stand-in for dialfact/scripts/testsmall.jsonl\n"
    assert "manual:" in r.stdout  # the full splits are named, not invented


def test_registry_covers_every_recipe_source():
    layout = {p for s in fetch.registry().values() for p in s.layout()}
    sources = set()
    for recipe in sorted((REPO / "recipes").glob("*.yaml")):
        sources |= set(re.findall(r"source:\s*([^\s,}]+)", recipe.read_text()))
    wanted = {re.sub(r"^(\.\./)?shared/data/", "", s) for s in sources
              if not s.startswith("data/samples/")}
    assert wanted, "no data sources found in recipes/"
    missing = sorted(w for w in wanted if w not in layout)
    assert not missing, f"recipe sources no benchmark fetches: {missing}"


def test_list_names_every_benchmark_with_licence_and_layout():
    r = cli("--list")
    assert r.returncode == 0, r.stderr
    for name, source in fetch.registry().items():
        assert f"{name}: " in r.stdout and source.licence in r.stdout and source.home in r.stdout
    assert "vista_human/dev.json  <-  cut from vista_human/human_eval_VISTA_input.json" in r.stdout
    assert "https://huggingface.co/datasets/McGill-NLP/FaithDial/resolve/main/data/test.json" in r.stdout
    assert "never: no licence" in r.stdout  # fhsumbench


def test_unknown_benchmark_and_missing_root_are_one_line_errors(tmp_path):
    r = cli("nope", "--to", str(tmp_path))
    assert r.returncode == 2 and r.stderr.startswith("error: unknown benchmark 'nope'") and "begin" in r.stderr
    r = cli("begin")
    assert r.returncode == 2 and "--to DIR" in r.stderr and "VISTA_DISTILL_DATA" in r.stderr
    assert "Traceback" not in r.stderr


def test_subset_fingerprint_is_canonical():
    a = {"b": 1, "a": [1, "é"]}
    assert fetch.fingerprint(a) == fetch.fingerprint({"a": [1, "é"], "b": 1}) != fetch.fingerprint({"a": 1})
    assert fetch.lookup("vista-human").name == "vista_human"

"""One table of exit codes for every command (runtime/exit_codes.py, printed by ``--help``): bad input 2, a server
that cannot be reached 3, an output that cannot be written 4 (a path through a file, a full disk), Ctrl-C 130;
each a line on stderr, never a traceback. Real processes, real sockets, a real file-size limit."""

from __future__ import annotations

import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from helpers import SAMPLE

from vista_distill.runtime import exit_codes

ROOT = Path(__file__).resolve().parents[1]
FIX = Path(__file__).parent / "fixtures"


def cli(*args: str, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vista_distill.cli", *args], capture_output=True, text=True,
                          timeout=timeout, check=False, **kw)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith(("error: ", "stopped: "))]
    assert len(errors) >= 1, proc.stderr[-3000:]
    return errors[0]


def test_help_prints_the_table():
    out = cli("--help").stdout
    for code, what in exit_codes.TABLE:
        assert f"{code:<4} {what}" in out


def test_bad_input_is_2_in_every_command(tmp_path):
    missing = str(tmp_path / "missing.yaml")
    cases = {
        "score": ("score", "--input", str(tmp_path / "missing.json"), "--output", str(tmp_path / "o.jsonl")),
        "score option": ("score", "--input", str(SAMPLE), "--output", str(tmp_path / "o.jsonl"), "--chunk-size", "0"),
        "data prepare": (
            "data",
            "prepare",
            "--benchmark",
            "begin",
            "--source",
            missing,
            "--out",
            str(tmp_path / "o.jsonl"),
        ),
        "data stats": ("data", "stats", missing),
        "data fetch": ("data", "fetch", "nope", "--to", str(tmp_path)),
        "distill": ("distill", "--config", missing),
        "train": ("train", "--config", missing, "--stage", "stage2"),
        "eval": ("eval", "--config", missing),
        "check": ("check", "--config", missing),
        "serve-config": (
            "serve-config",
            "--config",
            str(ROOT / "recipes" / "demo-cpu.yaml"),
            "--engines",
            "nope",
            "--adapters",
            str(tmp_path),
        ),
    }
    for name, args in cases.items():
        proc = cli(*args)
        assert proc.returncode == exit_codes.BAD_INPUT, (name, proc.returncode, proc.stderr[-2000:])
        one_error_line(proc)


def test_an_unreachable_server_is_3(tmp_path):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    proc = cli("score", "--input", str(SAMPLE), "--output", str(tmp_path / "o.jsonl"), "--server", url)
    assert proc.returncode == exit_codes.SERVER, proc.stderr[-2000:]
    assert url.rsplit("/", 1)[0] in one_error_line(proc)


def test_an_output_path_through_a_file_is_4_before_any_model_loads(tmp_path):
    (tmp_path / "file.txt").write_text("not a folder\n")
    out = tmp_path / "file.txt" / "runs" / "out.jsonl"
    start = time.monotonic()
    proc = cli("score", "--input", str(SAMPLE), "--output", str(out))
    assert proc.returncode == exit_codes.OUTPUT, proc.stderr[-2000:]
    line = one_error_line(proc)
    assert str(out) in line and "is a file, not a folder" in line
    assert time.monotonic() - start < 60 and "loading" not in proc.stderr.lower()


def test_a_full_disk_while_writing_is_4_naming_the_file(tmp_path):
    """A file-size limit (RLIMIT_FSIZE, as a quota or a full disk does) hit while the output is written: one line
    naming the file, exit 4, no half-written file left behind."""
    out = tmp_path / "prepared.jsonl"

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # the write then fails with EFBIG instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))

    proc = cli("data", "prepare", "--benchmark", "begin", "--source", str(FIX / "begin" / "dev_05_24_21.tsv"),
               "--out", str(out), preexec_fn=small_files)
    assert proc.returncode == exit_codes.OUTPUT, proc.stderr[-2000:]
    line = one_error_line(proc)
    assert line.startswith(f"error: {out}: cannot write") and "too large" in line.lower()
    assert not out.exists() and not list(tmp_path.glob(".prepared.jsonl.*"))
    ok = cli("data", "prepare", "--benchmark", "begin", "--source", str(FIX / "begin" / "dev_05_24_21.tsv"),
             "--out", str(out))
    assert ok.returncode == 0 and out.stat().st_size > 2048   # the limit, not the input, stopped it


def _silent_server() -> tuple[ThreadingHTTPServer, threading.Event]:
    """A server on loopback that accepts every request and never answers; the event is set at the first one."""
    seen = threading.Event()

    class Silent(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.set()
            time.sleep(60)

        do_POST = do_GET

        def log_message(self, *args) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Silent)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, seen


@pytest.mark.parametrize("command", ["score", "distill"])
def test_ctrl_c_is_130(tmp_path, command):
    httpd, seen = _silent_server()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    if command == "score":
        args = ["score", "--input", str(SAMPLE), "--output", str(tmp_path / "o.jsonl"), "--server", url]
    else:
        args = [
            "distill",
            "--config",
            str(ROOT / "recipes" / "demo-cpu.yaml"),
            "teacher.backend=openai",
            "teacher.model=m",
            f"teacher.base_url={url}",
            f"distill.output_dir={tmp_path / 'silver'}",
            "--limit",
            "1",
        ]
    # SIGINT as a terminal delivers it: a child inherits an ignored SIGINT (a test runner or server fixture may
    # have set one), and Python then installs no KeyboardInterrupt handler at all
    proc = subprocess.Popen([sys.executable, "-m", "vista_distill.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert seen.wait(60), "the command never reached the server"   # it now waits on the server
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        httpd.shutdown()
    assert proc.returncode == exit_codes.INTERRUPTED, err[-2000:]
    assert "Traceback" not in err and "interrupted" in err

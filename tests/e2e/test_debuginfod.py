"""The debuginfod client against a real ``debuginfod`` server (elfutils, Debian package).

The server is started on a loopback port with ``-F`` over the unstripped builds of
fixtures/debuginfod (a program and 20 shared libraries whose hot functions are static);
stripped copies of them are recorded. The first report fetches the 20 missing debug files
(in parallel) and names every static function; the second report asks the server nothing
(its own request counter, ``http_requests_total{type="debuginfo"}`` on /metrics, does not
move). ``--offline`` never asks; ``buildids`` shows ``debuginfod`` as the source.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from profiler.symbols.dso import clear_symbol_cache

from tests.support.offline_helpers import profile_rows, record

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("debuginfod") is None,
                       reason="debuginfod is not installed (make test installs it: make debuginfod-deps)"),
]

NUMS = [f"{i:02d}" for i in range(20)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def debuginfo_requests(url: str) -> int:
    text = urllib.request.urlopen(f"{url}/metrics", timeout=10).read().decode()
    m = re.search(r'^http_requests_total\{type="debuginfo"\} (\d+)', text, re.M)
    return int(m.group(1)) if m else 0


def build_id(path: Path) -> str:
    out = subprocess.run(["readelf", "-n", str(path)], check=True, capture_output=True, text=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    assert m is not None
    return m.group(1)


@pytest.fixture(scope="module")
def server(fixtures_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A debuginfod serving fixtures/debuginfod's unstripped builds; yields its URL."""
    work = tmp_path_factory.mktemp("debuginfod-server")
    port = free_port()
    log = open(work / "server.log", "w")
    proc = subprocess.Popen(["debuginfod", "-F", str(fixtures_dir / "debuginfod"), "-p", str(port),
                             "-d", str(work / "db.sqlite"), "-t0", "-g0"],
                            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "DEBUGINFOD_URLS": ""})
    url = f"http://127.0.0.1:{port}"
    probe = f"{url}/buildid/{build_id(fixtures_dir / 'debuginfod' / 'libdi_19.so')}/debuginfo"
    try:
        for _ in range(300):  # until the scan has indexed the files (a few seconds at most)
            if proc.poll() is not None:
                pytest.fail(f"debuginfod exited: {(work / 'server.log').read_text()[-2000:]}")
            try:
                urllib.request.urlopen(probe, timeout=5).read()
                break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("debuginfod did not index the fixtures within 30 s")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


@pytest.fixture
def recorded(fixtures_dir: Path, tmp_path: Path, require_perf: None) -> Path:
    """Stripped copies of di_main and its 20 libraries, recorded."""
    app = tmp_path / "app"
    app.mkdir()
    src = fixtures_dir / "debuginfod"
    for name in ["di_main"] + [f"libdi_{n}.so" for n in NUMS]:
        subprocess.run(["strip", "--strip-all", "-o", str(app / name), str(src / name)], check=True)
    capture = tmp_path / "cap.prof"
    record(capture, [str(app / "di_main"), "8000000"])
    return capture


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "xdg-cache"
    monkeypatch.delenv("PROFILER_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home / "profiler" / "debuginfod"


def report_rows(capture: Path, *extra: str, env: dict[str, str]) -> tuple[list[dict[str, object]], str]:
    done = subprocess.run([sys.executable, "-m", "profiler", "report", "-i", str(capture), "--no-children",
                           "-g", "none", "--format", "json", "--debug-dir", str(capture.parent / "none"), *extra],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["rows"], done.stderr


def test_first_report_fetches_twenty_files_second_uses_the_cache(
        server: str, recorded: Path, cache: Path) -> None:
    env = {**os.environ, "DEBUGINFOD_URLS": server}
    before = debuginfo_requests(server)
    rows, _ = report_rows(recorded, env=env)
    first = debuginfo_requests(server) - before
    symbols = {r["symbol"] for r in rows}
    assert {f"di_spin_{n}" for n in NUMS} <= symbols  # static: only the debug files know them
    assert first >= 20
    cached = sorted(p.parent.name for p in cache.glob("*/debuginfo"))
    assert len(cached) >= 20 and not list(cache.glob("*/.part-*"))

    rows2, _ = report_rows(recorded, env=env)
    assert debuginfo_requests(server) - before == first  # no request at all the second time
    assert rows2 == rows


def test_offline_never_asks_and_without_server_names_are_unnamed(
        server: str, recorded: Path, cache: Path) -> None:
    env = {**os.environ, "DEBUGINFOD_URLS": server}
    before = debuginfo_requests(server)
    rows, _ = report_rows(recorded, "--offline", env=env)
    assert debuginfo_requests(server) == before
    symbols = {str(r["symbol"]) for r in rows}
    assert not any(s.startswith("di_spin_") for s in symbols)
    assert any(s.startswith("libdi_07.so+0x") for s in symbols)  # unnamed, from .eh_frame


def test_buildids_shows_debuginfod_as_the_source(server: str, recorded: Path, cache: Path) -> None:
    env = {**os.environ, "DEBUGINFOD_URLS": server}
    done = subprocess.run([sys.executable, "-m", "profiler", "buildids", "-i", str(recorded), "--json", "--hit",
                           "--debug-dir", str(recorded.parent / "none")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    by_path = {Path(str(r["path"])).name: r["source"] for r in json.loads(done.stdout)}
    assert all(by_path[f"libdi_{n}.so"] == "debuginfod" for n in NUMS), by_path
    assert by_path["di_main"] == "debuginfod"


def test_unreachable_server_is_one_warning(recorded: Path, cache: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    env = {**os.environ, "DEBUGINFOD_URLS": dead, "DEBUGINFOD_TIMEOUT": "5"}
    rows, err = report_rows(recorded, env=env)
    assert err.count(f"debuginfod server {dead}") == 1
    assert any(str(r["symbol"]).startswith("libdi_03.so+0x") for r in rows)


def test_archive_packs_symbols_from_debuginfod(server: str, recorded: Path, cache: Path,
                                               tmp_path: Path) -> None:
    env = {**os.environ, "DEBUGINFOD_URLS": server}
    archived = tmp_path / "archived.prof"
    done = subprocess.run([sys.executable, "-m", "profiler", "archive", "-i", str(recorded), "-o", str(archived),
                           "--debug-dir", str(tmp_path / "none")], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    shutil.rmtree(recorded.parent / "app")
    clear_symbol_cache()
    rows, _ = profile_rows(archived, debug_dirs=[tmp_path / "none"], symfs=tmp_path)
    names = {label for _, frames, _ in rows for _, label in frames}
    assert {f"di_spin_{n}" for n in NUMS} <= names

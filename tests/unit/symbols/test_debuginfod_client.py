"""DebuginfodClient without a real server: a tiny HTTP server in a thread answers.

(The real elfutils debuginfod is exercised in tests/e2e/test_debuginfod.py.)
"""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from profiler.symbols.debuginfod import DebuginfodClient, urls_from, valid_build_id
from profiler.format.buildid import read_build_id


class Server:
    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files
        self.paths: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                outer.paths.append(self.path)
                body = outer.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True).start()  # shutdown() waits a poll


@pytest.fixture
def elf(fixtures_dir: Path) -> tuple[str, bytes]:
    path = fixtures_dir / "elf" / "prog_pie"
    bid = read_build_id(path)
    assert bid is not None
    return bid, path.read_bytes()


@pytest.fixture
def server(elf: tuple[str, bytes]) -> Iterator[Server]:
    bid, data = elf
    srv = Server({f"/buildid/{bid}/debuginfo": data, f"/buildid/{'ab' * 20}/debuginfo": data})
    yield srv
    srv.httpd.shutdown()


def test_build_ids_are_validated_as_hex() -> None:
    assert valid_build_id("ab" * 20) and valid_build_id("0123")
    for bad in ("", "a", "abc", "AB" * 20, "../../etc/passwd", "ab/cd", "ab" * 65):
        assert not valid_build_id(bad)


def test_urls_keep_http_and_https_only() -> None:
    assert urls_from(" http://a:1/  https://b  file:///x ftp://c ") == ("http://a:1", "https://b")
    assert urls_from(None) == () and urls_from("") == ()


def test_fetch_caches_atomically_and_asks_once(server: Server, elf: tuple[str, bytes], tmp_path: Path) -> None:
    bid, data = elf
    client = DebuginfodClient((server.url,), tmp_path)
    got = client.fetch(bid)
    assert got == tmp_path / bid / "debuginfo" and got.read_bytes() == data
    assert client.fetch(bid) == got and server.paths == [f"/buildid/{bid}/debuginfo"]
    assert [p.name for p in (tmp_path / bid).iterdir()] == ["debuginfo"]  # no temporary left


def test_a_file_with_another_build_id_is_refused(server: Server, tmp_path: Path) -> None:
    client = DebuginfodClient((server.url,), tmp_path)
    assert client.fetch("ab" * 20) is None  # the server answers with prog_pie
    assert not (tmp_path / ("ab" * 20) / "debuginfo").exists()
    assert len(client.warnings) == 1 and "is not that file" in client.warnings[0]


def test_invalid_build_ids_never_reach_the_network(server: Server, tmp_path: Path) -> None:
    client = DebuginfodClient((server.url,), tmp_path)
    assert client.fetch("../../x") is None and client.fetch("ABCD") is None
    assert server.paths == [] and client.requests == 0


def test_a_miss_is_remembered(server: Server, tmp_path: Path) -> None:
    client = DebuginfodClient((server.url,), tmp_path)
    assert client.fetch("cd" * 20) is None and client.fetch("cd" * 20) is None
    assert server.paths == [f"/buildid/{'cd' * 20}/debuginfo"]
    assert client.warnings == []  # a 404 is an answer, not a problem


def test_offline_uses_only_the_cache(server: Server, elf: tuple[str, bytes], tmp_path: Path) -> None:
    bid, _ = elf
    offline = DebuginfodClient((server.url,), tmp_path, offline=True)
    assert offline.fetch(bid) is None and server.paths == []
    DebuginfodClient((server.url,), tmp_path).fetch(bid)
    assert offline.fetch(bid) == tmp_path / bid / "debuginfo" and len(server.paths) == 1


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_fetch_all_is_parallel_and_shows_progress_only_on_a_terminal(server: Server, elf: tuple[str, bytes],
                                                                     tmp_path: Path) -> None:
    bid, _ = elf
    ids = [bid] + [f"{i:02x}" * 20 for i in range(10)]
    tty, pipe = Tty(), io.StringIO()
    got = DebuginfodClient((server.url,), tmp_path / "a").fetch_all(ids, stream=tty)
    assert got[bid] is not None and sum(p is not None for p in got.values()) == 1
    assert "\rdebuginfod: 11/11 files (1 found)" in tty.getvalue()
    DebuginfodClient((server.url,), tmp_path / "b").fetch_all(ids, stream=pipe)
    assert pipe.getvalue() == ""


def test_unreachable_server_warns_once(tmp_path: Path) -> None:
    client = DebuginfodClient(("http://127.0.0.1:9",), tmp_path, timeout=2)
    client.fetch_all([f"{i:02x}" * 20 for i in range(5)], stream=io.StringIO())
    assert len(client.warnings) == 1 and "http://127.0.0.1:9" in client.warnings[0]

"""The push client's URLs and its back-off (a loopback server that answers 503 with and without
Retry-After; the sleeps recorded instead of slept)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from profiler.push import Delivery, PushError, otlp_url, post, pyroscope_url


def test_urls() -> None:
    assert otlp_url("http://h:4318") == "http://h:4318/v1development/profiles"
    assert otlp_url("https://h/custom/path") == "https://h/custom/path"
    assert pyroscope_url("http://h:4040", {"name": "a.cpu{x=y}"}) == "http://h:4040/ingest?name=a.cpu%7Bx%3Dy%7D"
    assert pyroscope_url("http://h/pyro/ingest", {}).startswith("http://h/pyro/ingest")
    for bad in ("h:4318", "file:///x", "http://"):
        with pytest.raises(PushError, match="is not an http"):
            otlp_url(bad)


@pytest.fixture
def unavailable() -> Iterator[str]:
    calls = {"n": 0}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            assert self.headers["Authorization"] == "Basic dXNlcjpwdw=="  # user:pw
            calls["n"] += 1
            self.send_response(503)
            if calls["n"] == 2:
                self.send_header("Retry-After", "7")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://user:pw@127.0.0.1:{server.server_address[1]}/v1development/profiles?secret=1"
    server.shutdown()
    server.server_close()


def test_backoff_doubles_honours_retry_after_and_stops(unavailable: str) -> None:
    slept: list[float] = []
    with pytest.raises(PushError) as err:
        post(unavailable, b"x", "application/x-protobuf", Delivery(retries=4, backoff=0.5, max_wait=4.0), slept.append)
    assert slept == [0.5, 4.0, 2.0, 4.0]  # 0.5, Retry-After 7 capped at 4, then 2, 4 (capped)
    said = str(err.value)
    assert "after 5 attempts (last: HTTP 503)" in said
    assert "pw" not in said and "secret" not in said  # no credentials nor query in the sentence

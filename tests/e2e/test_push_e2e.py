"""``profiler push`` to loopback receivers written here with the backends' own message classes:
an OTLP/HTTP profiles receiver (``opentelemetry-proto``'s ``ExportProfilesServiceRequest``) and a
Pyroscope-style ``/ingest`` receiver (multipart pprof). What arrives equals ``report``'s counts;
headers carry the tenant and the bearer token, which never shows in the output; a receiver that
fails twice is retried into success, one that always fails or stalls ends in one sentence and
exit 1 within the bounded time, and a 400 is not retried."""

from __future__ import annotations

import gzip
import http.server
import os
import subprocess
import sys
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path

import pytest
from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2 as svc
from tests.e2e.test_exports_e2e import _env, our_flat
from tests.e2e.test_otlp_e2e import otlp_samples

from profiler.report.render.proto import profile_pb2

pytestmark = pytest.mark.e2e
TOKEN = "s3cret-token-value"


@dataclass
class Seen:
    requests: list[tuple[str, Message, bytes]] = field(default_factory=list)  # headers: case-insensitive


def serve(answer: Callable[[http.server.BaseHTTPRequestHandler, int], None]) -> Iterator[tuple[str, Seen]]:
    seen = Seen()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            seen.requests.append((self.path, self.headers, body))
            answer(self, len(seen.requests))

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def reply(handler: http.server.BaseHTTPRequestHandler, status: int, body: bytes = b"") -> None:
    handler.send_response(status)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


@pytest.fixture(scope="module")
def recording(require_perf: None, fixtures_dir: Path, profiler_cmd: list[str],
              tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("push") / "syscalls.prof"
    res = subprocess.run([*profiler_cmd, "record", "-q", "-g", "-F", "2000", "-o", str(out), "--",
                          str(fixtures_dir / "workloads" / "syscalls"), "0.3"],
                         capture_output=True, text=True, timeout=120, env=_env())
    assert res.returncode == 0, res.stderr
    return out


def push(profiler_cmd: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*profiler_cmd, "push", *args], capture_output=True, text=True, timeout=120,
                          env={**_env(), "PUSH_TOKEN": TOKEN})


def test_otlp_receiver_gets_the_report_with_tenant_and_token(recording: Path, profiler_cmd: list[str]) -> None:
    def ok(handler: http.server.BaseHTTPRequestHandler, n: int) -> None:
        reply(handler, 200, svc.ExportProfilesServiceResponse().SerializeToString())

    for url, seen in serve(ok):
        # --no-inline: the leaf is then the function perf report names (an inlined function would
        # be the innermost Line of its location, as in pprof)
        res = push(profiler_cmd, str(recording), "--otlp", url, "--tenant", "team-a", "--token-env", "PUSH_TOKEN",
                   "--no-inline")
        assert res.returncode == 0, res.stderr
        assert TOKEN not in res.stdout + res.stderr
        ((path, headers, body),) = seen.requests
        assert path == "/v1development/profiles"
        assert headers["Content-Type"] == "application/x-protobuf"
        assert headers["X-Scope-OrgID"] == "team-a" and headers["Authorization"] == f"Bearer {TOKEN}"
        request = svc.ExportProfilesServiceRequest.FromString(body)
        counts, _ = otlp_samples(request)  # type: ignore[arg-type]  # the same fields as ProfilesData
        leaf: Counter[str] = Counter()
        for (names, _tid), n in counts.items():
            leaf[names[0]] += n
        assert dict(leaf) == {k: v for k, v in our_flat(profiler_cmd, recording).items() if v}


def test_pyroscope_ingest_gets_pprof(recording: Path, profiler_cmd: list[str]) -> None:
    for url, seen in serve(lambda h, n: reply(h, 200)):
        res = push(profiler_cmd, str(recording), "--pyroscope", url, "--app", "myapp.cpu{env=ci}")
        assert res.returncode == 0, res.stderr
        ((path, headers, body),) = seen.requests
        parts = urllib.parse.urlsplit(path)
        query = dict(urllib.parse.parse_qsl(parts.query))
        assert parts.path == "/ingest" and query["name"] == "myapp.cpu{env=ci}" and query["format"] == "pprof"
        assert 0 < int(query["until"]) - int(query["from"]) <= 5 and int(query["from"]) > 1_600_000_000
        boundary = headers["Content-Type"].split("boundary=", 1)[1].encode()
        part = next(p for p in body.split(b"--" + boundary) if b'name="profile"' in p)
        blob = part.split(b"\r\n\r\n", 1)[1].rsplit(b"\r\n", 1)[0]
        prof = profile_pb2.Profile.FromString(gzip.decompress(blob))
        assert sum(s.value[0] for s in prof.sample) == sum(our_flat(profiler_cmd, recording).values())


def test_retries_then_success_and_a_final_refusal(recording: Path, profiler_cmd: list[str]) -> None:
    def flaky(handler: http.server.BaseHTTPRequestHandler, n: int) -> None:
        reply(handler, 503 if n <= 2 else 200)

    for url, seen in serve(flaky):
        res = push(profiler_cmd, str(recording), "--otlp", url)
        assert res.returncode == 0, res.stderr
        assert len(seen.requests) == 3 and "after 3 attempts" in res.stderr
    for url, seen in serve(lambda h, n: reply(h, 400, b"bad profile")):
        res = push(profiler_cmd, str(recording), "--otlp", url)
        assert res.returncode == 1 and len(seen.requests) == 1  # a 400 is final: not sent again
        assert res.stderr.strip().splitlines()[-1].startswith("profiler: ") and "HTTP 400: bad profile" in res.stderr
        assert "Traceback" not in res.stderr
    for url, seen in serve(lambda h, n: reply(h, 500)):
        res = push(profiler_cmd, str(recording), "--otlp", url, "--retries", "2")
        assert res.returncode == 1 and len(seen.requests) == 3
        assert "after 3 attempts (last: HTTP 500)" in res.stderr and "push it again later" in res.stderr


def test_a_stalled_receiver_ends_in_bounded_time(recording: Path, profiler_cmd: list[str]) -> None:
    def stall(handler: http.server.BaseHTTPRequestHandler, n: int) -> None:
        time.sleep(3)

    for url, seen in serve(stall):
        started = time.monotonic()
        res = push(profiler_cmd, str(recording), "--otlp", url, "--timeout", "0.5", "--retries", "1")
        took = time.monotonic() - started
        assert res.returncode == 1 and "no answer in time" in res.stderr, res.stderr
        assert len(seen.requests) == 2 and took < 20


def test_bad_destinations_are_one_sentence(recording: Path, profiler_cmd: list[str]) -> None:
    for args, said in ((["--otlp", "ftp://x"], "is not an http:// or https:// URL"),
                       ([], "push needs one destination"),
                       (["--otlp", "http://127.0.0.1:9", "--token-env", "NOPE_UNSET"], "is not set"),
                       (["--otlp", "http://127.0.0.1:9", "--retries", "0", "--timeout", "2"], "cannot connect")):
        env_args = [str(recording), *args]
        res = push(profiler_cmd, *env_args)
        assert res.returncode in (1, 2) and said in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert "NOPE_UNSET" not in os.environ


def test_record_pushes_each_rotated_file_and_resumes_its_queue(tmp_path: Path) -> None:
    """record --switch-output --push: every finished file reaches the receiver once; with the
    receiver down, the files stay queued on disk and the next recording with the same output
    sends them first; the recording itself never waits for the backend."""
    loop = ["sh", "-c", "i=0; while [ $i -lt 40 ]; do /bin/true; sleep 0.015; i=$((i+1)); done"]

    def ok(handler: http.server.BaseHTTPRequestHandler, n: int) -> None:
        reply(handler, 200, svc.ExportProfilesServiceResponse().SerializeToString())

    out = tmp_path / "r.prof"
    for url, seen in serve(ok):
        res = subprocess.run([sys.executable, "-m", "profiler", "record", "-e", "sched:sched_process_exec",
                              "--switch-output", "300ms", "--push", url, "--push-tenant", "ops", "-o", str(out),
                              "--", *loop], capture_output=True, text=True, timeout=180, env=_env())
        assert res.returncode == 0, res.stderr
        files = sorted(tmp_path.glob("r.prof.2*"))
        assert len(files) >= 2 and f"push: {len(files)} files pushed" in res.stderr, res.stderr
        assert len(seen.requests) == len(files)
        assert all(h["X-Scope-OrgID"] == "ops" for _, h, _ in seen.requests)
        execs = 0
        for _, _, body in seen.requests:
            request = svc.ExportProfilesServiceRequest.FromString(body)
            execs += sum(len(s.values) for rp in request.resource_profiles for sp in rp.scope_profiles
                         for prof in sp.profiles for s in prof.samples)
        assert execs == 81  # 2 x 40 + the shell's own: each file sent once
        assert (tmp_path / "r.prof.push-queue").read_text() == ""
    # the receiver is gone: files stay queued, the recording is not held up
    down = "http://127.0.0.1:9"
    started = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "profiler", "record", "-q", "-e", "sched:sched_process_exec",
                          "--switch-output", "300ms", "--push", down, "-o", str(tmp_path / "q.prof"), "--", *loop],
                         capture_output=True, text=True, timeout=180, env=_env())
    assert res.returncode == 0, res.stderr
    assert time.monotonic() - started < 40
    queued = (tmp_path / "q.prof.push-queue").read_text().split()
    assert queued and all(Path(p).exists() for p in queued)
    for url, seen in serve(ok):  # back up: the next recording sends the backlog first
        res = subprocess.run([sys.executable, "-m", "profiler", "record", "-q", "-e", "sched:sched_process_exec",
                              "--switch-output", "10s", "--push", url, "-o", str(tmp_path / "q.prof"), "--", "true"],
                             capture_output=True, text=True, timeout=180, env=_env())
        assert res.returncode == 0, res.stderr
        assert len(seen.requests) == len(queued) + 1
        assert (tmp_path / "q.prof.push-queue").read_text() == ""

"""A debuginfod client: debug files by build-id from HTTP servers, cached on disk.

The protocol (elfutils' debuginfod(8)): ``GET <server>/buildid/<hex build-id>/debuginfo``
returns the ELF file with the DWARF and ``.symtab`` of that build; 404 when the server does
not have it. Servers come from ``DEBUGINFOD_URLS`` (whitespace-separated, as elfutils reads
it) or ``--debuginfod URLS``; each is asked in turn until one has the file.

Cache: ``$XDG_CACHE_HOME/profiler/debuginfod/<build-id>/debuginfo`` (``PROFILER_CACHE_DIR``
overrides the ``profiler`` part). A file is written to a temporary name in its directory,
checked (an ELF whose build-id is the one asked for: a server's wrong answer never names a
frame) and renamed into place, so readers never see half a file and concurrent reports can
share the cache. A build-id no server had is remembered for :data:`MISS_TTL` seconds (an
empty ``.miss`` file) so a second report does not ask again. Build-ids are validated as hex
before they go into a URL or a path.

:meth:`DebuginfodClient.fetch_all` fetches many files in parallel (threads), with a
progress line on stderr only when it is a terminal. ``offline`` uses the cache and never
the network. Every network failure (timeout, refused, HTTP error) means "not found there",
with one warning per server.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import field
from pathlib import Path
from typing import IO

from profiler.dataclass import dataclass
from profiler.format.buildid import read_build_id
from profiler.cache import cache_dir


ENV_URLS = "DEBUGINFOD_URLS"
ENV_TIMEOUT = "DEBUGINFOD_TIMEOUT"
DEFAULT_TIMEOUT = 30.0  # seconds without progress on one connection (elfutils: 90)
MISS_TTL = 600.0  # seconds a "not found" answer is trusted (elfutils' cache_miss_s default)
MAX_WORKERS = 8
MAX_SIZE = 4 << 30  # bytes: a larger answer is refused
_HEX_ID = re.compile(r"(?:[0-9a-f]{2}){2,64}")
_CHUNK = 1 << 16


def valid_build_id(build_id: str) -> bool:
    """True for a lowercase hex build-id of 2 to 64 bytes."""
    return _HEX_ID.fullmatch(build_id) is not None


def urls_from(text: str | None) -> tuple[str, ...]:
    """Server URLs from a ``DEBUGINFOD_URLS``-style list; only http and https are kept."""
    urls = []
    for word in (text or "").split():
        scheme = urllib.parse.urlsplit(word).scheme
        if scheme in ("http", "https"):
            urls.append(word.rstrip("/"))
    return tuple(urls)


def default_cache_dir() -> Path:
    return cache_dir() / "debuginfod"


def timeout_from_env() -> float:
    try:
        value = float(os.environ.get(ENV_TIMEOUT, ""))
    except ValueError:
        return DEFAULT_TIMEOUT
    return value if value > 0 else DEFAULT_TIMEOUT


@dataclass
class DebuginfodClient:
    """Fetches debug files by build-id (see the module docstring); thread-safe."""

    urls: tuple[str, ...]
    cache: Path = field(default_factory=default_cache_dir)
    offline: bool = False
    timeout: float = DEFAULT_TIMEOUT
    max_workers: int = MAX_WORKERS
    warnings: list[str] = field(default_factory=list)
    requests: int = 0  # HTTP requests made (for tests and the progress line)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _warned: set[str] = field(default_factory=set, repr=False)

    @classmethod
    def from_options(cls, urls: str | None = None, offline: bool = False,
                     cache: Path | None = None) -> DebuginfodClient | None:
        """A client for ``urls`` (else ``$DEBUGINFOD_URLS``); None when no server is set and
        nothing could come from the cache either."""
        servers = urls_from(os.environ.get(ENV_URLS) if urls is None else urls)
        if not servers:
            return None
        return cls(servers, cache or default_cache_dir(), offline, timeout_from_env())

    # --- the cache -----------------------------------------------------------------------------

    def cached(self, build_id: str) -> Path | None:
        """The cached debug file of ``build_id``, if there is one."""
        if not valid_build_id(build_id):
            return None
        path = self.cache / build_id / "debuginfo"
        return path if path.is_file() else None

    def _recent_miss(self, build_id: str) -> bool:
        try:
            return time.time() - (self.cache / build_id / ".miss").stat().st_mtime < MISS_TTL
        except OSError:
            return False

    # --- fetching ------------------------------------------------------------------------------

    def fetch(self, build_id: str) -> Path | None:
        """The debug file of ``build_id``: from the cache, else from the first server that has
        it (never the network when ``offline``); None when none has it."""
        if not valid_build_id(build_id):
            return None
        found = self.cached(build_id)
        if found is not None or self.offline or self._recent_miss(build_id):
            return found
        for url in self.urls:
            got = self._download(url, build_id)
            if got is not None:
                return got
        self._mark_miss(build_id)
        return None

    def fetch_all(self, build_ids: Iterable[str], stream: IO[str] | None = None) -> dict[str, Path | None]:
        """:meth:`fetch` for many build-ids at once, in parallel threads; a progress line on
        ``stream`` (default stderr) only when it is a terminal."""
        wanted = sorted({b for b in build_ids if valid_build_id(b)})
        todo = [b for b in wanted if self.cached(b) is None]
        results = {b: self.cached(b) for b in wanted}
        if not todo or self.offline:
            return results
        from concurrent.futures import ThreadPoolExecutor  # only when something is fetched

        out = sys.stderr if stream is None else stream
        show = _Progress(out, len(todo)) if _isatty(out) else None
        with ThreadPoolExecutor(max_workers=max(1, min(self.max_workers, len(todo)))) as pool:
            for bid, path in zip(todo, pool.map(self._fetch_counted(show), todo)):
                results[bid] = path
        if show is not None:
            show.done()
        return results

    def _fetch_counted(self, show: _Progress | None) -> Callable[[str], Path | None]:
        def one(build_id: str) -> Path | None:
            path = self.fetch(build_id)
            if show is not None:
                show.step(path)
            return path
        return one

    def _download(self, url: str, build_id: str) -> Path | None:
        import urllib.error  # with urllib.request: http.client and ssl, 7 MB, only when fetching
        import urllib.request

        target_dir = self.cache / build_id
        request = urllib.request.Request(f"{url}/buildid/{build_id}/debuginfo",
                                         headers={"User-Agent": "profiler-debuginfod-client"})
        with self._lock:
            self.requests += 1
        try:
            target_dir.mkdir(parents=True, exist_ok=True)
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                tmp = self._save(response, target_dir)
        except urllib.error.HTTPError as exc:
            if exc.code != 404:
                self._warn(url, f"HTTP {exc.code} {exc.reason}")
            return None
        except (urllib.error.URLError, OSError, TimeoutError, ValueError) as exc:
            reason = getattr(exc, "reason", None) or exc
            self._warn(url, str(reason))
            return None
        return self._accept(tmp, target_dir, build_id, url)

    def _save(self, response: IO[bytes], target_dir: Path) -> Path:
        """Stream the body into a temporary file beside the target (bounded in size and time)."""
        import tempfile  # with random and shutil: ~6 ms that a report without a server need not pay

        fd, name = tempfile.mkstemp(prefix=".part-", dir=target_dir)
        deadline = time.monotonic() + 20 * self.timeout
        size = 0
        try:
            with os.fdopen(fd, "wb") as out:
                while chunk := response.read(_CHUNK):
                    size += len(chunk)
                    if size > MAX_SIZE or time.monotonic() > deadline:
                        raise ValueError("the answer is too large or too slow")
                    out.write(chunk)
        except BaseException:
            os.unlink(name)
            raise
        return Path(name)

    def _accept(self, tmp: Path, target_dir: Path, build_id: str, url: str) -> Path | None:
        """Rename ``tmp`` into the cache when it is an ELF file with the asked build-id."""
        found = read_build_id(tmp)
        if found != build_id:
            tmp.unlink(missing_ok=True)
            self._warn(url, f"its answer for build-id {build_id} is not that file; ignored")
            return None
        final = target_dir / "debuginfo"
        os.replace(tmp, final)
        (target_dir / ".miss").unlink(missing_ok=True)
        return final

    def _mark_miss(self, build_id: str) -> None:
        try:
            (self.cache / build_id).mkdir(parents=True, exist_ok=True)
            (self.cache / build_id / ".miss").touch()
        except OSError:
            pass

    def _warn(self, url: str, why: str) -> None:
        with self._lock:
            if url not in self._warned:
                self._warned.add(url)
                self.warnings.append(f"debuginfod server {url}: {why}.")


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class _Progress:
    """``debuginfod: 7/20 files (5 found)`` rewritten in place on a terminal."""

    def __init__(self, out: IO[str], total: int) -> None:
        self.out, self.total, self.count, self.found = out, total, 0, 0
        self._lock = threading.Lock()
        self._draw()

    def step(self, path: Path | None) -> None:
        with self._lock:
            self.count += 1
            self.found += path is not None
            self._draw()

    def _draw(self) -> None:
        self.out.write(f"\rdebuginfod: {self.count}/{self.total} files ({self.found} found)")
        self.out.flush()

    def done(self) -> None:
        self.out.write("\n")
        self.out.flush()


"""``record --switch-output ... --push URL`` (and ``--archive``): each finished file archived
and sent to a backend, in the background, through an on-disk queue.

The queue is a file beside the output, ``OUTPUT.push-queue``: one line per capture file waiting
to be sent, oldest first, rewritten whole (to a temporary file, then renamed) after every
change, so a recorder killed at any moment leaves a whole queue. Each file is sent by a child
process, ``profiler push FILE ...`` (which builds the profile and retries with back-off): the
recorder's drain loop only starts it and looks at its exit status, so a backend that refuses or
stalls never slows the recording. A file leaves the queue once its push exited 0; after a push
failed, the next try waits (``RETRY_S``, doubling up to ``MAX_RETRY_S``). A recorder started
again with the same output sends what its predecessor's queue still holds first. A file that
``--switch-max-files`` or ``--max-size`` deletes before it was sent is dropped from the queue
and counted (the disk bound wins over the backlog).

Nothing is sent twice after a restart: an entry is removed as soon as its push has exited 0,
before the next one starts; a restart only re-sends a file whose push had not finished.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

RETRY_S = 2.0
MAX_RETRY_S = 60.0
AT_EXIT_S = 15.0  # how long a recording that ended keeps sending (the rest stays queued)

TYPE_CHECKING = False  # typing costs every recording ~5 ms of start-up (profiler/value.py)
if TYPE_CHECKING:
    from typing import TextIO


class FileQueue:
    """The finished files to archive (--archive) and to push (--push), in order: the child
    process working on one now, and when to try again."""

    def __init__(self, output: str, push_args: list[str], archive: bool = False) -> None:
        self.path = f"{output}.push-queue"
        self.push_args = push_args  # after "profiler push FILE": destination and headers ([]: archive only)
        self.archive = archive
        self._phase = ""  # what the running child does: "archive" or "push"
        self.pending: list[str] = _read(self.path)
        self.sent = 0
        self.failed_attempts = 0
        self.dropped = 0
        self._child: subprocess.Popen[bytes] | None = None
        self._current: str | None = None
        self._wait_until = 0.0
        self._backoff = RETRY_S

    def add(self, path: str) -> None:
        """A finished file: send it after those already waiting."""
        self.pending.append(path)
        self._save()
        self.poll()

    def poll(self) -> None:
        """Reap a finished push, start the next when it is time (never waits)."""
        child = self._child
        if child is not None:
            code = child.poll()
            if code is None:
                return
            self._child = None
            if self._phase == "archive" and self._current is not None:
                if self.push_args:  # archived (or left as recorded): now send it
                    self._run("push", [self._current, *self.push_args])
                    return
                code = 0
            done, self._current = self._current, None
            if code == 0 and done is not None:
                self.sent += 1
                self.pending = [p for p in self.pending if p != done]
                self._save()
                self._backoff = RETRY_S
            else:
                self.failed_attempts += 1
                self._wait_until = time.monotonic() + self._backoff
                self._backoff = min(MAX_RETRY_S, self._backoff * 2)
        self._drop_missing()
        if self.pending and time.monotonic() >= self._wait_until:
            self._start(self.pending[0])

    def finish(self, say: TextIO | None, seconds: float = AT_EXIT_S) -> None:
        """At the end of the recording: keep going for at most ``seconds``; what is left stays
        queued for the next recorder with the same output. The summary goes to ``say``."""
        deadline = time.monotonic() + seconds
        while (self.pending or self._child is not None) and time.monotonic() < deadline:
            self.poll()
            time.sleep(0.05)
        child = self._child
        if child is not None:
            child.terminate()
            try:
                child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            self._child = None
        if say is not None:
            print(self.summary(), file=say)

    def summary(self) -> str:
        left = len(self.pending)
        parts = [f"{self.sent} file{'s' if self.sent != 1 else ''} {'pushed' if self.push_args else 'archived'}"]
        if left:
            parts.append(f"{left} still queued in {self.path}")
        if self.dropped:
            parts.append(f"{self.dropped} deleted by the size limits before they were sent")
        return ("push: " if self.push_args else "archive: ") + ", ".join(parts)

    def _start(self, path: str) -> None:
        self._current = path
        if self.archive:
            self._run("archive", ["-i", path])
        else:
            self._run("push", [path, *self.push_args])

    def _run(self, phase: str, args: list[str]) -> None:
        self._phase = phase
        self._child = subprocess.Popen(
            [sys.executable, "-m", "profiler", phase, *args],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)  # a Ctrl-C for the recorder is not the child's

    def _drop_missing(self) -> None:
        kept = [p for p in self.pending if p == self._current or os.path.exists(p)]
        if len(kept) != len(self.pending):
            self.dropped += len(self.pending) - len(kept)
            self.pending = kept
            self._save()

    def _save(self) -> None:
        tmp = f"{self.path}.tmp"
        with open(tmp, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.writelines(f"{p}\n" for p in self.pending)
        os.replace(tmp, self.path)


def _read(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            return [line.rstrip("\n") for line in f if line.strip() and os.path.exists(line.rstrip("\n"))]
    except OSError:
        return []

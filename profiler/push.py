"""Sending a profile to a backend over HTTP: OTLP/HTTP (protobuf) or Pyroscope's ``/ingest``.

One request, retried with back-off: a connection error, a timeout (a backend that stalls), 408,
429 and 5xx answers are tried again up to ``retries`` times, waiting ``backoff``, twice that,
... (at most ``max_wait`` seconds; a ``Retry-After`` in seconds is honoured within that
bound); any other 4xx is final at once (the request itself is wrong: sending it again would
not help). Every request has a ``timeout``, so nothing here waits without bound. TLS is
``urllib``'s for an ``https`` URL, with the system's certificate store.

Credentials: a bearer token is read from the environment variable the caller names, never from
the command line, and never appears in a message (errors name the URL and the status only). A
URL's ``user:password@`` becomes HTTP basic authentication (Grafana Cloud's Pyroscope takes it
so) and is left out of every message too.
"""

from __future__ import annotations

import base64
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from dataclasses import field

from profiler.dataclass import dataclass
from profiler.errors import ProfilerError

OTLP_PROFILES_PATH = "/v1development/profiles"
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


class PushError(ProfilerError):
    """The backend did not take the profile (exit 1, one sentence)."""


@dataclass(frozen=True)
class Delivery:
    """How requests are sent: headers, and how long and how often to try."""

    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 10.0
    retries: int = 4
    backoff: float = 0.5
    max_wait: float = 30.0


@dataclass(frozen=True)
class Sent:
    """A request the backend took: its status and how many attempts it needed."""

    status: int
    attempts: int
    body: bytes


def otlp_url(base: str) -> str:
    """The OTLP/HTTP profiles endpoint of ``base``: its own path when it has one, else the
    signal's default path (``/v1development/profiles``)."""
    parts = urllib.parse.urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise PushError(f"{base!r} is not an http:// or https:// URL.")
    if parts.path in ("", "/"):
        parts = parts._replace(path=OTLP_PROFILES_PATH)
    return urllib.parse.urlunsplit(parts)


def pyroscope_url(base: str, query: Mapping[str, str]) -> str:
    """``base``'s ``/ingest`` endpoint with ``query``."""
    parts = urllib.parse.urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise PushError(f"{base!r} is not an http:// or https:// URL.")
    path = parts.path.rstrip("/")
    if not path.endswith("/ingest"):
        path += "/ingest"
    return urllib.parse.urlunsplit(parts._replace(path=path, query=urllib.parse.urlencode(query)))


def multipart(field_name: str, filename: str, payload: bytes) -> tuple[bytes, str]:
    """A multipart/form-data body with one file field, and its Content-Type."""
    boundary = uuid.uuid4().hex
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"{field_name}\"; filename=\"{filename}\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n").encode()
    return head + payload + f"\r\n--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def post(url: str, body: bytes, content_type: str, delivery: Delivery,
         sleep: Callable[[float], None] = time.sleep) -> Sent:
    """POST ``body`` to ``url`` with retries (see the module docstring)."""
    headers = {**delivery.headers, "Content-Type": content_type, "User-Agent": "profiler"}
    url, basic = _without_userinfo(url)
    if basic and "Authorization" not in headers:
        headers["Authorization"] = basic
    wait = delivery.backoff
    last = ""
    for attempt in range(1, delivery.retries + 2):
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        retry_after: float | None = None
        try:
            with urllib.request.urlopen(request, timeout=delivery.timeout) as answer:
                return Sent(int(answer.status), attempt, answer.read(1 << 20))
        except urllib.error.HTTPError as exc:
            text = exc.read(300).decode("utf-8", "replace").strip().splitlines()
            last = f"HTTP {exc.code}{': ' + text[0] if text else ''}"
            if exc.code not in RETRY_STATUSES:
                raise PushError(f"{_where(url)} refused the profile ({last}).") from None
            retry_after = _seconds(exc.headers.get("Retry-After"))
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            last = "no answer in time" if isinstance(reason, TimeoutError) or "timed out" in str(reason) \
                else f"cannot connect: {reason}"
        if attempt > delivery.retries:
            break
        sleep(min(delivery.max_wait, max(wait, retry_after or 0.0)))
        wait = min(delivery.max_wait, wait * 2)
    tries = delivery.retries + 1
    raise PushError(f"{_where(url)} did not take the profile after {tries} attempt{'s' if tries > 1 else ''} "
                    f"(last: {last}); the capture is unchanged, push it again later.")


def _without_userinfo(url: str) -> tuple[str, str | None]:
    """The URL without ``user:password@``, and the basic-authentication header it meant."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None:
        return url, None
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if parts.port:
        host += f":{parts.port}"
    pair = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
    return urllib.parse.urlunsplit(parts._replace(netloc=host)), "Basic " + base64.b64encode(pair.encode()).decode()


def _where(url: str) -> str:
    """The URL without its query (which may carry labels) or credentials."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))


def _seconds(text: str | None) -> float | None:
    try:
        return max(0.0, float(text)) if text else None
    except ValueError:
        return None  # an HTTP date: the back-off decides

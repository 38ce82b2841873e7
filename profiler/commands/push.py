"""``profiler push CAPTURE``: send a capture's profile to a backend, as OTLP profiles over
OTLP/HTTP (``--otlp URL``) or as pprof to Pyroscope's ``/ingest`` (``--pyroscope URL``)."""

from __future__ import annotations

import io
import os
from typing import Any

import click

from profiler.commands._common import warn
from profiler.commands._profile_opts import load_options, profile_options
from profiler.errors import UsageError


@click.command("push")
@click.argument("capture", metavar="CAPTURE")
@profile_options
@click.option("--otlp", "otlp_url", metavar="URL",
              help="An OTLP/HTTP receiver (the profiles signal, protobuf); a URL without a path gets "
                   "/v1development/profiles (Pyroscope 2 and the OTel Collector take it there).")
@click.option("--pyroscope", "pyroscope_url", metavar="URL",
              help="A Pyroscope server: pprof posted to URL/ingest.")
@click.option("--app", metavar="NAME",
              help="Pyroscope's application name, labels allowed (name{env=prod}); default: the "
                   "recorded command's name, '.cpu' added.")
@click.option("--tenant", metavar="ID", help="The tenant, sent as X-Scope-OrgID (multi-tenant Pyroscope).")
@click.option("--token-env", metavar="VAR",
              help="Send 'Authorization: Bearer' with the token in environment variable VAR (never printed).")
@click.option("--header", "headers", multiple=True, metavar="'NAME: VALUE'", help="Another HTTP header (repeatable).")
@click.option("--timeout", type=float, default=10.0, show_default=True, help="Seconds to wait for each answer.")
@click.option("--retries", type=int, default=4, show_default=True,
              help="Tries again after a failure that may pass (no answer, 408, 429, 5xx), with back-off.")
def command(capture: str, otlp_url: str | None, pyroscope_url: str | None, app: str | None, tenant: str | None,
            token_env: str | None, headers: tuple[str, ...], timeout: float, retries: int, **kwargs: Any) -> None:
    """Send a capture's profile (symbolized here, so the backend sees names, files and lines)
    to an OTLP/HTTP receiver or a Pyroscope server. A failure that may pass is retried with
    back-off; the command ends with one sentence and exit 1 when the backend does not take it
    (the capture is never changed)."""
    from profiler.push import Delivery, multipart, otlp_url as otlp_endpoint, post, pyroscope_url as ingest_url

    if (otlp_url is None) == (pyroscope_url is None):
        raise UsageError("push needs one destination: --otlp URL or --pyroscope URL.")
    if timeout <= 0 or retries < 0:
        raise UsageError("--timeout must be above 0 and --retries at least 0.")
    delivery = Delivery(headers=_headers(tenant, token_env, headers), timeout=timeout, retries=retries)
    kwargs["input_"] = capture
    options = load_options(kwargs)
    if otlp_url is not None:
        url = otlp_endpoint(otlp_url)
        sent = post(url, _otlp_body(options), "application/x-protobuf", delivery)
        _partial_success(sent.body)
    else:
        assert pyroscope_url is not None
        blob, query = _pprof_body(options, app)
        body, content_type = multipart("profile", "profile.pb.gz", blob)
        url = ingest_url(pyroscope_url, query)
        sent = post(url, body, content_type, delivery)
    click.echo(f"pushed {capture} to {url.split('?')[0]} (HTTP {sent.status}"
               f"{f', after {sent.attempts} attempts' if sent.attempts > 1 else ''})", err=True)


def _headers(tenant: str | None, token_env: str | None, extra: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for h in extra:
        name, sep, value = h.partition(":")
        if not sep or not name.strip() or any(c in h for c in "\r\n"):
            raise UsageError(f"--header {h!r}: write it as 'Name: value'.")
        out[name.strip()] = value.strip()
    if tenant:
        out["X-Scope-OrgID"] = tenant
    if token_env:
        token = os.environ.get(token_env)
        if not token:
            raise UsageError(f"--token-env {token_env}: the environment variable is not set.")
        if any(c in token for c in "\r\n"):
            raise UsageError(f"--token-env {token_env}: the token holds a line break.")
        out["Authorization"] = f"Bearer {token}"
    return out


def _otlp_body(options: Any) -> bytes:
    from profiler.report.pipeline import load_events
    from profiler.report.profile import stack_profile
    from profiler.report.render.otlp import OtlpInput, build_otlp

    profiles = load_events(options, warn, what="push")
    data = OtlpInput([stack_profile(p, locations=True, timeline=True) for p in profiles], profiles[0].header)
    return bytes(build_otlp(data).SerializeToString())  # the bytes of an ExportProfilesServiceRequest


def _partial_success(body: bytes) -> None:
    """Say what an OTLP receiver rejected (its ExportProfilesServiceResponse), if anything."""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2 as svc

    try:
        answer = svc.ExportProfilesServiceResponse.FromString(body)
    except DecodeError:
        return  # not protobuf (a proxy's page): the status said it was taken
    partial = answer.partial_success
    if partial.rejected_profiles or partial.error_message:
        warn(f"the receiver rejected {partial.rejected_profiles} profile(s): "
             f"{partial.error_message or 'no reason given'}")


def _pprof_body(options: Any, app: str | None) -> tuple[bytes, dict[str, str]]:
    from profiler.report.pipeline import load_events
    from profiler.report.profile import profile_meta, stack_profile
    from profiler.report.render.pprof import PprofInput, write_pprof

    profiles = load_events(options, warn, what="push")
    stream = io.BytesIO()
    write_pprof(PprofInput(profiles=[stack_profile(p, locations=True) for p in profiles],
                           comments=[f"capture {options.input}"]), stream)
    header = profiles[0].header
    meta = profile_meta(profiles[0], header)
    name = app or f"{_command_name(header.target.command, header.cmdline)}.cpu"
    start_s = (header.start_time_ns or 0) // 1_000_000_000
    seconds = -(-max(0, meta.last_time_ns - (header.start_perf_clock_ns or meta.first_time_ns)) // 1_000_000_000)
    query = {"name": name, "from": str(start_s), "until": str(start_s + max(1, seconds)),
             "format": "pprof", "spyName": "profiler"}
    return stream.getvalue(), query


def _command_name(command: tuple[str, ...], cmdline: tuple[str, ...]) -> str:
    words = command or cmdline
    name = os.path.basename(words[0]) if words else ""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "profiler"


for _param in command.params:  # the capture is an argument: the shared -i has no use here
    if isinstance(_param, click.Option) and _param.name == "input_":
        _param.hidden = True

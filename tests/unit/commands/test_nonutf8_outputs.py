"""Every output of a capture whose program path and command name are not UTF-8.

``fixtures/captures/nonutf8-name.prof`` recorded ``shares`` copied to ``/tmp/…/sh\\xffres``
(``fixtures/captures/make_nonutf8_capture.py``): its COMM and MMAP2 records hold the byte 0xff,
which the reader decodes with surrogateescape. Each command runs in a child process, as a user
runs it; it must exit 0 (annotate: or refuse in one sentence, the capture has no symbols; the
end-to-end test annotates with the program present) with no traceback, and follow the one rule
of ``profiler/report/render/utf8.py``: text outputs (the table, script, folded stacks, CSV)
carry the bytes as recorded; outputs whose format is UTF-8 text (JSON, speedscope, Firefox, the
flame graph's HTML) are valid UTF-8 and show the byte as ``\\xff``; pprof's strings likewise.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import CAPTURES

CAPTURE = CAPTURES / "nonutf8-name.prof"
RAW_NAME = b"sh\xffres"


OUTPUTS = [
    ["report"], ["report", "--format", "json"], ["report", "--format", "csv"], ["report", "-g", "caller"],
    ["report", "--sort", "srcline"], ["report", "--sort", "comm,dso"], ["report", "--stats"],
    ["script"], ["script", "--json"], ["script", "-F", "comm,pid,tid,time,ip,sym,dso"],
    ["flamegraph", "-o", "{out}"], ["export", "-f", "folded", "-o", "{out}"],
    ["export", "-f", "speedscope", "-o", "{out}"],
    pytest.param(["export", "-f", "pprof", "-o", "{out}"], id="export-pprof"),
    ["export", "-f", "firefox", "-o", "{out}"], ["buildids"], ["buildids", "--json"], ["info"], ["dump"],
    ["annotate", "main"], ["export", "-f", "otlp", "-o", "{out}"], ["export", "-f", "otlp", "--json"],
]


def run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[bytes]:
    argv = [a.format(out=tmp_path / "out") for a in args]
    return subprocess.run([sys.executable, "-m", "profiler", *argv, "-i", str(CAPTURE)], capture_output=True,
                          timeout=120)


def test_the_capture_holds_names_that_are_not_utf8() -> None:
    raw = CAPTURE.read_bytes()
    assert RAW_NAME in raw or b"sh\xef\xbf\xbdres" in raw  # the records' bytes (or U+FFFD in the header)
    done = subprocess.run([sys.executable, "-m", "profiler", "script", "-F", "comm", "-i", str(CAPTURE)],
                          capture_output=True, timeout=120)
    assert done.returncode == 0 and RAW_NAME in done.stdout, done.stderr


@pytest.mark.slow  # make check leaves it out; make test runs it
@pytest.mark.parametrize("args", OUTPUTS, ids=lambda a: "-".join(w for w in a if not w.startswith(("-o", "{"))))
def test_every_output_takes_names_that_are_not_utf8(args: list[str], tmp_path: Path) -> None:
    done = run(args, tmp_path)
    err = done.stderr.decode(errors="replace")
    assert "Traceback" not in err, err
    if args[0] == "annotate" and done.returncode == 1:  # the capture has no symbols: one sentence
        assert err.startswith("profiler: ") and "main" in err, err
        return
    assert done.returncode == 0, err
    out = (tmp_path / "out").read_bytes() if "{out}" in args else done.stdout
    assert out
    if args[0] in ("info", "dump", "annotate", "buildids") or "--stats" in args or "srcline" in args:
        return  # no name of the program's is in them, or only in a path (the bytes kept)
    if is_utf8_format(args):
        if args[:3] == ["export", "-f", "pprof"]:
            out = pprof_strings(out)
        elif args[:3] == ["export", "-f", "otlp"] and "--json" not in args:
            out = otlp_strings(out)
        text = out.decode("utf-8")  # strict: valid UTF-8
        assert "sh\\xffres" in text or "sh\\\\xffres" in text, text[:2000]
    else:
        assert RAW_NAME in out, out[:2000]


def is_utf8_format(args: list[str]) -> bool:
    return ("json" in " ".join(args) or args[0] == "flamegraph"
            or args[:3] in (["export", "-f", "speedscope"], ["export", "-f", "firefox"], ["export", "-f", "pprof"],
                            ["export", "-f", "otlp"]))


def otlp_strings(blob: bytes) -> bytes:
    """The string table of an OTLP profiles message, one string a line (as UTF-8)."""
    from opentelemetry.proto.profiles.v1development import profiles_pb2

    return "\n".join(profiles_pb2.ProfilesData.FromString(blob).dictionary.string_table).encode()


def pprof_strings(blob: bytes) -> bytes:
    """The string table of a gzipped pprof profile, one string a line (as UTF-8)."""
    import gzip

    from profiler.report.render.proto import profile_pb2

    prof = profile_pb2.Profile()
    prof.ParseFromString(gzip.decompress(blob))
    return "\n".join(prof.string_table).encode("utf-8")

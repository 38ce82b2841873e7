"""Every output of a capture whose program path and command name are not UTF-8.

``fixtures/captures/nonutf8-name.prof`` recorded ``shares`` copied to ``/tmp/…/sh\\xffres``
(``fixtures/captures/make_nonutf8_capture.py``): its COMM and MMAP2 records hold the byte 0xff,
which the reader decodes with surrogateescape. Each command runs in a child process, as a user
runs it; it must exit 0 (annotate: or refuse in one sentence, the capture has no symbols; the
end-to-end test annotates with the program present) with no traceback. The outputs that fail
today are strict xfails: they flip to failures when fixed, and then the mark goes (with its
entry in tests/fuzz/capture_fuzz.py's KNOWN_BUGS).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import CAPTURES

CAPTURE = CAPTURES / "nonutf8-name.prof"
RAW_NAME = b"sh\xffres"

PPROF_BUG = pytest.mark.xfail(
    strict=True,
    reason="known bug: export -f pprof ends in a UnicodeEncodeError traceback in profiler/report/render/pprof.py "
           "on a string that is not UTF-8 (the renderers' one rule for such names is due); when it passes, remove "
           "this mark and the entry in tests/fuzz/capture_fuzz.py KNOWN_BUGS")

OUTPUTS = [
    ["report"], ["report", "--format", "json"], ["report", "--format", "csv"], ["report", "-g", "caller"],
    ["report", "--sort", "srcline"], ["report", "--sort", "comm,dso"], ["report", "--stats"],
    ["script"], ["script", "--json"], ["script", "-F", "comm,pid,tid,time,ip,sym,dso"],
    ["flamegraph", "-o", "{out}"], ["export", "-f", "folded", "-o", "{out}"],
    ["export", "-f", "speedscope", "-o", "{out}"],
    pytest.param(["export", "-f", "pprof", "-o", "{out}"], marks=PPROF_BUG, id="export-pprof"),
    ["export", "-f", "firefox", "-o", "{out}"], ["buildids"], ["buildids", "--json"], ["info"], ["dump"],
    ["annotate", "main"],
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

"""``profiler report`` end to end in-process on hand-built captures: option parsing, output
formats, header lines, and the bad-input cases (no samples, filters matching nothing, an
unknown sort key, a damaged capture, a DSO whose build-id changed)."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest
from tests.support.cli import run_main
from tests.support.report_capture import comm, kallsyms_text, kernel_sample, mmap2, user_sample, write_capture

from profiler.format import records as R


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFILER_CACHE_DIR", str(tmp_path / "cache"))


run = run_main


def capture(tmp_path: Path, n_a: int = 30, n_b: int = 10) -> Path:
    recs: list[R.Record] = [comm(100, 100, "app", 1)]
    t = 100
    for i in range(n_a + n_b):
        t += 1000
        frames = ("k_leaf_a", "k_mid", "k_root") if i < n_a else ("k_leaf_b", "k_root")
        recs.append(kernel_sample(frames, t, period=250 + i % 3))
    return write_capture(tmp_path / "c.prof", recs, kallsyms=kallsyms_text())


def test_table_has_perfs_header_lines_and_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "report", "-i", str(capture(tmp_path)))
    assert code == 0
    lines = out.splitlines()
    assert "# Total Lost Samples: 0" in lines
    assert "# Samples: 40 of event 'cpu-clock'" in lines
    period = sum(250 + i % 3 for i in range(40))
    assert f"# Event count (approx.): {period}" in lines
    head = next(line for line in lines if line.startswith("# Children"))
    assert head.split() == ["#", "Children", "Self", "Samples", "Period", "Command", "Shared", "Object", "Symbol"]
    assert any(line.endswith("[k] k_leaf_a") and "app" in line for line in lines)
    assert "---k_root" in out  # the root's caller graph


def test_json_matches_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(capture(tmp_path))
    _, text, _ = run(capsys, "report", "-i", path, "--no-children", "-g", "none")
    _, js, _ = run(capsys, "report", "-i", path, "--no-children", "-g", "none", "--format", "json")
    data = json.loads(js)
    assert data["total_samples"] == 40 and data["lost_samples"] == 0 and data["event"] == "cpu-clock"
    table = {}
    for line in text.splitlines():
        if line.startswith("  ") and "%" in line:
            parts = line.split()
            table[parts[-1]] = (float(parts[0].rstrip("%")), int(parts[1]), int(parts[2]))
    from_json = {r["symbol"]: (round(r["self"], 2), r["samples"], r["period"]) for r in data["rows"]}
    assert from_json == table
    assert set(data["rows"][0]) >= {"children", "self", "samples", "period", "comm", "dso", "symbol"}


def test_json_call_graph_and_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(capture(tmp_path))
    _, js, _ = run(capsys, "report", "-i", path, "--format", "json", "-g", "caller")
    rows = {r["symbol"]: r for r in json.loads(js)["rows"]}
    assert rows["k_leaf_a"]["callgraph"][0]["symbol"] == "k_root"
    assert rows["k_leaf_a"]["children"] == pytest.approx(75.0, abs=0.5)
    _, text, _ = run(capsys, "report", "-i", path, "--format", "csv", "--sort", "sym")
    rec = list(csv.DictReader(io.StringIO(text)))
    assert {r["symbol"] for r in rec} == {"k_root", "k_mid", "k_leaf_a", "k_leaf_b"}
    assert list(rec[0]) == ["children", "self", "samples", "period", "symbol", "kernel"]


def test_unknown_sort_key_lists_the_valid_ones(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "report", "-i", str(capture(tmp_path)), "--sort", "comm,bogus")
    assert code == 2
    assert "bogus" in err and all(k in err for k in ("pid", "tid", "comm", "dso", "sym", "cpu"))


def test_capture_without_samples_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_capture(tmp_path / "empty.prof", [comm(1, 1, "x", 1)], kallsyms=kallsyms_text())
    code, out, err = run(capsys, "report", "-i", str(path))
    assert code == 1 and "no samples" in err and out == ""


def test_filters_matching_nothing_say_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "report", "-i", str(capture(tmp_path)), "--comm", "nope")
    assert code == 1 and "no samples match" in err and "--comm nope" in err


def test_damaged_capture_reports_what_was_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = capture(tmp_path)
    data = path.read_bytes()
    cut = tmp_path / "cut.prof"
    cut.write_bytes(data[: len(data) - 37])  # into the trailer
    code, out, err = run(capsys, "report", "-i", str(cut), "--format", "json")
    assert code == 0 and json.loads(out)["total_samples"] == 40
    assert "warning" in err


def test_not_a_capture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "x.txt"
    bad.write_text("hello\n")
    code, _, err = run(capsys, "report", "-i", str(bad))
    assert code == 1 and "not a profiler capture" in err and "Traceback" not in err


def test_stats_and_header(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(capture(tmp_path))
    code, out, _ = run(capsys, "report", "-i", path, "--stats")
    assert code == 0 and "SAMPLE records:         40" in out and "COMM records:          1" in out
    code, out, _ = run(capsys, "report", "-i", path, "--header")
    assert code == 0 and "# hostname : testhost" in out and "name = cpu-clock" in out


def test_demangling_and_no_demangle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = kallsyms_text().replace(" k_leaf_a\n", " _ZN2ns5ClassC2Ev\n")
    recs = [comm(100, 100, "app", 1), kernel_sample(("k_leaf_a", "k_root"), 1000)]
    path = str(write_capture(tmp_path / "m.prof", recs, kallsyms=text))
    _, out, _ = run(capsys, "report", "-i", path, "--no-children", "-g", "none")
    assert "[k] ns::Class::Class()" in out
    _, out, _ = run(capsys, "report", "-i", path, "--no-children", "-g", "none", "--no-demangle")
    assert "[k] _ZN2ns5ClassC2Ev" in out


def test_unresolved_frames_show_dso_and_offset_and_a_changed_binary_warns_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    binary = shutil.which("true")
    assert binary is not None
    base = 0x5555_0000_0000
    recs: list[R.Record] = [
        comm(100, 100, "app", 1),
        mmap2(100, base, 0x10000, 0, binary, 2, build_id=bytes(range(20))),  # not its build-id
        mmap2(100, base + 0x100000, 0x1000, 0, "/nonexistent/lib.so", 3),
    ]
    recs += [user_sample([base + 0x1234, base + 0x1300], 10 + i) for i in range(3)]
    recs += [user_sample([base + 0x100010], 20), user_sample([0x10], 21)]
    path = str(write_capture(tmp_path / "u.prof", recs, kallsyms=kallsyms_text()))
    code, out, err = run(capsys, "report", "-i", path, "--no-children", "-g", "none")
    assert code == 0
    name = Path(binary).name
    assert any(line.split()[-3:] == [name, "[.]", "0x0000000000001234"] for line in out.splitlines())
    assert any(line.split()[-3:] == ["[unknown]", "[.]", "0000000000000010"] for line in out.splitlines())
    assert any(line.split()[-3:] == ["lib.so", "[.]", "0x0000000000000010"] for line in out.splitlines())
    assert sum(binary in line for line in err.splitlines()) == 1 and "build-id" in err


def test_folded_format_is_what_export_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(capture(tmp_path))
    code, folded, _ = run(capsys, "report", "-i", path, "--format", "folded")
    assert code == 0
    _, exported, _ = run(capsys, "export", "-i", path, "-f", "folded")
    assert folded == exported
    lines = dict(line.rsplit(" ", 1) for line in folded.splitlines())
    assert lines == {"app;k_root_[k];k_mid_[k];k_leaf_a_[k]": "30", "app;k_root_[k];k_leaf_b_[k]": "10"}
    # the flat-profile options do not cut the stacks
    _, flat, _ = run(capsys, "report", "-i", path, "--format", "folded", "--no-children", "-g", "none")
    assert flat == folded


def test_kallsyms_file_overrides_the_captured_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(capture(tmp_path))
    other = tmp_path / "kallsyms"
    other.write_text(kallsyms_text().replace(" k_leaf_a\n", " from_the_file\n"))
    for cmd in (["report", "--no-children", "-g", "none"], ["script"]):
        code, out, _ = run(capsys, *cmd, "-i", path, "--kallsyms", str(other))
        assert code == 0 and "from_the_file" in out and "k_leaf_a" not in out and "k_leaf_b" in out
        _, out, _ = run(capsys, *cmd, "-i", path)
        assert "k_leaf_a" in out and "from_the_file" not in out
    code, out, err = run(capsys, "report", "-i", path, "--kallsyms", str(tmp_path / "missing"))
    assert code == 2 and out == "" and "--kallsyms" in err and err.count("\n") == 1


@pytest.mark.parametrize("cmd", ["report", "script", "flamegraph", "export", "buildids", "archive"])
def test_symfs_that_is_not_a_directory_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        cmd: str) -> None:
    path = str(capture(tmp_path))
    extra = ["-f", "folded"] if cmd == "export" else ["-o", str(tmp_path / "f.html")] if cmd == "flamegraph" else []
    code, out, err = run(capsys, cmd, "-i", path, *extra, "--symfs", str(tmp_path / "nowhere"))
    assert code == 2 and out == ""
    assert err == (f"profiler: --symfs {tmp_path / 'nowhere'} does not exist: "
                   "it must name the root the recorded files are under.\n")


def test_a_file_under_symfs_with_the_wrong_build_id_warns_once(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    binary = shutil.which("true")
    assert binary is not None
    root = tmp_path / "root"
    (root / Path(binary).parent.relative_to("/")).mkdir(parents=True)
    shutil.copy(binary, root / Path(binary).relative_to("/"))
    base = 0x5555_0000_0000
    recs: list[R.Record] = [comm(100, 100, "app", 1),
                            mmap2(100, base, 0x10000, 0, binary, 2, build_id=bytes(range(20)))]
    recs += [user_sample([base + 0x1234], 10 + i) for i in range(3)]
    path = str(write_capture(tmp_path / "u.prof", recs, kallsyms=kallsyms_text()))
    code, out, err = run(capsys, "report", "-i", path, "--symfs", str(root), "--debug-dir", str(tmp_path))
    assert code == 0 and "0x0000000000001234" in out
    warned = [line for line in err.splitlines() if "build-id" in line]
    assert len(warned) == 1 and warned[0].startswith(f"profiler: warning: {root}")

"""The ctypes leaf: ioctl numbers as the kernel's macros compute them, syscall numbers, and
one actionable sentence per errno (no privileges needed)."""

from __future__ import annotations

import errno

import pytest

from profiler.errors import EventError, PermissionDeniedError, RecordError
from profiler.format.attr import new_attr
from profiler.record import perf_event as pe


def test_ioctl_numbers_match_the_kernel_headers() -> None:
    # _IO('$', n) = 0x24 << 8 | n; _IOW/_IOR add dir << 30 | size << 16
    assert pe.PERF_EVENT_IOC_ENABLE == 0x2400
    assert pe.PERF_EVENT_IOC_DISABLE == 0x2401
    assert pe.PERF_EVENT_IOC_REFRESH == 0x2402
    assert pe.PERF_EVENT_IOC_RESET == 0x2403
    assert pe.PERF_EVENT_IOC_PERIOD == 0x40082404
    assert pe.PERF_EVENT_IOC_SET_OUTPUT == 0x2405
    assert pe.PERF_EVENT_IOC_ID == 0x80082407


def test_syscall_numbers() -> None:
    assert pe.syscall_number("x86_64") == 298
    assert pe.syscall_number("aarch64") == 241
    with pytest.raises(RecordError, match="not supported on sparc64"):
        pe.syscall_number("sparc64")


@pytest.mark.parametrize(
    ("err", "cls", "words"),
    [
        (errno.EACCES, PermissionDeniedError, ["perf_event_paranoid", "sysctl"]),
        (errno.EPERM, PermissionDeniedError, ["perf_event_paranoid"]),
        (errno.ENOENT, EventError, ["does not support the event 'cycles'"]),
        (errno.EOPNOTSUPP, EventError, ["does not support the event 'cycles'"]),
        (errno.EINVAL, EventError, ["rejected the event 'cycles'"]),
        (errno.EMFILE, RecordError, ["ulimit -n"]),
        (errno.E2BIG, RecordError, ["size 128"]),
        (errno.ESRCH, RecordError, ["process 42 does not exist"]),
        (errno.EBUSY, EventError, ["exclusive use"]),
        (errno.EIO, RecordError, ["Input/output error"]),
    ],
)
def test_errno_sentences(err: int, cls: type, words: list[str]) -> None:
    attr = new_attr(type=0, config=0)
    error = pe.open_error(err, "cycles", attr, pid=42)
    assert type(error) is cls
    text = str(error)
    assert text.endswith(".") and "\n" not in text
    for word in words:
        assert word in text


def test_paranoid_level_is_quoted(monkeypatch: pytest.MonkeyPatch, tmp_path: pytest.TempPathFactory) -> None:
    path = tmp_path / "paranoid"  # type: ignore[operator]
    path.write_text("3\n")
    monkeypatch.setattr(pe, "PARANOID_PATH", path)
    assert "is 3" in str(pe.open_error(errno.EACCES, "cpu-clock", new_attr()))

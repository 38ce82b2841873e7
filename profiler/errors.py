"""The project's own error types.

Every failure a user can cause (bad options, bad files, missing permission, a full disk)
is raised as a ``ProfilerError`` subclass carrying one clear sentence. The CLI prints that
sentence and exits with ``exit_code``; nothing else reaches the user as a traceback.
"""

from __future__ import annotations


class ProfilerError(Exception):
    """Base class: ``str(error)`` is the one sentence shown to the user."""

    exit_code = 1


class UsageError(ProfilerError):
    """Bad or conflicting options."""

    exit_code = 2


class FormatError(ProfilerError):
    """A capture file that cannot be read (not ours, newer version, damaged)."""


class NotACaptureError(FormatError):
    """The file is something else (perf.data, text, empty...)."""


class VersionError(FormatError):
    """The capture was written by a newer, incompatible format version."""


class RecordError(ProfilerError):
    """Recording failed (perf_event_open, ring buffers, target process)."""

    errno: int | None = None  # the errno of a failed system call, when there was one


class PermissionDeniedError(RecordError):
    """perf events are not permitted for this user."""


class EventError(RecordError):
    """An unknown event name or an event this machine does not support."""


class CommandNotFoundError(RecordError):
    """The command to profile does not exist (exit 127, like a shell)."""

    exit_code = 127


class DiskFullError(ProfilerError):
    """The disk filled up while writing; what was written before is intact."""


class ReportError(ProfilerError):
    """Reporting failed (no samples, filters match nothing, bad sort key...)."""

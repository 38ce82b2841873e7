"""The perf mmap ring buffer, as pure logic over any writable buffer.

perf_event_open(2), "MMAP layout": the mapping is one control page (``struct
perf_event_mmap_page``) followed by 2^n data pages. The kernel advances ``data_head``
(offset 1024 of the control page) as it writes records; user space reads ``[data_tail,
data_head)`` and then stores ``data_tail`` (offset 1032) so the kernel may reuse the space
("When the mapping is PROT_WRITE, the data_tail value should be written by user space to
reflect the last read data. In this case the kernel will not over-write unread data").
Both are free-running byte counters; positions in the data area are taken modulo its size,
so a pending range that crosses the end is copied as two slices.

"After reading the data_head value, user space should issue an rmb()": on x86_64 loads are
not reordered with other loads, and on aarch64 the interpreter's own work between the read
of ``data_head`` and the copy goes through atomic reference counting, which orders them in
practice; the store of ``data_tail`` happens only after the copy has been written out.

Nothing here parses records: the bytes go to the capture as they are. This module works on
a ``bytearray`` exactly as on an ``mmap``, which is how it is unit-tested.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

TYPE_CHECKING = False  # typing costs every recording ~5 ms of start-up (profiler/value.py)
if TYPE_CHECKING:
    from typing import Any

DATA_HEAD_OFFSET = 1024
DATA_TAIL_OFFSET = 1032
_U64 = struct.Struct("=Q")  # host byte order, like the kernel writes it


def is_valid_page_count(pages: int) -> bool:
    """An mmap of a perf event must be 1 + 2^n pages (n >= 0)."""
    data = pages - 1
    return data >= 1 and data & (data - 1) == 0


class RingBuffer:
    """One perf ring buffer: ``buf`` holds the control page and then the data area."""

    def __init__(self, buf: Any, page_size: int) -> None:
        self._view = memoryview(buf).cast("B")
        self.page_size = page_size
        self.data_size = len(self._view) - page_size
        if self.data_size <= 0 or self.data_size & (self.data_size - 1):
            raise ValueError(f"ring buffer data area of {self.data_size} bytes is not a power of two")
        self._data = self._view[page_size:]

    # the control page ---------------------------------------------------------------

    @property
    def data_head(self) -> int:
        return int(_U64.unpack_from(self._view, DATA_HEAD_OFFSET)[0])

    @property
    def data_tail(self) -> int:
        return int(_U64.unpack_from(self._view, DATA_TAIL_OFFSET)[0])

    @data_tail.setter
    def data_tail(self, value: int) -> None:
        _U64.pack_into(self._view, DATA_TAIL_OFFSET, value)

    # reading --------------------------------------------------------------------------

    def pending(self) -> int:
        """Bytes written by the kernel and not yet consumed."""
        return self.data_head - self.data_tail

    def slices(self, tail: int, head: int) -> list[memoryview]:
        """``[tail, head)`` of the data area as one slice, or two when it wraps."""
        size = head - tail
        if size <= 0:
            return []
        if size > self.data_size:
            raise ValueError(f"ring buffer overrun: {size} bytes pending in {self.data_size}")
        start = tail & (self.data_size - 1)
        end = start + size
        if end <= self.data_size:
            return [self._data[start:end]]
        return [self._data[start:], self._data[: end - self.data_size]]

    def drain(self, sink: Callable[..., object]) -> int:
        """Hand the pending bytes to ``sink(*slices)`` and then release them to the kernel.

        Returns the number of bytes consumed (0 when the buffer was empty, in which case
        ``sink`` is not called). ``data_tail`` is stored only after ``sink`` returns, so a
        sink that raises leaves the bytes in place.
        """
        tail = self.data_tail
        head = self.data_head
        if head == tail:
            return 0
        chunks = self.slices(tail, head)
        try:
            sink(*chunks)
        finally:
            for chunk in chunks:
                chunk.release()
        self.data_tail = head
        return head - tail

    def take(self) -> bytes:
        """Copy the pending bytes out and release them to the kernel at once (b"" if none).

        Called on every wakeup of a busy recording, so it reads the control page directly
        rather than through ``slices`` (same bytes, fewer objects)."""
        view = self._view
        tail = _U64.unpack_from(view, DATA_TAIL_OFFSET)[0]
        head = _U64.unpack_from(view, DATA_HEAD_OFFSET)[0]
        size = head - tail
        if size <= 0:
            return b""
        data_size = self.data_size
        if size > data_size:
            raise ValueError(f"ring buffer overrun: {size} bytes pending in {data_size}")
        start = tail & (data_size - 1)
        end = start + size
        if end <= data_size:
            data = self._data[start:end].tobytes()
        else:
            data = self._data[start:].tobytes() + self._data[: end - data_size].tobytes()
        _U64.pack_into(view, DATA_TAIL_OFFSET, head)
        return data

    def release(self) -> None:
        """Drop the views on the underlying buffer (needed before an mmap can close)."""
        self._data.release()
        self._view.release()

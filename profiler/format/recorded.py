"""What a capture recorded of each mapped file: the ``buildids`` metadata, read once.

Two views of the same entries (docs/format.md, ``buildids``):

* by path: path -> build-id, what captures have always given (a ``dict``, so every caller of
  ``CaptureReader.build_ids`` keeps working);
* by inode: (path, maj, min, ino) -> :class:`RecordedFile`, for MMAP2 records, which carry
  the inode. Two processes in different mount namespaces may map two different files at one
  path; the inode tells which entry belongs to which mapping.

A report names a mapped file from a file it finds only when that file is the recorded one:
same build-id, else same content identity (``profiler/format/fileident.py``). An entry the
recorder could not read, whose host path it saw was another file (``replaced``), has neither:
:meth:`RecordedFile.check` then says to trust no file found at that path.
"""

from __future__ import annotations

from profiler.format.buildid import is_build_id

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: ``Dso.content`` of a file the recorder saw replaced and could not read: no local file is
#: trusted for it.
UNVERIFIED = "unverified"

InodeKey = tuple[str, int, int, int]  # path, maj, min, ino


class RecordedFile:
    """One ``buildids`` entry, checked."""

    __slots__ = ("path", "build_id", "content", "source", "namespace", "replaced")

    def __init__(self, path: str, build_id: str | None = None, content: dict[str, Any] | None = None,
                 source: str = "", namespace: bool = False, replaced: bool = False) -> None:
        self.path = path
        self.build_id = build_id
        self.content = content
        self.source = source
        self.namespace = namespace
        self.replaced = replaced

    @classmethod
    def from_entry(cls, entry: dict[str, Any]) -> RecordedFile:
        bid = entry.get("build_id")
        content = entry.get("content")
        if not (isinstance(content, dict) and isinstance(content.get("digest"), str)
                and isinstance(content.get("size"), int)):
            content = None
        source = entry.get("source")
        return cls(entry["path"], bid.lower() if isinstance(bid, str) and is_build_id(bid) else None,
                   None if content is None else dict(content), source if isinstance(source, str) else "",
                   entry.get("namespace") is True, entry.get("replaced") is True)

    @property
    def check(self) -> str | None:
        """What a found file must match besides the build-id: ``"<size>:<digest>"`` of a file
        without a build-id, :data:`UNVERIFIED` when nothing can vouch for any file, else None."""
        if self.build_id:
            return None
        if self.content is not None:
            return content_key(self.content)
        return UNVERIFIED if self.replaced else None


def content_key(content: dict[str, Any]) -> str:
    return f"{content.get('size')}:{content.get('digest')}"


class RecordedBuildIds(dict[str, str]):
    """path -> build-id, with ``by_inode`` (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.by_inode: dict[InodeKey, RecordedFile] = {}

    def add(self, entry: dict[str, Any]) -> None:
        found = RecordedFile.from_entry(entry)
        if found.build_id:
            self[found.path] = found.build_id
        key = (found.path, entry.get("maj"), entry.get("min"), entry.get("ino"))
        if all(isinstance(v, int) for v in key[1:]):
            self.by_inode[key] = found  # type: ignore[index]

"""MiniDebugInfo: the ``.gnu_debugdata`` section of a stripped binary.

Some distributions (Fedora, RHEL, openSUSE) strip binaries but keep, in ``.gnu_debugdata``,
an xz-compressed ELF file whose ``.symtab`` holds the function symbols that ``.dynsym``
lacks (static functions), as GDB's "MiniDebugInfo" describes. :func:`read_gnu_debugdata`
decompresses it (``lzma`` from the standard library, bounded in size: the section is part
of an untrusted binary) and returns it as an in-memory :class:`ElfFile`.
"""

from __future__ import annotations

from profiler.symbols.elf import ElfError, ElfFile

SECTION = ".gnu_debugdata"
#: Decompressed size limit: Fedora's are a few hundred KB; anything past this is refused.
MAX_SIZE = 256 << 20


def read_gnu_debugdata(elf: ElfFile, max_size: int = MAX_SIZE) -> ElfFile | None:
    """The embedded ELF of ``elf``'s ``.gnu_debugdata``, or None when it has none.

    A damaged or oversized section raises :class:`ElfError` with one sentence.
    """
    sec = elf.section(SECTION)
    if sec is None or not sec.has_file_data:
        return None
    import lzma  # only for a file that has the section (lzma: ~1 ms of every report's start-up)

    compressed = elf.read_section(sec)
    decompressor = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
    try:
        data = decompressor.decompress(compressed, max_length=max_size)
    except lzma.LZMAError as exc:
        raise ElfError(f"{elf.path}: {SECTION} is not valid xz data ({exc})") from exc
    if not decompressor.eof:
        if len(data) >= max_size:
            raise ElfError(f"{elf.path}: {SECTION} decompresses to more than {max_size >> 20} MB; ignored")
        raise ElfError(f"{elf.path}: {SECTION} is truncated xz data")
    return ElfFile(f"{elf.path}[{SECTION}]", data=data)

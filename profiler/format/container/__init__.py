"""The capture container: file header, self-delimiting checksummed frames, trailer.

* ``layout``: magic, versions, frame kinds and flags, the header structs, the reader's limits.
* ``codec``: msgpack as UTF-8, zstd.
* ``writer``: ``CaptureWriter`` (all the recorder imports, with ``layout``).
* ``scan``: ``FileFrame`` and the frame walk that checks checksums and resyncs after damage.
* ``inflate``: RAW_ZSTD frames inflated into RAW frames.
* ``reader``: ``CaptureReader``: the file header, frames, metadata and records.

This package's ``__init__`` imports nothing, so that the recorder, which imports the writer,
does not load the reader. docs/format.md is the prose specification.
"""

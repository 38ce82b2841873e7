"""The capture file format: the only contract between ``record`` and ``report``.

* ``container``: file header, checksummed frames, trailer; ``CaptureWriter`` / ``CaptureReader``.
* ``records``: kernel record types, one dataclass each, exact decoding and encoding.
* ``events``: the capture's events and how a record finds its event's layout.
* ``decode``: columnar decoding of every sample at once (the reporter's hot path).
* ``attr``: ``struct perf_event_attr``.
* ``header``: machine facts for a new capture's header.

docs/format.md is the prose specification.
"""

"""Columnar decoding of a capture's records (the reporter's hot path).

* ``columns``: what a decoded capture is: ``SampleColumns`` and its parts, ``ChainTable``,
  ``OtherRecord``, ``CaptureData`` (its docstring lists every column).
* ``chains``: ``PERF_CONTEXT_*`` markers, ``split_callchains``, the ``ChainStore`` that
  deduplicates callchains.
* ``views``: typed views over the capture and where each frame's records start.
* ``samples``: the ``SampleBuilder`` that gathers sample fields into columns.
* ``decoder``: ``load_capture``, the ``ChunkDecoder`` of the bounded-memory path, CPU checks.
"""

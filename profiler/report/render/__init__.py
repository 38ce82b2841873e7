"""Renderers: built data in, text on a stream out; one module per output format.

Importing this package loads no renderer: import the one you need
(``profiler.report.render.flamegraph``, ``.folded``, ``.speedscope``, ``.table``, ...). The
data they take is in :mod:`profiler.report.model` and the report builders; only the CLI
opens files. ``assets/`` holds the flame graph's HTML, CSS and JavaScript.
"""

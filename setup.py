"""The optional compiled kernels (issue 28): everything else is in pyproject.toml.

``optional=True``: a machine without a C compiler still installs, and the report runs on the
numpy code (README.md, "Without a C compiler")."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("profiler.native.compiled", ["profiler/native/compiled.c"], optional=True,
                             extra_compile_args=["-O2"])])

"""The names perf gives what is not a file, shared by every side (record, format, symbols,
report): a frame or DSO nothing names, the kernel's image, the vDSO. Defined once, here.
Importing this module imports nothing (the recorder's start-up)."""

UNKNOWN = "[unknown]"  # a frame no symbol names, a DSO no map covers, a comm never seen
KERNEL_DSO = "[kernel.kallsyms]"  # the kernel image (perf's name; modules keep their own)
GUEST_KERNEL_DSO = "[guest.kernel.kallsyms]"
VDSO = "[vdso]"  # the kernel's shared object mapped into every process
PYTHON_PREFIX = "py::"  # CPython's perf support names its trampolines py::QUALNAME:FILE (docs/python.md)

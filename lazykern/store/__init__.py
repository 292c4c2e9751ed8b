"""Store: compiled kernels kept on disk, one entry per key, shared by every process of a machine.

``cache`` (``KernelCache``: keys, lookups, compile-once, repair, counters) over ``_store`` (the
diskcache backend, the only module that touches diskcache's private parts), ``_entry`` (the entry
format: a strict header and the code under one digest) and ``_locks`` (per-key compile locks).
"""

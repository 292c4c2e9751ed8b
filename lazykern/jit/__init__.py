"""``@lazy_kernel``: Numba-Python kernels compiled one signature at a time and kept in the store.

``decorator`` (``LazyKernel``, ``lazy_kernel``) dispatches to ``_lazy_launch`` (the launch path),
``_lazy_instance`` (one compiled signature), ``_lazy_entry`` (its store entry), ``_host_copy``
(NumPy arguments) and ``_lazy_sim`` (Numba's CUDA simulator).
"""

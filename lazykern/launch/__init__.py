"""Kernel -> launch: a loaded cubin per device and the one launch layer everything goes through.

``kernel`` (``Kernel``), ``_launch`` (argument packing, ``cuLaunchKernel``), ``memory`` and ``arrays``
(stream-ordered device memory), ``_device`` (which GPU owns an array or stream), ``_capture`` (which
capture the thread is recording), ``_batch_split`` (a batch spread over several GPUs) and
``_gpu_probe`` (how many GPUs, asked in a child process).
"""

"""Scale-out: several GPUs in one process, Dask graphs over many, and cache bundles to ship kernels.

``multigpu`` (per-device kernels, a batch split across GPUs), ``dask`` (tropical products of
``dask.array``s, warming workers), ``bundle`` (export and verified import of store entries) over
``_bundle_read`` (the bounded reader of an untrusted bundle).
"""

"""Source -> compile: a shared preamble plus one fragment -> one translation unit -> a cubin (NVRTC).

``source`` decides what would be compiled (the text a key is derived from), ``compiler`` runs
NVRTC (no GPU needed) and names architectures, ``_includes`` digests the headers a compile reads.
"""

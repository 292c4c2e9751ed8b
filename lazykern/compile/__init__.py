"""Source -> compile: a shared preamble plus one fragment -> one translation unit -> a cubin (NVRTC).

``source`` decides what would be compiled (the text a key is derived from), ``compiler`` runs
NVRTC (no GPU needed) and names architectures, ``_manifest`` records the headers a compile reads (over
``_include_graph`` and ``_pp``'s tokens) and checks them on load.
"""

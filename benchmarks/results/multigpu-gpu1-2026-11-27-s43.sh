# GPU call 1 of issue 45 (see multigpu-selection-2026-11-27-s43-2xh200.md): the script ran from the
# lead checkout's root with .gpu/multigpu (branch multigpu 724ae92) and .gpu/multigpu-base (main 4686773).
#   probes: (cd $TREE && python3 -X faulthandler benchmarks/shared_library_probe.py --out probe-$t.json), both trees at once
#   selection: (cd $TREE && timeout 150 python3 -X faulthandler -m pytest -q -m gpu -p no:cacheprovider \
#              tests/test_multigpu_devices.py tests/test_multigpu.py), fixed then base
#   exit: python3 benchmarks/multigpu_exit.py --repeat 2 --dealloc-count 0 (fixed tree; its capture-pool item
#         raised then, which aborted the child before its exit: fixed in the benchmark since)

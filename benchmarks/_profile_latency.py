import cProfile, pstats, sys, time, io
import numpy as np, cupy as xp
import numba.cuda
from lazykern.tropical import networks as nw
xp.zeros(1) + 1; numba.cuda.current_context()
sg = nw.square_lattice(8, seed=8)
sg = nw.SpinGlass(sg.n, np.random.default_rng(1).permutation(sg.n)[sg.edges], sg.J, sg.h, None, "8x8 edge list")
pr = cProfile.Profile(); t = time.perf_counter(); pr.enable()
E = nw.ground_state_energy(sg, module=xp)
pr.disable(); t1 = time.perf_counter() - t
t = time.perf_counter(); nw.ground_state_energy(sg, module=xp); t2 = time.perf_counter() - t
s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("cumtime").print_stats(40)
print("first %.4f again %.4f E %s loaded %s" % (t1, t2, E, [m for m in ("cotengra", "kahypar", "opt_einsum") if m in sys.modules]))
print(s.getvalue())

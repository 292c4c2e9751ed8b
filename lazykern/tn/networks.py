"""Ising spin glasses as tropical tensor networks: exact ground states, configurations, degeneracy.

Convention: spins s_i = +-1, energy E(s) = -sum_(ij) J_ij s_i s_j - sum_i h_i s_i; the
ground state minimizes E. The network has one label per spin (index 0 is s = +1,
index 1 is s = -1), a 2 x 2 bond tensor J_ij s s' per coupling and a length-2 vertex
tensor h_i s per spin; its max-plus contraction to a scalar is max_s (-E(s)), so
E_0 = -(the contraction). The same network in counting numbers gives the number of
ground states (Liu, Wang, Zhang, PRL 126, 090506 (2021)).

>>> from lazykern.tropical import networks
>>> sg = networks.square_lattice(3, seed=1)
>>> E, spins = networks.ground_state(sg)
>>> bool(sg.energy(spins) == E)
True
"""

from __future__ import annotations

# The stages live in lazykern.tn.spinglass, one module each; this module keeps the documented names, and the
# underscore names tests and benchmarks reach for (a name is patched where it is looked up: the stage's module).
from . import _cost  # noqa: F401
from ._backend import backend_of
from .einsum import contract_network
from .spinglass.builders import chimera, couplings, cubic_lattice, random_regular, square_lattice
from .spinglass.configuration import ground_state
from .spinglass.counts import degeneracy
from .spinglass.energy import ground_state_energy
from .spinglass.energy import host_first as _host_first  # noqa: F401
from .spinglass.instance import SPIN, SpinGlass
from .spinglass.instance import fitted_network as _network  # noqa: F401
from .spinglass.planning import make_plan as _plan  # noqa: F401
from .spinglass.planning import plan
from .spinglass.routing import DEVICE_SWEEP, TINY_SWEEP
from .spinglass.routing import arena_tiles as _arena_tiles  # noqa: F401
from .spinglass.routing import planned as _planned  # noqa: F401
from .spinglass.routing import route as _route  # noqa: F401
from .spinglass.routing import stays_on_device as _stays_on_device  # noqa: F401
from .spinglass.routing import tiny as _tiny  # noqa: F401
from .spinglass.sweeps import SWEEP_FORMAT, SWEEP_STORED_FROM
from .spinglass.sweeps import boundary_sweep as _sweep  # noqa: F401
from .spinglass.sweeps import kept_orders as _orders  # noqa: F401
from .spinglass.sweeps import kept_sweeps as _sweeps  # noqa: F401
from .spinglass.sweeps import vertex_order as _order  # noqa: F401

__all__ = [
    "DEVICE_SWEEP", "SPIN", "SWEEP_FORMAT", "SWEEP_STORED_FROM", "TINY_SWEEP", "SpinGlass", "backend_of", "chimera",
    "contract_network", "couplings", "cubic_lattice", "degeneracy", "ground_state", "ground_state_energy", "plan",
    "random_regular", "square_lattice",
]  # fmt: skip

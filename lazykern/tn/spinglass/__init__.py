"""Ising spin glasses as tropical tensor networks, stage by stage, behind :mod:`lazykern.tn.networks` (its public
functions and names): the instance and its network (:mod:`.instance`), standard graphs (:mod:`.builders`), the
sweep a network is contracted along (:mod:`.sweeps`), the plan (:mod:`.planning`), where a problem is solved
(:mod:`.routing`), and the solvers: :mod:`.energy`, :mod:`.configuration`, :mod:`.counts` (their answers read by
:mod:`.answers`).
"""

"""Exact counting of tensor networks, stage by stage, behind :mod:`lazykern.tn.counting` (its public
functions and names): the kernels (:mod:`.kernels`) and their launches (:mod:`.launch`, :mod:`.reference`
on the host), the (value, count) algebra (:mod:`.algebra`), count arrays on any backend (:mod:`.arrays`),
proven bounds on the counts (:mod:`.bounds`), how the passes are laid out (:mod:`.passes`) and the exact
counts they rebuild (:mod:`.exact`).
"""

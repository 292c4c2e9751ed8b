"""The number systems :func:`lazykern.tn.solve` contracts a problem in, beside the tropical family.

Each is an :class:`lazykern.tn._contract.Algebra`: a number type held as one or more arrays per
tensor (its parts), with the batched product ``bmm``, the ``unit`` of a reduction and the ``add`` of
sliced results, so :mod:`lazykern.tn.einsum` plans, slices and runs it like the tropical and counting
algebras:

* :mod:`.kbest`: the k largest distinct values per entry, with counts (``SizeMax(k)``,
  ``CountingMax(k)``); on a GPU the lazily compiled ``tn_kbest`` family (:mod:`._kbest_kernels`);
* :mod:`.top2`: the best integer size and the counts of it and of one below (``CountingMax(2)`` where
  the two best sizes are consecutive); on a GPU the tropical GEMM then the ``tn_top2`` family
  (:mod:`._top2_kernels`);
* :mod:`.modular`: sum-product modulo primes below 2^21 through float64 GEMM, exact;
* :mod:`.polynomial`: the graph polynomial by evaluations in the modular algebra, interpolated and
  rebuilt by the Chinese remainder theorem;
* :mod:`.logsum`: sum-product in log space, stable at any beta;
* :mod:`.scaledsum`: the partition function by exact offsets (an entry's best size beside its log weight);
  on a GPU two kernels of the ``tn_scaledsum`` family (:mod:`._scaledsum_kernels`) around cuBLAS's product.

The tropical (max-plus / min-plus) and counting algebras live in :mod:`lazykern.tropical` and
:mod:`lazykern.tn.counting`.
"""

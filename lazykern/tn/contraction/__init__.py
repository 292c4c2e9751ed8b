"""The stages of :mod:`lazykern.tn.einsum`, one module each: inputs checked, an order searched, priced, sliced and
fitted to memory, the network run and checkpointed, its value or its argmax. Callers import the names from
:mod:`lazykern.tn.einsum`; a test patches a name in the module here that looks it up.
"""

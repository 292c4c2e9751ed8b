"""lazykern.jit."""

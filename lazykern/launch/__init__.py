"""lazykern.launch."""

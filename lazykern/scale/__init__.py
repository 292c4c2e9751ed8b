"""lazykern.scale."""

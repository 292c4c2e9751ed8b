"""lazykern.store."""

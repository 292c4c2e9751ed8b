"""lazykern.compile."""

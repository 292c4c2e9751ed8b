"""lazykern.tools."""

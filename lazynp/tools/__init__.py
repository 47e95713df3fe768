"""lazynp.tools."""

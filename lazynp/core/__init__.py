"""lazynp.core."""

"""lazynp.array."""

"""lazynp._base."""

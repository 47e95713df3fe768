"""lazynp.ir."""

"""lazynp._numpy."""

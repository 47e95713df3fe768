"""lazynp.ops."""

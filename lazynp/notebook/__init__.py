"""lazynp.notebook."""

"""lazynp.ir: the Symbol IR (:mod:`.symbol`: entries, JSON, shape inference) and the pure
graph passes on it (:mod:`.passes`)."""

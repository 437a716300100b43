"""rolltap.pool."""

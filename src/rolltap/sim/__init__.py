"""rolltap.sim."""

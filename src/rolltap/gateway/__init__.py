"""rolltap.gateway."""

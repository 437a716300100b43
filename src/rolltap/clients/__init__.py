"""rolltap.clients."""

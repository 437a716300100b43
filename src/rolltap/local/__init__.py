"""rolltap.local."""

"""rolltap.serve."""

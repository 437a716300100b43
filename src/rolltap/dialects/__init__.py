"""rolltap.dialects."""

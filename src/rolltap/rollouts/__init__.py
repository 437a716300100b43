"""rolltap.rollouts."""

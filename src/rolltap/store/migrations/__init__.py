"""Alembic migrations of the store schema (run by :func:`rolltap.store.upgrade`)."""

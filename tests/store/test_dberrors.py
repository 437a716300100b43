"""Driver errors that reach rolltap unwrapped are still database errors, sorted right."""

from __future__ import annotations

import asyncpg  # type: ignore[import-untyped]
import pytest
from sqlalchemy.exc import SQLAlchemyError

from rolltap.store.dberrors import database_errors, is_transient, translate_db_error


def test_asyncpgs_own_errors_are_database_errors_and_a_shutdown_is_transient() -> None:
    # raised unwrapped by engine.connect() while the server shuts down (seen in CI)
    err = asyncpg.exceptions.CannotConnectNowError("the database system is shutting down")
    with pytest.raises(database_errors()):
        raise err
    assert is_transient(err)
    assert "shutting down" in translate_db_error(err).message
    assert SQLAlchemyError in database_errors() and OSError in database_errors()

"""Store URLs: short schemes map to async drivers; passwords never show."""

from __future__ import annotations

import pytest

from rolltap.errors import ConfigError
from rolltap.store import mask_url, resolve_store_url
from rolltap.store.url import to_sqlalchemy_url


@pytest.mark.parametrize(
    ("given", "driver"),
    [
        ("sqlite:///runs.db", "sqlite+aiosqlite"),
        ("postgresql://u@h/db", "postgresql+asyncpg"),
        ("postgres://u@h/db", "postgresql+asyncpg"),
        ("mysql://u@h/db", "mysql+asyncmy"),
        ("mariadb://u@h/db", "mysql+asyncmy"),
        ("postgresql+asyncpg://u@h/db", "postgresql+asyncpg"),
    ],
)
def test_short_schemes_map_to_async_drivers(given: str, driver: str) -> None:
    assert to_sqlalchemy_url(given).drivername == driver


@pytest.mark.parametrize(
    "bad", ["sqlite://", "sqlite:///:memory:", "oracle://h/db", "postgresql+psycopg2://h/db", "::"]
)
def test_unusable_urls_are_config_errors(bad: str) -> None:
    with pytest.raises(ConfigError) as err:
        to_sqlalchemy_url(bad)
    assert "hunter2" not in str(err.value)


def test_passwords_are_masked() -> None:
    assert mask_url("postgresql://u:hunter2@h/db") == "postgresql://u:***@h/db"
    with pytest.raises(ConfigError) as err:
        to_sqlalchemy_url("oracle://u:hunter2@h/db")
    assert "hunter2" not in str(err.value)


def test_store_url_comes_from_flag_then_env_then_default() -> None:
    assert resolve_store_url("mysql://h/x", {"ROLLTAP_STORE": "sqlite:///e.db"}) == "mysql://h/x"
    assert resolve_store_url(None, {"ROLLTAP_STORE": "sqlite:///e.db"}) == "sqlite:///e.db"
    assert resolve_store_url(None, {}) == "sqlite:///rolltap.db"


def test_a_path_given_as_a_store_names_the_sqlite_url_it_means() -> None:
    with pytest.raises(ConfigError) as err:
        to_sqlalchemy_url("/tmp/runs.db")
    assert "'/tmp/runs.db' (a SQLite file is sqlite:////tmp/runs.db;" in str(err.value)
    with pytest.raises(ConfigError) as err:
        to_sqlalchemy_url("runs.db")
    assert "sqlite:///runs.db;" in str(err.value)
    with pytest.raises(ConfigError) as err:  # it may hold a password: not shown
        to_sqlalchemy_url("postgres:/u:hunter2@h/db")
    assert "hunter2" not in str(err.value) and "postgresql://USER@HOST/DB" in str(err.value)

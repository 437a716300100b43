"""What ``rolltap view`` serves: its store, address, token, and the service it shows.

Every flag of ``rolltap view`` is also a field of a TOML file's ``[view]`` table
(``rolltap view --config view.toml``):

```toml
[view]
store = "postgresql://db/rolltap"
host = "0.0.0.0"      # any address but loopback requires a token
port = 7575
serve = "http://127.0.0.1:8765"   # the Service page (token: ROLLTAP_SERVE_TOKEN)
```
"""

from __future__ import annotations

import os
import secrets
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rolltap.config.net import is_loopback
from rolltap.config.problems import config_error
from rolltap.errors import ConfigError

__all__ = ["DEFAULT_PORT", "SERVE_TOKEN_ENV", "TOKEN_ENV", "ViewConfig"]

DEFAULT_PORT = 7575
#: the token browsers must present when the viewer listens beyond loopback
TOKEN_ENV = "ROLLTAP_VIEW_TOKEN"
#: the token of the ``--serve`` service whose status the Service page shows
SERVE_TOKEN_ENV = "ROLLTAP_SERVE_TOKEN"


class ViewConfig(BaseModel):
    """The viewer's settings (``store`` None: ``ROLLTAP_STORE``, else ``rolltap.db``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    store: str | None = Field(default=None, repr=False)
    host: str = "127.0.0.1"
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535)
    serve: str | None = None
    page_size: int = Field(default=50, gt=0, le=1000)

    @property
    def needs_token(self) -> bool:
        """Beyond loopback every request needs the token; on loopback only if one is set."""
        return not is_loopback(self.host) or bool(os.environ.get(TOKEN_ENV))

    def resolved_token(self) -> tuple[str | None, bool]:
        """(the token, whether it was generated); (None, False) when none is needed."""
        if not self.needs_token:
            return None, False
        given = os.environ.get(TOKEN_ENV)
        if given:
            return given, False
        return secrets.token_urlsafe(24), True

    @classmethod
    def build(cls, values: dict[str, Any], *, source: str = "view config") -> ViewConfig:
        """Validate ``values``; ConfigError naming the first bad field."""
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            raise config_error(source, exc, whole="view") from None

    @classmethod
    def from_toml(cls, path: str | Path, **overrides: Any) -> ViewConfig:
        """Read ``[view]`` from ``path``; ``overrides`` that are not None win."""
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from exc
        table = data.get("view") or {}
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: [view] must be a table")
        values = {**table, **{k: v for k, v in overrides.items() if v is not None}}
        return cls.build(values, source=str(path))

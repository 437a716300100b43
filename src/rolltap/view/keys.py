"""Typed keys of what the viewer's aiohttp application holds."""

from __future__ import annotations

import aiohttp
import jinja2
from aiohttp import web

from rolltap.store import Store
from rolltap.view.config import ViewConfig

__all__ = ["CONFIG", "HTTP", "JINJA", "STORE"]

STORE = web.AppKey("store", Store)
CONFIG = web.AppKey("config", ViewConfig)
JINJA = web.AppKey("jinja", jinja2.Environment)
HTTP = web.AppKey("http", aiohttp.ClientSession)

"""``rolltap view``: a read-only web viewer over a store (and a service's status).

Server-rendered pages (Jinja2 on aiohttp) with their stylesheet and script inside the
package, so it runs on machines without internet. Runs, a run (summary, histograms,
tasks, rollouts filtered, sorted and paged in SQL, compared with another run), a
rollout (transcript, token view, raw events, export) and a service's status.
"""

from rolltap.view.app import ViewServer, build_app
from rolltap.view.config import DEFAULT_PORT, TOKEN_ENV, ViewConfig

__all__ = ["DEFAULT_PORT", "TOKEN_ENV", "ViewConfig", "ViewServer", "build_app"]

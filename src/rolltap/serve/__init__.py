"""Workers and their launchers: ``rolltap serve`` (a long-lived rollout service with
supervised workers) and ``rolltap eval --workers/--ray`` (the driver of one run on them).

A supervisor admits batches over HTTP and places each rollout on one of W worker
processes; each worker has its own event loop, gateway and model-client pool and runs
rollouts on the library's runner. Workers report stats on a fixed cadence; one that
dies or misses its heartbeat is killed and replaced, and its rollouts end
``worker_lost`` (stored so, and reported). Modules, in the order a call meets them:

* :mod:`~rolltap.serve.client` — :class:`ServeClient`, the caller's side
* :mod:`~rolltap.serve.api` — the HTTP routes (token auth, NDJSON result streams)
* :mod:`~rolltap.serve.service` — the API and the supervisor together; SIGTERM drain
* :mod:`~rolltap.serve.supervisor` — admission (429 when full), batches, results
* :mod:`~rolltap.serve.driver` — :func:`run_eval`: one eval run fed to the workers
* :mod:`~rolltap.serve.fleet` / :mod:`~rolltap.serve.handle` — worker slots,
  heartbeat deadlines, replacement
* :mod:`~rolltap.serve.launch` / :mod:`~rolltap.serve.ray_launch` — how a slot starts:
  a child process over a socket pair, or a Ray actor over TCP back to the driver
* :mod:`~rolltap.serve.protocol` — the supervisor↔worker frames
* :mod:`~rolltap.serve.worker` / :mod:`~rolltap.serve.jobs` — a worker and its rollouts
* :mod:`~rolltap.serve.heartbeat` / :mod:`~rolltap.proc.memory` — stats, malloc_trim
* :mod:`~rolltap.serve.sink` / :mod:`~rolltap.serve.desk` — persistence (on SQLite the
  supervisor owns the writer and workers ship their commits to it)
"""

from rolltap.serve.client import BatchStream, ServeClient, ServeResult
from rolltap.serve.config import TOKEN_ENV, ServeConfig
from rolltap.serve.driver import resume_eval, run_eval
from rolltap.serve.protocol import RolloutSpec
from rolltap.serve.service import Service
from rolltap.serve.supervisor import Supervisor

__all__ = [
    "TOKEN_ENV",
    "BatchStream",
    "RolloutSpec",
    "ServeClient",
    "ServeConfig",
    "ServeResult",
    "Service",
    "Supervisor",
    "resume_eval",
    "run_eval",
]

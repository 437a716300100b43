"""Workers and their launchers: ``rolltap serve`` (a long-lived rollout service with
supervised workers) and ``rolltap eval --workers/--ray`` (``rolltap.evaluate`` with
:class:`Workers` or :class:`Ray`: the driver of one run on them).

A supervisor admits batches (over HTTP, or from the eval driver) and places each
rollout on one of W worker processes; each worker has its own event loop, gateway and
model-client pool and runs rollouts on the library's runner. Workers report stats on a
fixed cadence; one that dies or misses its heartbeat is killed and replaced, and its
rollouts end ``worker_lost`` (stored so, and reported). The folders are the processes;
modules in the order a call meets them:

* :mod:`~rolltap.serve.client` — :class:`ServeClient`, the caller's side
* :mod:`~rolltap.serve.backends` — :class:`Workers`, :class:`Ray`: ``rolltap.evaluate``'s
  backends on workers

``supervisor/`` — the supervisor's process:

* :mod:`~rolltap.serve.supervisor.http_api` — the HTTP routes (token auth, NDJSON streams)
* :mod:`~rolltap.serve.supervisor.service` — the API and the supervisor together; SIGTERM drain
* :mod:`~rolltap.serve.supervisor.eval_driver` — one eval run fed to the workers
* :mod:`~rolltap.serve.supervisor.supervisor` — :class:`Supervisor`: batches in, results out
* :mod:`~rolltap.serve.supervisor.admission` — whether a batch may run, and on which workers
* :mod:`~rolltap.serve.supervisor.store_admission` — whether the store can take new rollouts
* :mod:`~rolltap.serve.supervisor.placement` — the records: worker handles, jobs, batches
* :mod:`~rolltap.serve.supervisor.worker_slots` — start the workers, read their frames,
  watch their heartbeats, replace the lost
* :mod:`~rolltap.serve.supervisor.shipped_store_host` — on SQLite, the one writer that
  commits what the workers ship
* :mod:`~rolltap.serve.supervisor.metrics` — Prometheus text of the status

``launch/`` — how a worker slot starts:

* :mod:`~rolltap.serve.launch.child_process` — a child process over a socket pair (and
  the :class:`~rolltap.serve.launch.child_process.Launcher` protocol)
* :mod:`~rolltap.serve.launch.ray_actor` — a Ray actor over TCP back to the driver

``worker/`` — a worker's process:

* :mod:`~rolltap.serve.worker.process` — the worker: its loop, gateway, frames
* :mod:`~rolltap.serve.worker.rollouts` — each submitted job run on the library's runner
* :mod:`~rolltap.serve.worker.heartbeat` / :mod:`~rolltap.proc.memory` — stats, malloc_trim
* :mod:`~rolltap.serve.worker.session_store` — where its sessions go: its own store, or
  shipped to the supervisor (SQLite)

Between them: :mod:`~rolltap.serve.protocol` (the supervisor↔worker frames),
:mod:`~rolltap.serve.config` (:class:`ServeConfig`) and :mod:`~rolltap.serve.outcomes`
(how a rollout ended when no runner stored it); what a worker could not save goes where
an in-process run's does (:mod:`rolltap.rollouts.unsaved`).
"""

from rolltap.serve.backends import Ray, Workers
from rolltap.serve.client import BatchStream, ServeClient, ServeResult
from rolltap.serve.config import TOKEN_ENV, ServeConfig
from rolltap.serve.protocol import RolloutSpec
from rolltap.serve.supervisor.service import Service
from rolltap.serve.supervisor.supervisor import Supervisor

__all__ = [
    "TOKEN_ENV",
    "BatchStream",
    "Ray",
    "RolloutSpec",
    "ServeClient",
    "ServeConfig",
    "ServeResult",
    "Service",
    "Supervisor",
    "Workers",
]

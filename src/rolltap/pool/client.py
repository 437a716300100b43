"""What the pool holds: any model client that can be closed.

The pool knows nothing else of its clients (they live in :mod:`rolltap.clients`, which
does not import the pool either); a client satisfies this protocol by shape.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["ModelClient"]


@runtime_checkable
class ModelClient(Protocol):
    """A model client owned by the gateway's pool and shared by many rollouts.

    Clients never retry on their own: a failure surfaces to the harness and the trace.
    ``aclose()`` must be idempotent.
    """

    async def aclose(self) -> None: ...

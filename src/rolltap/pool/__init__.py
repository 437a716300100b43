"""The bounded model-client pool the gateway borrows from.

One pool per gateway. Keys are opaque SHA-256 identity digests computed by the caller
with :meth:`rolltap.config.EndpointConfig.identity`; the pool never sees a credential.

>>> from rolltap.pool import ModelClientPool
>>> ModelClientPool(max_clients=8).snapshot().max_clients
8
"""

from rolltap.pool.lease import Lease
from rolltap.pool.pool import ModelClientPool
from rolltap.pool.snapshot import PoolSnapshot

__all__ = ["Lease", "ModelClientPool", "PoolSnapshot"]

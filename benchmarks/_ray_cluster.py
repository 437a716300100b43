"""A two-node Ray cluster on this machine, on loopback only, for the benchmarks.

Importing this module keeps Ray's addresses on 127.0.0.1: without the variable Ray
resolves 127.0.0.1 to the machine's network address (read when ray is imported, and
inherited by the cluster's processes), so it must be imported before ``ray`` is.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

__all__ = ["two_node_cluster"]


@contextmanager
def two_node_cluster(cpus_per_node: int = 1) -> Iterator[str]:
    """Start a head and one more node (dashboard off, a small object store, loopback
    only) until the block ends; the cluster's address. One logical CPU a node: a SPREAD
    placement of two one-CPU workers lands one on each."""
    from ray.cluster_utils import Cluster  # the ray extra, only when a Ray row runs

    node: dict[str, Any] = {
        "num_cpus": cpus_per_node, "node_ip_address": "127.0.0.1",
        "object_store_memory": 80 * 2**20,
    }  # fmt: skip
    cluster = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
    try:
        cluster.add_node(**node)
        cluster.wait_for_nodes()
        yield str(cluster.address)
    finally:
        cluster.shutdown()  # type: ignore[no-untyped-call]

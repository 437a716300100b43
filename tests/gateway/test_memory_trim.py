"""Every gateway (so ``rolltap gateway`` and ``rolltap eval`` too, not only serve workers)
returns freed allocator pages to the OS on its cadence, off the event loop."""

from __future__ import annotations

import asyncio
import threading

from helpers import GatewayFactory


async def test_the_gateway_trims_memory_off_the_loop(make_gateway: GatewayFactory) -> None:
    gateway = await make_gateway(trim_interval_s=0.05)
    assert gateway.trimmer is not None
    await asyncio.wait_for(gateway.trimmer.trimmed.wait(), 30)
    report = gateway.trimmer.last
    assert report is not None
    assert report.loop_thread == threading.get_ident() != report.thread


async def test_trimming_can_be_turned_off(make_gateway: GatewayFactory) -> None:
    gateway = await make_gateway(trim_interval_s=0)
    assert gateway.trimmer is None

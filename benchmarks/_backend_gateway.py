"""One gateway for the token benchmark's backend arms, in its own process (its CPU its own).

    python benchmarks/_backend_gateway.py '{"base_url": "http://127.0.0.1:8199/v1", …}'

The argument is an ``EndpointConfig`` as JSON; the gateway runs as ``rolltap gateway``
would (its GC tuning too), admin token ``bench``, until SIGTERM. Once it is ready (a token
endpoint's first renderer built, so no measured call waits on it) it prints its admin URL.
"""

from __future__ import annotations

import asyncio
import signal
import sys

from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.gateway import Gateway
from rolltap.proc.gc_tuning import tune_gc_for_gateway


async def serve(endpoint: EndpointConfig) -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with Gateway(endpoint, GatewaySettings(admin_token="bench")) as gateway:
        await gateway.ready()
        print(gateway.admin_url, flush=True)
        await stop.wait()


if __name__ == "__main__":
    tune_gc_for_gateway()
    asyncio.run(serve(EndpointConfig.model_validate_json(sys.argv[1])))

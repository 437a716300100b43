"""The :class:`Simulator`: an aiohttp low-level server speaking several model APIs.

OpenAI chat completions, Anthropic Messages, OpenAI Responses, and token-id completions
(vLLM's ``/v1/completions`` and ``/inference/v1/generate``, llama.cpp's ``/completion``,
SGLang's ``/generate``), told apart by route; and an RL engine's weight-update routes
(:mod:`rolltap.sim.control`).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from types import TracebackType
from typing import Any

import orjson
from aiohttp import web

from rolltap.sim.chat import CHAT
from rolltap.sim.completions import COMPLETIONS
from rolltap.sim.config import SimConfig
from rolltap.sim.control import CONTROL_ROUTES, answer
from rolltap.sim.generate import SGLANG, VLLM_GENERATE
from rolltap.sim.handler import Handler
from rolltap.sim.llamacpp import LLAMACPP
from rolltap.sim.messages import COUNT_TOKENS, MESSAGES
from rolltap.sim.plan import Dialect
from rolltap.sim.responses import RESPONSES
from rolltap.sim.stats import Gate, SimStats, StatsBoard
from rolltap.sim.tokenize import tokenize_response
from rolltap.sim.weights import Weights
from rolltap.sim.wire import AuthDigests, error_response

__all__ = ["Simulator"]

# Held or stalled requests are cancelled this long after aclose() starts.
_SHUTDOWN_TIMEOUT = 0.25
_HEALTH = b'{"status":"ok"}'
_ROUTES: dict[str, Dialect] = {
    "/v1/chat/completions": CHAT,
    "/v1/messages": MESSAGES,
    "/v1/messages/count_tokens": COUNT_TOKENS,
    "/v1/responses": RESPONSES,
    "/v1/completions": COMPLETIONS,
    "/completion": LLAMACPP,
    "/inference/v1/generate": VLLM_GENERATE,
    "/generate": SGLANG,
}


class Simulator:
    """A simulated model server on a local port; the route picks the API it speaks.

    Routes:

    ====================================  ====================================================
    ``POST /v1/chat/completions``         OpenAI chat completions (stream and not, tools,
                                          logprobs, ``stop``, vLLM's ``return_token_ids``)
    ``POST /v1/responses``                OpenAI Responses (stream and not, function
                                          tools, ``max_output_tokens``)
    ``POST /v1/messages``                 Anthropic Messages (stream and not, tools,
                                          ``stop_sequences``), errors in Anthropic's shape
    ``POST /v1/messages/count_tokens``    Anthropic token counting: ``{"input_tokens": N}``
    ``POST /v1/completions``              completions over token ids as vLLM serves them
                                          (stream and not, ``logprobs``,
                                          ``return_tokens_as_token_ids``,
                                          ``return_token_ids``, ``stop``)
    ``POST /completion``                  llama.cpp's native completion (token ids,
                                          ``n_predict``, ``n_probs``, ``return_tokens``)
    ``POST /inference/v1/generate``       vLLM's tokens-in/tokens-out route (``token_ids``,
                                          ``sampling_params``; stream and not)
    ``POST /generate``                    SGLang's native route (``input_ids``,
                                          ``return_logprob``; cumulative stream chunks)
    ``POST /tokenize``                    the vocabulary's ids of a text, in vLLM's or
                                          llama.cpp's shape (:mod:`rolltap.sim.tokenize`;
                                          not counted in stats)
    ``GET /v1/models``, ``GET /health``   model list and liveness (not counted in stats;
                                          ``GET``/``HEAD /`` answers as ``/health``)
    ``GET /stats``                        :meth:`snapshot`: the counters, prefix-cache hits
                                          and requests per routing header value
    ``GET /get_weight_version``           SGLang's: ``{"weight_version": V}``
    ``POST /update_weight_version``       SGLang's: ``{"new_version", "abort_all_requests"}``
                                          sets the version (aborting what is in flight)
    ``POST /pause?mode=abort|wait|keep``  vLLM's pause; ``POST /resume``, ``GET /is_paused``
    ``POST /pause_generation``            SGLang's pause (``{"mode": "abort" | "retract" |
                                          "in_place"}``); ``POST /continue_generation``
    ====================================  ====================================================

    OpenAI SDKs take ``base_url=sim.base_url`` (``…/v1``); the Anthropic SDK appends
    ``/v1/messages`` itself, so it takes ``base_url=sim.url``. Every conversation route
    answers the same conversation with the same words, tool call and token counts (see
    :mod:`rolltap.sim.content`); all routes share the latency model, faults and gates.

    The token routes take prompts as ids of the simulator's toy vocabulary
    (:data:`rolltap.sim.vocab.VOCAB`: its 150 words, each also space-prefixed, ChatML-style
    special tokens and 256 byte tokens; ``VOCAB.encode``/``decode`` are lossless) and
    answer ids of it, words drawn from a RNG seeded by the prompt ids, then the
    end-of-sequence id ``<|im_end|>``. When the prompt ids hold
    :attr:`SimConfig.tool_marker` (default ``<tools>``) with no ``<tool_response>`` after
    it, the answer is a Hermes/Qwen-style tool call instead,
    ``<tool_call>\\n{"name": …, "arguments": {…}}\\n</tool_call>``, naming the first tool
    listed as JSON after the marker (see :mod:`rolltap.sim.completions_in`).

    With :attr:`SimConfig.prefix_cache_blocks` the simulator keeps an LRU of prompt
    blocks (see :mod:`rolltap.sim.prefix`) and the time to first token is
    ``ttft_ms + prefill_ms_per_token × prompt tokens not cached``; the stats count hit and
    missed tokens. Requests are counted per value of ``X-Rolltap-Rollout``,
    ``X-Session-ID`` and ``X-SMG-Routing-Key``, so a test can see where each rollout went.

    With :attr:`SimConfig.script` the chat, Messages and Responses routes say a script's
    turns instead, per session (``X-Rolltap-Rollout``, else ``X-Session-ID``): text and
    tool calls, in each dialect's framing, stream and not (see :mod:`rolltap.sim.script`).
    They take what real agents send: unknown fields, roles a beta allows (``system``
    entries inside Messages ``messages``, Responses ``developer`` items), block, item and
    tool types they do not read.

    Every response carries ``x-sim-request-id`` and ``x-sim-auth-digest`` (16 hex chars of
    the SHA-256 of the ``Authorization`` value, else of ``x-api-key``, else ``none``), and
    :attr:`SimConfig.response_headers`.

    Weights (:mod:`rolltap.sim.weights`, the routes: :mod:`rolltap.sim.control`): with a
    version (:attr:`SimConfig.policy_version` or an update), SGLang's ``/generate`` reports
    it in ``meta_info.weight_version`` and the OpenAI routes in ``metadata.weight_version``.
    A pause holds new requests until the resume; an abort answers every generation in flight
    at once with the tokens it had generated (a prefix of its whole answer) and the route's
    abort reason; a frozen generation goes on, after the resume, with the same tokens.

    Per request, ``x-sim-fault: SPEC`` injects one fault instead of ``config.faults``
    (see :mod:`rolltap.sim.config`), and ``x-sim-gate: NAME`` holds the request at
    :meth:`gate` ``(NAME)`` (a stream after its first event) until the gate is opened.
    ``status`` and ``reset`` faults answer at once and skip the gate. Errors and faults
    take the route's error shape.

    >>> async def demo() -> None:  # doctest: +SKIP
    ...     async with Simulator(SimConfig(seed=1)) as sim:
    ...         chat = openai.AsyncOpenAI(base_url=sim.base_url, api_key="k")
    ...         claude = anthropic.AsyncAnthropic(base_url=sim.url, api_key="k")
    """

    def __init__(
        self, config: SimConfig | None = None, *, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.config = config or SimConfig()
        self._host = host
        self._port = port
        self._board = StatsBoard()
        self._gates: dict[str, Gate] = {}
        self._weights = Weights(self.config.policy_version, self._board)
        self._handler = Handler(self.config, self._board, self.gate, self._weights)
        self._numbers = itertools.count(1)
        self._digests = AuthDigests()
        self._models = orjson.dumps(
            {
                "object": "list",
                "data": [
                    {
                        "id": self.config.model,
                        "object": "model",
                        "created": 0,
                        "owned_by": "rolltap",
                    }
                ],
            }
        )
        self._runner: web.ServerRunner | None = None
        self._url: str | None = None

    async def start(self) -> None:
        """Bind and start serving (``async with`` calls this)."""
        if self._runner is not None:
            raise RuntimeError("simulator already started")
        # handler_cancellation: a client that goes away cancels its handler, even when the
        # handler is held at a gate or stalled, so `disconnected` is counted promptly.
        server = web.Server(self._handle, handler_cancellation=True, access_log=None)
        runner = web.ServerRunner(server, shutdown_timeout=_SHUTDOWN_TIMEOUT)
        await runner.setup()
        self._runner = runner
        site = web.TCPSite(runner, self._host, self._port)
        try:
            await site.start()
        except BaseException:
            await self.aclose()
            raise
        port = runner.addresses[0][1]
        host = "127.0.0.1" if self._host in ("", "0.0.0.0") else self._host
        host = f"[{host}]" if ":" in host else host
        self._url = f"http://{host}:{port}"

    async def aclose(self) -> None:
        """Stop serving; requests still running are cancelled shortly. Idempotent."""
        runner, self._runner = self._runner, None
        if runner is None:
            return
        self._handler.closing = True
        await runner.cleanup()

    async def __aenter__(self) -> Simulator:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    @property
    def url(self) -> str:
        """``http://HOST:PORT`` of the running server."""
        if self._url is None:
            raise RuntimeError("simulator not started")
        return self._url

    @property
    def base_url(self) -> str:
        """The OpenAI base URL: :attr:`url` + ``/v1`` (the Anthropic SDK takes :attr:`url`)."""
        return self.url + "/v1"

    @property
    def stats(self) -> SimStats:
        """Live counters (the same object across calls)."""
        return self._board.stats

    @property
    def weights(self) -> Weights:
        """The engine's version, pause and generations in flight (what the weight-update
        routes change)."""
        return self._weights

    def snapshot(self) -> dict[str, Any]:
        """What ``GET /stats`` answers: :meth:`SimStats.snapshot`, the weights' state
        (``weights``: version, paused) and the prefix cache's (``prefix_cache``: capacity
        and cached blocks, block size, evictions, costs)."""
        cache, config, weights = self._handler.cache, self.config, self._weights
        return {
            **self.stats.snapshot(),
            "weights": {"version": weights.version, "paused": weights.paused},
            "prefix_cache": {
                "capacity_blocks": cache.capacity,
                "block_tokens": cache.block_tokens,
                "cached_blocks": len(cache),
                "evicted_blocks": cache.evicted,
                "ttft_ms": config.ttft_ms,
                "prefill_ms_per_token": config.prefill_ms_per_token,
            },
        }

    def gate(self, name: str) -> Gate:
        """The gate called ``name``, created on first use (by a test or a request)."""
        gate = self._gates.get(name)
        if gate is None:
            gate = self._gates[name] = Gate(name)
        return gate

    async def wait_for(
        self,
        predicate: Callable[[SimStats], bool],
        timeout: float = 10.0,  # noqa: ASYNC109 -- the public API takes a plain timeout
    ) -> SimStats:
        """Wait until ``predicate(stats)`` is true, re-checking on every stats change.

        Raises :class:`TimeoutError` after ``timeout`` seconds.
        """
        async with asyncio.timeout(timeout):
            return await self._board.wait_for(predicate)

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        number = next(self._numbers)
        headers = {
            **self.config.response_headers,
            "x-sim-auth-digest": self._digests.of(request),
            "x-sim-request-id": f"sim-{number}",
        }
        path, method = request.path, request.method
        dialect = _ROUTES.get(path)
        if dialect is not None:
            if method != "POST":
                return dialect.error(405, "use POST", "method_not_allowed", headers)
            return await self._handler.handle(dialect, request, number, headers)
        if path == "/v1/models" and method == "GET":
            return web.Response(body=self._models, content_type="application/json", headers=headers)
        if path in ("/health", "/") and method in ("GET", "HEAD"):
            # "/": Claude Code probes its bare base URL before its first call.
            return web.Response(body=_HEALTH, content_type="application/json", headers=headers)
        if path == "/stats" and method == "GET":
            body = orjson.dumps(self.snapshot())
            return web.Response(body=body, content_type="application/json", headers=headers)
        if path in CONTROL_ROUTES:
            return await answer(self._weights, request, headers)
        if path == "/tokenize" and method == "POST" and self.config.tokenize:
            return await tokenize_response(request, self.config, headers)
        return error_response(404, f"no route {method} {path}", "not_found", headers)

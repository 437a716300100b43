"""A model call on a token endpoint: tokens in, tokens out, answered in any dialect.

The harness's request (chat, Messages or Responses) becomes canonical, then the
model's chat template renders it to prompt ids, extending the rollout's previous
prompt + sampled ids when the conversation extends it
(:class:`~rolltap.tokens.turns.TokenTurns`). The upstream's completions API samples
from those ids; the sampled text is parsed back into text, reasoning and tool calls
(:mod:`rolltap.tokens.parsers`) and answered in the harness's dialect — as a stream
when it asked for one, sent once the completion is whole (tool calls can only be
parsed then), with keepalives while it waits. The response event carries the exact
``tokens`` (prompt ids, completion ids, logprobs, how the prompt was rendered).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import orjson
from aiohttp import web

from rolltap.clients.completions import (
    COMPLETIONS_PATHS,
    Completion,
    completions_body,
    parse_completion,
)
from rolltap.clients.relay import UpstreamResponse
from rolltap.config import EndpointConfig
from rolltap.dialects.canonical import Request, Response
from rolltap.dialects.chat_canonical import response_from_canonical as chat_response
from rolltap.errors import UpstreamProtocolError
from rolltap.gateway.call import ModelCall, relayed_headers
from rolltap.gateway.folding import summarize_canonical
from rolltap.tokens import RendererConfig, RendererRegistry, request_to_template
from rolltap.tokens.parsers import get_parser
from rolltap.tokens.renderer import RenderedPrompt
from rolltap.tokens.turns import TokenTurns

__all__ = ["TokenCall", "renderer_config"]

#: sampling fields the canonical request carries; others go to the upstream as sent
_CANONICAL_SAMPLING = ("temperature", "top_p", "top_k", "max_tokens", "seed")
#: a completion's length when neither the harness nor the run bounds it
DEFAULT_MAX_TOKENS = 1024


def renderer_config(endpoint: EndpointConfig) -> RendererConfig:
    """What a token endpoint's renderers are built from (one pool per distinct config)."""
    return RendererConfig(
        endpoint.tokenizer or "", template_kwargs=endpoint.template_kwargs,
        eos_tokens=endpoint.eos_tokens,
    )  # fmt: skip


class TokenCall(ModelCall):
    """:class:`ModelCall` whose upstream is a completions API fed with token ids."""

    __slots__ = ("renderers", "sampled")

    def __init__(self, *args: Any, renderers: RendererRegistry, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.renderers = renderers
        #: the answer parsed from the sampled tokens (a retry's replay renders it again)
        self.sampled: Response | None = None

    @property
    def upstream_name(self) -> str:
        return f"completions.{self.rollout.endpoint.completions_api}"

    async def run(self) -> web.StreamResponse:
        if self.lookup.replay is not None:
            return await super().run()  # answered from the kept answer, no sampling
        self.rollout.admit_call()
        endpoint = self.rollout.endpoint
        request, options, rewrites = self._request()
        messages, tools = request_to_template(request)
        turns = self.rollout.token_turns
        if turns is None:
            turns = self.rollout.token_turns = TokenTurns()
        async with self.renderers.shared(renderer_config(endpoint)).acquire() as renderer:
            prompt = await turns.render(renderer, messages, tools)
        self.log_request(rewrites, tokens={"prompt_len": len(prompt.ids), **_how(prompt)})
        body = completions_body(
            endpoint.completions_api, model=endpoint.model, prompt_ids=prompt.ids, options=options
        )
        limiter = self.rollout.limiter
        if limiter is None:
            return await self._complete(body, prompt, turns)
        async with limiter.slot():
            return await self._complete(body, prompt, turns)

    def _request(self) -> tuple[Request, dict[str, Any], list[dict[str, Any]]]:
        """The canonical request with the run's sampling applied; the upstream options."""
        request = self.harness.to_canonical(self.body)
        sampling, rewrites = self.rollout.sampling, []
        for name, value in sampling.items():
            before = getattr(request, name, None) if name in _CANONICAL_SAMPLING else None
            if before != value:
                rewrites.append({"field": name, "from": before, "to": value})
        fields = {k: v for k, v in sampling.items() if k in _CANONICAL_SAMPLING}
        if "stop" in sampling:
            stop = sampling["stop"]
            fields["stop"] = (stop,) if isinstance(stop, str) else tuple(stop)
        request = dataclasses.replace(request, **fields)
        options: dict[str, Any] = {
            k: getattr(request, k) for k in _CANONICAL_SAMPLING if getattr(request, k) is not None
        }
        options.setdefault("max_tokens", DEFAULT_MAX_TOKENS)
        if request.stop:
            options["stop"] = list(request.stop)
        # the run's settings the canonical model has no field for go upstream as named
        options.update({k: v for k, v in sampling.items() if k not in fields and k != "stop"})
        return request, options, rewrites

    async def _complete(
        self, body: dict[str, Any], prompt: RenderedPrompt, turns: TokenTurns
    ) -> web.StreamResponse:
        endpoint = self.rollout.endpoint
        path = COMPLETIONS_PATHS[endpoint.completions_api]
        data = orjson.dumps(body)
        async with self.rollout.client.send(
            path, data, self.request.headers, rollout_id=self.rollout.id,
            from_root=endpoint.completions_api == "llamacpp",
        ) as up:  # fmt: skip
            self.t_headers = time.perf_counter()
            if up.status >= 400:
                raise await self._status_error(up)
            raw = await self._read_waiting(up)
            self.t_first = time.perf_counter()
            headers = relayed_headers(up.headers)
            status = up.status
        parsed = _json_object(raw)
        completion = parse_completion(endpoint.completions_api, parsed)
        turns.sampled(prompt, completion.ids)
        answer = self.sampled = self._answer(completion)
        # the body is the raw completion; the message is what it parsed to (tool calls)
        message = chat_response(answer)["choices"][0]["message"]
        recorded = {"body": parsed, "message": message, **summarize_canonical(answer)}
        recorded["tokens"] = _tokens(prompt, completion)
        self._record_response(status, recorded)
        return await self._deliver(answer, status, headers)

    def _answer(self, completion: Completion) -> Response:
        parser = get_parser(self.rollout.endpoint.tool_parser)
        result = parser.parse(
            completion.text, finish=completion.stop_reason or "end_turn",
            id_prefix=f"call_{self.intercept.id}_",
        )  # fmt: skip
        extra = {"parse_problems": result.problems} if result.problems else {}
        return Response(
            id=completion.id or self.intercept.id, model=self.rollout.endpoint.model,
            parts=result.parts, stop_reason=result.stop_reason, usage=completion.usage,
            extra=extra,
        )  # fmt: skip

    async def _read_waiting(self, up: UpstreamResponse) -> bytes:
        """The whole upstream body; a streaming harness gets keepalives meanwhile."""
        if self.stream:
            await self.open_stream(200, {})
        return b"".join([chunk async for chunk in self.chunks(up)])

    async def _deliver(
        self, answer: Response, status: int, headers: dict[str, str]
    ) -> web.StreamResponse:
        if self.response is None or self.frames is None:
            body = orjson.dumps(self.harness.response_from_canonical(answer))
            return await self.deliver_body(body, status, headers)
        await self.deliver_events(status, headers, answer)
        return self.response

    def canonical_answer(self) -> Response:
        assert self.sampled is not None
        return self.sampled


def _how(prompt: RenderedPrompt) -> dict[str, Any]:
    how: dict[str, Any] = {"render": "extend" if prompt.extended else "full"}
    if prompt.reason is not None:
        how["reason"] = prompt.reason
    return how


def _tokens(prompt: RenderedPrompt, completion: Completion) -> dict[str, Any]:
    """The response event's token record (docs/events.md, "Token records")."""
    return {
        "prompt_ids": list(prompt.ids),
        "completion_ids": list(completion.ids),
        "completion_logprobs": None if completion.logprobs is None else list(completion.logprobs),
        **_how(prompt),
    }


def _json_object(raw: bytes) -> dict[str, Any]:
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise UpstreamProtocolError(f"upstream returned invalid JSON: {exc}") from exc
    if not isinstance(parsed, dict):
        raise UpstreamProtocolError("upstream returned a JSON value that is not an object")
    return parsed

"""The token upstream: tokens in, tokens out, answered in any dialect (train mode).

The harness's request (chat, Messages or Responses) becomes canonical, then the
model's chat template renders it to prompt ids, extending the rollout's previous
prompt + sampled ids when the conversation extends it
(:class:`~rolltap.tokens.turns.TokenTurns`, one per rollout: this upstream's state).
The upstream's completions API (:mod:`rolltap.clients.completions`) samples from those
ids; the sampled ids, decoded locally with special tokens kept, are parsed back into
text, reasoning and tool calls by the endpoint's ``tool_parser`` and ``reasoning_parser``
(:mod:`rolltap.tokens.parsers`). The answer is whole (tool calls can only be parsed
then): the gateway delivers it in the harness's dialect, as a stream when it asked for
one, with keepalives while it waits. A completion cut by an ``abort`` pause or aborted by
the engine is continued until whole (:mod:`rolltap.clients.continuation`). Both events
carry ``tokens``: the request's prompt length and how it was rendered, the response's
exact prompt ids, completion ids and logprobs, the policy version of each span of them
and how many times the completion was continued; both add ``drift`` when the prompt does
not extend the previous prompt + completion (:mod:`rolltap.tokens.drift`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from rolltap.clients.completions import (
    COMPLETIONS_PATHS,
    ROOT_FLAVORS,
    Completion,
    completions_body,
)
from rolltap.clients.continuation import Continuation, Continued
from rolltap.clients.relay import RelayClient, UpstreamResponse
from rolltap.clients.upstream import Answer, CallGate, ModelRequest, Reply, UpstreamRequest
from rolltap.config import EndpointConfig
from rolltap.dialects.canonical import Reasoning, Request, Response, Tool
from rolltap.dialects.chat.dialect import response_from_canonical as chat_response
from rolltap.dialects.registry import get_dialect
from rolltap.dialects.translate import Dropped, canonical_request
from rolltap.errors import TokenizerError
from rolltap.tokens import RendererConfig, RendererRegistry, request_to_template
from rolltap.tokens.drift import Drift
from rolltap.tokens.handle import RendererHandle
from rolltap.tokens.parsers import CallParser, ToolCallParser, resolve_parser
from rolltap.tokens.renderer import RenderedPrompt
from rolltap.tokens.turns import TokenTurns

__all__ = ["DEFAULT_MAX_TOKENS", "TokenRequest", "TokenUpstream", "renderer_config"]

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


@dataclasses.dataclass(slots=True)
class TokenRequest(UpstreamRequest):
    """A completions request, with the rendered prompt its answer is recorded against."""

    prompt: RenderedPrompt = dataclasses.field(kw_only=True)
    #: the tools the harness offered (a parser may type call values by their schemas)
    tools: tuple[Tool, ...] = dataclasses.field(default=(), kw_only=True)
    #: where ``prompt`` parts from the previous prompt + completion (None: it extends them)
    drift: Drift | None = dataclasses.field(default=None, kw_only=True)
    #: the completion's budget (a continued completion's parts share it)
    max_tokens: int = dataclasses.field(default=DEFAULT_MAX_TOKENS, kw_only=True)


class TokenUpstream:
    """An :class:`~rolltap.clients.upstream.Upstream` that samples from token ids."""

    __slots__ = ("client", "endpoint", "errors", "gate", "name", "parser", "renderers", "turns")

    def __init__(
        self, endpoint: EndpointConfig, client: RelayClient, renderers: RendererRegistry,
        gate: CallGate | None = None,
    ) -> None:  # fmt: skip
        self.endpoint, self.client, self.renderers = endpoint, client, renderers
        #: the endpoint's policy: version and pauses (None outside a gateway)
        self.gate = gate
        self.name = f"completions.{endpoint.completions_api}"
        # a completions server's error bodies are read as the endpoint's dialect's
        self.errors = get_dialect(endpoint.dialect)
        self.turns = TokenTurns()
        # unknown names and Harmony mixed with another format fail here, not per answer
        self.parser: ToolCallParser = resolve_parser(
            endpoint.tool_parser, endpoint.reasoning_parser
        )

    async def rewrite(self, call: ModelRequest) -> TokenRequest:
        """The prompt rendered to ids (extending the last one when it can)."""
        endpoint = self.endpoint
        canonical, dropped = canonical_request(
            call.body, call.dialect.name, unsupported=endpoint.unsupported
        )
        canonical, effort = _without_effort(canonical, endpoint.template_kwargs)
        request, options, rewrites = _with_sampling(canonical, call.sampling)
        rewrites += [d.rewrite() for d in (*dropped, *effort)]
        messages, tools = request_to_template(request)
        async with self.renderers.shared(renderer_config(endpoint)).acquire() as renderer:
            prompt, drift = await self.turns.render(renderer, messages, tools)
            stop_ids = renderer.eos_token_ids
        body = completions_body(
            endpoint.completions_api, model=endpoint.model, prompt_ids=prompt.ids,
            options=options, stop_ids=stop_ids,
        )  # fmt: skip
        record = {"tokens": {"prompt_len": len(prompt.ids), **_how(prompt, drift)}}
        return TokenRequest(
            call, body, rewrites, record, prompt=prompt, tools=tuple(request.tools), drift=drift,
            max_tokens=int(options["max_tokens"]),
        )  # fmt: skip

    @asynccontextmanager
    async def call(self, request: TokenRequest) -> AsyncIterator[Reply]:
        """Send the completion, continued in parts when it is cut (its body waits for
        them: :class:`~rolltap.clients.continuation.Continuation`)."""
        api, call = self.endpoint.completions_api, request.call

        def send(body: bytes) -> AbstractAsyncContextManager[UpstreamResponse]:
            return self.client.send(
                COMPLETIONS_PATHS[api], body, call.headers, rollout_id=call.rollout_id,
                from_root=api in ROOT_FLAVORS,
            )  # fmt: skip

        parts = Continuation(
            api, request.body, request.prompt.ids, send, max_tokens=request.max_tokens,
            gate=self.gate, errors=self.errors,
        )  # fmt: skip
        async with parts:
            head = await parts.head()
            yield Reply(
                head.status, head.headers, "answer", self.errors, parts,
                functools.partial(self._answer, request, parts), retry_after=head.retry_after,
            )  # fmt: skip

    async def _answer(self, request: TokenRequest, parts: Continuation, raw: bytes) -> Answer:
        done = parts.result
        if done is None:  # an error status is never parsed: the gateway raises it
            raise RuntimeError("no completion to parse")
        completion = done.completion
        async with self.renderers.shared(renderer_config(self.endpoint)).acquire() as renderer:
            text = await sampled_text(renderer, completion)
        answer = self._response(completion, text, request)
        reasoning = [p.text for p in answer.parts if isinstance(p, Reasoning)]
        self.turns.sampled(request.prompt, completion.ids, reasoning=reasoning)
        # the body is the raw completion; the message is what it parsed to (tool calls)
        message = chat_response(answer)["choices"][0]["message"]
        record = {"message": message, "tokens": _tokens(request, done)}
        if done.engine_version is not None:  # the gateway stamps the engine's own version
            record["policy_version"] = done.engine_version
        if "parse_problems" in answer.extra:  # answered as plain text: say why
            record["parse_problems"] = answer.extra["parse_problems"]
        return Answer(
            done.body, raw, answer, record, sent_version=done.sent_version,
            waited_s=done.waited_s,
        )  # fmt: skip

    def _response(self, completion: Completion, text: str, request: TokenRequest) -> Response:
        call_id, parser = request.call.call_id, self.parser
        if isinstance(parser, CallParser) and request.tools:
            parser = parser.for_tools(request.tools)
        result = parser.parse(
            text, finish=completion.stop_reason or "end_turn",
            id_prefix=f"call_{call_id}_",
        )  # fmt: skip
        extra = {"parse_problems": result.problems} if result.problems else {}
        return Response(
            id=completion.id or call_id, model=self.endpoint.model,
            parts=result.parts, stop_reason=result.stop_reason, usage=completion.usage,
            extra=extra,
        )  # fmt: skip


async def sampled_text(renderer: RendererHandle, completion: Completion) -> str:
    """What the parsers read: the sampled ids decoded locally with special tokens kept
    (servers' text drops ``[TOOL_CALLS]`` and Harmony's markers; ``/generate`` sends none),
    less the end-of-turn id the model stopped on; decoded off the loop by the pooled
    renderer. The server's text when the ids do not decode."""
    ids = completion.ids
    if ids and ids[-1] in renderer.eos_token_ids:
        ids = ids[:-1]
    try:
        text: str = await renderer.decode(ids, skip_special_tokens=False)
    except TokenizerError:
        if completion.text is None:
            raise
        return completion.text
    return text


def _with_sampling(
    request: Request, sampling: Mapping[str, Any]
) -> tuple[Request, dict[str, Any], list[dict[str, Any]]]:
    """The canonical request with the run's sampling applied; the upstream options."""
    rewrites: list[dict[str, Any]] = []
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


def _without_effort(
    request: Request, template_kwargs: Mapping[str, Any]
) -> tuple[Request, list[Dropped]]:
    """The request less its ``reasoning_effort``, recorded as dropped: the prompt is
    rendered with the endpoint's ``template_kwargs`` alone, the same on every turn (a
    per-call setting would break the rollout's prompt extension), so an effort reaches
    the model only as ``template_kwargs = {reasoning_effort = ...}`` on the endpoint."""
    if request.reasoning_effort is None:
        return request, []
    how = (
        "set by the endpoint's template_kwargs"
        if "reasoning_effort" in template_kwargs
        else ("the token client renders the chat template with the endpoint's template_kwargs only")
    )
    return dataclasses.replace(request, reasoning_effort=None), [Dropped("reasoning_effort", how)]


def _how(prompt: RenderedPrompt, drift: Drift | None) -> dict[str, Any]:
    how: dict[str, Any] = {"render": "extend" if prompt.extended else "full"}
    if prompt.reason is not None:
        how["reason"] = prompt.reason
    if drift is not None:
        how["drift"] = drift.to_record()
    return how


def _tokens(request: TokenRequest, done: Continued) -> dict[str, Any]:
    """The response event's token record (docs/events.md, "Token records")."""
    completion = done.completion
    return {
        "prompt_ids": list(request.prompt.ids),
        "completion_ids": list(completion.ids),
        "completion_logprobs": None if completion.logprobs is None else list(completion.logprobs),
        "policy_versions": done.spans,
        "continued": done.continued,
        **_how(request.prompt, request.drift),
    }

"""``rolltap gateway``: the interception gateway for harnesses started by hand."""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

import typer

from rolltap.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    CaptureLogprobsOpt,
    CaptureTokensOpt,
    Interrupts,
    MaxStalenessOpt,
    OtelContentOpt,
    OtelOpt,
    PauseMaxOpt,
    ReasoningParserOpt,
    RolloutsPerVersionOpt,
    ToolParserOpt,
    UnsupportedOpt,
    UntilSignalled,
    address_fields,
    capture_fields,
    console,
    endpoint_from_flags,
    parser_fields,
    print_error,
    run_async,
    unsupported_fields,
)
from rolltap.config import Dialect, EndpointConfig, GatewaySettings
from rolltap.gateway import Gateway
from rolltap.gateway.observer import RolloutObserver
from rolltap.local import LocalModel
from rolltap.otel import open_tracer, otel_enabled
from rolltap.proc.gc_tuning import tune_gc_for_gateway
from rolltap.rollouts.recorder import StoreRecorder
from rolltap.store import LeaseKeeper, Store, mask_url

__all__ = ["register"]


class UpstreamDialect(StrEnum):
    """What the upstream speaks (typer shows an Enum as a choice; it has no Literal)."""

    chat = "chat"
    messages = "messages"
    responses = "responses"


_DIALECT: dict[UpstreamDialect, Dialect] = {
    UpstreamDialect.chat: "chat",
    UpstreamDialect.messages: "messages",
    UpstreamDialect.responses: "responses",
}


@dataclass(frozen=True, slots=True)
class _Tracing:
    otel: bool | None = None
    content: bool = False


async def _serve(
    endpoint: EndpointConfig | None,
    settings: GatewaySettings,
    store_url: str | None,
    until: UntilSignalled,
    tracing: _Tracing = _Tracing(),
    *,
    local_fields: dict[str, str] | None = None,
) -> int:
    """Serve until a signal; 0 after a clean shutdown, 1 if it timed out or a commit failed.
    ``local_fields``: endpoint fields of the built-in local model's (``--unsupported``)."""
    otel_enabled(tracing.otel)  # a missing extra fails before the local model starts
    if endpoint is None:
        async with LocalModel() as model:
            console.print(f"local model: {model.base_url}")
            local = EndpointConfig(
                name="local", base_url=model.base_url, model=model.model, **(local_fields or {})
            )
            return await _serve(local, settings, store_url, until, tracing)
    if store_url is None:
        return await _run_gateway(endpoint, settings, [], until, tracing)
    async with await Store.open(store_url) as store:
        run = await store.create_run(
            f"gateway {time.strftime('%Y-%m-%d %H:%M:%S')}",
            {"endpoint": endpoint.model_dump(mode="json")},
        )
        console.print(f"persisting to {mask_url(store.url)} as run {run.id}")
        keeper = LeaseKeeper(store, run.id, ttl_s=settings.lease_ttl_s, role="gateway")
        async with keeper, StoreRecorder(store, run.id, reader=store) as recorder:
            code = await _run_gateway(endpoint, settings, [recorder], until, tracing, run.id)
    if recorder.failures:
        print_error("store_error", f"{recorder.failures} commit(s) failed: see the warnings above")
        return EXIT_FAILED
    return code


async def _run_gateway(
    endpoint: EndpointConfig,
    settings: GatewaySettings,
    observers: list[RolloutObserver],
    until: UntilSignalled,
    tracing: _Tracing,
    run_id: str | None = None,
) -> int:
    async with (
        open_tracer(tracing.otel, content=tracing.content, run_id=run_id) as tracer,
        Gateway(endpoint, settings, observers=observers, tracer=tracer) as gateway,
    ):
        if tracer is not None:
            console.print("tracing: OpenTelemetry spans exported over OTLP/HTTP")
        upstream = ", ".join(endpoint.replica_urls)
        console.print(f"gateway admin API: {gateway.admin_url}  (upstream {upstream})")
        if gateway.admin_token_generated:
            console.print(
                f"admin token: {gateway.admin_token}  (set ROLLTAP_ADMIN_TOKEN to fix it)"
            )
        console.print(
            f"register a rollout: curl -X POST -H 'Authorization: Bearer <admin token>' "
            f"{gateway.admin_url}/rollouts"
        )
        await until.wait()  # serve until SIGINT/SIGTERM; closing marks open rollouts cancelled
    if not gateway.drained:
        print_error("drain_timeout", "open rollouts' calls did not unwind in time")
        return EXIT_FAILED
    console.print("gateway stopped", highlight=False)
    return EXIT_OK


def gateway(
    endpoint: Annotated[
        list[str] | None,
        typer.Option(
            metavar="URL",
            help="Upstream base URL (e.g. http://127.0.0.1:8080/v1); repeat for the replicas"
            " of one model (each rollout pinned to one); omitted: start the built-in local model",
        ),
    ] = None,
    model: Annotated[str | None, typer.Option(help="Upstream model name")] = None,
    dialect: Annotated[
        UpstreamDialect | None,
        typer.Option(
            # "[chat]" would be read as rich markup, hence "default chat"
            help="What the upstream speaks: chat (/chat/completions), messages "
            "(Anthropic /messages) or responses (OpenAI /responses); default chat"
        ),
    ] = None,
    api_key_env: Annotated[
        str | None, typer.Option(help="Name of the env var holding the upstream API key")
    ] = None,
    tool_parser: ToolParserOpt = None,
    reasoning_parser: ReasoningParserOpt = None,
    capture_tokens: CaptureTokensOpt = None,
    capture_logprobs: CaptureLogprobsOpt = None,
    unsupported: UnsupportedOpt = None,
    host: Annotated[str | None, typer.Option(help="Bind address [127.0.0.1]")] = None,
    port: Annotated[int | None, typer.Option(help="Admin/first server port [0: any]")] = None,
    multiplex: Annotated[int | None, typer.Option(help="Rollouts per server [32]")] = None,
    store: Annotated[
        str | None,
        typer.Option(
            help="Persist every rollout's events (sqlite:///f.db, postgresql://…, "
            "mysql://…); default: in memory until the rollout is deleted"
        ),
    ] = None,
    max_staleness: MaxStalenessOpt = None,
    rollouts_per_version: RolloutsPerVersionOpt = None,
    pause_max_s: PauseMaxOpt = None,
    otel: OtelOpt = None,
    otel_content: OtelContentOpt = False,
) -> None:
    """Run the interception gateway in front of one upstream endpoint."""
    settings = GatewaySettings.from_env(
        host=host, port=port, multiplex=multiplex, max_staleness=max_staleness,
        rollouts_per_version=rollouts_per_version, pause_max_s=pause_max_s,
    )  # fmt: skip
    policy = unsupported_fields(unsupported)
    ep = None
    if not endpoint and dialect is not None:
        # the built-in local model is llama-server, which rolltap drives as chat only
        raise typer.BadParameter("--dialect needs --endpoint", param_hint="--dialect")
    if not endpoint and (capture_tokens or capture_logprobs):
        # llama-server returns no token ids: nothing would be captured
        raise typer.BadParameter("--capture-tokens needs --endpoint (a vLLM server)",
                                 param_hint="--capture-tokens")  # fmt: skip
    if endpoint:
        if model is None:
            raise typer.BadParameter("--model is required with --endpoint", param_hint="--model")
        ep = endpoint_from_flags(
            **address_fields(endpoint),
            model=model,
            api_key_env=api_key_env,
            dialect=_DIALECT[dialect or UpstreamDialect.chat],
            **parser_fields(tool_parser, reasoning_parser),
            **capture_fields(capture_tokens, capture_logprobs),
            **policy,
        )
    interrupts = Interrupts()
    until = UntilSignalled.installed(interrupts)
    tune_gc_for_gateway()
    local = {"local_fields": policy} if policy and ep is None else {}
    run_async(_serve(ep, settings, store, until, _Tracing(otel, otel_content), **local), interrupts)


def register(app: typer.Typer) -> None:
    app.command("gateway")(gateway)

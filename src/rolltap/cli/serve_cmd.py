"""``rolltap serve``: the long-lived rollout service (see docs/serve.md)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any

import typer

from rolltap.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    CaptureLogprobsOpt,
    CaptureTokensOpt,
    MaxStalenessOpt,
    OtelContentOpt,
    OtelOpt,
    PauseMaxOpt,
    ReasoningParserOpt,
    RolloutsPerVersionOpt,
    ToolParserOpt,
    UnsupportedOpt,
    address_fields,
    capture_fields,
    console,
    endpoint_from_flags,
    parser_fields,
    print_error,
    run_async,
    unsupported_fields,
)
from rolltap.config import EndpointConfig
from rolltap.errors import ConfigError
from rolltap.local import LocalModel
from rolltap.rollouts.config import RAY_NEEDS_ENDPOINT
from rolltap.serve import TOKEN_ENV, ServeConfig, Service
from rolltap.store import mask_url, resolve_store_url

__all__ = ["register"]


async def _serve(
    values: dict[str, Any], config_file: Path | None, *, local_fields: dict[str, str] | None = None
) -> int:
    """Serve until a signal, drain; 0 after a clean drain, 1 if it timed out or a commit failed.
    ``local_fields``: endpoint fields of the built-in local model's (``--unsupported``)."""
    if not values.get("endpoints") and config_file is None:
        if values.get("ray") is not None:
            raise ConfigError(RAY_NEEDS_ENDPOINT)
        async with LocalModel() as model:
            console.print(f"local model: {model.base_url}")
            local = EndpointConfig(
                name="local", base_url=model.base_url, model=model.model, **(local_fields or {})
            )
            return await _serve({**values, "endpoints": [local]}, None)
    if config_file is not None:
        config = ServeConfig.from_toml(config_file, **values)
    else:
        config = ServeConfig.build(values)
    # the service and its supervisor report drains and worker losses as warnings
    logging.basicConfig(level=logging.WARNING, format="rolltap serve: %(message)s")
    async with Service(config) as service:
        # one line a parser can rely on: tests and scripts read the URL from it
        console.print(f"rolltap serve: {service.url}", soft_wrap=True, highlight=False)
        console.print(
            f"{len(service.supervisor.worker_slots.slots)} workers × {config.max_inflight} rollouts"
            f"{' on Ray' if config.ray is not None else ''}; "
            f"store {mask_url(resolve_store_url(config.store))}",
            highlight=False,
        )
        if config.restricts_code:
            listed = ", ".join(config.allow_harness) or "none"
            console.print(f"code callers may run: built-ins and {listed}", highlight=False)
        if service.token_generated:
            console.print(f"token: {service.token}  (set {TOKEN_ENV} to fix it)", highlight=False)
        drained = await service.run_until_signalled()
        failures = service.supervisor.commit_failures
    if not drained:
        print_error("drain_timeout", "rollouts still running at the drain deadline were cancelled")
        return EXIT_FAILED
    if failures:
        print_error("store_error", f"{failures} rollout(s) could not be stored")
        return EXIT_FAILED
    console.print("rolltap serve: drained and stopped", highlight=False)
    return EXIT_OK


def serve(
    endpoint: Annotated[
        list[str] | None,
        typer.Option(
            metavar="URL",
            help="Upstream base URL; repeat for the replicas of one model (each rollout pinned"
            " to one); omitted (and no --config): the built-in local model",
        ),
    ] = None,
    model: Annotated[str | None, typer.Option(help="Upstream model name")] = None,
    api_key_env: Annotated[
        str | None, typer.Option(help="Name of the env var holding the upstream API key")
    ] = None,
    tool_parser: ToolParserOpt = None,
    reasoning_parser: ReasoningParserOpt = None,
    capture_tokens: CaptureTokensOpt = None,
    capture_logprobs: CaptureLogprobsOpt = None,
    unsupported: UnsupportedOpt = None,
    workers: Annotated[int | None, typer.Option(help="Worker processes [CPUs, at most 8]")] = None,
    ray: Annotated[
        str | None,
        typer.Option(
            metavar="local|auto|ADDRESS",
            help="Workers as Ray actors: a cluster started for the service, the running one,"
            " or a cluster address (needs --endpoint and the ray extra)",
        ),
    ] = None,
    workers_per_node: Annotated[
        int | None, typer.Option(help="With --ray: K workers on every node (else --workers)")
    ] = None,
    ray_working_dir: Annotated[
        str | None,
        typer.Option(help="With --ray: upload this directory to every node (harness code)"),
    ] = None,
    store: Annotated[
        str | None, typer.Option(help="sqlite:///f.db, postgresql://…, mysql://… [ROLLTAP_STORE]")
    ] = None,
    host: Annotated[str | None, typer.Option(help="Bind address [127.0.0.1]")] = None,
    port: Annotated[int | None, typer.Option(help="Port [8765; 0: any]")] = None,
    max_inflight: Annotated[int | None, typer.Option(help="Rollouts per worker [64]")] = None,
    drain_timeout: Annotated[
        float | None, typer.Option(help="On SIGTERM, seconds in-flight rollouts get [60]")
    ] = None,
    stats_interval: Annotated[float | None, typer.Option(help="Heartbeat cadence, s [10]")] = None,
    heartbeat_timeout: Annotated[
        float | None, typer.Option(help="A worker this silent is replaced, s [30]")
    ] = None,
    config: Annotated[
        Path | None, typer.Option(help="TOML with \\[serve] and \\[endpoints.NAME] tables")
    ] = None,
    otel: OtelOpt = None,
    otel_content: OtelContentOpt = False,
    allow_harness: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-harness",
            help="A module:function harness or reward, or a cmd command line, callers may "
            "run (repeat); enforced when given and whenever --host is not loopback",
        ),
    ] = None,
    store_unavailable_timeout: Annotated[
        float | None,
        typer.Option(
            envvar="ROLLTAP_STORE_UNAVAILABLE_TIMEOUT_S",
            help="Past this long without the store (s), what is unsaved goes to "
            "rolltap-unsaved-RUN-wN.jsonl \\[300]",
        ),
    ] = None,
    unsaved_dir: Annotated[
        Path | None, typer.Option(help="Where unsaved-sessions files go [the current directory]")
    ] = None,
    max_staleness: MaxStalenessOpt = None,
    rollouts_per_version: RolloutsPerVersionOpt = None,
    pause_max_s: PauseMaxOpt = None,
) -> None:
    """Run rollouts for callers over HTTP, on supervised worker processes, until SIGTERM."""
    values: dict[str, Any] = {
        "workers": workers, "ray": ray, "workers_per_node": workers_per_node,
        "ray_working_dir": ray_working_dir,
        "store": store, "host": host, "port": port,
        "max_inflight": max_inflight, "drain_timeout_s": drain_timeout,
        "stats_interval_s": stats_interval, "heartbeat_timeout_s": heartbeat_timeout,
        "otel": otel, "otel_content": otel_content or None,
        "allow_harness": allow_harness or None,
        "store_unavailable_timeout_s": store_unavailable_timeout,
        "unsaved_dir": None if unsaved_dir is None else str(unsaved_dir),
    }  # fmt: skip
    values = {k: v for k, v in values.items() if v is not None}
    # each worker's gateway settings ([serve.gateway] in a config file), field by field
    gateway = {"max_staleness": max_staleness, "rollouts_per_version": rollouts_per_version,
               "pause_max_s": pause_max_s}  # fmt: skip
    if given := {k: v for k, v in gateway.items() if v is not None}:
        values["gateway"] = given
    policy = unsupported_fields(unsupported)
    if policy and config is not None and not endpoint:
        raise ConfigError(
            "--unsupported applies to --endpoint or the local model; with --config, set"
            " unsupported in each [endpoints.NAME] table"
        )
    if endpoint:
        if model is None:
            raise typer.BadParameter("--model is required with --endpoint", param_hint="--model")
        values["endpoints"] = [
            endpoint_from_flags(
                **address_fields(endpoint),
                model=model,
                api_key_env=api_key_env,
                **parser_fields(tool_parser, reasoning_parser),
                **capture_fields(capture_tokens, capture_logprobs),
                **policy,
            )
        ]
    local = {"local_fields": policy} if policy and not endpoint else {}
    run_async(_serve(values, config, **local))


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)

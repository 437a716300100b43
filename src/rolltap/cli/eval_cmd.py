"""``rolltap eval`` (run a harness over a task set) and ``rolltap runs compare A B``."""

from __future__ import annotations

import asyncio
import sys
from typing import Annotated, Any, Literal

import orjson
import typer

import rolltap
from rolltap import evaluation
from rolltap.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_SIGINT,
    CaptureLogprobsOpt,
    CaptureTokensOpt,
    Interrupts,
    MaxStalenessOpt,
    OtelContentOpt,
    OtelOpt,
    PauseMaxOpt,
    ReasoningParserOpt,
    ToolParserOpt,
    UnsupportedOpt,
    console,
    err_console,
    print_error,
    run_async,
    unsupported_fields,
)
from rolltap.cli.eval_again import Again, retry_exit, run_again
from rolltap.cli.report import ProgressReporter, render_summary, render_workers
from rolltap.proc.gc_tuning import tune_gc_for_gateway
from rolltap.rollouts import Hooks, RunConfig, RunResult, load_run_config
from rolltap.rollouts.api import Stoppable
from rolltap.rollouts.auto_workers import available_cores

__all__ = ["register"]


class _Stopper:
    """The first SIGINT/SIGTERM stops admitting and cancels in-flight rollouts (they end
    ``cancelled``, the store is flushed); before the runner exists (the local model is
    starting) it declines, and the command is cancelled instead."""

    def __init__(self) -> None:
        self.runner: Stoppable | None = None
        #: the run's id once planned: a second signal, which cancels the command, names
        #: it too (its state is kept as the command unwinds)
        self.run_id: str | None = None

    def attach(self, runner: Stoppable) -> None:
        self.runner = runner

    def __call__(self, signum: int) -> bool:
        if self.runner is None:
            return False
        err_console.print("stopping: cancelling rollouts in flight (state is kept)")
        self.runner.stop()
        return True


async def _eval(config: RunConfig, again: Again, as_json: bool, stopper: _Stopper) -> RunResult:
    """``rolltap.evaluate`` on the backend ``--workers``/``--ray`` (or the config) name;
    or a resume, or a retry, of a stored run."""
    with ProgressReporter(err_console) as progress:

        def plan(run_id: str, total: int) -> None:
            stopper.run_id = run_id
            progress.plan(run_id, total)

        hooks = Hooks(on_result=progress.result, on_runner=stopper.attach,
                      on_plan=plan, on_stage=progress.stage,
                      on_store=progress.store)  # fmt: skip
        if again.run_id is not None:
            result = await run_again(config, again, hooks)
        else:
            backend = evaluation.backend_for(config)  # --workers/--ray, or the config's
            _placement_line(config, backend)
            result = await evaluation.evaluate(config, backend, hooks=hooks)
    _report(result, config, as_json)
    return result


def _exit_code(result: RunResult, interrupts: Interrupts, again: Again) -> int:
    """130/143 after a signal; 0 when a rollout succeeded and every commit did (a retry:
    one of its new attempts, or it had nothing to retry); else 1."""
    if result.interrupted or interrupts.signum is not None:
        return interrupts.exit_code or EXIT_SIGINT
    ok, note = (result.ok, None) if result.retried is None else retry_exit(result, again.codes)
    if note is not None:
        err_console.print(note, soft_wrap=True, markup=False, highlight=False)
    if ok and not any(res.commit_failed for res in result.results):
        return EXIT_OK
    if any(res.commit_failed for res in result.results):
        print_error("store_error", "a store commit failed: see the errors above")
    else:
        errors = result.summary.get("errors", {})
        causes = ", ".join(f"{code} × {entry['count']}" for code, entry in errors.items())
        what = "no retried rollout completed" if result.retried else "no rollout completed"
        print_error("run_failed", what + (f" ({causes})" if causes else ""))
    return EXIT_FAILED


def _report(result: RunResult, config: RunConfig, as_json: bool) -> None:
    if as_json:
        body = {"run_id": result.run_id, "interrupted": result.interrupted, **result.summary}
        if result.retried is not None:
            body["retried"] = result.retried
        sys.stdout.write(orjson.dumps(body, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        render_summary(console, result.run_id, result.summary)
        if result.workers:
            render_workers(console, result.workers)
    empty = int(result.summary.get("no_model_calls") or 0)  # None: not known (a retry)
    if empty:
        # a harness that never called the model can still score (it printed the task):
        # said last, on stderr, so it is not lost above a long table
        err_console.print(
            f"warning: {empty} of {result.summary['rollouts']} rollout(s) made no model call "
            "through the gateway (no_model_calls): their rewards say nothing about the model; "
            "check that the harness uses the base URL and key it is given",
            soft_wrap=True, markup=False, highlight=False,
        )  # fmt: skip
    if result.interrupted:
        _finish_hint(result.run_id, config, retried=result.retried is not None)


def _finish_hint(run_id: str, config: RunConfig, *, retried: bool) -> None:
    """How to finish an interrupted run (a retry's interrupted attempts are failed ones:
    the next retry runs them again)."""
    store = f" --store {config.store}" if config.store else ""
    how = "--retry-failed" if retried else "--resume"
    err_console.print(
        f"interrupted: finish it with  rolltap eval {how} {run_id}{store}",
        soft_wrap=True, markup=False, highlight=False,
    )  # fmt: skip


def _endpoint(values: list[str] | None) -> str | list[str] | None:
    """``--endpoint`` once is a name or a URL; several URLs are the replicas of one model;
    otherwise the last one given wins, as it did before replicas."""
    if not values:
        return None
    if len(values) > 1 and all(v.startswith(("http://", "https://")) for v in values):
        return values
    return values[-1]


def _workers_flag(value: str | None) -> int | str | None:
    """``--workers``: a number of processes (0: this one) or ``auto``."""
    if value is None or value == "auto":
        return value
    if value.isdigit():
        return int(value)
    raise typer.BadParameter(f"{value!r}: give a number of worker processes, 0 or auto")


def _placement_line(config: RunConfig, backend: object) -> None:
    """Say so when ``auto`` (the default) spread the run over worker processes."""
    if config.workers in (None, "auto") and isinstance(backend, rolltap.Workers):
        err_console.print(
            f"-c {config.c} on {available_cores()} cores: the rollouts run on {backend.n} "
            "worker processes (--workers N to choose, 0 for this process)",
            soft_wrap=True, markup=False, highlight=False,
        )  # fmt: skip


def _sampling(temperature: float | None, sample_max_tokens: int | None) -> dict[str, Any] | None:
    sampling: dict[str, Any] = {}
    if temperature is not None:
        sampling["temperature"] = temperature
    if sample_max_tokens is not None:
        sampling["max_tokens"] = sample_max_tokens
    return sampling or None


def eval_command(
    tasks: Annotated[str | None, typer.Argument(help="Tasks file (JSONL or Parquet)")] = None,
    harness: Annotated[
        str | None,
        typer.Option(
            help="Built-in (chat, tool-agent, messages-tool-agent), an agent CLI"
            " (claude-code, codex) or module:function"
        ),
    ] = None,
    cmd: Annotated[str | None, typer.Option(help="Run this shell command as the harness")] = None,
    endpoint: Annotated[
        list[str] | None,
        typer.Option(
            metavar="URL|NAME",
            help="Upstream URL or \\[endpoints] name; repeat with URLs for the replicas of"
            " one model (each rollout pinned to one); omitted: local model",
        ),
    ] = None,
    model: Annotated[str | None, typer.Option(help="Upstream model name")] = None,
    api_key_env: Annotated[str | None, typer.Option(help="Env var with the API key")] = None,
    dialect: Annotated[
        str | None, typer.Option(help="Upstream API: chat, messages or responses \\[chat]")
    ] = None,
    client: Annotated[
        str | None, typer.Option(help="relay (as sent) or tokens (token ids, for training)")
    ] = None,
    tokenizer: Annotated[
        str | None, typer.Option(help="Tokenizer directory for --client tokens (local: GGUF's)")
    ] = None,
    completions_api: Annotated[
        str | None,
        typer.Option(help="Token client upstream: vllm, llamacpp, vllm-generate, sglang \\[vllm]"),
    ] = None,
    tool_parser: ToolParserOpt = None,
    reasoning_parser: ReasoningParserOpt = None,
    capture_tokens: CaptureTokensOpt = None,
    capture_logprobs: CaptureLogprobsOpt = None,
    unsupported: UnsupportedOpt = None,
    n: Annotated[int | None, typer.Option("-n", help="First N tasks")] = None,
    r: Annotated[int | None, typer.Option("-r", help="Rollouts per task \\[1]")] = None,
    c: Annotated[int | None, typer.Option("-c", help="Rollouts at once \\[16]")] = None,
    reward: Annotated[
        list[str] | None, typer.Option(help="NAME[=WEIGHT], repeatable \\[contains]")
    ] = None,
    store: Annotated[str | None, typer.Option(help="Store URL \\[sqlite:///rolltap.db]")] = None,
    config: Annotated[str | None, typer.Option(help="TOML run config")] = None,
    resume: Annotated[
        str | None, typer.Option(metavar="RUN", help="Finish the unfinished rollouts of RUN")
    ] = None,
    retry_failed: Annotated[
        str | None,
        typer.Option(
            metavar="RUN",
            help="Run a new attempt of every rollout of RUN whose latest attempt failed",
        ),
    ] = None,
    retry_codes: Annotated[
        list[str] | None,
        typer.Option(
            metavar="CODE,…",
            help="With --retry-failed: only failures with these error codes (all: any)",
        ),
    ] = None,
    attempt_policy: Annotated[
        Literal["best", "last"] | None,
        typer.Option(help="A retried run counts each rollout's best or last attempt \\[best]"),
    ] = None,
    shuffle: Annotated[bool, typer.Option("--shuffle", help="Shuffle tasks")] = False,
    seed: Annotated[int | None, typer.Option(help="Shuffle seed \\[0]")] = None,
    timeout: Annotated[float | None, typer.Option(help="Per-rollout timeout (s)")] = None,
    max_turns: Annotated[int | None, typer.Option(help="Per-rollout model-call limit")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Per-rollout token limit")] = None,
    temperature: Annotated[float | None, typer.Option(help="Sampling temperature")] = None,
    sample_max_tokens: Annotated[int | None, typer.Option(help="max_tokens per call")] = None,
    store_unavailable_timeout: Annotated[
        float | None,
        typer.Option(
            envvar="ROLLTAP_STORE_UNAVAILABLE_TIMEOUT_S",
            help="Stop (store_unavailable) when the store is away this long (s) \\[300]",
        ),
    ] = None,
    workers: Annotated[
        str | None,
        typer.Option(
            metavar="N|0|auto",
            callback=_workers_flag,
            help="Run the rollouts on N worker processes (-c split among them); 0: in this"
            " process; auto: worker processes from -c 1024 when the machine has the cores"
            " \\[auto]",
        ),
    ] = None,
    ray: Annotated[
        str | None,
        typer.Option(
            metavar="local|auto|ADDRESS",
            help="Run the rollouts on Ray actors: a cluster started for the run, the running"
            " one, or a cluster address (needs --endpoint and the ray extra)",
        ),
    ] = None,
    workers_per_node: Annotated[
        int | None, typer.Option(help="With --ray: K workers on every node \\[1]")
    ] = None,
    ray_working_dir: Annotated[
        str | None,
        typer.Option(help="With --ray: upload this directory to every node (harness code)"),
    ] = None,
    max_staleness: MaxStalenessOpt = None,
    pause_max_s: PauseMaxOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON")] = False,
    otel: OtelOpt = None,
    otel_content: OtelContentOpt = False,
) -> None:
    """Run a harness over a task set: N tasks × R rollouts, C at once, all events kept."""
    flags = {
        "tasks": tasks, "harness": harness, "cmd": cmd, "endpoint": _endpoint(endpoint),
        "model": model,
        "api_key_env": api_key_env, "n": n, "r": r, "c": c, "dialect": dialect,
        "client": client, "tokenizer": tokenizer, "completions_api": completions_api,
        "tool_parser": tool_parser, "reasoning_parser": reasoning_parser,
        "capture_tokens": capture_tokens, "capture_logprobs": capture_logprobs,
        "unsupported": unsupported_fields(unsupported).get("unsupported"),
        "rewards": reward or None, "store": store, "shuffle": shuffle or None, "seed": seed,
        "otel": otel, "otel_content": otel_content or None,
        "store_unavailable_timeout_s": store_unavailable_timeout,
        "workers": workers, "ray": ray, "workers_per_node": workers_per_node,
        "ray_working_dir": ray_working_dir,
        "max_staleness": max_staleness, "pause_max_s": pause_max_s,
        "retry_codes": retry_codes, "attempt_policy": attempt_policy,
    }  # fmt: skip
    limits = {"timeout_s": timeout, "max_turns": max_turns, "max_tokens": max_tokens}
    sampling = _sampling(temperature, sample_max_tokens)
    stopper, interrupts = _Stopper(), Interrupts()
    interrupts.handler = stopper

    again = Again(resume, retry_failed, retry_codes, attempt_policy)

    async def main() -> int:
        again.check()
        base = load_run_config(config) if config else RunConfig()
        merged = _merged(base, flags, limits, sampling)
        try:
            return _exit_code(await _eval(merged, again, as_json, stopper), interrupts, again)
        except asyncio.CancelledError:  # a second signal: no summary, but the way back
            if stopper.run_id is not None:
                _finish_hint(stopper.run_id, merged, retried=again.retry is not None)
            raise

    tune_gc_for_gateway()  # the run's gateway lives in this process
    run_async(main(), interrupts)


def _merged(
    base: RunConfig, flags: dict[str, Any], limits: dict[str, Any], sampling: dict[str, Any] | None
) -> RunConfig:
    """``base`` (the --config file) with the flags given over it; limits and sampling
    merge field by field rather than replacing the file's."""
    given = {k: v for k, v in limits.items() if v is not None}
    return base.merged({
        **flags,
        "limits": {**base.limits.model_dump(), **given},
        "sampling": {**base.sampling, **sampling} if sampling else None,
    })  # fmt: skip


def register(app: typer.Typer) -> None:
    """Add ``eval`` to ``app`` (``runs compare`` is added with the other ``runs`` commands)."""
    app.command("eval")(eval_command)

"""What every CLI command shares: one-line errors, exit codes, SIGINT/SIGTERM.

Every mistake a command reports is one line on stderr, ``error [code] message``,
optionally followed by one ``hint: …`` line; never a traceback. Exit codes: 0 done,
1 failed, 2 usage (flags, config, :class:`~rolltap.errors.UsageError`), 128 + the
signal after SIGINT (130) or SIGTERM (143) for a command that was stopped.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, NoReturn

import typer
from pydantic import ValidationError
from rich.console import Console

from rolltap.config import EndpointConfig
from rolltap.dialects.translate import UNSUPPORTED
from rolltap.errors import ConfigError, RolltapError
from rolltap.proc.loop import run as run_loop
from rolltap.rollouts.config import describe_errors

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_SIGINT",
    "EXIT_USAGE",
    "CaptureLogprobsOpt",
    "CaptureTokensOpt",
    "Interrupts",
    "MaxStalenessOpt",
    "OtelContentOpt",
    "OtelOpt",
    "PauseMaxOpt",
    "ReasoningParserOpt",
    "ToolParserOpt",
    "UnsupportedOpt",
    "UntilSignalled",
    "address_fields",
    "capture_fields",
    "console",
    "endpoint_from_flags",
    "err_console",
    "exit_code_of",
    "fail",
    "parser_fields",
    "print_error",
    "report_error",
    "run_async",
    "unsupported_fields",
]

#: ``--otel/--no-otel`` on every command that runs rollouts
OtelOpt = Annotated[
    bool | None,
    typer.Option(
        "--otel/--no-otel",
        help="OpenTelemetry spans; default: on when OTEL_EXPORTER_OTLP_ENDPOINT is set",
    ),
]
#: ``--otel-content`` beside :data:`OtelOpt`
OtelContentOpt = Annotated[
    bool, typer.Option("--otel-content", help="Put prompts and completions in the spans")
]
#: ``--max-staleness`` / ``--pause-max-s`` on every command that runs a gateway (the
#: gateway's ``max_staleness`` and ``pause_max_s``: :mod:`rolltap.gateway.policy`)
MaxStalenessOpt = Annotated[
    int | None,
    typer.Option(
        help="A rollout whose first call was made K or more policy versions ago gets no new"
        " calls (409 policy_stale) and ends stale; default: no bound",
    ),
]
#: ``--rollouts-per-version`` beside :data:`MaxStalenessOpt` on ``gateway`` and ``serve``
RolloutsPerVersionOpt = Annotated[
    int | None,
    typer.Option(
        "--rollouts-per-version",
        metavar="B",
        help="The rollouts the trainer uses per policy version: with --max-staleness K, a"
        " new rollout waits while it would be trained on K or more versions after it"
        " began; default: no bound",
    ),
]
PauseMaxOpt = Annotated[
    float | None,
    typer.Option(
        "--pause-max-s",
        help="While paused (POST /pause), a call waits this long (s) at most, then gets"
        " 503 paused \\[600]",
    ),
]
#: ``--tool-parser`` / ``--reasoning-parser`` where endpoint flags are (the token client's)
ToolParserOpt = Annotated[
    str | None,
    typer.Option(
        help="Token client: how completions' tool calls are read: hermes, qwen3_coder,"
        " llama3_json, mistral, deepseek_v3, openai (gpt-oss) \\[hermes]"
    ),
]
ReasoningParserOpt = Annotated[
    str | None,
    typer.Option(
        help="Token client: how reasoning is read: think, harmony, none"
        " \\[think; harmony with --tool-parser openai]"
    ),
]

#: ``--capture-tokens`` / ``--capture-logprobs`` where endpoint flags are (a chat relay's)
CaptureTokensOpt = Annotated[
    bool | None,
    typer.Option(
        "--capture-tokens/--no-capture-tokens",
        help="Chat relay to vLLM: record the ids the server saw and sampled"
        " (return_token_ids); the harness's answer is as it asked",
    ),
]
CaptureLogprobsOpt = Annotated[
    bool | None,
    typer.Option(
        "--capture-logprobs/--no-capture-logprobs",
        help="With --capture-tokens: record logprobs too (asked for if the harness did not)",
    ),
]

#: ``--unsupported`` where endpoint flags are: a translated call's inexpressible fields
UnsupportedOpt = Annotated[
    str | None,
    typer.Option(
        metavar="drop|refuse",
        help="A translated call's fields the upstream's dialect cannot express: drop them"
        " (each recorded) or refuse the call with a 400 naming the field \\[drop]",
    ),
]

console = Console()
err_console = Console(stderr=True)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
#: what a shell reports for a command killed by SIGINT (the exit code after Ctrl-C)
EXIT_SIGINT = 128 + signal.SIGINT


def one_line(text: str) -> str:
    """``text`` on one line: line breaks (pydantic's, a driver's) become ``; ``."""
    return "; ".join(part.strip() for part in text.splitlines() if part.strip())


def print_error(
    code: str, message: str, hint: str | None = None, details: str | None = None
) -> None:
    """``error [code] message`` (then ``details`` indented, then ``hint: …``) on stderr."""
    # soft_wrap: rich would otherwise fold a long message at the console width
    err_console.print(f"error [{code}] {one_line(message)}", markup=False, highlight=False,
                      soft_wrap=True)  # fmt: skip
    for line in (details or "").splitlines():
        err_console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)
    if hint:
        err_console.print(f"hint: {one_line(hint)}", markup=False, highlight=False, soft_wrap=True)


def exit_code_of(err: RolltapError) -> int:
    """2 for a usage or configuration mistake, 1 for every other failure (each error
    class's ``exit_code``)."""
    return err.exit_code


def report_error(err: RolltapError) -> None:
    """``err`` as :func:`print_error` shows it, with its details and hint."""
    print_error(err.code, err.message, err.hint, err.details)


def fail(err: RolltapError) -> NoReturn:
    """Report ``err`` in one line and exit with its code."""
    report_error(err)
    raise typer.Exit(exit_code_of(err)) from err


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def address_fields(urls: list[str]) -> dict[str, Any]:
    """An endpoint's address from ``--endpoint`` given once (``base_url``) or more
    (``replicas``: rollouts are pinned to one of them)."""
    return {"base_url": urls[0]} if len(urls) == 1 else {"replicas": urls}


def parser_fields(tool_parser: str | None, reasoning_parser: str | None) -> dict[str, str]:
    """The endpoint fields of ``--tool-parser`` and ``--reasoning-parser``, when given."""
    given = {"tool_parser": tool_parser, "reasoning_parser": reasoning_parser}
    return {k: v for k, v in given.items() if v is not None}


def capture_fields(capture_tokens: bool | None, capture_logprobs: bool | None) -> dict[str, bool]:
    """The endpoint fields of ``--capture-tokens`` and ``--capture-logprobs``, when given."""
    given = {"capture_tokens": capture_tokens, "capture_logprobs": capture_logprobs}
    return {k: v for k, v in given.items() if v is not None}


def unsupported_fields(unsupported: str | None) -> dict[str, str]:
    """The endpoint field of ``--unsupported``, when given; a typo is one usage error."""
    if unsupported is None:
        return {}
    if unsupported not in UNSUPPORTED:
        raise ConfigError(f"--unsupported must be drop or refuse (got {unsupported!r})")
    return {"unsupported": unsupported}


def endpoint_from_flags(**fields: Any) -> EndpointConfig:
    """An endpoint from a command's flags; a bad value is a ConfigError naming its flag."""
    try:
        return EndpointConfig(**fields)
    except ValidationError as exc:
        raise ConfigError(f"invalid endpoint: {describe_errors(exc, flags=True)}") from exc


class Interrupts:
    """SIGINT and SIGTERM while a command runs.

    The first signal goes to :attr:`handler` when the command set one; it returns True
    when the command will stop itself (finish what it can and return). Otherwise, and
    on a second signal, the command's task is cancelled, which unwinds every
    ``async with`` (rollouts marked, stores flushed, child processes stopped).
    """

    def __init__(self) -> None:
        self.signum: int | None = None
        self.count = 0
        self.handler: Callable[[int], bool] | None = None
        self._task: asyncio.Task[Any] | None = None

    @property
    def exit_code(self) -> int | None:
        """128 + the first signal received (130 SIGINT, 143 SIGTERM); None if none came."""
        return None if self.signum is None else 128 + self.signum

    def _received(self, signum: int) -> None:
        self.count += 1
        if self.signum is None:
            self.signum = signum
        if self.count == 1 and self.handler is not None and self.handler(signum):
            return
        if self._task is not None:
            self._task.cancel()

    async def guard(self, main: Coroutine[Any, Any, int | None]) -> int | None:
        """Await ``main`` with the handlers installed; its exit code."""
        loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        # signals reach only the main thread (a command run from a test's worker thread
        # keeps the default handlers)
        signals = (signal.SIGINT, signal.SIGTERM) if _in_main_thread() else ()
        for signum in signals:
            loop.add_signal_handler(signum, self._received, signum)
        try:
            return await main
        finally:
            for signum in signals:
                loop.remove_signal_handler(signum)


def run_async(main: Coroutine[Any, Any, int | None], interrupts: Interrupts | None = None) -> None:
    """Run a command's coroutine; exit with the code it returns (``None``: 0).

    A rolltap error exits 2 (usage) or 1 in one line; a signal stops the command as
    :class:`Interrupts` describes, then exits 128 + the signal unless the command
    returned its own code after stopping itself.
    """
    interrupts = interrupts or Interrupts()
    try:
        code = run_loop(interrupts.guard(main))
    except (KeyboardInterrupt, asyncio.CancelledError):
        err_console.print("stopped", highlight=False)
        raise typer.Exit(interrupts.exit_code or EXIT_SIGINT) from None
    except RolltapError as err:
        main.close()  # refused before it ran (ROLLTAP_LOOP): no "never awaited" warning
        fail(err)
    if code:
        raise typer.Exit(code)


class UntilSignalled:
    """An :class:`Interrupts` handler for a command that serves until stopped.

    While :meth:`wait` runs, the first signal ends it (the command then shuts down
    cleanly: the gateway marks its open rollouts, the store flushes); before that
    (a model still starting) the handler declines and the command is cancelled.
    """

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._waiting = False

    def __call__(self, signum: int) -> bool:
        if not self._waiting:
            return False
        err_console.print(f"{signal.Signals(signum).name}: stopping", highlight=False)
        self._event.set()
        return True

    async def wait(self) -> None:
        """Return once a signal came."""
        self._waiting = True
        try:
            await self._event.wait()
        finally:
            self._waiting = False

    @classmethod
    def installed(cls, interrupts: Interrupts) -> UntilSignalled:
        """A new one, set as ``interrupts``' handler."""
        until = cls()
        interrupts.handler = until
        return until

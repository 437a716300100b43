"""Start rolltap processes for benchmarks and read their CPU time."""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import psutil

__all__ = [
    "SRC", "bare_relay", "baseline_src", "cpu_seconds", "free_port", "gateway", "rolltap_process",
    "running", "simulator", "simulator_process",
]  # fmt: skip

#: this checkout's ``src/`` (the code a benchmark measures against ``--baseline-src``)
SRC = Path(__file__).resolve().parents[1] / "src"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited early: {proc.args!r}")
        try:
            with urllib.request.urlopen(url, timeout=1) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} not healthy in {timeout}s")


@contextmanager
def running(
    command: list[str],
    health_url: str,
    *,
    stderr: int | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[psutil.Process]:
    """Run ``command`` until the block ends, once ``health_url`` answers 200; its handle.

    ``env``: its environment (default: ours), the admin token added."""
    proc = subprocess.Popen(
        command, env=dict(os.environ if env is None else env, ROLLTAP_ADMIN_TOKEN="bench"),
        stdout=subprocess.DEVNULL, stderr=stderr,
    )  # fmt: skip
    try:
        _wait_healthy(health_url, proc)
        yield psutil.Process(proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def rolltap_process(
    args: list[str], health_url: str, *, env: Mapping[str, str] | None = None
) -> AbstractContextManager[psutil.Process]:
    """Run ``rolltap ARGS`` until the block ends (``env``: its environment, default ours);
    yields its psutil handle."""
    command = [sys.executable, "-c", "from rolltap.cli.main import main; main()", *args]
    return running(command, health_url, stderr=subprocess.PIPE, env=env)


def cpu_seconds(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return float(times.user + times.system)


@contextmanager
def simulator(completion_tokens: int) -> Iterator[str]:
    """``rolltap sim`` on asyncio's loop (the "direct" every benchmark measures against)
    answering ``completion_tokens`` tokens, until the block ends; its URL."""
    with simulator_process(completion_tokens) as (url, _):
        yield url


@contextmanager
def simulator_process(completion_tokens: int) -> Iterator[tuple[str, psutil.Process]]:
    """:func:`simulator`, its URL and its process (to read its CPU time)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    args = ["sim", "--port", str(port), "--completion-tokens", str(completion_tokens)]
    env = {**os.environ, "ROLLTAP_LOOP": "asyncio"}
    with rolltap_process(args, url + "/health", env=env) as proc:
        yield url, proc


@contextmanager
def gateway(
    upstream: str,
    *,
    dialect: str = "chat",
    env: Mapping[str, str] | None = None,
    multiplex: int | None = None,
    src: Path | None = None,
) -> Iterator[tuple[str, psutil.Process]]:
    """``rolltap gateway`` in front of ``upstream`` (a simulator's URL) speaking
    ``dialect`` to it (``env``: its environment, e.g. ``ROLLTAP_LOOP=asyncio``; ``src``:
    another checkout's ``src/`` to run instead of this one's), until the block ends; its
    URL and process."""
    if src is not None:
        env = {**(os.environ if env is None else env), "PYTHONPATH": str(src.resolve())}
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    args = ["gateway", "--endpoint", upstream + "/v1", "--model", "sim-model",
            "--dialect", dialect, "--port", str(port)]  # fmt: skip
    if multiplex is not None:
        args += ["--multiplex", str(multiplex)]
    with rolltap_process(args, url + "/health", env=env) as proc:
        yield url, proc


@contextmanager
def bare_relay(upstream: str, loop: str) -> Iterator[tuple[str, psutil.Process]]:
    """The bare aiohttp relay (_bare_relay.py: parse, forward, parse, respond; nothing
    recorded) in front of ``upstream`` on ``loop`` (``asyncio`` or ``uvloop``), until the
    block ends; its URL and process."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, str(Path(__file__).with_name("_bare_relay.py")),
               "--port", str(port), "--upstream", upstream, "--loop", loop]  # fmt: skip
    with running(command, url + "/health") as proc:
        yield url, proc


def baseline_src(parser: argparse.ArgumentParser, value: str | None) -> Path | None:
    """``--baseline-src``'s folder (a checkout's ``src/``), or a usage error naming it."""
    if value is None:
        return None
    path = Path(value)
    if not (path / "rolltap").is_dir():
        parser.error(f"--baseline-src {value}: no rolltap package there (a src/)")
    return path


def loop_sizes(parser: argparse.ArgumentParser, args: argparse.Namespace, least: int) -> list[int]:
    """``--messages`` as history lengths of at least ``least``, with ``--calls`` and
    ``--repeat`` of at least 1, or a usage error naming what is wrong."""
    try:
        sizes = [int(s) for s in args.messages.split(",")]
    except ValueError:
        parser.error(f"--messages {args.messages}: comma-separated message counts")
    if any(s < least for s in sizes) or args.calls < 1 or args.repeat < 1:
        parser.error(f"--messages of at least {least}, --calls and --repeat of at least 1")
    return sizes

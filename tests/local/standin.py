"""A stand-in for llama-server, for start-up tests (no model is loaded).

``STANDIN_MODE`` picks what it does: ``ok`` serves ``/health``; ``sigill-unless-safe``
dies of SIGILL unless given ``--no-repack`` (a CPU that faults on AMX tiles);
``sigill`` always dies of SIGILL; ``exit3`` exits with status 3. Each start appends
its pid and arguments to ``STANDIN_LOG`` when set. Any POST (a model call) is never
answered; the first one writes ``called`` to the FIFO ``STANDIN_CALLED`` when set.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'{"status": "ok"}'
        self.send_response(200 if self.path == "/health" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        fifo = os.environ.pop("STANDIN_CALLED", None)
        if fifo:
            with open(fifo, "w") as out:
                out.write("called\n")
        threading.Event().wait()  # a model call in flight, for as long as it takes

    def log_message(self, *args: object) -> None:
        pass


def main(argv: list[str]) -> None:
    mode = os.environ.get("STANDIN_MODE", "ok")
    if log := os.environ.get("STANDIN_LOG"):
        with open(log, "a") as out:
            out.write(f"{os.getpid()} {' '.join(argv)}\n")
    print("llama threadpool init, n_threads = 2", file=sys.stderr, flush=True)
    if mode == "exit3":
        print("error: unknown model architecture", file=sys.stderr, flush=True)
        sys.exit(3)
    if mode == "sigill" or (mode == "sigill-unless-safe" and "--no-repack" not in argv):
        os.kill(os.getpid(), signal.SIGILL)
    port = int(argv[argv.index("--port") + 1])
    ThreadingHTTPServer(("127.0.0.1", port), _Health).serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])

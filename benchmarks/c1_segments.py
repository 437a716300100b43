"""Where a call's time goes at c = 1: the bare relay's and rolltap's, segment by segment.

    python benchmarks/c1_segments.py [--messages 2,400] [--samples 500] [--stream]
                                     [--baseline-src DIR]

Copies ``src/`` (and DIR, a checkout's ``src/``: the code before a change) and the bare
relay (_bare_relay.py) to a temporary folder, inserts a mark at fixed points of the
request path (the handler's start, the body read, the conversation found, the request
rewritten, the gate passed, the request sent, the answer's headers, its body read,
delivered, written), then times calls through the simulator called directly, the relay
and each gateway, interleaved call by call as benchmarks/gateway_overhead.py does (each
process runs on cold caches). A mark is ``time.perf_counter_ns()``, CLOCK_MONOTONIC, one
clock for every process on the machine, so the load generator's send and end frame each
call's marks. Prints the median of each segment: "client_send -> g0_handler" is the
load generator's send to the gateway's handler; "... -> client_end" ends at the load
generator's last byte (its first byte with --stream). An anchor the code no longer has
stops the run, naming it. Medians of segments do not add up to the median total.
Not CI.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import aiohttp
from _history_load import Target, _turn, body, history
from _procs import SRC, baseline_src, free_port, rolltap_process, running, simulator
from gateway_overhead import register

_MARKS = '''"""Timing marks, written by benchmarks/c1_segments.py."""
import json, os, signal, time
MARKS = []
def mark(name):
    MARKS.append((name, time.perf_counter_ns()))
def _dump(*_):
    with open(os.environ["C1_MARKS"], "w") as f:
        json.dump(MARKS, f)
signal.signal(signal.SIGUSR2, _dump)
'''
_IMPORT = "from rolltap._c1marks import mark\n"

_POST = (
    "            response = await session.post("
    "url, data=body, headers=headers, allow_redirects=False)\n"
)
_READ = (
    "        body, found, raw, encoded = await _read(request, arrival, context)\n",
    "        body, found, raw = await _read(request, arrival, context)\n",
)
#: rolltap's own client (stop 48): a connection taken, then the answer's head checked
_ACQUIRE = "        conn = self._conn = await self._pool.acquire(deadline)\n"
_REDIRECT_CHECK = "            if status in _REDIRECTS:\n"
_OPEN = "        resp, frames = await self.open_stream(reply.status, reply.headers)\n        relay"
#: a place to mark: a line or lines of code, or the versions of it the code has had
_Anchor = str | tuple[str, ...]
#: (file under src/rolltap, anchor, mark, where: before, after, or "mid" (between its lines))
_GATEWAY: list[tuple[str, _Anchor, str, str]] = [
    ("gateway/harness.py", "    async def handler(request: web.Request) -> web.StreamResponse:\n",
     "g0_handler", "after"),
    ("gateway/harness.py", "        request.app[SERVER].check(request, rollout)\n",
     "g0b_checked", "after"),
    ("gateway/harness.py", "    body = arrival.body = parse_json_object(raw)\n",
     "g0d_parsed", "after"),
    ("gateway/harness.py", ("    start = 0 if found is None else found.validated(dialect.name)\n",
                            "    start = found.validated(dialect.name)\n"), "g0e_found", "after"),
    ("gateway/harness.py", _READ, "g1_read", "after"),
    ("gateway/harness.py",
     ("    del found, raw, encoded  # the call drops them once used (each is body-sized)\n",
      "    del found, raw  # the call drops them once used (each is body-sized)\n"),
     "g2_call", "after"),
    ("gateway/call.py", ("        del raw, encoded\n", "        del raw\n"), "g3_rewritten",
     "after"),
    ("gateway/call.py", "        self.defer_request(sent)\n", "g3a_gate", "before"),
    ("gateway/call.py", "            self.waited += self.t_sent - queued\n",
     "g3c_slot_cut", "after"),
    ("clients/exchange.py", _ACQUIRE, "g4_post", "before"),
    ("clients/exchange.py", _REDIRECT_CHECK, "g5_headers", "before"),
    ("gateway/call.py", "            raw = await reply.body.read()\n        self.t_first",
     "g6_body_read", "mid"),
    ("gateway/call.py", _OPEN, "g6s_stream_open", "mid"),
    ("gateway/call.py", "                recorded, response = await self.deliver(reply)\n",
     "g7_delivered", "after"),
]  # fmt: skip
#: the same points in code whose exchange sent on aiohttp's client (stops 44-47)
_AIOHTTP_SEND: list[tuple[str, _Anchor, str, str]] = [
    ("clients/exchange.py", _POST, "g4_post", "before"),
    ("clients/exchange.py", _POST, "g5_headers", "after"),
]
#: the same points in code from before clients/exchange.py (stop 43)
_OLD_SEND: list[tuple[str, _Anchor, str, str]] = [
    ("clients/relay.py", "            response = await self._client_session().post(\n",
     "g4_post", "before"),
    ("clients/relay.py", "                url, data=body, headers=headers, allow_redirects=False\n"
     "            )\n", "g5_headers", "after"),
]  # fmt: skip
_RELAY = [
    ("    body = orjson.loads(await request.read())\n", "r0_handler", "before"),
    ("    body = orjson.loads(await request.read())\n", "r1_read", "after"),
    ("    async with session.post(url, data=data, headers=headers) as up:\n", "r4_post",
     "before"),
    ("        if up.content_type == \"text/event-stream\":\n", "r5_headers", "before"),
]  # fmt: skip


def _indent(line: str) -> str:
    return " " * (len(line) - len(line.lstrip()))


def _insert(path: Path, anchors: _Anchor, name: str, where: str) -> None:
    """Mark ``name`` before the first of ``anchors`` the file has, after it or between
    its two lines ("mid"); an anchor matches at any indentation (a block around it may
    come or go)."""
    text = path.read_text()
    for anchor in (anchors,) if isinstance(anchors, str) else anchors:
        lines = anchor.split("\n")
        pattern = "\n".join(
            (r"^[ ]*" if i == 0 or line.strip() else "") + re.escape(line.lstrip())
            for i, line in enumerate(lines)
        )
        found = re.findall(pattern, text, flags=re.MULTILINE)
        if len(found) == 1:
            break
    else:
        sys.exit(f"{path}: no single place to mark {name!r} ({anchors!r}): the code moved")
    anchor = found[0]
    call = f"mark({name!r})\n"
    head, _, tail = anchor.partition("\n")
    if where == "before":
        new = _indent(head) + call + anchor
    elif where == "after":
        last = anchor.rstrip("\n").split("\n")[-1]
        new = anchor + _indent(last) + ("    " if last.endswith(":") else "") + call
    else:
        new = head + "\n" + _indent(tail) + call + tail
    text = text.replace(anchor, new)
    if _IMPORT not in text:
        future = "from __future__ import annotations\n"
        text = text.replace(future, future + _IMPORT, 1)
    path.write_text(text)


def marked_copy(src: Path, dest: Path) -> Path:
    """``src`` (a ``src/`` folder) copied to ``dest`` with the gateway's marks."""
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__"))
    (dest / "rolltap" / "_c1marks.py").write_text(_MARKS)
    points = _GATEWAY
    exchange = dest / "rolltap" / "clients" / "exchange.py"
    if not exchange.exists():
        points = [p for p in _GATEWAY if p[0] != "clients/exchange.py"] + _OLD_SEND
    elif "_pool.acquire" not in exchange.read_text():
        points = [p for p in _GATEWAY if p[0] != "clients/exchange.py"] + _AIOHTTP_SEND
    for file, anchor, name, where in points:
        _insert(dest / "rolltap" / file, anchor, name, where)
    return dest


def marked_relay(dest: Path) -> Path:
    """The bare relay with its marks (its body encoded before its send's mark)."""
    relay = dest / "relay.py"
    post = "    async with session.post(url, data=orjson.dumps(body), headers=headers) as up:\n"
    text = Path(__file__).with_name("_bare_relay.py").read_text()
    if text.count(post) != 1:
        sys.exit(f"_bare_relay.py: no single place to mark its send ({post!r})")
    relay.write_text(text.replace(post, "    data = orjson.dumps(body)\n" + post.replace(
        "orjson.dumps(body)", "data"
    )))  # fmt: skip
    for anchor, name, where in _RELAY:
        _insert(relay, anchor, name, where)
    return relay


async def _call(
    http: aiohttp.ClientSession, t: Target, data: bytes, stream: bool
) -> tuple[int, int]:
    start = time.perf_counter_ns()
    async with http.post(t.url + "/chat/completions", data=data, headers=t.headers) as resp:
        await resp.content.readany()
        first = time.perf_counter_ns()
        await resp.read()
    return start, first if stream else time.perf_counter_ns()


async def _load(
    bare: dict[str, Target], admins: dict[str, str], n: int, samples: int, stream: bool
) -> dict[str, list[tuple[int, int]]]:
    """Each target's calls (send, end) at ``n`` messages: the ``bare`` ones and a new
    rollout on each gateway of ``admins``."""
    async with aiohttp.ClientSession() as http:
        targets = dict(bare)
        for name, admin in admins.items():
            targets[name] = (await register(http, admin, 1, name))[0]
        out: dict[str, list[tuple[int, int]]] = {name: [] for name in targets}
        names = list(targets)
        base = history(n - 2 if n > 2 else 2)
        for t in targets.values():  # the history sent once, as a rollout would have
            await _call(http, t, body(base, t, stream=False), False)
        for i in range(samples):
            messages = base + _turn(100_000 + i, "new") if n > 2 else history(2, f"s{i:06d}")
            for k in range(len(names)):
                t = targets[names[(i + k) % len(names)]]
                out[t.name].append(await _call(http, t, body(messages, t, stream=stream), stream))
    return out


def segments(
    marks: list[tuple[str, int]], calls: list[tuple[int, int]], first: str
) -> dict[str, list[float]]:
    """Microseconds per segment: each call's marks in time order, framed by its send and end."""
    groups: list[dict[str, int]] = []
    for name, ts in marks:
        if name == first:
            groups.append({})
        if groups:
            groups[-1][name] = ts
    out: dict[str, list[float]] = {}
    for (start, end), group in zip(calls, groups[-len(calls) :], strict=True):
        prev, prev_name = start, "client_send"
        for name in sorted((n for n in group if group[n] <= end), key=group.__getitem__):
            out.setdefault(f"{prev_name} -> {name}", []).append((group[name] - prev) / 1000)
            prev, prev_name = group[name], name
        out.setdefault(f"{prev_name} -> client_end", []).append((end - prev) / 1000)
        out.setdefault("total", []).append((end - start) / 1000)
    return out


def _print(n: int, direct: float, tables: dict[str, dict[str, list[float]]], warm: int) -> None:
    print(f"\n{n} messages: direct p50 {direct:.0f} us")
    for name, table in tables.items():
        print(f"| {name}: segment | p50 us |\n|---|---|")
        for key, values in table.items():
            if len(values) > 2 * warm:  # a segment most calls have
                print(f"| {key} | {statistics.median(values[warm:]):.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", default="2,400")
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--stream", action="store_true", help="end at the first chunk")
    parser.add_argument("--baseline-src", help="a src/ folder measured beside this one")
    args = parser.parse_args()
    base = baseline_src(parser, args.baseline_src)
    here = SRC
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        srcs = {"rolltap": marked_copy(here, Path(tmp) / "new")}
        if base is not None:
            srcs["baseline"] = marked_copy(base, Path(tmp) / "old")
        relay = marked_relay(Path(tmp))
        sim = stack.enter_context(simulator(16))
        procs, files = {}, {}
        port = free_port()
        files["relay"] = Path(tmp) / "relay.json"
        env = {**os.environ, "PYTHONPATH": str(srcs["rolltap"]), "C1_MARKS": str(files["relay"])}
        command = [sys.executable, str(relay), "--port", str(port), "--upstream", sim]
        procs["relay"] = stack.enter_context(
            running(command, f"http://127.0.0.1:{port}/health", env=env)
        )
        bare = {"direct": Target("direct", sim + "/v1", "k"),
                "relay": Target("relay", f"http://127.0.0.1:{port}/v1", "k")}  # fmt: skip
        admins = {}
        for name, src in srcs.items():
            port = free_port()
            files[name] = Path(tmp) / f"{name}.json"
            env = {**os.environ, "PYTHONPATH": str(src), "C1_MARKS": str(files[name])}
            gw_args = ["gateway", "--endpoint", sim + "/v1", "--model", "sim-model",
                       "--dialect", "chat", "--port", str(port), "--multiplex", "128"]  # fmt: skip
            admins[name] = f"http://127.0.0.1:{port}"
            procs[name] = stack.enter_context(
                rolltap_process(gw_args, admins[name] + "/health", env=env)
            )
        warm = 20
        for n in (int(m) for m in args.messages.split(",")):
            calls = asyncio.run(_load(bare, admins, n, args.samples, args.stream))
            for proc in procs.values():
                proc.send_signal(signal.SIGUSR2)
            time.sleep(1.0)  # each process writes its marks
            direct = statistics.median((e - s) / 1000 for s, e in calls["direct"][warm:])
            tables = {}
            for name in procs:
                first = "r0_handler" if name == "relay" else "g0_handler"
                marks = json.loads(files[name].read_text())
                tables[name] = segments(marks, calls[name], first)
            _print(n, direct, tables, warm)


if __name__ == "__main__":
    main()

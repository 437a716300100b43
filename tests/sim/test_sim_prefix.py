"""The prefix cache: blocks of the simulator's tokens in an LRU, hits and misses, the
first-token delay they imply, and the per-rollout request counts in ``/stats``."""

from __future__ import annotations

from array import array
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
import pytest
import typer
from typer.testing import CliRunner

from rolltap.cli import sim_cmd
from rolltap.sim import SimConfig, Simulator
from rolltap.sim.content import Prompt, Tool, answer_for
from rolltap.sim.prefix import (
    PrefixCache,
    conversation_ids,
    conversation_tokens,
    prompt_blocks,
    token_bytes,
)
from rolltap.sim.vocab import VOCAB
from sim.simkit import prompt_ids

BLOCK = 16
SYSTEM = {"role": "system", "content": "You are a careful agent. " * 8}


# -- the cache on its own -------------------------------------------------------------------


def ids_of(*runs: tuple[int, int]) -> bytes:
    """``(token, count)`` runs as one prompt's token bytes."""
    return token_bytes([token for token, count in runs for _ in range(count)])


def test_blocks_are_full_and_chained_over_their_prefix() -> None:
    blocks = prompt_blocks(ids_of((1, 16), (2, 16), (3, 8)), BLOCK)
    assert (len(blocks.hashes), blocks.tokens) == (2, 40)  # the partial block is not one
    with_answer = prompt_blocks(ids_of((1, 16), (2, 16), (3, 8)), BLOCK, ids_of((4, 24)))
    assert with_answer.hashes[:2] == blocks.hashes
    assert (len(with_answer.hashes), with_answer.prompt_blocks, with_answer.tokens) == (4, 2, 40)
    other = prompt_blocks(ids_of((9, 16), (2, 16)), BLOCK)
    assert other.hashes[1] != blocks.hashes[1]  # same tokens, another prefix
    assert prompt_blocks(ids_of((1, 16), (2, 16)), BLOCK).hashes == blocks.hashes
    assert prompt_blocks(ids_of((1, 15)), BLOCK).hashes == ()


def test_lookup_counts_the_leading_hits_then_caches_the_rest() -> None:
    cache = PrefixCache(capacity=8, block_tokens=BLOCK)
    first = prompt_blocks(ids_of((1, 16), (2, 16), (3, 16)), BLOCK)
    assert cache.lookup(first) == 0
    assert len(cache) == 3
    assert cache.lookup(first) == 48
    longer = prompt_blocks(ids_of((1, 16), (2, 16), (3, 16), (4, 20)), BLOCK)
    assert cache.lookup(longer) == 48
    forked = prompt_blocks(ids_of((1, 16), (7, 16), (3, 16)), BLOCK)
    assert cache.lookup(forked) == 16  # a miss ends the prefix, even if later blocks match


def test_eviction_takes_a_prompts_tail_before_its_head() -> None:
    cache = PrefixCache(capacity=3, block_tokens=BLOCK)
    long = prompt_blocks(ids_of((1, 16), (2, 16), (3, 16)), BLOCK)
    cache.lookup(long)
    cache.lookup(prompt_blocks(ids_of((8, 16)), BLOCK))  # one more block: one must go
    assert cache.evicted == 1
    assert cache.lookup(long) == 32  # lost its last block only


def test_least_recently_used_prompts_go_first() -> None:
    cache = PrefixCache(capacity=4, block_tokens=BLOCK)
    old, new = (prompt_blocks(ids_of((n, 32)), BLOCK) for n in (1, 2))
    cache.lookup(old)
    cache.lookup(new)
    cache.lookup(new)
    cache.lookup(prompt_blocks(ids_of((3, 32)), BLOCK))  # needs two blocks
    assert cache.lookup(new) == 32
    assert cache.lookup(old) == 0


def test_generated_blocks_are_cached_but_not_looked_up() -> None:
    cache = PrefixCache(capacity=8, block_tokens=BLOCK)
    answered = prompt_blocks(ids_of((1, 16)), BLOCK, ids_of((2, 32)))
    assert cache.lookup(answered) == 0
    assert len(cache) == 3
    assert cache.lookup(answered) == 16  # only the prompt's own block counts as a hit
    next_turn = prompt_blocks(ids_of((1, 16), (2, 32), (5, 16)), BLOCK)
    assert cache.lookup(next_turn) == 48


def test_a_prompt_longer_than_the_cache_keeps_its_head() -> None:
    cache = PrefixCache(capacity=2, block_tokens=BLOCK)
    five = prompt_blocks(ids_of((1, 16), (2, 16), (3, 16), (4, 16), (5, 16)), BLOCK)
    cache.lookup(five)
    assert len(cache) == 2
    assert cache.lookup(five) == 32


def test_no_capacity_caches_nothing() -> None:
    cache = PrefixCache(capacity=0, block_tokens=BLOCK)
    blocks = prompt_blocks(ids_of((1, 64)), BLOCK)
    assert cache.lookup(blocks) == cache.lookup(blocks) == 0
    assert len(cache) == 0


def test_a_text_answer_is_cached_as_generated_and_a_tool_call_is_not() -> None:
    config = SimConfig(completion_tokens=4)
    prompt = Prompt(model="m", turns=(("user", "the river"),))
    tokens = conversation_tokens(prompt, answer_for(prompt, config))
    assert tokens.prompt.endswith(token_bytes(VOCAB.encode("<|im_start|>assistant\n")))
    generated = VOCAB.decode(array("H", tokens.generated), skip_control=False)
    assert generated == answer_for(prompt, config).text + "<|im_end|>"
    tools = Prompt(model="m", turns=prompt.turns, tools=(Tool("search", None),))
    assert conversation_tokens(tools, answer_for(tools, config)).generated == b""


def test_a_longer_conversation_starts_with_the_shorter_ones_ids() -> None:
    tools = (Tool("search", {"type": "object"}),)
    short = Prompt(model="m", turns=(("system", "be brief"), ("user", "the river")), tools=tools)
    more = (*short.turns, ("assistant", "stone cloud"), ("call", 'search\n{"q":"x"}'))
    longer = Prompt(model="m", turns=more, tools=tools)
    head = conversation_ids(short)
    assert conversation_ids(longer)[: len(head)] == head
    text = VOCAB.decode(array("H", head), skip_control=False)
    assert text.startswith('<|im_start|>system\n<tools>[{"name":"search"')
    assert text.endswith("<|im_start|>user\nthe river<|im_end|>\n")


# -- the simulator --------------------------------------------------------------------------


@pytest.fixture
async def cached() -> AsyncIterator[Simulator]:
    config = SimConfig(
        seed=3, ttft_ms=5, prefill_ms_per_token=0.01, prefix_cache_blocks=64,
        prefix_block_tokens=BLOCK,
    )  # fmt: skip
    async with Simulator(config) as sim:
        yield sim


async def post(
    http: aiohttp.ClientSession, url: str, body: dict[str, Any], **headers: str
) -> tuple[dict[str, Any], dict[str, str]]:
    async with http.post(url, json=body, headers=headers) as resp:
        assert resp.status == 200, await resp.text()
        return orjson.loads(await resp.read()), dict(resp.headers)


def cached_tokens(headers: dict[str, str]) -> tuple[int, int]:
    return int(headers["x-sim-cached-tokens"]), int(headers["x-sim-prompt-tokens"])


async def test_each_turn_hits_the_history_and_answer_of_the_last(
    cached: Simulator, session: aiohttp.ClientSession
) -> None:
    url = cached.base_url + "/chat/completions"
    messages: list[dict[str, Any]] = [SYSTEM, {"role": "user", "content": "Find the river."}]
    answer, headers = await post(session, url, {"model": "m", "messages": messages})
    hit, first = cached_tokens(headers)
    assert hit == 0
    assert float(headers["x-sim-ttft-ms"]) == pytest.approx(5 + first * 0.01)
    reply = answer["choices"][0]["message"]
    messages += [reply, {"role": "user", "content": "And then?"}]
    _, headers = await post(session, url, {"model": "m", "messages": messages})
    hit, second = cached_tokens(headers)
    # the first prompt (which ended with the generation prompt) and the answer it
    # generated, TEXT<|im_end|>, are the start of the second prompt: their full blocks hit
    generated = len(VOCAB.encode(reply["content"] + "<|im_end|>"))
    assert hit == (first + generated) // BLOCK * BLOCK
    assert hit > first // BLOCK * BLOCK  # more than the prompt alone
    assert second > first
    assert float(headers["x-sim-ttft-ms"]) == pytest.approx(5 + (second - hit) * 0.01)
    stats = cached.stats
    assert (stats.prefix_hit_tokens, stats.prefix_miss_tokens) == (hit, first + second - hit)
    assert stats.prefix_hit_rate == pytest.approx(hit / (first + second))


async def test_a_repeated_body_hits_again(
    cached: Simulator, session: aiohttp.ClientSession
) -> None:
    # the answer of a repeated body is cached; the prefix lookup must still run each time
    url = cached.base_url + "/chat/completions"
    body = {"model": "m", "messages": [SYSTEM, {"role": "user", "content": "Again."}]}
    _, headers = await post(session, url, body)
    _, again = await post(session, url, body)
    hit, tokens = cached_tokens(again)
    assert hit == tokens // BLOCK * BLOCK > 0
    assert cached_tokens(headers)[0] == 0


async def test_routes_share_the_cache_for_one_conversation(
    cached: Simulator, session: aiohttp.ClientSession
) -> None:
    user = {"role": "user", "content": "Describe the quiet valley in detail."}
    chat = {"model": "m", "messages": [SYSTEM, user], "stream": True}
    async with session.post(cached.base_url + "/chat/completions", json=chat) as resp:
        await resp.read()
        assert cached_tokens(dict(resp.headers))[0] == 0
    messages = {"model": "m", "max_tokens": 8, "system": SYSTEM["content"], "messages": [user]}
    _, headers = await post(session, cached.url + "/v1/messages", messages)
    hit, tokens = cached_tokens(headers)
    assert hit == tokens // BLOCK * BLOCK > 0


async def test_token_prompts_are_cached_as_sent(
    cached: Simulator, session: aiohttp.ClientSession
) -> None:
    ids = prompt_ids("<|im_start|>user\n" + "the river and the stone " * 10)
    url = cached.base_url + "/completions"
    _, headers = await post(session, url, {"model": "m", "prompt": ids})
    assert cached_tokens(headers) == (0, len(ids))
    _, headers = await post(session, url, {"model": "m", "prompt": [*ids, *prompt_ids(" more")]})
    assert cached_tokens(headers)[0] == len(ids) // BLOCK * BLOCK
    _, headers = await post(session, cached.url + "/completion", {"prompt": ids})
    assert cached_tokens(headers) == (len(ids) // BLOCK * BLOCK, len(ids))


async def test_sampled_ids_are_cached_for_the_next_turn(
    cached: Simulator, session: aiohttp.ClientSession
) -> None:
    # a token client sends the ids it was given back in the next prompt: they hit
    ids = prompt_ids("<|im_start|>user\n" + "a quiet green valley " * 9)
    url = cached.base_url + "/completions"
    answer, _ = await post(session, url, {"model": "m", "prompt": ids, "return_token_ids": True})
    sampled = answer["choices"][0]["token_ids"]
    turn = [*ids, *sampled, *prompt_ids("\n<|im_start|>user\nmore<|im_end|>\n")]
    _, headers = await post(session, url, {"model": "m", "prompt": turn})
    assert cached_tokens(headers) == ((len(ids) + len(sampled)) // BLOCK * BLOCK, len(turn))


async def test_counting_tokens_fills_no_cache(
    cached: Simulator, session: aiohttp.ClientSession
) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "count me " * 20}]}
    _, headers = await post(session, cached.url + "/v1/messages/count_tokens", body)
    assert "x-sim-cached-tokens" not in headers
    assert (cached.stats.prefix_hit_tokens, cached.stats.prefix_miss_tokens) == (0, 0)


async def test_a_prefill_cost_without_a_cache_counts_every_token_missed(
    session: aiohttp.ClientSession,
) -> None:
    async with Simulator(SimConfig(prefill_ms_per_token=0.001)) as sim:
        body = {"model": "m", "messages": [SYSTEM]}
        for _ in range(2):
            _, headers = await post(session, sim.base_url + "/chat/completions", body)
            hit, tokens = cached_tokens(headers)
            assert hit == 0
            assert float(headers["x-sim-ttft-ms"]) == pytest.approx(tokens * 0.001)
        assert sim.stats.prefix_miss_tokens == 2 * tokens
        assert sim.snapshot()["prefix_cache"]["capacity_blocks"] == 0


async def test_the_default_simulator_counts_no_prompts(
    sim: Simulator, session: aiohttp.ClientSession
) -> None:
    body = {"model": "m", "messages": [SYSTEM]}
    _, headers = await post(session, sim.base_url + "/chat/completions", body)
    assert "x-sim-cached-tokens" not in headers and "x-sim-ttft-ms" not in headers
    assert sim.stats.prefix_hit_rate is None


async def test_a_small_cache_evicts_and_stats_say_so(session: aiohttp.ClientSession) -> None:
    config = SimConfig(prefix_cache_blocks=8, prefix_block_tokens=BLOCK)
    async with Simulator(config) as sim:
        url = sim.base_url + "/chat/completions"
        bodies = [
            {"model": "m", "messages": [{"role": "user", "content": f"{word} " * 200}]}
            for word in ("river", "stone")
        ]  # each more than the whole cache
        for body in (*bodies, *bodies):
            _, headers = await post(session, url, body)
            assert cached_tokens(headers)[0] == 0  # the other one pushed it out
        async with session.get(sim.url + "/stats") as resp:
            stats = await resp.json()
    cache = stats["prefix_cache"]
    assert (cache["capacity_blocks"], cache["cached_blocks"], cache["block_tokens"]) == (8, 8, 16)
    assert cache["evicted_blocks"] > 0
    assert stats["prefix_hit_tokens"] == 0 and stats["prefix_miss_tokens"] > 0
    assert stats["prefix_hit_rate"] == 0.0


async def test_stats_count_requests_per_rollout_session_and_routing_key(
    sim: Simulator, session: aiohttp.ClientSession
) -> None:
    url = sim.base_url + "/chat/completions"
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    for rollout in ("r1", "r1", "r2"):
        headers = {
            "X-Rolltap-Rollout": rollout, "X-Session-ID": rollout,
            "X-SMG-Routing-Key": rollout, "Authorization": "Bearer sk-secret",
        }  # fmt: skip
        await post(session, url, body, **headers)
    await post(session, url, body)  # none of them
    async with session.get(sim.url + "/stats") as resp:
        assert resp.status == 200
        text = await resp.text()
    stats = orjson.loads(text)
    for field in ("requests_by_rollout", "requests_by_session", "requests_by_routing_key"):
        assert stats[field] == {"r1": 2, "r2": 1}
    assert stats["requests"] == 4
    assert "sk-secret" not in text
    assert sim.stats.requests_by_rollout == {"r1": 2, "r2": 1}


# -- configuration --------------------------------------------------------------------------


def _app() -> typer.Typer:
    app = typer.Typer()
    sim_cmd.register(app)

    @app.command("noop")
    def noop() -> None:
        """Keeps typer from collapsing the app into the single `sim` command."""

    return app


@pytest.mark.parametrize(
    "fields",
    [{"prefix_cache_blocks": -1}, {"prefix_block_tokens": 0}, {"prefill_ms_per_token": -0.1}],
)
def test_bad_cache_settings_are_rejected(fields: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=next(iter(fields))):
        SimConfig.model_validate(fields)


def test_cli_flags_reach_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[SimConfig] = []

    async def fake_run(config: SimConfig, host: str, port: int, **kwargs: object) -> None:
        seen.append(config)

    monkeypatch.setattr(sim_cmd, "run_sim", fake_run)
    args = [
        "sim", "--prefix-cache-blocks", "512", "--prefix-block-tokens", "32",
        "--prefill-ms-per-token", "0.05", "--ttft-ms", "20",
    ]  # fmt: skip
    result = CliRunner().invoke(_app(), args)
    assert result.exit_code == 0, result.output
    config = seen[0]
    assert (config.prefix_cache_blocks, config.prefix_block_tokens) == (512, 32)
    assert (config.prefill_ms_per_token, config.ttft_ms) == (0.05, 20)


def test_cli_help_documents_the_cache() -> None:
    result = CliRunner().invoke(_app(), ["sim", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for text in ("--prefix-cache-blocks", "--prefix-block-tokens", "--prefill-ms-per-token"):
        assert text in result.output
    bad = CliRunner().invoke(_app(), ["sim", "--prefix-block-tokens", "0"])
    assert bad.exit_code != 0

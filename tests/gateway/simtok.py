"""A Hugging Face tokenizer over the simulator's vocabulary, with a Qwen-style template.

The simulator's completions routes speak token ids of its toy vocabulary
(:data:`rolltap.sim.vocab.VOCAB`); this builds a real ``tokenizers`` BPE with exactly
those ids (no merges, so text splits into its one-character tokens, the byte tokens
for everything else), saves it with a ChatML template that lists tools between
``<tools>`` and ``</tools>`` (the simulator's cue for a tool call) and loads through the
normal path.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from helpers import ADMIN_HEADERS
from rolltap.gateway import Gateway
from rolltap.sim.vocab import SPECIAL_TOKENS, VOCAB

try:
    from tokenizers import AddedToken, Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast
except ImportError as exc:
    if os.environ.get("CI") == "true":
        raise  # CI installs the extra: its absence is a failure, not a skip
    pytest.skip(f"the 'tokens' extra is not installed: {exc}", allow_module_level=True)

TEMPLATE = """\
{%- if tools -%}
<|im_start|>system
<tools>
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}</tools><|im_end|>
{% endif -%}
{%- for message in messages -%}
{%- if message.role == 'assistant' -%}
<|im_start|>assistant
{% if message.content %}{{ message.content }}{% endif %}
{%- for call in message.tool_calls or [] %}<tool_call>
{{ {"name": call.function.name, "arguments": call.function.arguments} | tojson }}
</tool_call>{% endfor %}<|im_end|>
{% elif message.role == 'tool' -%}
<|im_start|>user
<tool_response>
{{ message.content }}
</tool_response><|im_end|>
{% else -%}
<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
<|im_start|>assistant
{% endif -%}
"""


#: :data:`TEMPLATE` rendering reasoning as Qwen3's does: only for assistant messages after
#: the last user message, so a new user turn drops the reasoning of those before it
QWEN3_TEMPLATE = TEMPLATE.replace(
    "{%- for message in messages -%}",
    "{%- set ns = namespace(last_user=-1) -%}"
    "{%- for m in messages %}{% if m.role == 'user' %}{% set ns.last_user = loop.index0 %}"
    "{% endif %}{% endfor -%}\n{%- for message in messages -%}",
    1,
).replace(
    "<|im_start|>assistant\n{% if message.content %}",
    "<|im_start|>assistant\n"
    "{% if message.reasoning_content and loop.index0 > ns.last_user %}"
    "<think>\n{{ message.reasoning_content }}\n</think>\n\n{% endif %}"
    "{% if message.content %}",
    1,
)


def build_sim_tokenizer(path: Path, template: str = TEMPLATE) -> Path:
    vocab = {VOCAB.token(i): i for i in range(len(VOCAB))}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[], byte_fallback=True))
    backend.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Fuse()])
    backend.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS]
    )
    fast = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    fast.chat_template = template
    fast.save_pretrained(str(path))
    return path


#: one ``add`` tool, as the token-client tests offer it
ADD_TOOLS: list[Any] = [{
    "type": "function",
    "function": {"name": "add", "description": "add", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}},
}]  # fmt: skip


async def drift_counts(http: aiohttp.ClientSession, gateway: Gateway) -> tuple[int, str]:
    """The gateway's drifted-turn count from ``/stats`` and its ``/metrics`` line."""
    async with http.get(gateway.admin_url + "/stats", headers=ADMIN_HEADERS) as resp:
        stats = await resp.json()
    async with http.get(gateway.admin_url + "/metrics", headers=ADMIN_HEADERS) as resp:
        metrics = await resp.text()
    (line,) = [m for m in metrics.splitlines() if m.startswith("rolltap_token_drift_total")]
    return stats["totals"]["token_drift"], line


def drift_window(ids: list[int], at: int) -> list[int]:
    """The ids a drift record keeps around position ``at`` (four either side)."""
    return ids[max(0, at - 4) : at + 4]

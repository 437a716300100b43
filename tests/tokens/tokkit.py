"""A small real tokenizer directory for the token tests: byte-level BPE + a ChatML template.

The BPE is trained in-process on a tiny corpus with the ``tokenizers`` library, wrapped
as a ``transformers.PreTrainedTokenizerFast`` and saved with :data:`TEMPLATE`, so the
tests load it through the same path as a downloaded model. Byte-level BPE decodes
losslessly, as real chat models' vocabularies do.

The template is ChatML with tools (Qwen 2.5 style) plus two quirks real templates have:
``raise_exception`` on an unknown role, and reasoning rendered for the *last* assistant
message only (as Qwen3 drops old reasoning), which makes it non-incremental.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

try:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
except ImportError as exc:
    if os.environ.get("CI") == "true":
        raise  # CI installs the extra: its absence is a failure, not a skip
    pytest.skip(f"the 'tokens' extra is not installed: {exc}", allow_module_level=True)

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

TEMPLATE = """\
{%- if tools -%}
<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content }}
{% endif %}# Tools
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}<|im_end|>
{% elif messages[0].role == 'system' -%}
<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif -%}
{%- for message in messages -%}
{%- if message.role not in ['system', 'user', 'assistant', 'tool'] -%}
{{ raise_exception('unknown role ' + message.role) }}
{%- elif message.role == 'system' and loop.first -%}
{%- elif message.role == 'assistant' -%}
<|im_start|>assistant
{% if message.reasoning_content and loop.last %}<think>{{ message.reasoning_content }}</think>
{% endif %}{% if message.content %}{{ message.content }}{% endif %}
{%- for call in message.tool_calls or [] %}<tool_call>
{{ {"name": call.function.name, "arguments": call.function.arguments} | tojson }}
</tool_call>{% endfor %}<|im_end|>
{% else -%}
<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
<|im_start|>assistant
{% if enable_thinking is defined and not enable_thinking %}<think>

</think>

{% endif -%}
{%- endif -%}
"""

CORPUS = [
    "You are a calculator agent. Use the add tool to add numbers.",
    'The tool call is {"name": "add", "arguments": {"a": 1, "b": 2}} and the result is 3.',
    "Monday, Tuesday, Wednesday, Thursday, Friday. 1, 2, 3, 4, 5, 6, 7, 8, 9, 10.",
    "<tool_call> </tool_call> <think> </think> system user assistant tool",
    "The total is 55. Hello world! What is the sum of these numbers?",
] * 4


def build_tokenizer_dir(path: Path, *, template: str | None = TEMPLATE) -> Path:
    """Train the BPE, save it with ``template`` (None: no chat template) at ``path``."""
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=500,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(CORPUS, trainer)
    fast = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=backend,
        bos_token="<|endoftext|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    if template is not None:
        fast.chat_template = template
    fast.save_pretrained(str(path))
    return path


def write_generation_config(path: Path, eos: object) -> None:
    (path / "generation_config.json").write_text(json.dumps({"eos_token_id": eos}))

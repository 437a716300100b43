"""What a vLLM server adds to a chat answer: its token ids, and a reasoning model's thought.

**Token ids.** vLLM's ``return_token_ids`` on ``POST /v1/chat/completions``.

vLLM (0.10.2 and later) answers a chat request that sets ``return_token_ids: true`` with
the prompt's ids (``prompt_token_ids``, at the top of the body, or of a stream's first
chunk) and each choice's sampled ids (``choices[].token_ids``; in a stream, each chunk's
own). The simulator's are in its vocabulary (:data:`~rolltap.sim.vocab.VOCAB`): the
prompt as its prefix cache renders the conversation (ChatML turns, then
``<|im_start|>assistant\\n``), the answer's words one id each (a word cut by a stop
sequence, its bytes), a tool call as Hermes writes one (``<tool_call>\\n{"name": …,
"arguments": …}\\n</tool_call>``), then ``<|im_end|>`` when the answer ended by itself
(as vLLM, the end-of-sequence id is among the sampled ids; it carries no logprob here).

**Reasoning.** With :attr:`SimConfig.reasoning_tokens`, the answer opens with that many
words of thought, handed out as vLLM's reasoning parser does: ``message.reasoning_content``
(in a stream, ``delta.reasoning_content`` chunks before the answer's), their ids
``<think>\n…\n</think>\n\n`` first among the sampled ids. As Qwen3's template, the
prompt's history drops earlier turns' thought (only the answer's text is rendered), so a
reasoning model's next prompt does not extend what it sampled.

**Re-tokenization.** With :attr:`SimConfig.retokenize_history`, each earlier assistant
turn of the prompt is spelled in byte tokens: the same text, other ids than were sampled.
"""

from __future__ import annotations

import random
from array import array
from dataclasses import dataclass

import orjson

from rolltap.sim.config import SimConfig
from rolltap.sim.content import Answer, Prompt
from rolltap.sim.prefix import conversation_tokens
from rolltap.sim.vocab import VOCAB
from rolltap.sim.words import WORDS

__all__ = ["ChatIds", "chat_ids", "reasoning_of"]


@dataclass(frozen=True, slots=True)
class ChatIds:
    """The ids of one chat answer, as a stream hands them out."""

    prompt: list[int]
    #: the thought's ids (sent with its first chunk), empty without one
    thinking: list[int]
    #: one list per text token (a tool call: all in the first)
    pieces: list[list[int]]
    #: the end-of-sequence id when the answer ended by itself, sent with the finish
    end: list[int]

    @property
    def completion(self) -> list[int]:
        """Every sampled id, in order (a whole body's ``token_ids``)."""
        return self.thinking + [i for piece in self.pieces for i in piece] + self.end


def reasoning_of(answer: Answer, config: SimConfig) -> tuple[str, ...]:
    """The thought before ``answer``: :attr:`SimConfig.reasoning_tokens` words, drawn from
    the answer itself (the same answer, the same thought); none by default."""
    if not config.reasoning_tokens:
        return ()
    rng = random.Random(f"{config.seed}:reasoning:{answer.text}:{answer.tool_name}")
    words = [rng.choice(WORDS) for _ in range(config.reasoning_tokens)]
    return tuple(w if i == 0 else " " + w for i, w in enumerate(words))


def chat_ids(
    prompt: Prompt, answer: Answer, thought: tuple[str, ...] = (), *, retokenize: bool = False
) -> ChatIds:
    """The prompt's and the answer's ids (``thought``: its reasoning's words; ``retokenize``:
    earlier assistant turns spelled in byte tokens, :attr:`SimConfig.retokenize_history`)."""
    rendered = conversation_tokens(prompt, answer, spell_assistant=retokenize).prompt
    prompt_ids = array("H", rendered).tolist()
    thinking = VOCAB.encode("<think>\n" + "".join(thought) + "\n</think>\n\n") if thought else []
    if answer.tool_name is not None:
        call = {"name": answer.tool_name, "arguments": orjson.loads(answer.tool_args or "{}")}
        text = "<tool_call>\n" + orjson.dumps(call).decode() + "\n</tool_call>"
        return ChatIds(prompt_ids, thinking, [VOCAB.encode(text)], [VOCAB.eos])
    pieces = [VOCAB.encode(token) for token in answer.tokens]
    return ChatIds(prompt_ids, thinking, pieces, [VOCAB.eos] if answer.stop == "end" else [])

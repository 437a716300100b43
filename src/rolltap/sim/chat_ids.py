"""vLLM's ``return_token_ids`` on ``POST /v1/chat/completions``: the ids behind a chat answer.

vLLM (0.10.2 and later) answers a chat request that sets ``return_token_ids: true`` with
the prompt's ids (``prompt_token_ids``, at the top of the body, or of a stream's first
chunk) and each choice's sampled ids (``choices[].token_ids``; in a stream, each chunk's
own). The simulator's are in its vocabulary (:data:`~rolltap.sim.vocab.VOCAB`): the
prompt as its prefix cache renders the conversation (ChatML turns, then
``<|im_start|>assistant\\n``), the answer's words one id each (a word cut by a stop
sequence, its bytes), a tool call as Hermes writes one (``<tool_call>\\n{"name": …,
"arguments": …}\\n</tool_call>``), then ``<|im_end|>`` when the answer ended by itself
(as vLLM, the end-of-sequence id is among the sampled ids; it carries no logprob here).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

import orjson

from rolltap.sim.content import Answer, Prompt
from rolltap.sim.prefix import conversation_tokens
from rolltap.sim.vocab import VOCAB

__all__ = ["ChatIds", "chat_ids"]


@dataclass(frozen=True, slots=True)
class ChatIds:
    """The ids of one chat answer, as a stream hands them out."""

    prompt: list[int]
    #: one list per text token (a tool call: all in the first)
    pieces: list[list[int]]
    #: the end-of-sequence id when the answer ended by itself, sent with the finish
    end: list[int]

    @property
    def completion(self) -> list[int]:
        """Every sampled id, in order (a whole body's ``token_ids``)."""
        return [i for piece in self.pieces for i in piece] + self.end


def chat_ids(prompt: Prompt, answer: Answer) -> ChatIds:
    """The prompt's and the answer's ids."""
    prompt_ids = array("H", conversation_tokens(prompt, answer).prompt).tolist()
    if answer.tool_name is not None:
        call = {"name": answer.tool_name, "arguments": orjson.loads(answer.tool_args or "{}")}
        text = "<tool_call>\n" + orjson.dumps(call).decode() + "\n</tool_call>"
        return ChatIds(prompt_ids, [VOCAB.encode(text)], [VOCAB.eos])
    pieces = [VOCAB.encode(token) for token in answer.tokens]
    return ChatIds(prompt_ids, pieces, [VOCAB.eos] if answer.stop == "end" else [])

"""Token-level rendering for the token client: chat templates → prompt token ids.

Needs the ``tokens`` extra (transformers, tokenizers) at *use*, not at import: nothing
here imports transformers until a tokenizer is loaded. :class:`Renderer` renders one
model's chat template and keeps multi-turn prompts prefix-consistent;
:class:`RendererRegistry` shares elastic pools of them per build inputs;
:func:`request_to_template` turns a canonical request into template input;
:func:`load_gguf_tokenizer` makes a tokenizer directory from a GGUF file.

>>> from rolltap.tokens import RendererConfig
>>> RendererConfig("/models/qwen3").multiplex
256
"""

from rolltap.tokens.config import RendererConfig
from rolltap.tokens.convert import request_to_template, to_template_messages, to_template_tools
from rolltap.tokens.gguf import load_gguf_tokenizer
from rolltap.tokens.handle import RendererHandle
from rolltap.tokens.pool import RendererPool, RendererPoolSnapshot, RendererRegistry
from rolltap.tokens.renderer import FullRenderReason, RenderedPrompt, Renderer

__all__ = [
    "FullRenderReason",
    "RenderedPrompt",
    "Renderer",
    "RendererConfig",
    "RendererHandle",
    "RendererPool",
    "RendererPoolSnapshot",
    "RendererRegistry",
    "load_gguf_tokenizer",
    "request_to_template",
    "to_template_messages",
    "to_template_tools",
]

"""The weight version an engine reports in its answers.

SGLang puts it in ``/generate``'s ``meta_info.weight_version`` and in its OpenAI-shaped
answers' ``metadata.weight_version``; the simulator does the same. The token client reads
it per completion part (:attr:`~rolltap.clients.completions.Completion.weight_version`),
the gateway per answer (:mod:`rolltap.gateway.policy`): one reader for both.

>>> reported_version({"meta_info": {"weight_version": 7}})
'7'
>>> reported_version({"choices": []}) is None
True
"""

from __future__ import annotations

from typing import Any

__all__ = ["reported_version"]


def reported_version(body: Any) -> str | None:
    """The weight version an engine put in its answer ``body``: SGLang's
    ``meta_info.weight_version`` (``/generate``), or ``metadata.weight_version`` (an
    OpenAI-shaped answer of SGLang's or the simulator's); None when it put none."""
    if not isinstance(body, dict):
        return None
    for key in ("metadata", "meta_info"):
        holder = body.get(key)
        if isinstance(holder, dict):
            version = holder.get("weight_version")
            if isinstance(version, str | int) and not isinstance(version, bool):
                return str(version)
    return None

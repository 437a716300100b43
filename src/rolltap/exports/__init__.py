"""What a store holds, read out: JSONL, ``hf`` datasets, token sequences, transcripts, and
each model call as it was sent (:func:`sent_requests`).

Every export reads the store through its facade (:mod:`rolltap.store`), never its
modules. ``rolltap sessions export/import`` is :func:`export_jsonl` and
:func:`import_jsonl`; ``rolltap export hf`` is :func:`export_hf`; ``rolltap export
tokens`` is :func:`export_tokens`; ``rolltap sessions show`` renders
:func:`build_transcript` with :func:`render_lines`, the viewer renders the same
entries as HTML, and the ``hf`` rows are made from them.

>>> async def backup(url: str) -> int:
...     async with await Store.open(url) as store:
...         return await export_jsonl(store, "all.jsonl")

(``Store`` from :mod:`rolltap.store`.)
"""

from rolltap.exports.hf import HfExport, export_hf, require_hf
from rolltap.exports.importing import import_jsonl
from rolltap.exports.jsonl import export_jsonl, read_jsonl, write_sessions
from rolltap.exports.sent import SentRequest, sent_requests
from rolltap.exports.token_drift import ON_DRIFT, OnDrift
from rolltap.exports.token_records import TokenRecordError, TokenTurn
from rolltap.exports.tokens import TokenExport, assemble, export_tokens, token_turn
from rolltap.exports.transcript import build_transcript
from rolltap.exports.transcript_model import Transcript
from rolltap.exports.transcript_text import render_lines

__all__ = [
    "ON_DRIFT",
    "HfExport",
    "OnDrift",
    "SentRequest",
    "TokenExport",
    "TokenRecordError",
    "TokenTurn",
    "Transcript",
    "assemble",
    "build_transcript",
    "export_hf",
    "export_jsonl",
    "export_tokens",
    "import_jsonl",
    "read_jsonl",
    "render_lines",
    "require_hf",
    "sent_requests",
    "token_turn",
    "write_sessions",
]

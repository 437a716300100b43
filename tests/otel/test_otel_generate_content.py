"""Span content for a ``/generate`` answer: the engine sends no text, the parsed message has it."""

from __future__ import annotations

import orjson

from rolltap.otel.content import output_attributes


def test_a_generate_answer_takes_its_text_from_the_parsed_message() -> None:
    body = {"output_ids": [5, 7], "meta_info": {
        "prompt_tokens": 3, "completion_tokens": 2,
        "finish_reason": {"type": "stop", "matched": 7}}}  # fmt: skip
    payload = {"body": body, "dialect": "completions.sglang",
               "message": {"role": "assistant", "content": "decoded locally"}}  # fmt: skip
    attrs = output_attributes(payload, "sglang")
    (message,) = orjson.loads(attrs["gen_ai.output.messages"])
    assert message["parts"] == [{"type": "text", "content": "decoded locally"}]
    assert message["finish_reason"] == "stop"

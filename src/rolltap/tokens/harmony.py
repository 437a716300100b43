"""gpt-oss's Harmony format, as a completion writes it: messages on channels.

A message is ``<|start|>{role}[ to={recipient}]<|channel|>{channel}[ to={recipient}]
[ <|constrain|>{type}]<|message|>{body}`` ended by ``<|end|>``, ``<|call|>`` (a tool
call) or ``<|return|>`` (the turn's end). The generation prompt already wrote the first
message's ``<|start|>assistant``, so a completion opens with ``<|channel|>``; the token
client strips the end-of-turn token it stopped on, so the last message may lack its
terminator. Channels: ``analysis`` (reasoning), ``commentary`` (tool calls, addressed
``to=functions.NAME``, or preambles the user sees), ``final`` (the answer).

:func:`split_harmony` is the ``harmony`` reasoning parser; :func:`scan_harmony` reads the
rest for the ``openai`` tool parser. Text with no Harmony markers at all is plain text.

>>> split_harmony("<|channel|>analysis<|message|>hm<|end|><|start|>assistant"
...               "<|channel|>final<|message|>hi")
('hm', '<|start|>assistant<|channel|>final<|message|>hi', [])
"""

from __future__ import annotations

from dataclasses import dataclass

from rolltap.tokens._calljson import Scan, arguments_text, checked_name, decode_json_at

__all__ = ["HarmonyMessage", "read_messages", "scan_harmony", "split_harmony"]

_START, _CHANNEL, _MESSAGE, _CONSTRAIN = "<|start|>", "<|channel|>", "<|message|>", "<|constrain|>"
_ENDS = ("<|end|>", "<|call|>", "<|return|>")
_MARKERS = (_START, _CHANNEL, _MESSAGE, _CONSTRAIN, *_ENDS)
_FUNCTIONS = "functions."


@dataclass(frozen=True, slots=True)
class HarmonyMessage:
    """One message: its header fields, its body, and its text as written."""

    channel: str
    recipient: str | None
    body: str
    raw: str


def _header(header: str) -> tuple[str, str | None, str]:
    """(channel, recipient, problem) of a header (the text before ``<|message|>``)."""
    role, found, channel_part = header.partition(_CHANNEL)
    if not found:
        return "", None, "a Harmony message without a channel"
    words = [*role.split(), *channel_part.replace(_CONSTRAIN, " ").split()]
    if not channel_part.split():
        return "", None, "a Harmony message with an empty channel"
    recipients = [w.removeprefix("to=") for w in words if w.startswith("to=")]
    if len(recipients) > 1 or recipients == [""]:
        return "", None, "a Harmony message with more than one recipient"
    return channel_part.split()[0], (recipients[0] if recipients else None), ""


def _body_end(text: str, start: int) -> tuple[int, int]:
    """(where the body ends, where the next message starts)."""
    ends = [(at, len(end)) for end in _ENDS if (at := text.find(end, start)) >= 0]
    if not ends:
        return len(text), len(text)
    at, size = min(ends)
    return at, at + size


def read_messages(text: str) -> tuple[list[HarmonyMessage], str]:
    """The completion's messages, or ([], the problem) for text that is not Harmony."""
    messages: list[HarmonyMessage] = []
    at = 0
    while at < len(text):
        start = at
        if text.startswith(_START, at):
            at += len(_START)
        elif messages:
            return [], f"text outside a Harmony message at character {at}"
        opened = text.find(_MESSAGE, at)
        if opened < 0:
            return [], f"an unterminated Harmony header at character {start}"
        channel, recipient, problem = _header(text[at:opened])
        if problem:
            return [], f"{problem} at character {start}"
        body_at = opened + len(_MESSAGE)
        end, after = _body_end(text, body_at)
        body = text[body_at:end]
        if any(marker in body for marker in (_START, _CHANNEL, _MESSAGE)):
            return [], f"an unterminated Harmony message at character {start}"
        messages.append(HarmonyMessage(channel, recipient, body, text[start:after]))
        at = after
    return messages, ""


def _is_harmony(text: str) -> bool:
    return any(marker in text for marker in _MARKERS)


def split_harmony(text: str) -> tuple[str | None, str, list[str]]:
    """(the ``analysis`` messages' text, the other messages as written, problems)."""
    if not _is_harmony(text):
        return None, text, []
    messages, problem = read_messages(text)
    if problem:
        return None, text, [problem]
    analysis = [m.body for m in messages if m.channel == "analysis"]
    rest = "".join(m.raw for m in messages if m.channel != "analysis")
    return ("\n\n".join(analysis) if analysis else None), rest, []


def _call(message: HarmonyMessage, number: int) -> tuple[tuple[str, str] | None, str]:
    what = f"tool call {number}"
    recipient = message.recipient or ""
    name, problem = checked_name(recipient.removeprefix(_FUNCTIONS), what)
    if problem:
        return None, problem
    body = message.body.strip() or "{}"
    value, end, problem = decode_json_at(body, 0, what)
    if problem:
        return None, problem
    if end != len(body):
        return None, f"{what}: text after the arguments"
    arguments, problem = arguments_text(value, what)
    return ((name, arguments) if not problem else None), problem


def scan_harmony(text: str) -> Scan:
    """Texts (``final`` and preamble messages) and calls (messages with a recipient)."""
    if not _is_harmony(text):
        return [text], [], []
    messages, problem = read_messages(text)
    if problem:
        return [], [], [problem]
    texts: list[str] = []
    calls: list[tuple[str, str]] = []
    for message in messages:
        if message.recipient is None:
            texts.append(message.body)
            continue
        call, problem = _call(message, len(calls))
        if call is None:
            return texts, calls, [problem]
        calls.append(call)
    return texts, calls, []

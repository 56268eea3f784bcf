"""Hostile and odd requests (issue 8), and how to send them through the LiteLLM proxy or an
OpenAI SDK client, recording only the outcome (HTTP status, or the exception type).

Used by ``tests/test_hostile_input.py`` (which prints the matrix table) and the privacy test.
Bodies are built for a given model group; a body is a JSON-able object, or ``bytes``
sent as is (lone surrogates, invalid UTF-8, malformed JSON).
"""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass
from typing import Any, Callable

import httpx

#: Per-request limit in seconds; a request still open after it counts as a hang.
HANG_S = 90.0

PNG_1PX = ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")
WAV_HEADER = b"RIFF$\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00@\x1f\x00\x00\x80>\x00\x00\x02\x00\x10\x00data\x00\x00\x00\x00"
PDF_B64 = base64.b64encode(b"%PDF-1.1\n%\xe2\xe3\xcf\xd3\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF").decode()
ONE_MB_PROMPT = ("Summarise the following log. " + "lorem ipsum dolor sit amet " * 40_000)[:1_048_576]


@dataclass(frozen=True)
class Case:
    """One hostile request.

    Attributes:
        name: the row label.
        path: the API path below ``/v1`` (e.g. "/chat/completions").
        body: model group -> JSON-able body, or raw ``bytes``.
        multipart: send ``body`` as multipart form fields plus a WAV file (audio transcription).
    """

    name: str
    path: str
    body: Callable[[str], Any]
    multipart: bool = False


def _chat(messages, **extra):
    return lambda m: {"model": m, "messages": messages, **extra}


def _user(content):
    return _chat([{"role": "user", "content": content}])


def _raw_chat(raw_content_json: str):
    return lambda m: ('{"model": "%s", "messages": [{"role": "user", "content": %s}]}' % (m, raw_content_json)).encode("utf-8")


TOOL_CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}

CASES: list[Case] = [
    Case("content missing", "/chat/completions", _chat([{"role": "user"}])),
    Case("content None", "/chat/completions", _user(None)),
    Case("content empty string", "/chat/completions", _user("")),
    Case("content whitespace only", "/chat/completions", _user("  \n\t  ")),
    Case("parts: image only", "/chat/completions", _user([{"type": "image_url", "image_url": {"url": PNG_1PX}}])),
    Case("parts: audio only", "/chat/completions", _user([{"type": "input_audio", "input_audio": {
        "data": base64.b64encode(WAV_HEADER).decode(), "format": "wav"}}])),
    Case("parts: file only", "/chat/completions", _user([{"type": "file", "file": {
        "filename": "a.pdf", "file_data": "data:application/pdf;base64," + PDF_B64}}])),
    Case("parts: empty list", "/chat/completions", _user([])),
    Case("tool messages, tool last", "/chat/completions", _chat([
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 C, sunny"}])),
    Case("function message (legacy)", "/chat/completions", _chat([
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "function_call": {"name": "get_weather", "arguments": "{}"}},
        {"role": "function", "name": "get_weather", "content": "18 C"}])),
    Case("no user message: system only", "/chat/completions", _chat([{"role": "system", "content": "You are terse."}])),
    Case("no user message: assistant only", "/chat/completions", _chat([{"role": "assistant", "content": "Hello!"}])),
    Case("messages empty list", "/chat/completions", _chat([])),
    Case("1 MB prompt", "/chat/completions", _user(ONE_MB_PROMPT)),
    Case("lone surrogates (JSON escapes)", "/chat/completions", _raw_chat('"bad \\ud800 and \\udfff here"')),
    Case("invalid UTF-8 bytes", "/chat/completions",
         lambda m: b'{"model": "' + m.encode() + b'", "messages": [{"role": "user", "content": "bad \xff\xfe\xc3 bytes"}]}'),
    Case("Chinese", "/chat/completions", _user("请用三句话解释量子计算的基本原理。")),
    Case("Japanese", "/chat/completions", _user("量子コンピュータの仕組みを簡単に説明してください。")),
    Case("Russian", "/chat/completions", _user("Объясните, пожалуйста, принцип работы квантового компьютера.")),
    Case("Arabic", "/chat/completions", _user("اشرح لي كيف يعمل الحاسوب الكمومي باختصار.")),
    Case("mixed scripts + emoji", "/chat/completions", _user("Explain 量子 компьютер حاسوب 量子コンピュータ 🚀 in one line")),
    Case("n = 3", "/chat/completions", _chat([{"role": "user", "content": "Name a colour."}], n=3)),
    Case("max_tokens = 0", "/chat/completions", _chat([{"role": "user", "content": "Hi"}], max_tokens=0)),
    Case("max_tokens = -5", "/chat/completions", _chat([{"role": "user", "content": "Hi"}], max_tokens=-5)),
    Case("unknown model group", "/chat/completions",
         lambda m: {"model": "no-such-model-group", "messages": [{"role": "user", "content": "Hi"}]}),
    Case("stream + content None", "/chat/completions", _chat([{"role": "user", "content": None}], stream=True)),
    Case("stream + image only", "/chat/completions",
         _chat([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": PNG_1PX}}]}], stream=True)),
    Case("embeddings", "/embeddings", lambda m: {"model": m, "input": "embed this"}),
    Case("embeddings, list input", "/embeddings", lambda m: {"model": m, "input": ["a", "b"]}),
    Case("image generation", "/images/generations", lambda m: {"model": m, "prompt": "a red square", "n": 1}),
    Case("audio speech", "/audio/speech", lambda m: {"model": m, "input": "hello", "voice": "alloy"}),
    Case("audio transcription", "/audio/transcriptions", lambda m: {"model": m}, multipart=True),
    Case("completions: prompt list", "/completions", lambda m: {"model": m, "prompt": ["Say hi", "Say bye"]}),
    Case("completions: token ids", "/completions", lambda m: {"model": m, "prompt": [1, 2, 3, 4]}),
    Case("completions: prompt missing", "/completions", lambda m: {"model": m}),
    Case("responses: input string", "/responses", lambda m: {"model": m, "input": "Say hello"}),
    Case("responses: input items", "/responses", lambda m: {"model": m, "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "Say hello"}]}]}),
    Case("responses: input empty", "/responses", lambda m: {"model": m, "input": []}),
    Case("malformed JSON", "/chat/completions", lambda m: b'{"model": "' + m.encode() + b'", "messages": [{"role": '),
    Case("body is a JSON list", "/chat/completions", lambda m: b'[1, 2, 3]'),
]


def outcome_of_exception(exc: BaseException) -> str:
    """'HTTP <status>' for an SDK status error, else the exception type name."""
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return str(status)
    return type(exc).__name__


async def send_http(client: httpx.AsyncClient, base_v1: str, api_key: str, case: Case, model: str) -> str:
    """Send ``case`` with raw httpx to ``base_v1`` + path; the outcome is the HTTP status (a str),
    "HANG" after :data:`HANG_S`, or the exception type. Streams are read to the end."""
    body = case.body(model)
    headers = {"Authorization": f"Bearer {api_key}"}
    url = base_v1.rstrip("/") + case.path

    async def go() -> str:
        if case.multipart:
            req = client.build_request("POST", url, headers=headers, data=body,
                                       files={"file": ("a.wav", WAV_HEADER, "audio/wav")})
        elif isinstance(body, bytes):
            req = client.build_request("POST", url, headers={**headers, "content-type": "application/json"}, content=body)
        else:
            req = client.build_request("POST", url, headers=headers, json=body)
        resp = await client.send(req, stream=True)
        try:
            async for _ in resp.aiter_raw():
                pass
        finally:
            await resp.aclose()
        return str(resp.status_code)

    try:
        return await asyncio.wait_for(go(), HANG_S)
    except asyncio.TimeoutError:
        return "HANG"
    except Exception as exc:  # noqa: BLE001 - the outcome is what we compare
        return type(exc).__name__


async def send_sdk(client, case: Case, model: str) -> str:
    """Send ``case`` through an ``openai.AsyncOpenAI`` client (raw ``post``, so that odd bodies
    reach the transport unchanged). The outcome is "200", the status of an ``APIStatusError``,
    "HANG", or the exception type."""
    body = case.body(model)
    opts = {"max_retries": 0, "timeout": HANG_S}

    async def go() -> str:
        if case.multipart:
            await client.post(case.path, cast_to=httpx.Response, body=body, files=[("file", ("a.wav", WAV_HEADER, "audio/wav"))],
                              options={**opts, "headers": {"Content-Type": "multipart/form-data"}})
        elif isinstance(body, bytes):
            await client.post(case.path, cast_to=httpx.Response, content=body,
                              options={**opts, "headers": {"Content-Type": "application/json"}})
        else:
            await client.post(case.path, cast_to=httpx.Response, body=body, options=opts)
        return "200"

    try:
        return await asyncio.wait_for(go(), HANG_S + 5)
    except asyncio.TimeoutError:
        return "HANG"
    except Exception as exc:  # noqa: BLE001
        return outcome_of_exception(exc)


def markdown_table(header: list[str], rows: list[list[Any]]) -> str:
    """A GitHub-markdown table."""
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def parse_prometheus(text: str, name: str) -> dict[str, float]:
    """Samples of one metric family from a text exposition: {label-string: value}."""
    out = {}
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            key, _, val = line.rpartition(" ")
            out[key[len(name):]] = float(val)
    return out


__all__ = ["Case", "CASES", "HANG_S", "send_http", "send_sdk", "markdown_table", "parse_prometheus", "json"]

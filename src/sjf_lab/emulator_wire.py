"""The emulator's answers on the wire: OpenAI's chat / completions / responses (whole or SSE
streamed) and Ollama's chat / generate (whole or NDJSON streamed), and embedding answers.

Contract: :class:`_Format` builds the bytes of one answer of :class:`sjf_lab.emulator.Emulator`
from its endpoint, the request body and the request's record (timings for Ollama's
``*_duration`` fields and LM Studio's ``stats``, :mod:`sjf_lab.box.formats`); ``_words`` is
the answer text (one word per token). Pure: no I/O.
"""

from __future__ import annotations

import json
import time
from typing import Any, Mapping

from sjf_lab.box.formats import EMBED_APIS, embedding_answer, lmstudio_stats, ollama_durations

_WORDS = ("lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit", "sed", "do")


def _words(start: int, end: int) -> str:
    """Tokens [start, end) as text: one word (with its leading space) per token."""
    return "".join(" " + _WORDS[i % len(_WORDS)] for i in range(start, end))


def _sse(obj: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return (head + "data: " + json.dumps(obj, separators=(",", ":")) + "\n\n").encode()


class _Format:
    """OpenAI wire formats of the three generation endpoints."""

    def __init__(self, endpoint: str, body: Mapping, model: str, seq: int, prompt_tokens: int,
                 rec: Mapping | None = None, first_token_s: float = 0.0, lmstudio: bool = False):
        self.endpoint = endpoint
        self.body = body
        self.rec = rec  # the request's record: timings for Ollama's durations, LM Studio's stats
        self.first_token_s = first_token_s
        self.lmstudio = lmstudio
        self.model = str(body.get("model") or model)
        self.created = int(time.time())
        self.prompt_tokens = prompt_tokens
        so = body.get("stream_options")
        self.include_usage = isinstance(so, Mapping) and bool(so.get("include_usage"))
        prefix = {"chat": "chatcmpl", "completions": "cmpl", "responses": "resp", "ollama-chat": "ollama",
                  "ollama-generate": "ollama"}.get(endpoint, "emb")
        self.id = f"{prefix}-emu{seq}"

    def usage(self, n: int) -> dict:
        if self.endpoint == "responses":
            return {"input_tokens": self.prompt_tokens, "output_tokens": n, "total_tokens": self.prompt_tokens + n}
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": n, "total_tokens": self.prompt_tokens + n}

    def _chunk(self, choice: dict, usage: dict | None = None) -> dict:
        obj = "chat.completion.chunk" if self.endpoint == "chat" else "text_completion"
        d = {"id": self.id, "object": obj, "created": self.created, "model": self.model, "choices": [choice] if choice else []}
        if usage is not None:
            d["usage"] = usage
        return d

    def _response_obj(self, text: str, n: int, status: str) -> dict:
        return {"id": self.id, "object": "response", "created_at": self.created, "status": status, "model": self.model,
                "output": [{"type": "message", "id": f"msg-{self.id}", "status": status, "role": "assistant",
                            "content": [{"type": "output_text", "text": text, "annotations": []}]}],
                "usage": self.usage(n)}

    def _ollama(self, text: str, done: bool, n: int = 0, finish: str = "stop") -> bytes:
        d: dict = {"model": self.model, "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.created))}
        if self.endpoint == "ollama-chat":
            d["message"] = {"role": "assistant", "content": text}
        else:
            d["response"] = text
        d["done"] = done
        if done:
            d.update(done_reason=finish, prompt_eval_count=self.prompt_tokens, eval_count=n,
                     **ollama_durations(self.rec, self.first_token_s))
        return (json.dumps(d, separators=(",", ":")) + "\n").encode()

    def stream_start(self) -> list[bytes]:
        if self.endpoint.startswith("ollama"):
            return []
        if self.endpoint == "chat":
            return [_sse(self._chunk({"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}))]
        if self.endpoint == "responses":
            r = self._response_obj("", 0, "in_progress")
            r["output"] = []
            return [_sse({"type": "response.created", "response": r}, "response.created")]
        return []

    def stream_delta(self, text: str) -> bytes:
        if self.endpoint.startswith("ollama"):
            return self._ollama(text, False)
        if self.endpoint == "chat":
            return _sse(self._chunk({"index": 0, "delta": {"content": text}, "finish_reason": None}))
        if self.endpoint == "responses":
            return _sse({"type": "response.output_text.delta", "item_id": f"msg-{self.id}", "output_index": 0,
                         "content_index": 0, "delta": text}, "response.output_text.delta")
        return _sse(self._chunk({"index": 0, "text": text, "logprobs": None, "finish_reason": None}))

    def stream_end(self, n: int, finish: str) -> list[bytes]:
        if self.endpoint.startswith("ollama"):
            return [self._ollama("", True, n, finish)]
        if self.endpoint == "responses":
            r = self._response_obj(_words(0, n), n, "completed")
            return [_sse({"type": "response.completed", "response": r}, "response.completed")]
        if self.endpoint == "chat":
            last = {"index": 0, "delta": {}, "finish_reason": finish}
        else:
            last = {"index": 0, "text": "", "logprobs": None, "finish_reason": finish}
        out = []
        if self.include_usage:
            out.append(_sse(self._chunk(last)))
            out.append(_sse(self._chunk({}, self.usage(n))))
        else:
            out.append(_sse(self._chunk(last, self.usage(n))))
        out.append(b"data: [DONE]\n\n")
        return out

    def full(self, text: str, n: int, finish: str) -> dict:
        if self.endpoint in EMBED_APIS:
            return embedding_answer(self.endpoint, self.body, self.model, self.rec)
        if self.endpoint.startswith("ollama"):
            return json.loads(self._ollama(text, True, n, finish))
        if self.endpoint == "responses":
            return self._response_obj(text, n, "completed")
        if self.endpoint == "chat":
            choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
            obj = "text_completion"
        out = {"id": self.id, "object": obj, "created": self.created, "model": self.model,
               "choices": [choice], "usage": self.usage(n)}
        if self.lmstudio:
            out.update(lmstudio_stats(self.rec, n, finish, self.first_token_s))
        return out


__all__ = ["_Format", "_words"]

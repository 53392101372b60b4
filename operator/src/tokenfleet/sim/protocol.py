"""OpenAI-protocol requests and responses as vLLM 0.32 / SGLang 0.5 shape them. Pure.

Parsing turns a request body into a ParsedRequest or raises ApiError carrying the engine's
own error shape: vLLM `{"error": {"message", "type", "param", "code"}}`, SGLang the flat
`{"object": "error", "message", "type", "param", "code"}`.
"""

from __future__ import annotations

import random
import time
import uuid
from dataclasses import dataclass
from typing import Any

from tokenfleet.engines import engine as engine_record
from tokenfleet.sim.tokens import count_chat_tokens, count_prompt_tokens

# vLLM's CompletionRequest defaults max_tokens to 16. A chat request without a limit runs to
# max_model_len in vLLM; a real model would stop at EOS long before, the simulator (which
# never emits EOS) stops at this many tokens instead (--default-max-tokens).
COMPLETION_DEFAULT_MAX_TOKENS = 16
CHAT_DEFAULT_MAX_TOKENS = 256


class ApiError(Exception):
    def __init__(self, status: int, message: str, err_type: str, param: str | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.err_type = err_type
        self.param = param

    def body(self, engine: str) -> dict[str, Any]:
        info = {
            "message": self.message,
            "type": self.err_type,
            "param": self.param,
            "code": self.status,
        }
        return engine_record(engine).error_body(info)


def bad_request(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, "BadRequestError", param)


def validation_error(kind: str, loc: str, msg: str, **extra: object) -> ApiError:
    """What vLLM's FastAPI validation handler answers: type "Bad Request", param = loc."""
    detail = {"type": kind, "loc": loc, "msg": msg, **extra}
    return ApiError(400, f"1 validation error:\n  {detail}", "Bad Request", loc)


def json_error(error: ValueError) -> ApiError:
    position = getattr(error, "pos", 0)
    reason = getattr(error, "msg", str(error))
    return validation_error(
        "json_invalid",
        f"body.{position}",
        "JSON decode error",
        input="<dict of 0 items>",
        ctx={"error": reason},
    )


@dataclass(frozen=True)
class ParsedRequest:
    chat: bool
    model: str
    prompt_tokens: int
    max_tokens: int
    stream: bool
    include_usage: bool


def parse_request(
    body: object,
    chat: bool,
    served_model: str,
    max_model_len: int,
    chat_default_max_tokens: int = CHAT_DEFAULT_MAX_TOKENS,
) -> ParsedRequest:
    if not isinstance(body, dict):
        raise validation_error(
            "model_attributes_type",
            "body",
            "Input should be a valid dictionary or object to extract fields from",
        )
    model = body.get("model") or served_model
    if model != served_model:
        raise ApiError(
            404,
            f"The model `{model}` does not exist. Valid aliases: {served_model}.",
            "NotFoundError",
            "model",
        )
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise bad_request("Field required: messages must be a non-empty list.", "messages")
        if not all(isinstance(m, dict) for m in messages):
            raise bad_request("Each message must be an object.", "messages")
        prompt_tokens = count_chat_tokens(messages)
        limit = body.get("max_completion_tokens")
        if limit is None:
            limit = body.get("max_tokens")
        default = chat_default_max_tokens
    else:
        prompt_tokens = _completion_prompt_tokens(body.get("prompt"))
        limit = body.get("max_tokens", COMPLETION_DEFAULT_MAX_TOKENS)
        default = COMPLETION_DEFAULT_MAX_TOKENS
    if limit is None:
        limit = default
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise validation_error("int_type", "max_tokens", "Input should be a valid integer")
    if limit > max_model_len:
        raise bad_request(
            f"max_tokens={limit} cannot be greater than max_model_len={max_model_len}. "
            f"Please request fewer output tokens. (parameter=max_tokens, value={limit})",
            "max_tokens",
        )
    if prompt_tokens > max_model_len:
        raise bad_request(
            f"This model's maximum context length is {max_model_len} tokens. However, your "
            f"prompt contains {prompt_tokens} input tokens, which exceeds this limit even "
            "without any output tokens. Please reduce the length of the input prompt. "
            f"(parameter=input_tokens, value={prompt_tokens})",
            "input_tokens",
        )
    # vLLM clamps max_tokens to what the context leaves (get_max_tokens), then checks it.
    max_tokens = min(limit, max_model_len - prompt_tokens)
    if max_tokens < 1:
        raise bad_request(
            f"max_tokens must be at least 1, got {max_tokens}. "
            f"(parameter=max_tokens, value={max_tokens})",
            "max_tokens",
        )
    n = body.get("n", 1)
    if n != 1:
        raise bad_request("The simulator serves n=1 only.", "n")
    stream = bool(body.get("stream", False))
    options = body.get("stream_options") or {}
    include_usage = stream and isinstance(options, dict) and bool(options.get("include_usage"))
    return ParsedRequest(chat, model, max(prompt_tokens, 1), max_tokens, stream, include_usage)


def _completion_prompt_tokens(prompt: object) -> int:
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, str):
        return count_prompt_tokens(prompt)
    if isinstance(prompt, list) and all(
        isinstance(t, int) and not isinstance(t, bool) for t in prompt
    ):
        return count_prompt_tokens(prompt)
    raise bad_request(
        "prompt must be a string or a list of token ids (batches of several prompts are not "
        "simulated: send one request per prompt).",
        "prompt",
    )


class ResponseBuilder:
    """Builds the JSON bodies and SSE chunks of one request."""

    def __init__(self, parsed: ParsedRequest, request_index: int, seed: int = 0) -> None:
        self.parsed = parsed
        prefix = "chatcmpl" if parsed.chat else "cmpl"
        # Random-looking like vLLM's ids, but reproducible for a given --seed.
        bits = random.Random(f"id:{seed}:{request_index}").getrandbits(128)
        self.id = f"{prefix}-{uuid.UUID(int=bits, version=4).hex}"
        self.created = int(time.time())
        self.object = "chat.completion" if parsed.chat else "text_completion"

    def usage(self, completion_tokens: int) -> dict[str, int]:
        prompt = self.parsed.prompt_tokens
        return {
            "prompt_tokens": prompt,
            "total_tokens": prompt + completion_tokens,
            "completion_tokens": completion_tokens,
        }

    def full(self, text: str, completion_tokens: int, finish_reason: str) -> dict[str, Any]:
        choice: dict[str, Any]
        if self.parsed.chat:
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": text, "tool_calls": []},
                "logprobs": None,
                "finish_reason": finish_reason,
                "stop_reason": None,
            }
        else:
            choice = {
                "index": 0,
                "text": text,
                "logprobs": None,
                "finish_reason": finish_reason,
                "stop_reason": None,
            }
        return {
            "id": self.id,
            "object": self.object,
            "created": self.created,
            "model": self.parsed.model,
            "choices": [choice],
            "usage": self.usage(completion_tokens),
        }

    def chunk(
        self, text: str | None, finish_reason: str | None, role: bool = False
    ) -> dict[str, Any]:
        """One streamed choice; `text=None` with role=True is the chat opening chunk."""
        choice: dict[str, Any] = {"index": 0}
        if self.parsed.chat:
            delta: dict[str, Any] = {"role": "assistant", "content": ""} if role else {}
            if text is not None:
                delta["content"] = text
            choice["delta"] = delta
        else:
            choice["text"] = text or ""
        choice["logprobs"] = None
        choice["finish_reason"] = finish_reason
        if finish_reason is not None:
            choice["stop_reason"] = None
        body: dict[str, Any] = {
            "id": self.id,
            "object": f"{self.object}.chunk" if self.parsed.chat else self.object,
            "created": self.created,
            "model": self.parsed.model,
            "choices": [choice],
        }
        return body

    def usage_chunk(self, completion_tokens: int) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": f"{self.object}.chunk" if self.parsed.chat else self.object,
            "created": self.created,
            "model": self.parsed.model,
            "choices": [],
            "usage": self.usage(completion_tokens),
        }


def models_body(served_model: str, max_model_len: int, engine: str) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [
            {
                "id": served_model,
                "object": "model",
                "created": int(time.time()),
                "owned_by": engine,
                "root": served_model,
                "parent": None,
                "max_model_len": max_model_len,
                "permission": [],
            }
        ],
    }

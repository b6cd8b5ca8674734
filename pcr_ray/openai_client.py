"""A connection to an OpenAI-compatible server (vLLM, SGLang, TGI, llama.cpp's server, an API) through the `openai`
client package: the key from an environment variable, the client's retries and timeouts, its errors as ServerError.

The client retries 408, 409, 429, 5xx and connection errors with exponential backoff (`max_retries`) within
`timeout_s` per request; what still fails raises ServerError naming the server, the status and the server's own
message. The API key is never in a config, an identity or a log.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

NO_KEY = "none"  # what a local server gets when the key's variable is unset (the client needs some key)
T = TypeVar("T")


class ServerError(RuntimeError):
    """A request the server did not answer after the client's retries: the server, the status and its message."""


class ServerClient:
    """One `openai.OpenAI` client per process (built on first use, the key read from the environment then)."""

    def __init__(self, base_url: str, *, api_key_env: str, timeout_s: float, max_retries: int, extra: str) -> None:
        self.base_url, self.api_key_env = base_url, api_key_env
        self.timeout_s, self.max_retries = timeout_s, max_retries
        self.extra = extra  # the config that needs the package, for the ImportError's message
        self._client: Any = None
        self._lock = threading.Lock()

    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                try:
                    import openai  # extra `openai`; 1 s to import
                except ImportError as exc:
                    raise ImportError(f"{self.extra} needs the `openai` package: pip install 'pcr_ray[openai]'"
                                      ) from exc
                self._client = openai.OpenAI(base_url=self.base_url, api_key=os.environ.get(self.api_key_env) or NO_KEY,
                                             timeout=self.timeout_s, max_retries=self.max_retries)
            return self._client

    @property
    def root(self) -> str:
        """The server's root URL (base_url without its `/v1`): where vLLM serves /pooling."""
        url = self.base_url.rstrip("/")
        return url[:-3] if url.endswith("/v1") else url

    def first_model(self) -> str:
        """The first model the server lists (GET /models)."""
        listed = self.call(lambda: self.client.models.list().data)
        if not listed:
            raise ServerError(f"{self.base_url}: the server lists no model (GET /models); name the model")
        return str(listed[0].id)

    def call(self, fn: Callable[[], T]) -> T:
        """fn() with the client's errors (after its retries) as ServerError naming the server and its message."""
        import openai  # extra `openai`; 1 s to import

        try:
            return fn()
        except openai.APIStatusError as exc:
            raise ServerError(f"{self.base_url}: HTTP {exc.status_code} after {self.max_retries} retries: "
                              f"{server_message(exc)}") from None
        except openai.APITimeoutError:
            raise ServerError(f"{self.base_url}: no answer within timeout_s={self.timeout_s:g} s "
                              f"(after {self.max_retries} retries)") from None
        except openai.APIConnectionError as exc:
            raise ServerError(f"{self.base_url}: cannot connect ({exc.__cause__ or exc}) after "
                              f"{self.max_retries} retries") from None


def server_message(exc: Any) -> str:
    """The server's own error message of an APIStatusError (its JSON `error.message`, else the body as text)."""
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        err = body.get("error", body)
        if isinstance(err, Mapping) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
    return str(getattr(exc, "message", "") or exc)

"""API-key check of the scoring service: required when it binds beyond loopback, compared in constant time.

The key comes from the environment variable `api_key_env` (default PCR_RAY_API_KEY) or the file `api_key_file`
(first line); clients send it as `Authorization: Bearer <key>` or `X-API-Key: <key>`. Only its SHA-256 digest
travels to the ingress and is compared (hmac.compare_digest); the key itself is never logged or echoed.
`/healthz` stays open (liveness probes). A non-loopback host without a key refuses to start unless
`allow_unauthenticated=true`, which warns loudly.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MIN_KEY_CHARS = 16
OPEN_PATHS = ("/healthz",)
_HOW = "send it as 'Authorization: Bearer <key>' or 'X-API-Key: <key>'"
_MAKE = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"


def is_loopback(host: str) -> bool:
    """True for localhost and loopback addresses (127.0.0.0/8, ::1); False for 0.0.0.0, '' and the rest."""
    h = host.strip().strip("[]").lower()
    if h == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def digest(key: str) -> str:
    """SHA-256 hex digest of a key (what the ingress holds and compares)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def load_key(api_key_env: str, api_key_file: str | None) -> str | None:
    """The configured key: the file's first line when `api_key_file` is set, else $api_key_env; None if neither."""
    if api_key_file:
        p = Path(api_key_file).expanduser()
        try:
            lines = p.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise ValueError(f"api_key_file {p} cannot be read: {exc.strerror or exc}") from None
        key = lines[0].strip() if lines else ""
        where = f"api_key_file {p}"
    else:
        key = os.environ.get(api_key_env, "").strip() if api_key_env else ""
        where = f"${api_key_env}"
        if not key:
            return None
    if len(key) < MIN_KEY_CHARS:
        raise ValueError(f"the API key in {where} is shorter than {MIN_KEY_CHARS} characters; make one with {_MAKE}")
    return key


@dataclass(frozen=True)
class ApiKeyAuth:
    """The ingress's key policy: `key_digest` None means open (no key asked)."""

    key_digest: str | None = field(default=None, repr=False)

    @classmethod
    def from_settings(cls, host: str, api_key_env: str = "PCR_RAY_API_KEY", api_key_file: str | None = None,
                      allow_unauthenticated: bool = False) -> ApiKeyAuth:
        """The policy for a service bound to `host`; ValueError when beyond loopback without a key."""
        key = load_key(api_key_env, api_key_file)
        if key is not None:
            return cls(digest(key))
        if is_loopback(host):
            return cls(None)
        if not allow_unauthenticated:
            raise ValueError(
                f"host={host} accepts requests from other machines, so the service needs an API key: "
                f"`export {api_key_env}=$({_MAKE})` or api_key_file=/path/to/keyfile (clients {_HOW}); "
                f"or host=127.0.0.1, or allow_unauthenticated=true to serve anyone who can reach the port")
        msg = (f"pcr_ray scoring service on host={host} WITHOUT AN API KEY (allow_unauthenticated=true): anyone "
               f"who can reach the port can use it; set {api_key_env} or api_key_file")
        warnings.warn(msg, RuntimeWarning, stacklevel=2)
        log.warning(msg)
        return cls(None)

    def accepts(self, headers: dict[str, str]) -> str:
        """'' when the request may pass; else why not (for the 401 body, never containing the key)."""
        if self.key_digest is None:
            return ""
        given = headers.get("x-api-key")
        if given is None:
            auth = headers.get("authorization", "")
            scheme, _, token = auth.partition(" ")
            given = token.strip() if scheme.lower() == "bearer" else None
        if not given:
            return f"this service needs an API key: {_HOW}"
        if not hmac.compare_digest(digest(given), self.key_digest):
            return "the API key is not valid"
        return ""


class ApiKeyMiddleware:
    """Pure ASGI middleware: 401 (before the body is read) for HTTP requests without the right key."""

    def __init__(self, app: Any, auth: ApiKeyAuth) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or self.auth.key_digest is None or scope.get("path", "") in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        why = self.auth.accepts(headers)
        if not why:
            await self.app(scope, receive, send)
            return
        body = json.dumps({"detail": why, "errors": []}).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"www-authenticate", b'Bearer realm="pcr_ray"'), (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})

r"""Who may talk to the server: HTTP Host/Origin checks, a bearer token, and a clean stdin.

Over HTTP a browser page can reach a server on the user's machine by pointing a hostname it
controls at 127.0.0.1 (DNS rebinding); the page's requests then carry that foreign name in
``Host``, and its own site in ``Origin``. :class:`TrustMiddleware` serves a request only when
``Host`` names this server (the bound address, a loopback name for a loopback or wildcard bind,
an IP literal for a wildcard bind, or an ``--allow-host`` entry), when any ``Origin`` names one
of those too (or an ``--allow-origin`` entry), and, when a token is set, when
``Authorization: Bearer <token>`` matches it. A refusal is one log line.

Over stdio, :func:`filter_stdin` puts a small filter in front of the protocol reader: JSON
``\ud800``-style escapes of lone surrogates, which the SDK's JSON parser rejects without
answering (the client then waits forever), are replaced by ``\ufffd``.
"""

from __future__ import annotations

import fnmatch
import hmac
import ipaddress
import logging
import os
import re
import threading
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

__all__ = ["TrustMiddleware", "filter_stdin", "fix_surrogate_escapes", "is_loopback"]

log = logging.getLogger(__name__)

_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
_HOST_PORT = re.compile(r"^(?:\[(?P<v6>[^\]]+)\]|(?P<name>[^:\[\]]*))(?::(?P<port>\d{1,5}))?$")
# An escaped backslash, a surrogate pair, or a lone surrogate escape, in JSON text.
_ESCAPES = re.compile(
    rb"\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[dD][89a-fA-F][0-9a-fA-F]{2}"
)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or name) is this machine's loopback."""
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _unspecified(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return host in ("", "*")


def _split_host(value: str) -> tuple[str, int | None] | None:
    match = _HOST_PORT.match(value.strip())
    if match is None:
        return None
    name = (match["v6"] or match["name"] or "").lower().rstrip(".")
    port = int(match["port"]) if match["port"] else None
    return (name, port) if name else None


def _clip(value: str) -> str:
    return repr(value if len(value) <= 80 else value[:77] + "...")


class TrustMiddleware:
    """ASGI middleware enforcing the Host, Origin and bearer-token rules (see module doc).

    Args:
        app: the ASGI app to protect.
        bind: the address the server listens on.
        port: the port it listens on.
        allow_hosts: extra ``Host`` names (``name``, ``name:port`` or a ``*.example.org``
            pattern), e.g. the name a reverse proxy forwards.
        allow_origins: extra browser origins (``https://app.example.org``; patterns allowed).
        token: when set, every request needs ``Authorization: Bearer <token>``.
    """

    def __init__(
        self,
        app: Any,
        *,
        bind: str,
        port: int,
        allow_hosts: Sequence[str] = (),
        allow_origins: Sequence[str] = (),
        token: str | None = None,
    ) -> None:
        self.app = app
        self.bind = bind.lower()
        self.port = port
        self.allow_hosts = [h.strip().lower() for h in allow_hosts if h.strip()]
        self.allow_origins = [o.strip().lower().rstrip("/") for o in allow_origins if o.strip()]
        self.token = token.encode("utf-8") if token else None

    def host_allowed(self, value: str) -> bool:
        """Whether a ``Host`` header value names this server."""
        parsed = _split_host(value)
        if parsed is None:
            return False
        name, port = parsed
        for allowed in self.allow_hosts:
            if fnmatch.fnmatchcase(name, allowed) or (
                port is not None and fnmatch.fnmatchcase(f"{name}:{port}", allowed)
            ):
                return True
        if port is not None and port != self.port:
            return False
        wildcard = _unspecified(self.bind)
        if name == self.bind:
            return True
        if (wildcard or is_loopback(self.bind)) and (name in _LOOPBACK_NAMES or is_loopback(name)):
            return True
        # An address literal cannot be rebound by DNS: on a wildcard bind any of ours may come.
        return wildcard and _is_ip(name)

    def origin_allowed(self, value: str) -> bool:
        """Whether an ``Origin`` header value is this server itself or an allowed origin."""
        origin = value.strip().lower().rstrip("/")
        if any(fnmatch.fnmatchcase(origin, allowed) for allowed in self.allow_origins):
            return True
        try:
            parts = urlsplit(origin)
            port = parts.port
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return False  # "null", file:, extensions …
        if port is None:
            port = 443 if parts.scheme == "https" else 80
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        return self.host_allowed(f"{host}:{port}")

    def _authorised(self, header: str | None) -> bool:
        if self.token is None:
            return True
        if header is None or not header.lower().startswith("bearer "):
            return False
        return hmac.compare_digest(header[7:].strip().encode("utf-8", "replace"), self.token)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Serve the request, or refuse it with 421, 403 or 401 and one log line."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: dict[str, str] = {}
        for key, raw in scope.get("headers", ()):
            headers.setdefault(key.decode("latin-1").lower(), raw.decode("latin-1"))
        host, origin = headers.get("host", ""), headers.get("origin")
        if not self.host_allowed(host):
            log.warning(
                "Refused a request with Host %s (not this server; DNS rebinding?).", _clip(host)
            )
            await _refuse(send, 421, "Misdirected Request: this Host is not served here.\n")
            return
        if origin is not None and not self.origin_allowed(origin):
            log.warning("Refused a request from Origin %s (not allowed).", _clip(origin))
            await _refuse(send, 403, "Forbidden: this Origin is not allowed.\n")
            return
        if not self._authorised(headers.get("authorization")):
            log.warning("Refused a request without the right bearer token.")
            await _refuse(
                send,
                401,
                "Unauthorized: send Authorization: Bearer <token>.\n",
                [(b"www-authenticate", b'Bearer realm="pinakes-mcp"')],
            )
            return
        await self.app(scope, receive, send)


async def _refuse(
    send: Any, status: int, body: str, extra: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    payload = body.encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(payload)).encode()),
                *extra,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


def fix_surrogate_escapes(line: bytes) -> bytes:
    r"""Replace JSON escapes of lone surrogates in ``line`` with ``\ufffd`` (pairs are kept)."""

    def one(match: re.Match[bytes]) -> bytes:
        text = match.group(0)
        return text if text == b"\\\\" or len(text) == 12 else b"\\ufffd"

    return _ESCAPES.sub(one, line) if b"\\u" in line or b"\\U" in line else line


def filter_stdin() -> None:
    """Put :func:`fix_surrogate_escapes` between the real stdin and the protocol reader.

    File descriptor 0 becomes the read end of a pipe that a daemon thread fills, line by line,
    from the original stdin; end of input is passed on.
    """
    source = os.fdopen(os.dup(0), "rb")
    read_end, write_end = os.pipe()
    os.dup2(read_end, 0)
    os.close(read_end)

    def pump() -> None:
        with source, os.fdopen(write_end, "wb", buffering=0) as sink:
            try:
                for line in iter(source.readline, b""):
                    sink.write(fix_surrogate_escapes(line))
            except OSError:  # the server stopped reading
                pass

    threading.Thread(target=pump, name="pinakes-stdin", daemon=True).start()

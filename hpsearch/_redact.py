"""Secrets out of everything a search writes: URLs lose their passwords, tokens and keys.

Masked: the password of a URL's userinfo (``scheme://user:***@host``) and the values of query parameters that
name a secret (``?password=***``, ``token``, ``key``, ``secret``, ``api_key``, ``access_token``, ``sslpassword``,
...). `redact` finds every URL in a text (a message, a log line, a saved setting) and masks each one.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["redact", "redact_url"]

MASK = "***"
_SECRET_KEYS = re.compile(r"(pass(word|wd)?|pwd|secret|token|key|auth|credential|signature|sig)", re.IGNORECASE)
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>]+")


def redact_url(url: str) -> str:
    """``url`` with its userinfo password and secret query values replaced by ``***``."""
    if "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    # userinfo: everything before the last "@" that comes before the path.
    path_start = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    authority, tail = rest[:path_start], rest[path_start:]
    if "@" in authority:
        creds, host = authority.rsplit("@", 1)
        user = creds.split(":", 1)[0]
        authority = f"{user}:{MASK}@{host}" if ":" in creds else f"{creds}@{host}"
    if "?" in tail:
        path, _, query = tail.partition("?")
        query, hash_mark, fragment = query.partition("#")
        parts = []
        for item in query.split("&"):
            key, eq, _ = item.partition("=")
            parts.append(f"{key}={MASK}" if eq and _SECRET_KEYS.search(key) else item)
        tail = f"{path}?{'&'.join(parts)}{hash_mark}{fragment}"
    return f"{scheme}://{authority}{tail}"


def _redact_match(match: re.Match[str]) -> str:
    text = match.group(0)
    stripped = text.rstrip(".,;:)]}")  # sentence punctuation after a URL is not part of it
    return redact_url(stripped) + text[len(stripped):]


def redact(value: Any) -> Any:
    """Every URL inside a string masked (other values returned as they are; lists and dicts walked)."""
    if isinstance(value, str):
        return _URL.sub(_redact_match, value) if "://" in value else value
    if isinstance(value, list | tuple):
        return type(value)(redact(v) for v in value)
    if isinstance(value, dict):
        return {k: redact(v) for k, v in value.items()}
    return value

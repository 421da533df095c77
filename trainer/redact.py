"""The one masking rule for secrets, shared by the trainer's trackers and everything a search writes.

Masked, wherever a text is stored, logged or printed:

- a URL's userinfo password (``scheme://user:***@host``), raw or percent-encoded, also when it holds ``/``, ``#``,
  ``?`` or ``@`` (``postgresql://u:pw/Slash#9?q@host/db``): the host is found after the last ``@`` that is
  followed by a host name, not at the first ``/``;
- the values of query parameters that name a secret (``?password=***``, ``token``, ``key``, ``api_key``,
  ``sslpassword``, ...);
- the value of every secret-named environment variable (``*_API_KEY``, ``*_TOKEN``, ``*_PASSWORD``...) and of every
  password `redact_url` has seen, wherever it appears (a library's error quoting it without its URL);
- parameters with a secret-looking name (`is_secret_name`: ``api_key``, ``hf_token``...) are never logged:
  `safe_params` drops them.

`redact` applies all of these to a string, or walks lists, tuples and dicts.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

__all__ = ["MASK", "is_secret_name", "redact", "redact_url", "safe_params"]

MASK = "***"
_SECRET_NAME = re.compile(r"token|secret|passw|api_?key|credential|private_key|auth", re.IGNORECASE)
_SECRET_QUERY_KEY = re.compile(
    r"pass(word|wd)?|pwd|secret|token|key|auth|credential|signature|sig", re.IGNORECASE
)
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>]+")
# What may follow the "@" that ends a userinfo: a host (name, IPv4, [IPv6]) and an optional port, then the end of
# the authority.
_HOST = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.\-_%]+)(:\d*)?(?=[/?#]|$)")
_MIN_SECRET = 4  # shorter values ("pw") would mask ordinary words
_SEEN: set[str] = set()  # passwords seen in URLs: masked wherever they appear later
_SEEN_LOCK = threading.Lock()
_SECRET_ENV: dict[str, bool] = {}  # environment variable name -> is_secret_name(name), checked once per name
_KNOWN: tuple[frozenset[str], list[str]] = (
    frozenset(),
    [],
)  # the last secrets found, and their masking order


def is_secret_name(key: Any) -> bool:
    """Whether a parameter or variable named ``key`` holds a secret (``api_key``, ``hf_token``, ``password``...)."""
    return bool(_SECRET_NAME.search(str(key)))


def _userinfo_end(rest: str) -> int:
    """The index of the "@" ending the userinfo in ``rest`` (the URL after ``://``), or -1 when there is none.

    RFC 3986 forbids a raw ``/``, ``?`` or ``#`` in a userinfo, but users write passwords raw and SQLAlchemy
    accepts them; so the userinfo ends at the last "@" before the first host-like authority end."""
    standard_end = min(
        (i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=len(rest)
    )
    if "@" in rest[:standard_end]:
        return rest.rfind("@", 0, standard_end)
    if ":" not in rest[:standard_end] and "@" not in rest:
        return -1
    user_end = rest.find(":")
    if user_end < 0 or any(c in rest[:user_end] for c in "/?#@"):
        return -1  # no "user:" before the first "/", so nothing here is a password
    at = rest.find("@", user_end)
    while at >= 0:
        if _HOST.match(rest, at + 1):
            return at
        at = rest.find("@", at + 1)
    return -1


def _remember(password: str) -> None:
    for value in {password, unquote(password)}:
        if len(value) >= _MIN_SECRET:
            with _SEEN_LOCK:
                _SEEN.add(value)


def _mask_query(tail: str) -> str:
    path, _, query = tail.partition("?")
    query, hash_mark, fragment = query.partition("#")
    parts = []
    for item in query.split("&"):
        key, eq, value = item.partition("=")
        if eq and _SECRET_QUERY_KEY.search(unquote(key)):
            _remember(value)
            parts.append(f"{key}={MASK}")
        else:
            parts.append(item)
    return f"{path}?{'&'.join(parts)}{hash_mark}{fragment}"


def redact_url(url: str) -> str:
    """``url`` with its userinfo password and secret query values replaced by ``***`` (remembered for `redact`)."""
    if "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    at = _userinfo_end(rest)
    authority_start = 0
    head = ""
    if at >= 0:
        user, colon, password = rest[:at].partition(":")
        if colon:
            _remember(password)
        head = f"{user}:{MASK}@" if colon else f"{user}@"
        authority_start = at + 1
    rest = rest[authority_start:]
    tail_start = min(
        (i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=len(rest)
    )
    host, tail = rest[:tail_start], rest[tail_start:]
    if "?" in tail:
        tail = _mask_query(tail)
    return f"{scheme}://{head}{host}{tail}"


def _redact_match(match: re.Match[str]) -> str:
    text = match.group(0)
    stripped = text.rstrip(".,;:)]}")  # sentence punctuation after a URL is not part of it
    return redact_url(stripped) + text[len(stripped) :]


def _known_secrets() -> list[str]:
    """The secret values to mask, longest first (a secret holding another is masked whole). Read at each call (the
    environment may change), but cheaply: every text a search writes goes through here, several times per trial."""
    global _KNOWN
    with _SEEN_LOCK:
        values = _environment_secrets() | _SEEN
    known = _KNOWN
    if known[0] != values:
        known = _KNOWN = (frozenset(values), sorted(values, key=len, reverse=True))
    return known[1]


# The environment's raw variables as last read (os.environ's own bytes, None where it keeps none) and the secret
# values among them.
_ENV_READ: tuple[dict[Any, Any] | None, frozenset[str]] = (None, frozenset())


def _environment_secrets() -> frozenset[str]:
    """The values of the secret-named environment variables. Read again only when the environment changed since the
    last read (compared whole: one dict comparison, where reading it decodes every variable's name); variable names
    are checked once each and only secret-named variables' values are read."""
    global _ENV_READ
    # CPython's mapping behind os.environ; absent elsewhere: then it is read whole every time.
    raw = getattr(os.environ, "_data", None)
    last, secrets = _ENV_READ
    if raw is not None and last is not None and raw == last:
        return secrets
    values = set()
    for name in os.environ:
        secret = _SECRET_ENV.get(name)
        if secret is None:
            secret = _SECRET_ENV[name] = is_secret_name(name)
        if secret:
            value = os.environ.get(name)
            if value is not None and len(value) >= 6:
                values.add(value)
    secrets = frozenset(values)
    _ENV_READ = (dict(raw) if isinstance(raw, dict) else None, secrets)
    return secrets


def _redact_text(text: str) -> str:
    if "://" in text:
        text = _URL.sub(_redact_match, text)
    for secret in _known_secrets():
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def redact(value: Any) -> Any:
    """Every secret inside a string masked (other values returned as they are; lists, tuples and dicts walked)."""
    if isinstance(value, str):
        return _redact_text(value)
    if isinstance(value, list | tuple):
        return type(value)(redact(v) for v in value)
    if isinstance(value, dict):
        return {k: redact(v) for k, v in value.items()}
    return value


def safe_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` without the secret-named ones, strings masked: what a tracker may log."""
    return {str(k): redact(v) for k, v in params.items() if not is_secret_name(k)}

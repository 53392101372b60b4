"""A Prometheus base URL, parsed: the one form the operator dials, compares and joins.

`spec.autoscaling.prometheus.url` is tenant input and the operator sends requests to it
from its own pod, so the string is never handed to an HTTP client. It is parsed into
(scheme, host, port, path) with everything that could move a request elsewhere refused:
userinfo (`http://allowed@evil`), a query or fragment (`.../-/quit?` would turn the
client's own path into a query string), dot segments (`/tenant-a/../tenant-b`), percent
escapes (`%2e%2e`), backslashes, whitespace and control characters. The allowlist compares
parsed URLs (scheme, host, port and a path prefix by whole segments), and a request URL is
the allowed base's components plus the tenant's extra segments plus one of the two query
endpoints: nothing else of Prometheus' API (lifecycle, admin, TSDB) can be reached.

`URL_PATTERN` is the same grammar as a regular expression without look-around (RE2, which
the API server uses for CRD patterns): the CRD refuses at admission what it can; the
parser says which rule the value broke and what to write instead.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from tokenfleet.errors import UserError

FIELD = "spec.autoscaling.prometheus.url"
MAX_LENGTH = 2048
QUERY = "/api/v1/query"
QUERY_RANGE = "/api/v1/query_range"
ENDPOINTS = (QUERY, QUERY_RANGE)  # the only paths the operator requests
EXAMPLE = "http://prometheus-operated.monitoring:9090"
DEFAULT_PORTS = {"http": 80, "https": 443}

_SEGMENT_CHARS = "A-Za-z0-9._~-"  # RFC 3986 "unreserved": no escapes, no delimiters
_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST = rf"(\[[0-9A-Fa-f:.]+\]|{_LABEL}(\.{_LABEL})*)"
# A segment that is neither "." nor "..": starts with a non-dot, or is "." + a non-dot,
# or ".." + at least one more character.
_SEGMENT = (
    rf"([A-Za-z0-9_~-][{_SEGMENT_CHARS}]*|\.[A-Za-z0-9_~-][{_SEGMENT_CHARS}]*"
    rf"|\.\.[{_SEGMENT_CHARS}]+)"
)
_PORT = r"([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"
URL_PATTERN = rf"^[Hh][Tt][Tt][Pp][Ss]?://{_HOST}(:{_PORT})?(/{_SEGMENT})*/?$"
_LABEL_RE = re.compile(_LABEL)
_SEGMENT_RE = re.compile(_SEGMENT)


class UrlRefused(UserError):
    """A URL that is not a plain Prometheus base URL: names the field, the value, the
    problem and the fix (str() is one line). The value is a tenant's string, so the line
    shows it quoted, escaped and cut short."""

    def __init__(self, field: str, value: str, problem: str, fix: str) -> None:
        super().__init__(field, value, problem, fix)
        self.args = (f"{field} {_shown(value)}: {problem}; {fix}",)


@dataclass(frozen=True)
class PrometheusUrl:
    """scheme://host:port/path, normalised: lower-case scheme and host, the port always
    set, the path "" or "/segment/..." without a trailing slash."""

    scheme: str
    host: str  # an IPv6 literal keeps its brackets
    port: int
    path: str

    def __str__(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}{self.path}"

    @property
    def segments(self) -> tuple[str, ...]:
        return tuple(self.path.split("/")[1:]) if self.path else ()

    def below(self, base: PrometheusUrl) -> bool:
        """The same origin and base's path a prefix of this one by whole segments
        (http://prom:9090/a/bc is not below http://prom:9090/a/b)."""
        origin = (self.scheme, self.host, self.port) == (base.scheme, base.host, base.port)
        return origin and self.segments[: len(base.segments)] == base.segments

    def joined(self, base: PrometheusUrl) -> PrometheusUrl:
        """This URL built from `base`'s components plus the segments below it (each one
        checked again), so what is dialled is the allowed entry, extended by a path."""
        if not self.below(base):
            raise ValueError(f"{self} is not below {base}")
        rest = self.segments[len(base.segments) :]
        for segment in rest:
            if not _SEGMENT_RE.fullmatch(segment):
                raise ValueError(f"{self}: segment {segment!r} is not a plain path segment")
        path = base.path + "".join(f"/{s}" for s in rest)
        return PrometheusUrl(base.scheme, base.host, base.port, path)

    def endpoint_path(self, endpoint: str) -> str:
        """The request path of one of the query endpoints below this base; any other
        endpoint is a bug, refused here."""
        if endpoint not in ENDPOINTS:
            raise ValueError(f"{endpoint!r} is not a Prometheus query endpoint {ENDPOINTS}")
        return self.path + endpoint


def parse_prometheus_url(text: object, field: str = FIELD) -> PrometheusUrl:
    """The parsed URL, or UrlRefused naming the rule it broke."""
    if not isinstance(text, str):
        raise UrlRefused(field, repr(text), "not a string", f"write a URL such as {EXAMPLE}")
    try:
        return _parse(text)
    except _Bad as bad:
        raise UrlRefused(field, text, bad.problem, bad.fix) from None


class _Bad(Exception):
    def __init__(self, problem: str, fix: str = f"write the base URL only, e.g. {EXAMPLE}"):
        super().__init__(problem)
        self.problem = problem
        self.fix = fix


def _parse(value: str) -> PrometheusUrl:
    if len(value) > MAX_LENGTH:
        raise _Bad(f"longer than {MAX_LENGTH} characters")
    bad = next((c for c in value if ord(c) <= 0x20 or ord(c) >= 0x7F), None)
    if bad is not None:
        raise _Bad(f"contains {_char(bad)}", "remove it: a URL has no spaces or controls")
    scheme, sep, rest = value.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in DEFAULT_PORTS:
        raise _Bad("not an http(s) URL")
    for char, what in (("?", "a query"), ("#", "a fragment"), ("\\", "a backslash")):
        if char in rest:
            raise _Bad(f"has {what} ({char!r}), which the operator does not send")
    if "%" in rest:
        raise _Bad("has a percent-encoded character", "write the path in plain characters")
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        raise _Bad("has userinfo ('@')", f"remove 'user@': use e.g. {EXAMPLE}")
    host, port = _authority(authority, scheme)
    return PrometheusUrl(scheme, host, port, _path(path) if slash else "")


def _authority(authority: str, scheme: str) -> tuple[str, int]:
    if authority.startswith("["):
        literal, _, tail = authority[1:].partition("]")
        try:
            host = f"[{ipaddress.IPv6Address(literal).compressed}]"
        except ValueError:
            raise _Bad(f"host [{literal}] is not an IPv6 address") from None
        if tail and not tail.startswith(":"):
            raise _Bad(f"unexpected {tail!r} after the host")
        port_text = tail[1:] if tail else None
    else:
        host, colon, after = authority.partition(":")
        port_text = after if colon else None
        host = host.lower()
        labels = host.split(".")
        if not host or len(host) > 253 or not all(_LABEL_RE.fullmatch(p) for p in labels):
            raise _Bad(f"host {host!r} is not a DNS name or IP address")
    if port_text is None:
        return host, DEFAULT_PORTS[scheme]
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise _Bad(f"port {port_text!r} is not 1-65535")
    return host, int(port_text)


def _path(path: str) -> str:
    segments = path.split("/")
    if segments[-1] == "":
        segments.pop()  # one trailing slash is the same base
    for segment in segments:
        if segment in (".", ".."):
            raise _Bad(f"has a dot segment ({segment!r})", "write the path without . or ..")
        if segment == "":
            raise _Bad("has an empty path segment ('//')", "write each '/' once")
        if not _SEGMENT_RE.fullmatch(segment):
            bad = next(c for c in segment if not re.fullmatch(f"[{_SEGMENT_CHARS}]", c))
            raise _Bad(
                f"path segment {segment!r} has {_char(bad)}",
                "use letters, digits and . _ ~ - in the path",
            )
    return "".join(f"/{s}" for s in segments)


def _char(c: str) -> str:
    if ord(c) < 0x20 or ord(c) == 0x7F:
        return f"a control character ({c!r})"
    if c == " ":
        return "a space"
    if ord(c) > 0x7F:
        return f"a non-ASCII character ({c!r})"
    return f"{c!r}"


def _shown(value: str) -> str:
    text = repr(value)  # CR, LF and other controls escaped: the message stays one line
    return text if len(text) <= 200 else text[:197] + "..."

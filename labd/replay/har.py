"""HAR 1.2 archives: loaded into memory for replay, written by the recorder.

Matching follows what a page asks for: method, scheme, host (default ports dropped), path and
query, with configurable query parameters ignored (cache busters, timestamps). When a URL was
recorded several times the first recording is served, always: deterministic across runs.
Entries that cannot be served (bad base64, no response) are skipped and listed, not fatal;
so are headers HTTP cannot carry (a name that is not a token, a value holding CR, LF, NUL or
another control character but tab), the rest of their entry being served. HAR files exported
by browsers' developer tools load as they are.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from labd.replay.encoding import coding_of
from labd.replay.errors import ArchiveError
from labd.textfile import size_text
from labd.validation import MAX_DEPTH, too_deep

Key = tuple[str, str, str, str, str]
DEFAULT_PORTS = {"http": 80, "https": 443}
# Hop-by-hop and framing headers: the server sets them for the body it actually sends (HAR
# bodies are stored decoded: a recorded Content-Encoding is kept apart, in Response.encoding,
# and sent only with a body encoded again to match).
DROPPED_HEADERS = {
    "connection", "keep-alive", "proxy-connection", "transfer-encoding", "content-length",
    "content-encoding", "upgrade", "te", "trailer",
}  # fmt: skip
# What HTTP can carry (RFC 9110): a field name is a token of tchars; a value holds no control
# character but tab (CR, LF or NUL would split or end the header: aiohttp refuses to send it).
TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
# Text JSON would escape six bytes to one (NUL is \u0000): such a body is kept as base64.
ESCAPED = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def _escape(found: re.Match[str]) -> str:
    char = chr(int(found[1], 16))
    return char if char in UNRESERVED else found[0].upper()


def normal_path(path: str) -> str:
    """RFC 3986's normal form of a path (a client and the recording may spell one URL either
    way): characters outside ASCII as UTF-8 escapes (an export may write a path as an IRI),
    escapes of unreserved characters decoded and the rest in upper case (%7e is ~, %2f is
    %2F), and the dot segments removed (/a/./b/../c is /a/c), as browsers send it."""
    path = quote(path, safe="/;:@&=+$,!'()*%~-._") if not path.isascii() else path
    return _without_dots(ESCAPE.sub(_escape, path)) or "/"


def _without_dots(path: str) -> str:
    """RFC 3986 section 5.2.4, for an absolute path."""
    if "." not in path:
        return path
    kept: list[str] = []
    parts = path.split("/")
    for part in parts[1:]:
        if part == "..":
            if kept:
                kept.pop()
        elif part != ".":
            kept.append(part)
    trailing = parts[-1] in (".", "..")  # /a/b/.. is /a/
    return "/" + "/".join(kept) + ("/" if trailing and kept else "")


def normal_host(host: str) -> str:
    """Lower case, and an internationalised name in its ASCII form (xn--...), as browsers
    send it, whichever form an export wrote."""
    host = host.lower()
    if host.isascii():
        return host
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:  # not a name IDNA can encode: matched as written
        return host


def authority(scheme: str, host: str, port: int | None) -> str:
    host = normal_host(host)
    if ":" in host:  # IPv6, bracketed as in a URL: ::1 port 8080 is not the address ::1:8080
        host = f"[{host}]"
    if port is None or DEFAULT_PORTS.get(scheme) == port:
        return host
    return f"{host}:{port}"


def request_key(method: str, url: str, ignore_params: Iterable[str] = ()) -> Key:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    ignored = set(ignore_params)
    query = urlencode(
        sorted(
            (k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in ignored
        )
    )
    return (
        method.upper(),
        scheme,
        authority(scheme, parts.hostname or "", port),
        normal_path(parts.path),
        query,
    )


@dataclass(frozen=True)
class Response:
    status: int
    reason: str
    headers: tuple[tuple[str, str], ...]
    body: bytes  # decoded
    encoding: str = ""  # the recorded Content-Encoding ("gzip"), "" for none
    length: int | None = None  # a HEAD's recorded Content-Length: what a GET would be sent


@dataclass
class Archive:
    responses: dict[Key, Response] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # "entries[3]: why"
    ignore_params: frozenset[str] = frozenset()
    source: str = ""

    def find(self, method: str, url: str) -> Response | None:
        return self.responses.get(request_key(method, url, self.ignore_params))

    def __len__(self) -> int:
        return len(self.responses)


def load(path: Path, max_bytes: int, ignore_params: Iterable[str] = ()) -> Archive:
    """Read a HAR file; refuse one over `max_bytes` before reading it (JSON costs several times
    its size in memory)."""
    try:
        info = path.stat()
    except OSError as e:
        raise ArchiveError(f"{path}: {e.strerror or e}") from e
    if not stat.S_ISREG(info.st_mode):
        # A pipe would block the reader, /dev/zero never end: an archive is a file.
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise ArchiveError(f"{path}: {kind}, not an archive")
    raise_it = "(raise replay.max_archive_mb or --max-archive-mb)"
    if info.st_size > max_bytes:
        raise ArchiveError(
            f"{path}: the archive is {size_text(info.st_size)}, over the limit of "
            f"{size_text(max_bytes)} {raise_it}"
        )
    try:
        with path.open("rb") as f:
            data = f.read(max_bytes + 1)  # the file may have grown since
    except OSError as e:
        raise ArchiveError(f"{path}: {e.strerror or e}") from e
    if len(data) > max_bytes:
        raise ArchiveError(
            f"{path}: the archive is over the limit of {size_text(max_bytes)} {raise_it}"
        )
    try:
        document = json.loads(data)
    except json.JSONDecodeError as e:
        raise ArchiveError(
            f"{path}: not JSON (line {e.lineno}, column {e.colno}: {e.msg}); truncated?"
        ) from e
    except UnicodeDecodeError as e:
        raise ArchiveError(f"{path}: not JSON text ({e.reason} at byte {e.start})") from e
    except ValueError as e:  # a number of more digits than Python converts (4,300)
        raise ArchiveError(f"{path}: not JSON labd can read: {e}") from e
    except RecursionError:
        document = None  # nested deeper than the parser's stack: refused just below
    if document is None or too_deep(document):
        raise ArchiveError(f"{path}: arrays and objects nested more than {MAX_DEPTH} deep")
    return parse(document, str(path), ignore_params)


def parse(document: Any, source: str, ignore_params: Iterable[str] = ()) -> Archive:
    if not isinstance(document, dict) or not isinstance(document.get("log"), dict):
        raise ArchiveError(f"{source}: not a HAR archive (no 'log' object)")
    entries = document["log"].get("entries")
    if not isinstance(entries, list):
        raise ArchiveError(f"{source}: log.entries: expected a list of entries")
    archive = Archive(ignore_params=frozenset(ignore_params), source=source)
    for i, entry in enumerate(entries):
        problems: list[str] = []
        try:
            key, response = _entry(entry, archive.ignore_params, problems)
        except ValueError as e:
            archive.skipped.append(f"entries[{i}]: {e}")
            continue
        archive.skipped.extend(f"entries[{i}]: {problem}" for problem in problems)
        archive.responses.setdefault(key, response)  # the first recording wins
    if not entries:  # every request would miss: a job would measure 404s
        raise ArchiveError(f"{source}: log.entries is empty: nothing to serve")
    if not archive.responses:
        raise ArchiveError(f"{source}: no entry can be served; first problem: {archive.skipped[0]}")
    return archive


def _object(parent: dict[str, Any], key: str, path: str) -> dict[str, Any]:
    """parent[key], which must be a JSON object; the error names `path`."""
    if key not in parent:
        raise ValueError(f"missing {path!r}")
    if not isinstance(value := parent[key], dict):
        raise ValueError(f"{path}: expected an object, got {_json_type(value)}")
    return value


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    return "null" if value is None else names.get(type(value), "a number")


def _entry(entry: Any, ignore_params: frozenset[str], problems: list[str]) -> tuple[Key, Response]:
    """The entry's key and response; what of it cannot be sent (a header, the status text) is
    left out and described in `problems`. ValueError names the field that cannot be used."""
    if not isinstance(entry, dict):
        raise ValueError(f"expected an object, got {_json_type(entry)}")
    request = _object(entry, "request", "request")
    response = _object(entry, "response", "response")
    url = request.get("url")
    if not isinstance(url, str) or not urlsplit(url).hostname:
        raise ValueError(f"request.url {url!r} is not an absolute URL")
    status = response.get("status")
    if isinstance(status, str) and status.isascii() and status.isdigit():
        status = int(status)
    if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 599:
        raise ValueError(f"response.status {status!r} is not an HTTP status code")
    if status < 200:
        raise ValueError(f"response.status {status}: an interim (1xx) response, not an answer")
    content = response.get("content") or {}
    if not isinstance(content, dict):
        raise ValueError(f"response.content: expected an object, got {_json_type(content)}")
    text = content.get("text")
    if text is None:
        body = b""  # HAR exports often leave bodies out (redirects, 304s, or by choice)
    elif not isinstance(text, str):
        raise ValueError(f"response.content.text: expected a string, got {_json_type(text)}")
    elif content.get("encoding") == "base64":
        try:
            body = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError) as e:
            raise ValueError(f"response.content.text: bad base64 ({e})") from None
    else:
        body = text.encode("utf-8")
    headers, encoding = _headers(response.get("headers") or [], problems)
    # Exports that list no headers still name the type; a stylesheet or script served without
    # one is refused by a browser under nosniff, and the page would load differently.
    mime = content.get("mimeType")
    typed = any(name.lower() == "content-type" for name, _ in headers)
    if body and not typed and isinstance(mime, str) and mime and not BAD_VALUE.search(mime):
        headers += (("Content-Type", mime),)
    reason = str(response.get("statusText") or "")
    if BAD_VALUE.search(reason):
        problems.append(f"response.statusText {reason!r}: holds a control character; not sent")
        reason = ""
    method = request.get("method")
    if not isinstance(method, str) or not TOKEN.fullmatch(method):
        raise ValueError(f"request.method {method!r} is not an HTTP method")
    key = request_key(method, url, ignore_params)
    head = method == "HEAD" and not body
    length = _content_length(response.get("headers") or [], problems) if head else None
    return key, Response(status, reason, headers, body, encoding, length)


def _content_length(listed: list[dict[str, Any]], problems: list[str]) -> int | None:
    """The Content-Length among a HEAD's checked headers, if it is a number (of at most 18
    digits: an exabyte is no length, and int() refuses 4,300 digits); one that is not is
    described in `problems` and not sent."""
    found = (str(h["value"]) for h in listed if str(h["name"]).lower() == "content-length")
    value = next(found, None)
    if value is None:
        return None
    if (digits := value.strip()).isascii() and digits.isdigit() and len(digits) <= 18:
        return int(digits)
    problems.append(f"response Content-Length {value[:40]!r}: not a length; the HEAD is sent none")
    return None


def _headers(listed: Any, problems: list[str]) -> tuple[tuple[tuple[str, str], ...], str]:
    """(the headers to send, the recorded content coding): framing and HTTP/2 pseudo-headers
    dropped silently (the server sets its own), those HTTP cannot carry dropped and described
    in `problems`."""
    if not isinstance(listed, list):
        raise ValueError("response.headers: expected a list")
    kept, encoding = [], ""
    for j, header in enumerate(listed):
        if not isinstance(header, dict) or not {"name", "value"} <= header.keys():
            raise ValueError(f"response.headers[{j}]: expected an object with name and value")
        name, value = str(header["name"]), str(header["value"])
        if name.lower() == "content-encoding":
            encoding = coding_of(value)  # the replay server encodes the body again to match
            continue
        if name.lower() in DROPPED_HEADERS or name.startswith(":"):
            continue
        if not TOKEN.fullmatch(name):
            problems.append(f"response.headers[{j}]: name {name!r} is not an HTTP token; skipped")
        elif BAD_VALUE.search(value):
            problems.append(
                f"response.headers[{j}] {name}: the value holds a control character; skipped"
            )
        else:
            kept.append((name, value))
    return tuple(kept), encoding


def har_entry(
    method: str,
    url: str,
    request_headers: Iterable[tuple[str, str]],
    request_body: bytes,
    status: int,
    reason: str,
    headers: Iterable[tuple[str, str]],
    body: bytes,
    started: str,
    time_ms: float,
    wire_size: int | None = None,
) -> dict[str, Any]:
    """One HAR 1.2 entry; `body` is decoded, and bodies that are not UTF-8 text, or hold
    control characters JSON would escape six bytes to one, are stored as base64. Under a
    Content-Encoding among `headers`, `wire_size` is the body's size as received (encoded):
    HAR's bodySize, and content.compression the bytes it saved; unknown, bodySize is -1."""
    headers = list(headers)
    mime = next((v for k, v in headers if k.lower() == "content-type"), "")
    content: dict[str, Any] = {"size": len(body), "mimeType": mime}
    body_size = len(body)
    if any(k.lower() == "content-encoding" and coding_of(v) for k, v in headers):
        body_size = -1 if wire_size is None else wire_size
        if wire_size is not None:
            content["compression"] = len(body) - wire_size
    try:
        text: str | None = body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and not ESCAPED.search(text):
        content["text"] = text
    else:
        content["text"] = base64.b64encode(body).decode("ascii")
        content["encoding"] = "base64"
    query = parse_qsl(urlsplit(url).query, keep_blank_values=True)
    request: dict[str, Any] = {
        "method": method, "url": url, "httpVersion": "HTTP/1.1",
        "headers": [{"name": k, "value": v} for k, v in request_headers],
        "queryString": [{"name": k, "value": v} for k, v in query],
        "cookies": [], "headersSize": -1, "bodySize": len(request_body),
    }  # fmt: skip
    if request_body:
        request["postData"] = {"mimeType": "", "text": request_body.decode("utf-8", "replace")}
    return {
        "startedDateTime": started,
        "time": time_ms,
        "request": request,
        "response": {
            "status": status,
            "statusText": reason,
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": k, "value": v} for k, v in headers],
            "cookies": [],
            "content": content,
            "redirectURL": next((v for k, v in headers if k.lower() == "location"), ""),
            "headersSize": -1,
            "bodySize": body_size,
        },
        "cache": {},
        "timings": {"send": 0, "wait": time_ms, "receive": 0},
    }


def har_document(entries: list[dict[str, Any]], version: str) -> dict[str, Any]:
    return {
        "log": {
            "version": "1.2",
            "creator": {"name": "labd", "version": version},
            "entries": entries,
        }
    }

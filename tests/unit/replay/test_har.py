"""Loading and matching HAR archives, including what browsers export and what is broken."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from labd.errors import UsageError
from labd.replay.errors import ArchiveError
from labd.replay.har import har_document, har_entry, load, parse, request_key
from labd.replay.shaping import PROFILES, profile

MiB = 2**20
WHEN = "2026-01-01T00:00:00+00:00"


def entry(
    url: str, body: bytes | None = b"ok", method: str = "GET", b64: bool = False, **response: Any
) -> dict[str, Any]:
    content: dict[str, Any] = {"size": len(body or b""), "mimeType": "text/plain"}
    if body is not None:
        content["text"] = base64.b64encode(body).decode() if b64 else body.decode()
        if b64:
            content["encoding"] = "base64"
    return {
        "request": {"method": method, "url": url, "headers": []},
        "response": {
            "status": 200,
            "statusText": "OK",
            "headers": [],
            "content": content,
            **response,
        },
    }


def archive_of(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"log": {"version": "1.2", "entries": list(entries)}}


def test_matching_is_by_method_scheme_host_path_and_query() -> None:
    archive = parse(archive_of(entry("http://Example.test:80/a?b=2&a=1&t=123", b"one")), "x", ["t"])
    # Host case, default port, parameter order and ignored parameters do not matter.
    assert archive.find("GET", "http://example.test/a?a=1&b=2&t=999") is not None
    assert archive.find("GET", "https://example.test/a?a=1&b=2") is None
    assert archive.find("POST", "http://example.test/a?a=1&b=2") is None
    assert archive.find("GET", "http://example.test/a?a=1") is None
    assert archive.find("GET", "http://example.test:8080/a?a=1&b=2") is None


def test_a_url_recorded_twice_is_always_answered_with_the_first_recording() -> None:
    archive = parse(
        archive_of(entry("http://e.test/", b"first"), entry("http://e.test/", b"second")), "x"
    )
    response = archive.find("GET", "http://e.test/")
    assert response is not None and response.body == b"first"


def test_binary_bodies_and_framing_headers() -> None:
    raw = bytes(range(256))
    har = archive_of(
        entry(
            "http://e.test/img",
            raw,
            b64=True,
            headers=[
                {"name": "Content-Encoding", "value": "gzip"},
                {"name": "Content-Length", "value": "9"},
                {"name": "Content-Type", "value": "image/png"},
                {"name": ":status", "value": "200"},
            ],
        )
    )
    response = parse(har, "x").find("GET", "http://e.test/img")
    assert response is not None
    assert response.body == raw
    # Bodies are stored decoded: the recorded encoding and length would lie.
    assert response.headers == (("Content-Type", "image/png"),)


def test_browser_export_with_missing_bodies_loads() -> None:
    exported = archive_of(
        entry("https://e.test/", b"<html>"),
        {**entry("https://e.test/redirect", None, status=301), "_initiator": {"type": "parser"}},
    )
    exported["log"]["creator"] = {"name": "WebInspector", "version": "537.36"}
    archive = parse(exported, "devtools.har")
    redirect = archive.find("GET", "https://e.test/redirect")
    assert redirect is not None and redirect.status == 301 and redirect.body == b""
    assert archive.skipped == []


def test_broken_entries_are_skipped_and_named() -> None:
    har = archive_of(
        entry("http://e.test/good"),
        entry("http://e.test/b64", b"!!notbase64"),
        {"request": {"method": "GET", "url": "http://e.test/noresponse"}},
        entry("/relative"),
    )
    har["log"]["entries"][1]["response"]["content"]["encoding"] = "base64"
    archive = parse(har, "x")
    assert len(archive) == 1
    assert archive.skipped[0].startswith("entries[1]: response.content.text: bad base64")
    assert archive.skipped[1] == "entries[2]: missing 'response'"
    assert archive.skipped[2] == "entries[3]: request.url '/relative' is not an absolute URL"


def test_headers_http_cannot_carry_are_skipped_and_named() -> None:
    # A value with CR/LF or NUL made aiohttp refuse the response (an empty reply and a
    # traceback); a name that is not a token went out as it was ("Bad Name:: v").
    headers = [
        {"name": "Content-Type", "value": "text/plain"},
        {"name": "X-Split", "value": "a\r\nSet-Cookie: evil=1"},
        {"name": "X-Nul", "value": "a\x00b"},
        {"name": "Bad Name:", "value": "v"},
        {"name": "X-Tab", "value": "a\tb"},
        {"name": "", "value": "v"},
    ]
    har = archive_of(
        entry("http://e.test/", headers=headers, statusText="OK\r\nX: y"),
        entry("http://e.test/other"),
    )
    archive = parse(har, "x")
    assert len(archive) == 2  # the entry is served, without what cannot be sent
    response = archive.find("GET", "http://e.test/")
    assert response is not None
    assert response.headers == (("Content-Type", "text/plain"), ("X-Tab", "a\tb"))
    assert response.reason == ""
    assert archive.skipped == [
        "entries[0]: response.headers[1] X-Split: the value holds a control character; skipped",
        "entries[0]: response.headers[2] X-Nul: the value holds a control character; skipped",
        "entries[0]: response.headers[3]: name 'Bad Name:' is not an HTTP token; skipped",
        "entries[0]: response.headers[5]: name '' is not an HTTP token; skipped",
        "entries[0]: response.statusText 'OK\\r\\nX: y': holds a control character; not sent",
    ]


def test_nothing_servable_is_an_error() -> None:
    with pytest.raises(
        ArchiveError, match=r"x: no entry can be served; first problem: entries\[0\]"
    ):
        parse(archive_of(entry("/relative")), "x")


def test_corrupt_truncated_and_foreign_files(tmp_path: Path) -> None:
    good = json.dumps(archive_of(entry("http://e.test/")))
    truncated = tmp_path / "cut.har"
    truncated.write_text(good[: len(good) // 2])
    with pytest.raises(
        ArchiveError, match=r"cut.har: not JSON \(line 1, column \d+: .*\); truncated\?"
    ):
        load(truncated, MiB)
    binary = tmp_path / "binary.har"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    with pytest.raises(ArchiveError, match=r"binary.har: not JSON"):
        load(binary, MiB)
    foreign = tmp_path / "package.json"
    foreign.write_text('{"name": "x"}')
    with pytest.raises(ArchiveError, match=r"package.json: not a HAR archive \(no 'log' object\)"):
        load(foreign, MiB)
    with pytest.raises(ArchiveError, match=r"missing.har: No such file"):
        load(tmp_path / "missing.har", MiB)


def test_a_number_too_long_to_convert_is_named_not_a_crash(tmp_path: Path) -> None:
    """A 5,000-digit status crashed `labd replay serve` (exit 3) and made submit a 500."""
    huge = tmp_path / "huge.har"
    huge.write_text('{"log": {"entries": [{"response": {"status": ' + "9" * 5000 + "}}]}}")
    with pytest.raises(ArchiveError, match=r"huge.har: not JSON labd can read: Exceeds the limit"):
        load(huge, MiB)


def test_an_archive_over_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    big = tmp_path / "big.har"
    with big.open("wb") as f:  # sparse: 500 MiB on paper, nothing on disk
        f.truncate(500 * MiB)
    with pytest.raises(
        ArchiveError, match=r"big.har: the archive is 500 MiB, over the limit of 256 MiB"
    ):
        load(big, 256 * MiB)


def test_written_entries_round_trip() -> None:
    binary = bytes(range(200, 256))
    entries = [
        har_entry("GET", "http://e.test/t?q=1", [], b"", 200, "OK", [], b"text", WHEN, 1.0),
        har_entry("POST", "http://e.test/bin", [], b"form", 201, "Created", [], binary, WHEN, 2.0),
    ]
    archive = parse(json.loads(json.dumps(har_document(entries, "test"))), "x")
    assert archive.find("GET", "http://e.test/t?q=1").body == b"text"  # type: ignore[union-attr]
    assert archive.find("POST", "http://e.test/bin").body == binary  # type: ignore[union-attr]
    assert entries[1]["response"]["content"]["encoding"] == "base64"


def test_request_keys() -> None:
    assert request_key("get", "HTTPS://Example.test:443/") == (
        "GET",
        "https",
        "example.test",
        "/",
        "",
    )
    assert request_key("GET", "http://e.test") == ("GET", "http", "e.test", "/", "")


def test_one_url_spelled_two_ways_is_one_recording() -> None:
    """An export may write a host in Unicode and escapes in either case; a browser asks for
    the ASCII host (xn--) and its own escapes. RFC 3986's normal form matches them."""
    archive = parse(archive_of(entry("https://Bücher.example/a%7eb/c%2fd%e2%82%ac")), "x")
    assert archive.find("GET", "https://xn--bcher-kva.example/a~b/c%2Fd%E2%82%AC") is not None
    # What the normal form keeps apart stays apart: an escaped slash is not a slash.
    assert archive.find("GET", "https://xn--bcher-kva.example/a~b/c/d%E2%82%AC") is None
    assert request_key("GET", "http://[::1]:8080/%41")[2:4] == ("[::1]:8080", "/A")
    # Dot segments go, as browsers remove them; a path written as an IRI is its UTF-8 escapes.
    dots = parse(archive_of(entry("http://e.test/dot/./x/../y"), entry("http://e.test/ü")), "x")
    assert dots.find("GET", "http://e.test/dot/y") is not None
    assert dots.find("GET", "http://e.test/%C3%BC") is not None
    assert request_key("GET", "http://e.test/a/b/..")[3] == "/a/"


def test_profiles_are_named_with_their_values() -> None:
    assert profile("3G") == PROFILES["3g"]
    assert (PROFILES["3g"].latency_ms, PROFILES["3g"].down_kbps, PROFILES["3g"].up_kbps) == (
        300,
        1600,
        768,
    )
    assert not PROFILES["none"].shaped
    with pytest.raises(UsageError, match="network profile '5g': unknown; known: none, 2g"):
        profile("5g")


def test_interim_statuses_are_skipped_with_the_reason() -> None:
    """A recorded 100, 101 (a WebSocket upgrade) or 199 was served as the answer: clients hung."""
    har = archive_of(
        entry("http://e.test/"),
        *(entry(f"http://e.test/{status}", status=status) for status in (100, 101, 199)),
    )
    archive = parse(har, "x")
    assert len(archive) == 1
    assert archive.skipped == [
        f"entries[{i}]: response.status {status}: an interim (1xx) response, not an answer"
        for i, status in ((1, 100), (2, 101), (3, 199))
    ]


@pytest.mark.parametrize(
    ("broken", "says"),
    [
        (7, "expected an object, got a number"),
        ({"request": [], "response": {}}, "request: expected an object, got an array"),
        (
            {"request": {"url": "http://e.test/"}, "response": "x"},
            "response: expected an object, got a string",
        ),
        (
            {"request": {"method": "GET", "url": "http://e.test/"}, "response": {"status": "abc"}},
            "response.status 'abc' is not an HTTP status code",
        ),
        (
            {"request": {"method": "GET", "url": "http://e.test/"}, "response": {"status": True}},
            "response.status True is not an HTTP status code",
        ),
        (
            {"request": {"method": 3, "url": "http://e.test/"}, "response": {"status": 200}},
            "request.method 3 is not an HTTP method",
        ),
        (
            {
                "request": {"method": "GET", "url": "http://e.test/"},
                "response": {"status": 200, "content": {"text": {"a": 1}}},
            },
            "response.content.text: expected a string, got an object",
        ),
        (
            {
                "request": {"method": "GET", "url": "http://e.test/"},
                "response": {"status": 200, "headers": ["Content-Type: text/html"]},
            },
            "response.headers[0]: expected an object with name and value",
        ),
    ],
)
def test_a_skipped_entry_names_the_field_and_what_was_expected(broken: Any, says: str) -> None:
    """They said "invalid literal for int()", "'int' object is not subscriptable", "string
    indices must be integers"."""
    har = archive_of(entry("http://e.test/"))
    har["log"]["entries"].append(broken)
    assert parse(har, "x").skipped == [f"entries[1]: {says}"]


@pytest.mark.parametrize("depth", [65, 100_000])
def test_deep_nesting_is_refused_before_anything_recursive(tmp_path: Path, depth: int) -> None:
    """100,000 levels raised RecursionError from the JSON parser (a crash of `labd replay
    serve`, an HTTP 500 at submit); 65 is past the limit labd keeps for all JSON it takes in."""
    deep = tmp_path / "deep.har"
    deep.write_text('{"log": {"entries": ' + "[" * depth + "]" * depth + "}}")
    with pytest.raises(ArchiveError, match=r"deep.har: arrays and objects nested more than 64"):
        load(deep, 64 * MiB)


def test_bodies_with_control_characters_are_stored_as_base64() -> None:
    """JSON writes NUL as \\u0000: 40 KB of gzip (200 MB of zeros) made a 1.2 GB archive."""
    body = b"\0" * 1000
    recorded = har_entry("GET", "http://e.test/", [], b"", 200, "OK", [], body, WHEN, 1)
    content = recorded["response"]["content"]
    assert content["encoding"] == "base64" and len(json.dumps(content["text"])) < 1400
    found = parse(archive_of(recorded), "x").find("GET", "http://e.test/")
    assert found is not None and found.body == body


def test_a_response_without_content_type_is_served_with_the_archives_mime_type() -> None:
    """A stylesheet served without a type is refused by a browser under nosniff: the page
    would load differently than it was recorded."""
    css = entry("https://e.test/a.css", b"body{}")
    css["response"]["content"]["mimeType"] = "text/css"
    typed = entry(
        "https://e.test/b.css", b"body{}", headers=[{"name": "content-type", "value": "text/css"}]
    )
    archive = parse(archive_of(css, typed, entry("https://e.test/empty", b"")), "x")
    assert archive.find("GET", "https://e.test/a.css").headers == (  # type: ignore[union-attr]
        ("Content-Type", "text/css"),
    )
    # A recorded header wins (the mimeType beside it says text/plain); an empty body gets none.
    assert archive.find("GET", "https://e.test/b.css").headers == (  # type: ignore[union-attr]
        ("content-type", "text/css"),
    )
    assert archive.find("GET", "https://e.test/empty").headers == ()  # type: ignore[union-attr]


def test_a_heads_recorded_length_is_kept_when_it_is_a_number(tmp_path: Path) -> None:
    """What a GET would be sent; absurd values are left out, not the entry."""
    entries = [
        {"request": {"method": "HEAD", "url": f"http://site.test/{n}"},
         "response": {"status": 200, "headers": [{"name": "content-length", "value": value}]}}
        for n, value in enumerate([" 12345 ", "1" * 5000, "-1", "١٢"])
    ]  # fmt: skip
    path = tmp_path / "heads.har"
    path.write_text(json.dumps({"log": {"entries": entries}}))
    archive = load(path, MiB)
    lengths = [archive.find("HEAD", f"http://site.test/{n}") for n in range(4)]
    assert [r.length if r else "missing" for r in lengths] == [12345, None, None, None]
    assert [problem.split(":")[0] for problem in archive.skipped] == [
        f"entries[{n}]" for n in (1, 2, 3)
    ]
    assert "not a length; the HEAD is sent none" in archive.skipped[1]

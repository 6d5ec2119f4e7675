"""Compressed responses: kept decoded in the HAR with their Content-Encoding beside them, and
replayed encoded again for clients that accept it (a page of 70 bytes of gzip was sent as its
11,000 decoded bytes: 157 times the bandwidth)."""

from __future__ import annotations

import gzip
import zlib

import pytest

from labd.replay.encoding import ENCODERS, Undecodable, accepted, coding_of, decoded, encoded
from labd.replay.har import har_entry, parse
from labd.replay.replaying import ReplayHandler
from labd.replay.shaping import PROFILES, Shaper
from tests.unit.replay.test_har import WHEN, archive_of, entry

PAGE = b"<p>hello, compressed world</p>" * 400


@pytest.mark.parametrize(
    ("header", "allows"),
    [
        ("gzip, deflate, br, zstd", {"gzip", "deflate", "br", "zstd"}),
        ("gzip;q=0, deflate;q=0.5", {"deflate"}),
        ("x-gzip", {"gzip"}),
        ("*", set(ENCODERS)),
        ("*, gzip;q=0", set(ENCODERS) - {"gzip"}),
        ("", set()),
        ("identity", {"identity"}),
    ],
)
def test_accept_encoding_is_read_with_its_weights(header: str, allows: set[str]) -> None:
    assert accepted(header) == allows


def test_content_codings_are_named_in_lower_case_and_identity_is_none() -> None:
    assert [
        coding_of(v) for v in ("GZIP", "x-gzip", "identity", "", "gzip, br", "x-gzip, GZIP")
    ] == [
        "gzip",
        "gzip",
        "",
        "",
        "gzip,br",
        "gzip,gzip",
    ]
    assert encoded(b"x", "compress") is None and encoded(b"x", "gzip,compress") is None


@pytest.mark.parametrize("coding", ["gzip,gzip", "deflate,gzip", "gzip,deflate", "gzip"])
def test_codings_applied_one_over_another_are_undone_in_reverse(coding: str) -> None:
    """ "Content-Encoding: gzip, gzip" is two layers; aiohttp decodes one coding only, so the
    recorder kept the page gzipped and replay served garbage under the header."""
    wire = encoded(PAGE, coding)
    assert wire is not None and decoded(wire, coding, len(PAGE)) == PAGE
    if coding == "gzip,gzip":
        assert gzip.decompress(gzip.decompress(wire)) == PAGE


def test_raw_deflate_and_gzip_of_several_members_are_read_as_browsers_read_them() -> None:
    raw = zlib.compressobj(6, zlib.DEFLATED, -15)
    assert decoded(raw.compress(PAGE) + raw.flush(), "deflate", len(PAGE)) == PAGE
    members = gzip.compress(PAGE[:100]) + gzip.compress(PAGE[100:])
    assert decoded(members, "gzip", len(PAGE)) == PAGE


@pytest.mark.parametrize(
    ("coding", "body", "names"),
    [
        ("compress", b"x", "'compress'"),
        ("gzip,gzip", gzip.compress(b"not gzip inside"), "gzip"),
        ("gzip", gzip.compress(PAGE)[:-20], "ends early"),
        ("gzip,gzip", gzip.compress(gzip.compress(b"\0" * 2**24)), "over the limit of 1 MiB"),
    ],
)
def test_a_body_that_cannot_be_decoded_is_refused_naming_why(
    coding: str, body: bytes, names: str
) -> None:
    with pytest.raises(Undecodable, match=names):
        decoded(body, coding, 2**20)


def test_stacked_codings_are_sent_only_to_a_client_that_accepts_each() -> None:
    twice = [{"name": "Content-Encoding", "value": "gzip, deflate"}]
    handler = ReplayHandler(
        parse(archive_of(entry("https://e.test/a.js", PAGE, headers=twice)), "x.har"),
        Shaper(PROFILES["none"]),
    )
    (choices,) = handler.prepared.values()
    sent = choices.for_client("gzip, deflate")
    assert sent.headers["Content-Encoding"] == "gzip, deflate"
    assert gzip.decompress(zlib.decompress(sent.body)) == PAGE  # listed in the order applied
    assert choices.for_client("gzip").body == PAGE  # deflate not accepted: identity


def test_gzip_and_deflate_come_back_as_the_body() -> None:
    assert gzip.decompress(encoded(PAGE, "gzip") or b"") == PAGE
    assert zlib.decompress(encoded(PAGE, "deflate") or b"") == PAGE
    assert encoded(PAGE, "gzip") == encoded(PAGE, "gzip")  # the same bytes on every run


def test_a_recorded_entry_keeps_the_coding_and_the_size_on_the_wire() -> None:
    """HAR 1.2: content.text decoded, bodySize as received, content.compression the saving."""
    headers = [("Content-Type", "text/html"), ("Content-Encoding", "gzip")]
    wire = len(gzip.compress(PAGE))
    recorded = har_entry("GET", "http://e.test/", [], b"", 200, "OK", headers, PAGE, WHEN, 1, wire)
    response = recorded["response"]
    assert response["content"]["text"] == PAGE.decode()
    assert {"name": "Content-Encoding", "value": "gzip"} in response["headers"]
    assert response["bodySize"] == wire
    assert response["content"]["compression"] == len(PAGE) - wire
    loaded = parse(archive_of(recorded), "x").find("GET", "http://e.test/")
    assert loaded is not None and loaded.encoding == "gzip" and loaded.body == PAGE
    assert loaded.headers == (("Content-Type", "text/html"),)  # sent only with an encoded body
    unknown = har_entry("GET", "http://e.test/", [], b"", 200, "OK", headers, PAGE, WHEN, 1)
    assert unknown["response"]["bodySize"] == -1  # HAR's "not available"
    assert "compression" not in unknown["response"]["content"]


def test_browser_exports_replay_encoded_as_they_were_sent() -> None:
    """Chrome and Firefox keep content-encoding among the headers and the text decoded."""
    gzipped, brotli = ([{"name": "content-encoding", "value": v}] for v in ("gzip", "br"))
    exported = archive_of(
        entry("https://e.test/a.js", PAGE, headers=gzipped),
        entry("https://e.test/b.js", PAGE, headers=brotli),
        entry("https://e.test/c", b"", status=304, headers=gzipped),
    )
    handler = ReplayHandler(parse(exported, "devtools.har"), Shaper(PROFILES["none"]))
    choices = {key[3]: found for key, found in handler.prepared.items()}
    sent = choices["/a.js"].for_client("gzip, deflate, br")
    assert sent.headers["Content-Encoding"] == "gzip" and gzip.decompress(sent.body) == PAGE
    assert choices["/a.js"].for_client("deflate").body == PAGE  # not accepted: identity
    assert "Content-Encoding" not in choices["/a.js"].for_client("").headers
    sent = choices["/b.js"].for_client("br")
    if "br" in ENCODERS:
        assert sent.headers["Content-Encoding"] == "br" and sent.body != PAGE
    else:  # cannot be produced here: identity, and no header claiming otherwise
        assert "Content-Encoding" not in sent.headers and sent.body == PAGE
    empty = choices["/c"].for_client("gzip")  # nothing to encode (a 304)
    assert "Content-Encoding" not in empty.headers and empty.body == b""

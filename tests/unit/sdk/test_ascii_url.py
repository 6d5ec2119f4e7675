"""The URL the controller types: the same address in ASCII (WHATWG URL), so neither a desktop's
keyboard map nor a phone's `input text` has to take characters beyond ASCII."""

from __future__ import annotations

import pytest

from labd.sdk.controller import ascii_url


@pytest.mark.parametrize(
    ("url", "typed"),
    [
        ("http://site.test/?q=a b#x", "http://site.test/?q=a b#x"),  # ASCII: as it is
        ("http://EXAMPLE.com:8080/%zz", "http://EXAMPLE.com:8080/%zz"),
        (
            "http://127.0.0.1:8000/あい?q=é#frag日",
            "http://127.0.0.1:8000/%E3%81%82%E3%81%84?q=%C3%A9#frag%E6%97%A5",
        ),
        # UTS 46 as browsers have it: ß kept (xn--fa-hia), not mapped to "ss" as IDNA 2003 does
        ("http://faß.例え.JP:80/x", "http://xn--fa-hia.xn--r8jz45g.jp:80/x"),
        ("http://例え.jp:pä@例え.jp/", "http://%E4%BE%8B%E3%81%88.jp:p%C3%A4@xn--r8jz45g.jp/"),
        ("http://[::1]:80/é", "http://[::1]:80/%C3%A9"),
        ("data:text/html,<p>é", "data:text/html,<p>%C3%A9"),
        ("foo://bücher.de/x", "foo://b%C3%BCcher.de/x"),  # not a special scheme: no IDNA
        ("HTTPS://bücher.de/", "HTTPS://xn--bcher-kva.de/"),
        # not a host IDNA takes, nor a URL urlsplit takes: percent-encoded, which a browser
        # decodes before it checks a host (WHATWG URL's host parser)
        ("http://a..例/", "http://a..%E4%BE%8B/"),
        ("http://[::1/é", "http://[::1/%C3%A9"),
    ],
)
def test_the_same_address_in_ascii(url: str, typed: str) -> None:
    assert ascii_url(url) == typed
    assert ascii_url(typed) == typed

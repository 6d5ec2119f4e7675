"""labd's sync pages: one colour edge to edge, a `next` link only to http(s) pages and never
able to break out of its attribute; anything else is refused with what was wrong."""

from __future__ import annotations

import aiohttp

from labd.capture import SyncPages


async def test_colour_pages_and_what_they_refuse() -> None:
    pages = SyncPages()
    await pages.start()
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(pages.url((0, 255, 0), "http://www.labd.test/?a=1&b='\"<x>")) as r:
                assert r.status == 200 and r.headers["Cache-Control"] == "no-store"
                page = await r.text()
            assert "data-labd-sync='#00ff00'" in page and "background:#00ff00" in page
            assert "data-next='http://www.labd.test/?a=1&amp;b=&#x27;&quot;&lt;x&gt;'" in page
            base = pages.url((255, 0, 0)).rsplit("/", 1)[0]
            async with http.get(f"{base}/red") as r:
                assert r.status == 404 and "six hex digits" in await r.text()
            async with http.get(f"{base}/ff0000?next=javascript:alert(1)") as r:
                assert r.status == 400 and "only http and https" in await r.text()
    finally:
        await pages.stop()

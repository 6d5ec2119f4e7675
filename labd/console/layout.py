"""The console's page frame and small HTML pieces. Pages are Python functions returning
strings, every value from outside passed through `escape`: a few dozen lines of layout do
not need a template engine. `html.escape` leaves control and bidi characters alone (a revision
`safe\u202eexe.txt` would read reversed), so `page` writes every one left in the whole page,
charts and tables of `labd.report` included, as a visible escape (`labd.visible.shown`, as the
CLI does)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from html import escape

from aiohttp import web

from labd.daemon.guard import CALLER
from labd.visible import shown

NAV = (
    ("devices", "Devices"),
    ("queue", "Queue"),
    ("running", "Running"),
    ("jobs", "Jobs"),
    ("compare", "Compare"),
    ("history", "History"),
)


def page(
    request: web.Request, title: str, body: str, current: str = "", live: bool = False
) -> web.Response:
    """A whole console page: header with the navigation and who is signed in, then `body`.
    `live`: the page follows the event bus (loads the one small script)."""
    caller = request.get(CALLER)
    who = ""
    if caller is not None:
        who = (
            f"<span class='who'>{escape(caller.principal.name)} "
            f"({escape(caller.principal.role.value)})</span>"
            + form("/console/logout", "Sign out", request, css="link")
        )
    links = "".join(
        f"<a href='/console/{slug}'" + (" class='here'" if slug == current else "") + f">{name}</a>"
        for slug, name in NAV
    )
    script = "<script src='/console/static/live.js' defer></script>" if live else ""
    html = (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{escape(title)} · labd</title>"
        f"<link rel='stylesheet' href='/console/static/console.css'>{script}</head><body>"
        f"<header><a class='brand' href='/console/'>labd</a><nav>{links}</nav>{who}</header>"
        f"<main><h1>{escape(title)}</h1>{body}</main></body></html>"
    )
    # The console's own markup holds no such character but the newline, which is kept.
    return web.Response(text=shown(html, lines=True), content_type="text/html")


def form(
    action: str,
    label: str,
    request: web.Request,
    css: str = "",
    fields: Sequence[tuple[str, str]] = (),
) -> str:
    """A one-button form posting to `action` with the session's anti-forgery token."""
    from labd.console.access import CSRF

    token = request.get(CSRF, "")
    hidden = "".join(
        f"<input type='hidden' name='{escape(k)}' value='{escape(v)}'>"
        for k, v in [("csrf", token), *fields]
    )
    return (
        f"<form method='post' action='{escape(action)}' class='inline'>{hidden}"
        f"<button type='submit' class='{css}'>{escape(label)}</button></form>"
    )


def table(head: Sequence[str], rows: Iterable[str], empty: str, css: str = "") -> str:
    """A table of pre-rendered <tr> rows, or the `empty` sentence when there are none."""
    body = "".join(rows)
    if not body:
        return f"<p class='note'>{escape(empty)}</p>"
    cells = "".join(f"<th>{escape(h)}</th>" for h in head)
    return f"<table class='{css}'><tr>{cells}</tr>{body}</table>"


def when(moment: datetime | None) -> str:
    """A time as UTC, to the second; a dash when there is none."""
    if moment is None:
        return "-"
    return f"<time datetime='{moment.isoformat()}'>{moment:%Y-%m-%d %H:%M:%S}</time>"


def state(value: str) -> str:
    return f"<span class='state {escape(value)}'>{escape(value)}</span>"


def job_link(job_id: str) -> str:
    return f"<a href='/console/jobs/{escape(job_id)}'>{escape(job_id)}</a>"

"""The names the API's Host and Origin checks accept."""

from __future__ import annotations

import socket

from labd.daemon.guard import allowed_host_names, authority


def test_a_host_header_is_exactly_one_host_and_port() -> None:
    assert authority("Evil.Example:9472") == ("evil.example", 9472)
    assert authority("[::1]:9472") == ("::1", 9472)
    assert authority("127.0.0.1") == ("127.0.0.1", None)
    assert authority("localhost.") == ("localhost.", None)  # not `localhost`
    for bad in ("[::1", "localhost:9472@evil.example", "localhost:9472 evil.example",
                "localhost:", "localhost:99999", "a:1:2", ""):  # fmt: skip
        assert authority(bad) is None, bad


def test_the_default_names_are_this_machine_and_where_labd_listens() -> None:
    names = allowed_host_names(["0.0.0.0", "10.1.2.3"], ["Labd.Lab.Example"])
    assert {"localhost", "127.0.0.1", "::1", "10.1.2.3", "labd.lab.example"} <= names
    assert socket.gethostname().lower() in names
    assert "0.0.0.0" not in names and "evil.example" not in names


def test_on_a_wildcard_address_any_ip_literal_names_this_daemon() -> None:
    from labd.auth import Audit, Principals
    from labd.daemon.guard import ApiGuard
    from labd.events import EventBus

    names = allowed_host_names(["0.0.0.0"], [])
    wildcard = ApiGuard(Principals([]), Audit(EventBus(10)), names, {}, any_ip_literal=True)
    assert wildcard._host_allowed("192.0.2.7") and wildcard._host_allowed("2001:db8::1")
    assert not wildcard._host_allowed("evil.example")
    loopback = ApiGuard(Principals([]), Audit(EventBus(10)), names, {})
    assert not loopback._host_allowed("192.0.2.7")

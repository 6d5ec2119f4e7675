"""The API's Unix socket: open to every account, one daemon at a time, any path length."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from labd.daemon.listeners import peer_of, reachable, tcp_socket, unix_socket
from labd.errors import LabdError


def test_a_socket_any_account_may_connect_to_and_whose_peer_is_known(tmp_path: Path) -> None:
    with unix_socket(tmp_path / "api.sock", "api") as server:
        assert stat.S_IMODE((tmp_path / "api.sock").stat().st_mode) == 0o666
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(str(tmp_path / "api.sock"))
            accepted, _ = server.accept()
            with accepted:
                peer = peer_of(accepted)
    assert peer is not None and peer.uid == os.geteuid()
    assert peer_of(socket.socket()) is None  # TCP: no peer credentials


def test_a_dead_daemons_socket_is_replaced_and_a_live_one_kept(tmp_path: Path) -> None:
    unix_socket(tmp_path / "api.sock", "api").close()  # left behind, nobody listens
    with (
        unix_socket(tmp_path / "api.sock", "api"),
        pytest.raises(LabdError, match="another process already listens"),
    ):
        unix_socket(tmp_path / "api.sock", "api")
    (tmp_path / "notes").write_text("mine")
    with pytest.raises(LabdError, match="cannot listen on"):
        unix_socket(tmp_path / "notes", "api")
    assert (tmp_path / "notes").read_text() == "mine"


def test_a_path_too_long_for_sockaddr_un_still_works(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 120)
    deep.mkdir()
    with (
        unix_socket(deep / "api.sock", "api"),
        socket.socket(socket.AF_UNIX) as client,
        reachable(deep / "api.sock") as address,
    ):
        client.connect(address)


def test_a_taken_port_says_so_and_names_the_key_to_change() -> None:
    """A second account's `labd run` said only "Address already in use"."""
    with tcp_socket("127.0.0.1", 0, "side") as taken:
        taken.listen()  # a running daemon's
        port = taken.getsockname()[1]
        with pytest.raises(LabdError) as caught:
            tcp_socket("127.0.0.1", port, "http side port ([http] host and port)")
    assert str(caught.value) == (
        f"http side port ([http] host and port): cannot listen on 127.0.0.1:{port}: Address "
        "already in use (another labd or program listens there: set another port)"
    )

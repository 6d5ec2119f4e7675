from __future__ import annotations

import stat
from pathlib import Path

from labd.daemon.statedir import prepare_state_dir


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_state_directory_is_private_but_its_socket_reachable(tmp_path: Path) -> None:
    state = tmp_path / "state" / "labd"
    prepare_state_dir(state, sqlite=True)
    assert mode(state) == 0o711  # others may connect to api.sock by name, not list or read
    assert mode(state / "labd.db") == 0o600  # every job's parameters, tokens included
    assert mode(state / "jobs") == 0o700


def test_an_older_labds_readable_files_are_tightened(tmp_path: Path) -> None:
    state = tmp_path / "labd"
    (state / "jobs").mkdir(parents=True)
    state.chmod(0o755)
    (state / "jobs").chmod(0o755)
    for name in ("labd.db", "labd.db-wal"):
        (state / name).write_text("rows")
        (state / name).chmod(0o644)
    (state / "credentials").mkdir()
    (state / "credentials" / "local.toml").write_text("secret")
    (state / "credentials").chmod(0o755)  # an operations tester: listable after a restart
    (state / "credentials" / "local.toml").chmod(0o644)
    prepare_state_dir(state, sqlite=True)
    assert (mode(state), mode(state / "jobs")) == (0o711, 0o700)
    assert mode(state / "labd.db") == mode(state / "labd.db-wal") == 0o600
    assert (state / "labd.db").read_text() == "rows"
    assert mode(state / "credentials") == 0o700
    assert mode(state / "credentials" / "local.toml") == 0o600


def test_no_sqlite_file_is_made_when_the_database_is_elsewhere(tmp_path: Path) -> None:
    prepare_state_dir(tmp_path / "labd", sqlite=False)
    assert not (tmp_path / "labd" / "labd.db").exists()


def test_a_link_in_the_state_directory_is_not_followed(tmp_path: Path) -> None:
    """/dev/null was found 0600 on a lab machine: a database file that is a link made labd,
    as root, tighten whatever it pointed at."""
    state = tmp_path / "labd"
    state.mkdir()
    shared = tmp_path / "shared"
    shared.write_text("")
    shared.chmod(0o666)
    (state / "labd.db-wal").symlink_to(shared)
    prepare_state_dir(state, sqlite=True)
    assert shared.stat().st_mode & 0o777 == 0o666


def test_a_labd_pid_that_is_not_a_regular_file_is_named(tmp_path: Path) -> None:
    """A link, a directory or a pipe at labd.pid gave "unexpected error" and a crash log; a
    link's target is never opened."""
    import os

    import pytest

    from labd.daemon.statedir import lock_state_dir
    from labd.errors import LabdError

    target = tmp_path / "elsewhere"
    target.write_text("keep\n")
    for make in (
        lambda p: p.symlink_to(target),
        lambda p: p.mkdir(),
        lambda p: os.mkfifo(p),
    ):
        folder = tmp_path / f"state-{len(list(tmp_path.iterdir()))}"
        folder.mkdir()
        make(folder / "labd.pid")
        with pytest.raises(LabdError, match=r"cannot start: .*labd\.pid: .*regular file"):
            lock_state_dir(folder)
    assert target.read_text() == "keep\n"
    fd = lock_state_dir(tmp_path)  # a plain one is taken, and holds the pid
    assert (tmp_path / "labd.pid").read_text() == f"{os.getpid()}\n"
    os.close(fd)


def test_a_credentials_folder_that_is_a_link_is_not_followed(tmp_path: Path) -> None:
    """Its target and the files in it were made 0700 and 0600: not labd's to change."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "f").write_text("someone's")
    elsewhere.chmod(0o755)
    (elsewhere / "f").chmod(0o644)
    state = tmp_path / "labd"
    state.mkdir()
    (state / "credentials").symlink_to(elsewhere)
    prepare_state_dir(state, sqlite=True)
    assert (mode(elsewhere), mode(elsewhere / "f")) == (0o755, 0o644)

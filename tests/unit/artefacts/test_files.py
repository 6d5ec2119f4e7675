"""A job's folder as the API sees it: what is listed, what opens, and why the rest does not."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from labd.artefacts import ArtefactError, list_artefacts, open_artefact
from labd.artefacts.files import artefact_page, disk_usage


@pytest.fixture
def jobs(tmp_path: Path) -> Path:
    folder = tmp_path / "jobs" / "j1"
    (folder / "new" / "iteration-3").mkdir(parents=True)
    (folder / "new" / "iteration-3" / "video.webm").write_bytes(b"v" * 5000)
    (folder / "new" / "iteration-3" / "heatmap.png").write_bytes(b"p" * 10)
    (folder / "new" / "iteration-3" / "input-latency.json").write_text('{"dispatch": [5.6]}')
    (folder / "job.log").write_text("PERFHERDER_DATA: {}\n")
    (folder / "notes.html").write_text("<script>alert(1)</script>")
    (folder / ".hidden").write_text("x")
    (folder / "odd name.txt").write_text("x")
    (tmp_path / "outside.txt").write_text("OUTSIDE")
    (folder / "link.txt").symlink_to(tmp_path / "outside.txt")
    (folder / "linked-dir").symlink_to(tmp_path)
    return tmp_path / "jobs"


def test_listing_names_kinds_and_leaves_out_links_and_hidden_files(jobs: Path) -> None:
    found = {a.name: a for a in list_artefacts(jobs, "j1")}
    assert sorted(found) == ["job.log", "new/iteration-3/heatmap.png",
                             "new/iteration-3/input-latency.json",
                             "new/iteration-3/video.webm", "notes.html"]  # fmt: skip
    video = found["new/iteration-3/video.webm"]
    assert (video.kind, video.content_type, video.size) == ("video", "video/webm", 5000)
    assert (video.iteration, video.variant) == (3, "new")
    assert found["new/iteration-3/heatmap.png"].kind == "heatmap"
    assert found["new/iteration-3/input-latency.json"].kind == "input_latency"
    assert (found["job.log"].kind, found["job.log"].content_type) == ("log", "text/plain")
    assert list_artefacts(jobs, "nope") == [] and list_artefacts(jobs, "..") == []


def test_a_listing_counts_what_it_cannot_serve_and_allows_8_folders(jobs: Path) -> None:
    """A tester saw 4 files listed of 7 written, with nothing saying so; and "deeper than 8
    folders" refused 8 folders."""
    eight = jobs / "j1" / "/".join("abcdefgh")
    eight.mkdir(parents=True)
    (eight / "deep.txt").write_text("x")
    (eight / "i").mkdir()
    (eight / "i" / "deeper.txt").write_text("x")
    page = artefact_page(jobs, "j1")
    assert "a/b/c/d/e/f/g/h/deep.txt" in [a.name for a in page.artefacts]
    # .hidden, odd name.txt and the 9th folder; links are no files of the job's, not counted
    assert page.unservable == 3 and page.total == 6
    fd, _ = open_artefact(jobs, "j1", "a/b/c/d/e/f/g/h/deep.txt")
    os.close(fd)
    with pytest.raises(ArtefactError, match="deeper than 8 folders"):
        open_artefact(jobs, "j1", "a/b/c/d/e/f/g/h/i/deeper.txt")


def test_open_reads_the_file_and_refuses_the_rest_with_a_status(jobs: Path) -> None:
    fd, info = open_artefact(jobs, "j1", "new/iteration-3/video.webm")
    try:
        assert info.st_size == 5000 and os.read(fd, 3) == b"vvv"
    finally:
        os.close(fd)
    refused = {
        ("j1", "link.txt"): 403,
        ("j1", "linked-dir/outside.txt"): 403,
        ("j1", "../outside.txt"): 400,
        ("j1", ".hidden"): 400,
        ("j1", "a//b"): 400,
        ("j1", "job.log/x"): 404,  # a file on the way is not a link
        ("j1", "new"): 404,
        ("j1", "missing.webm"): 404,
        ("j2", "job.log"): 404,
        ("..", "outside.txt"): 400,
    }
    for (job_id, name), status in refused.items():
        with pytest.raises(ArtefactError) as caught:
            open_artefact(jobs, job_id, name)
        assert caught.value.status == status, (job_id, name, str(caught.value))


def test_disk_usage_is_what_du_counts(jobs: Path) -> None:
    du = subprocess.run(["du", "-s", "-B1", str(jobs / "j1")], capture_output=True, text=True)
    assert disk_usage(jobs / "j1") == int(du.stdout.split()[0])


def test_a_named_pipe_is_not_listed_not_opened_and_not_waited_on(jobs: Path) -> None:
    """A FIFO a job left is a 404 at once (no reader thread blocked until a writer comes), is
    not listed, and the disk-usage walk passes it by."""
    import concurrent.futures

    os.mkfifo(jobs / "j1" / "pipe.txt")
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        opening = pool.submit(open_artefact, jobs, "j1", "pipe.txt")
        try:
            error = opening.exception(timeout=5)
        finally:
            if not opening.done():  # blocked in open: a writer releases it, then fail
                os.close(os.open(jobs / "j1" / "pipe.txt", os.O_WRONLY | os.O_NONBLOCK))
    assert isinstance(error, ArtefactError) and error.status == 404, error
    assert "pipe.txt" not in {a.name for a in list_artefacts(jobs, "j1")}
    assert disk_usage(jobs / "j1") > 0

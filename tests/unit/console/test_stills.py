"""The console's filmstrip stills read a progress.json the measured program can write: a
malformed one is a clear 422 ("no frames"), never a 500 with a traceback."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from labd.console.artefacts import ArtefactFiles

MALFORMED = [
    "{}",
    "[1,2]",
    '{"frames":5}',
    "not json",
    '{"frames":[{"t_ms":"12","progress":0.5}]}',
    '{"frames":[{"t_ms":[12],"progress":0.5}]}',
    '{"frames":[{"progress":0.5}]}',
    '{"frames":[{"t_ms":1e999,"progress":0.5}]}',
    '{"frames":["x"]}',
    "[" * 100_000,
    "\udcff",
]


async def still(jobs: Path, progress: str) -> web.Response:
    folder = jobs / "job-1" / "a"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "video.webm").write_bytes(b"not really a video")
    (folder / "progress.json").write_bytes(progress.encode("utf-8", "surrogateescape"))
    request = make_mocked_request(
        "GET",
        "/console/jobs/job-1/still?video=a/video.webm&frame=0",
        match_info={"id": "job-1"},
    )
    return await ArtefactFiles(jobs).still(request)


@pytest.mark.parametrize("progress", MALFORMED)
async def test_a_malformed_progress_file_is_a_422_with_no_frames(
    tmp_path: Path, progress: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        response = await still(tmp_path, progress)
    assert response.status == 422
    assert response.text is not None
    assert response.text.startswith("a/progress.json: ") and "no frames" in response.text
    assert "\n" not in response.text.rstrip("\n")  # one line
    assert "Traceback" not in caplog.text


async def test_a_well_formed_progress_file_still_reads(tmp_path: Path) -> None:
    # The progress file reads, so the video is what is judged: not a video, its stills are an
    # image saying so (the page's <img> shows it), not the progress file's "no frames".
    response = await still(tmp_path, '{"frames":[{"t_ms":0,"progress":0.0,"extra":1}]}')
    assert response.status == 422 and response.content_type == "image/svg+xml"
    assert isinstance(response.body, bytes)
    said = " ".join(re.sub(rb"<[^>]+>", b" ", response.body).decode().split())
    assert said == "No stills: the video could not be opened.", said

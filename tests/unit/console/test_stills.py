"""The console's filmstrip stills read a progress.json the measured program can write: a
malformed one is a clear 422 ("no frames"), never a 500 with a traceback."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from labd.console.artefacts import CURVE_MOST, ArtefactFiles, curve_points
from labd.console.stills import Stills

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


async def test_progress_outside_0_to_1_is_refused_naming_the_frame(tmp_path: Path) -> None:
    """labd.capture writes progress as a share, 0.0 to 1.0: 9.0 (a percent) is malformed."""
    response = await still(
        tmp_path, '{"frames":[{"t_ms":0,"progress":0.0},{"t_ms":1,"progress":9}]}'
    )
    assert response.status == 422
    assert response.text == (
        "a/progress.json: frame 1, progress: input should be less than or equal to 1 (got 9); "
        "no frames\n"
    )


async def test_a_progress_file_larger_than_the_console_reads_is_refused(tmp_path: Path) -> None:
    frames = ",".join(f'{{"t_ms":{i},"progress":0.5}}' for i in range(200_000))
    response = await still(tmp_path, '{"frames":[' + frames + "]}")
    assert response.status == 422 and response.text is not None
    assert "larger than the 4,194,304 bytes the console reads" in response.text


def test_the_progress_curve_is_thinned_to_its_changes_and_keeps_every_rise() -> None:
    """200,000 frames of a saw-tooth become at most CURVE_MOST points that still reach 0 and 1
    in every part of the time; a real curve (few changes) keeps every change and its end."""
    saw = [{"t_ms": float(i), "progress": (i % 101) / 100} for i in range(200_000)]
    points = curve_points(saw)
    assert len(points) <= CURVE_MOST
    assert points[0] == (0.0, 0.0) and points[-1] == (199_999.0, (199_999 % 101) / 100)
    quarter = 50_000
    for part in range(4):
        values = [p for t, p in points if part * quarter <= t < (part + 1) * quarter]
        assert min(values) == 0.0 and max(values) == 1.0, part
    real = [0.0] * 50 + [0.4] * 30 + [0.9] * 10 + [1.0] * 100
    frames = [{"t_ms": 16.0 * k, "progress": p} for k, p in enumerate(real)]
    assert curve_points(frames) == [(0.0, 0.0), (800.0, 0.4), (1280.0, 0.9), (1440.0, 1.0),
                                    (16.0 * 189, 1.0)]  # fmt: skip


def test_a_frame_past_the_videos_end_is_named() -> None:
    stills = Stills({0: b"jpeg"}, video_frames=250)
    assert stills.past_end(249) == ""
    assert stills.past_end(8695) == (
        "frame 8695 is past the end of the video, which holds 250 frames (frames count from 0)"
    )
    assert Stills({}).past_end(8695) == ""  # not cut yet: not known


async def test_a_new_progress_file_cuts_the_stills_again(tmp_path: Path) -> None:
    """A re-tester's find: the stills were kept by the video alone, so a progress.json written
    again (a running job viewed early) gave broken images for its new frames."""
    from tests.conftest import need_program
    from tests.integration.http.test_console_untrusted_jobs import webm

    need_program("ffmpeg")
    folder = tmp_path / "job-1" / "a"
    folder.mkdir(parents=True)
    webm(folder / "video.webm", "64x48", 0.4)  # 10 frames
    files = ArtefactFiles(tmp_path)

    async def frame(n: int) -> web.Response:
        request = make_mocked_request(
            "GET", f"/console/jobs/job-1/still?video=a/video.webm&frame={n}",
            match_info={"id": "job-1"},
        )  # fmt: skip
        return await files.still(request)

    def progress(changed_at: list[int]) -> str:
        frames = [{"t_ms": i, "progress": sum(i >= c for c in changed_at) / 3} for i in range(60)]
        return json.dumps({"frames": frames})

    (folder / "progress.json").write_text(progress([1, 2, 3]))
    assert (await frame(2)).status == 200
    (folder / "progress.json").write_text(progress([5, 6, 50]))
    assert (await frame(5)).status == 200 and (await frame(5)).content_type == "image/jpeg"
    past = await frame(50)
    assert past.status == 404 and past.content_type == "image/svg+xml"

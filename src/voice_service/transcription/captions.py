"""Captions of timed segments: SubRip (SRT) and WebVTT, as every transcript surface writes
them (OpenAI's response formats, a job's `?format=`)."""

from __future__ import annotations

from collections.abc import Sequence

from voice_service.engines.protocols import Segment


def srt(segments: Sequence[Segment]) -> str:
    return "".join(
        f"{index}\n{_clock(s.start, ',')} --> {_clock(s.end, ',')}\n{s.text}\n\n"
        for index, s in enumerate(segments, start=1)
    )


def vtt(segments: Sequence[Segment]) -> str:
    cues = "".join(
        f"{_clock(s.start, '.')} --> {_clock(s.end, '.')}\n{s.text}\n\n" for s in segments
    )
    return "WEBVTT\n\n" + cues


def _clock(seconds: float, decimal_mark: str) -> str:
    millis = max(0, round(seconds * 1000))
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs, millis = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{decimal_mark}{millis:03d}"

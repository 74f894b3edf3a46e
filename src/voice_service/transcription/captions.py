"""Captions of timed segments: SubRip (SRT) and WebVTT, as every transcript surface writes
them (OpenAI's response formats, a job's `?format=`). A segment whose speaker is known names
it: `[speaker_0] ` before an SRT cue's text (as WhisperX writes it), WebVTT's voice span
`<v speaker_0>` in a VTT cue."""

from __future__ import annotations

import html
from collections.abc import Sequence

from voice_service.engines.protocols import Segment


def srt(segments: Sequence[Segment]) -> str:
    return "".join(
        f"{index}\n{_clock(s.start, ',')} --> {_clock(s.end, ',')}\n{_srt_text(s)}\n\n"
        for index, s in enumerate(segments, start=1)
    )


def vtt(segments: Sequence[Segment]) -> str:
    cues = "".join(
        f"{_clock(s.start, '.')} --> {_clock(s.end, '.')}\n{_vtt_text(s)}\n\n" for s in segments
    )
    return "WEBVTT\n\n" + cues


def _srt_text(segment: Segment) -> str:
    return segment.text if segment.speaker is None else f"[{segment.speaker}] {segment.text}"


def _vtt_text(segment: Segment) -> str:
    # A cue's text is markup: what the speaker said is escaped, as is the voice's name.
    text = html.escape(segment.text, quote=False)
    if segment.speaker is None:
        return text
    return f"<v {html.escape(segment.speaker, quote=False)}>{text}</v>"


def _clock(seconds: float, decimal_mark: str) -> str:
    millis = max(0, round(seconds * 1000))
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs, millis = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{decimal_mark}{millis:03d}"

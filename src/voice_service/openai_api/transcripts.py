"""A transcript in each of OpenAI's response formats."""

from __future__ import annotations

import json
from typing import Any

from voice_service.openai_api.schemas import TranscriptFormat
from voice_service.transcription.captions import srt, vtt
from voice_service.transcription.service import TimedTranscript, billed_seconds


def usage(transcript: TimedTranscript) -> dict[str, Any]:
    """What the request is billed: one unit per started second, as OpenAI bills whisper-1."""
    return {"type": "duration", "seconds": billed_seconds(transcript.info.duration_seconds)}


def render(
    transcript: TimedTranscript,
    fmt: TranscriptFormat,
    task: str,
    *,
    words: bool,
    segments: bool,
    temperature: float,
) -> tuple[bytes, str]:
    """The body and its media type."""
    if fmt is TranscriptFormat.TEXT:
        return (transcript.text + "\n").encode(), "text/plain; charset=utf-8"
    if fmt is TranscriptFormat.SRT:
        return srt(transcript.segments).encode(), "application/x-subrip; charset=utf-8"
    if fmt is TranscriptFormat.VTT:
        return vtt(transcript.segments).encode(), "text/vtt; charset=utf-8"
    body: dict[str, Any] = {"text": transcript.text}
    if fmt is TranscriptFormat.VERBOSE_JSON:
        body = verbose_json(
            transcript, task, words=words, segments=segments, temperature=temperature
        )
    body["usage"] = usage(transcript)
    return json.dumps(body, ensure_ascii=False).encode(), "application/json"


def verbose_json(
    transcript: TimedTranscript, task: str, *, words: bool, segments: bool, temperature: float
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "task": task,
        "language": transcript.info.language,
        "duration": float(transcript.info.duration_seconds),
        "text": transcript.text,
    }
    if segments:
        body["segments"] = [
            {
                "id": index,
                "seek": 0,
                "start": segment.start,
                "end": segment.end,
                "text": segment.text,
                "tokens": list(segment.tokens),
                "temperature": temperature,
                "avg_logprob": segment.avg_logprob,
                "compression_ratio": segment.compression_ratio,
                "no_speech_prob": segment.no_speech_prob,
            }
            for index, segment in enumerate(transcript.segments)
        ]
    if words:
        body["words"] = [
            {"word": word.word, "start": word.start, "end": word.end}
            for segment in transcript.segments
            for word in segment.words
        ]
    return body

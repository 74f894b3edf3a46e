"""Small files that state, or decode to, long audio: what a job's measurement is tested on.

Encoding hours of audio would be slow, so each encodes 120 ms of Opus silence once and
muxes that one packet again and again (as `speech_clips.long_silent_ogg_opus` does).
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

RATE = 48_000
PACKET = 5_760  # samples: 120 ms at 48 kHz, Opus's longest frame


def ogg_stating(path: Path, *, stated_seconds: float, holding_seconds: float) -> Path:
    """An Ogg Opus file whose last granule position says `stated_seconds`, though its
    packets hold only `holding_seconds` of silence: a header that overstates."""
    packets = round(holding_seconds * RATE / PACKET)
    times = [index * PACKET for index in range(packets - 1)]
    return _silence(path, "ogg", [*times, round(stated_seconds * RATE) - PACKET], {})


def unstated_webm(path: Path, seconds: float) -> Path:
    """A WebM of `seconds` of Opus silence with no Duration element (as a live recorder
    writes it, muxed with `live`): its length is known only by decoding it."""
    times = [index * PACKET for index in range(round(seconds * RATE / PACKET))]
    return _silence(path, "webm", times, {"live": "1"})


def stated_seconds(path: Path) -> float:
    """The duration the file's container states, as FFmpeg reads it."""
    with av.open(str(path)) as container:
        if container.duration is None:
            return 0.0
        return container.duration / av.time_base


def _silence(
    path: Path, container_format: str, times: Iterable[int], options: dict[str, str]
) -> Path:
    with av.open(str(path), "w", format=container_format, options=options) as container:
        stream = container.add_stream("libopus", rate=RATE, layout="mono")
        stream.codec_context.options = {"frame_duration": "120", "b": "6000"}
        frame = av.AudioFrame.from_ndarray(
            np.zeros((1, RATE), dtype=np.int16), format="s16", layout="mono"
        )
        frame.sample_rate, frame.pts, frame.time_base = RATE, 0, Fraction(1, RATE)
        encoded = [*stream.encode(frame), *stream.encode(None)]
        template = bytes(encoded[len(encoded) // 2])
        for at in times:
            packet = av.Packet(template)
            packet.stream = stream
            packet.time_base = Fraction(1, RATE)
            packet.pts = packet.dts = at
            packet.duration = PACKET
            container.mux(packet)
    return path

"""ElevenLabs' `output_format` names, which the native API takes as a query parameter: the
formats phones (8 kHz G.711), players and voice agents (raw PCM at their own rate) want."""

from __future__ import annotations

from voice_service.audio.encode import MP3, AudioFormat
from voice_service.core.errors import InvalidRequest

PARAMETER = "output_format"


def _mp3(rate: int, kbps: int) -> AudioFormat:
    return AudioFormat("mp3", "libmp3lame", "audio/mpeg", rate, kbps * 1000, lossy=True)


def _pcm(rate: int) -> AudioFormat:
    return AudioFormat("s16le", "pcm_s16le", f"audio/pcm;rate={rate}", rate)


NAMED_FORMATS: dict[str, AudioFormat] = {
    "mp3_22050_32": _mp3(22_050, 32),
    "mp3_44100_64": _mp3(44_100, 64),
    "mp3_44100_128": _mp3(44_100, 128),
    **{f"pcm_{rate}": _pcm(rate) for rate in (8_000, 16_000, 22_050, 24_000, 44_100)},
    # Raw G.711 at 8 kHz, as a phone line carries it. μ-law's type is the one RFC 2046
    # registered (audio/basic); A-law has no registered type outside RTP.
    "ulaw_8000": AudioFormat("mulaw", "pcm_mulaw", "audio/basic", 8_000),
    "alaw_8000": AudioFormat("alaw", "pcm_alaw", "audio/x-alaw-basic", 8_000),
    "opus_48000_64": AudioFormat("ogg", "libopus", "audio/ogg", 48_000, 64_000, lossy=True),
}

DESCRIPTION = (
    "ElevenLabs' name of the audio format: "
    + ", ".join(NAMED_FORMATS)
    + ". PCM is raw 16-bit little-endian mono; μ-law and A-law are raw G.711. "
    "Default: MP3 at the voice's own rate."
)


def parse_output_format(name: str | None) -> AudioFormat:
    """The format `output_format` names; MP3 at the voice's rate when it names none."""
    if name is None:
        return MP3
    fmt = NAMED_FORMATS.get(name)
    if fmt is None:
        raise InvalidRequest(
            f"{PARAMETER} must be one of: {', '.join(NAMED_FORMATS)}.", param=PARAMETER
        )
    return fmt


def format_name(fmt: AudioFormat) -> str | None:
    """ElevenLabs' name for `fmt`, if it has one."""
    return next((name for name, named in NAMED_FORMATS.items() if named == fmt), None)

"""GET /voices bodies: the shared catalogue serialized once, each org's clones per request.

The catalogue changes only when a node starts (it is what the node's engines loaded), so
serializing its rows on every listing would be most of the endpoint's work.
"""

from __future__ import annotations

from collections.abc import Sequence

from voice_service.core import models
from voice_service.voices.schemas import Voice


class VoiceListing:
    def __init__(self, catalogue: Sequence[models.Voice]) -> None:
        self.catalogue = tuple(catalogue)
        self._catalogue = [_json(voice) for voice in catalogue]

    def render(self, clones: Sequence[models.Voice]) -> bytes:
        """The JSON of a `VoiceList`: the catalogue, then the organization's clones."""
        items = [*self._catalogue, *(_json(voice) for voice in clones)]
        return b'{"voices":[' + b",".join(items) + b"]}"


def _json(voice: models.Voice) -> bytes:
    return Voice.of(voice).model_dump_json().encode()

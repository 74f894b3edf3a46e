"""The path of one voice, `/voices/{id}`, matched only by a voice id.

Without it `/voices/{id}` would also match `/voices/clone`: GET /voices/clone would look
for a voice named "clone", and a 405 there would advertise GET and DELETE beside the POST
the path really has. Starlette keeps path convertors in one registry, filled before any
route that names one is declared: importing this module registers it.
"""

from __future__ import annotations

from starlette.convertors import Convertor, register_url_convertor


class VoiceIdConvertor(Convertor[str]):
    regex = "voice_[^/]+"  # ids.new_id("voice") and ids.catalogue_voice_id

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("voice_id", VoiceIdConvertor())

VOICE_PATH = "/voices/{id:voice_id}"

"""The path of one voice, `/voices/{id}`, which the voices router (GET) and the cloning
router (DELETE) both answer.

`/voices/clone` matches it too: GET and DELETE there look for a voice named "clone" and
answer 404 as for any id that is no voice of the caller's, so every status the path gives
is one the OpenAPI document declares (a 405 would be undeclared).
"""

from __future__ import annotations

VOICE_PATH = "/voices/{id}"

"""Voice samples kept on disk under the data dir, one file per cloned voice.

In a cluster the data dir's samples/ folder must be shared storage (profiles, which
synthesis needs, live in the database; samples are kept only as the consented record).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


class SampleStore:
    def __init__(self, root: Path) -> None:
        self._root = root

    def path_for(self, org_id: str, voice_id: str) -> Path:
        return self._root / org_id / voice_id

    def save(self, org_id: str, voice_id: str, source: Path) -> Path:
        target = self.path_for(org_id, voice_id)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        shutil.copyfile(source, partial)
        os.replace(partial, target)  # never a half-written sample under the final name
        return target

    def delete(self, org_id: str, voice_id: str) -> None:
        self.path_for(org_id, voice_id).unlink(missing_ok=True)

"""The one lock that serializes every use of espeak-ng in this process.

espeak-ng keeps its state (current voice, synth callback, output buffers) in C globals and is
not thread-safe. Piper's wheel links it statically into `piper/espeakbridge.so`, and both the
Piper phonemizer and `EspeakEngine` (which calls the same library through ctypes) drive that
single copy. Piper's own phonemizer lock is private to `piper.voice`, so we hold this lock around
every call into espeak-ng from either engine. It is a process-wide singleton on purpose: the
state it guards is process-wide too.
"""

from __future__ import annotations

import threading

ESPEAK_LOCK = threading.Lock()

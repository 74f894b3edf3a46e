"""Transcription jobs: long recordings transcribed in the background, piece by piece, billed
once when they complete, and kept for a while for their owner to fetch."""

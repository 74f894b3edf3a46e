"""Providers: inference on other servers (OpenAI-compatible ones such as vLLM, speaches and
Kokoro-FastAPI, or ElevenLabs), named in the providers file and used like local engines.

`config` reads the file, `wire` speaks each kind's protocol, `replicas` chooses a replica
and leaves failing ones out, `provider` makes each call with its retry and deadline, and
`table` is the node's set of them, which routes transcriptions, speech and clones.
"""

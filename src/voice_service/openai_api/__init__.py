"""The OpenAI-compatible audio API under /v1: OpenAI's SDKs and the tools built on them work
with only the base URL and key changed. Same keys, limits, request log and usage as the
native API; OpenAI's error shape (see `errors.openai_error`)."""

"""Webhooks: an organization's URLs told of its events, each delivery signed by the Standard
Webhooks scheme and retried until its receiver takes it."""

"""How a node's log lines look: uvicorn's text lines, or one JSON object per line.

`serve` hands `log_config(...)` to uvicorn, which applies it in every worker process. The
request line (`books.requestlog.writer`) carries its fields as the record's `extra`, so the
JSON form has them as keys: time, level, request id, organization, key prefix, method,
path, status, error code and duration. Nothing secret is ever logged: keys appear by their
display prefix only.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any, Literal

LogFormat = Literal["text", "json"]

# The request line's fields, in this order in every JSON line that has them.
REQUEST_FIELDS = (
    "request_id",
    "org_id",
    "key_prefix",
    "method",
    "path",
    "status",
    "error_code",
    "duration_ms",
    "client",  # the caller's address (the one its proxy saw, behind a trusted proxy)
)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in REQUEST_FIELDS:
            if hasattr(record, name):
                line[name] = getattr(record, name)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def log_config(fmt: LogFormat) -> dict[str, Any]:
    """A `logging.config.dictConfig` for uvicorn's loggers and ours, at INFO, and the job
    queue's."""
    formatter = (
        {"()": f"{__name__}.JsonFormatter"}
        if fmt == "json"
        else {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}
    )
    handler = {
        "class": "logging.StreamHandler",
        "formatter": "default",
        "stream": "ext://sys.stderr",
    }
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"default": formatter},
        "handlers": {"default": handler},
        "loggers": {
            "uvicorn": {"handlers": ["default"], "level": "INFO", "propagate": False},
            "uvicorn.error": {"level": "INFO"},
            "voice_service": {"handlers": ["default"], "level": "INFO", "propagate": False},
            # The job queue's library: its failures only. Its info lines repeat ours, and
            # its one warning is that jobs under way were cut off at shutdown, which they
            # are on purpose (they go back to the queue).
            "saq": {"handlers": ["default"], "level": "ERROR", "propagate": False},
        },
    }

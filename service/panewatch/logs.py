"""Log lines that carry the session they are about (``extra={"session": id}``)."""

from __future__ import annotations

import json
import logging
import time


class _TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        session = getattr(record, "session", None)
        prefix = f"[{session}] " if session else ""
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        return f"{stamp} {record.levelname.lower():7} {record.name}: {prefix}{record.getMessage()}"


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {"at": round(record.created, 3), "level": record.levelname.lower(), "logger": record.name,
               "msg": record.getMessage()}
        session = getattr(record, "session", None)
        if session:
            out["session"] = session
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


def setup_logging(json_lines: bool = False, level: int = logging.INFO) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(_JsonFormatter() if json_lines else _TextFormatter())
    root = logging.getLogger("panewatch")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False

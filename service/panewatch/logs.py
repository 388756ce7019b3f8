"""Log lines that carry the session they are about (``extra={"session": id}``).

uvicorn's own loggers go through the same handler, so ``--log-json`` means every line is JSON
(a 500's traceback included, as one ``exc`` field instead of ~120 plain lines).
"""

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
        out = {
            "at": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        session = getattr(record, "session", None)
        if session:
            out["session"] = session
        actor = getattr(record, "actor", None)  # who made a write: the token, a login, a device
        if actor:
            out["actor"] = actor
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


#: uvicorn's loggers and the least level shown for each (its access log stays off).
UVICORN_LOGGERS = {"uvicorn": logging.WARNING, "uvicorn.error": logging.WARNING, "uvicorn.access": logging.WARNING}


def setup_logging(json_lines: bool = False, level: int = logging.INFO) -> None:
    """One handler on stderr for Panewatch's loggers and uvicorn's (start uvicorn with
    ``log_config=None`` so that it keeps them)."""
    # Neither format shows the caller, thread or process, so records do not gather them (the
    # logging HOWTO's "Optimization"): every state change is a log line, on the read path.
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    logging._srcfile = None
    handler = logging.StreamHandler()
    handler.setFormatter(_JsonFormatter() if json_lines else _TextFormatter())
    for name, least in {"panewatch": level, **UVICORN_LOGGERS}.items():
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(least)
        logger.propagate = False

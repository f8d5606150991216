"""Worker logs forwarded to this process: a worker's QueueHandler feeds a QueueListener here,
which re-emits each record through the logger of the same name."""

from __future__ import annotations

import logging


class ParentLogDispatch(logging.Handler):
    """Re-emits a worker's log record through the parent's logger of the same name."""

    def emit(self, record: logging.LogRecord) -> None:
        logging.getLogger(record.name).handle(record)

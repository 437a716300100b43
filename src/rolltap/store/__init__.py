"""Events, the in-memory event log, and their SQL persistence."""

from rolltap.store.events import FORMAT_VERSION, Event, EventKind, EventLog

__all__ = ["FORMAT_VERSION", "Event", "EventKind", "EventLog"]

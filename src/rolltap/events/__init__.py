"""The event model and the in-memory event log: what every part records and reads.

At the bottom of the layers (it imports nothing of rolltap's): the gateway appends to
an :class:`EventLog` per rollout, the store persists it, exports and results read it.

>>> log = EventLog()
>>> log.append(EventKind.NOTE, {"text": "hi"}).kind
'note'
"""

from rolltap.events.log import EventLog, LogSnapshot
from rolltap.events.model import FORMAT_VERSION, ID_LENGTH, Event, EventKind

__all__ = ["FORMAT_VERSION", "ID_LENGTH", "Event", "EventKind", "EventLog", "LogSnapshot"]

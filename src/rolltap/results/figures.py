"""Figures of a run's summary as people read them: the one place that rounds them.

The summary (:func:`rolltap.store.aggregate.summary_of_run`) keeps latencies in
milliseconds to the microsecond; shown that way they claim a precision no one measured
(``1302.671``). The eval summary, ``runs compare`` and the viewer show them through
:func:`fmt_ms`, so a figure reads the same everywhere.

>>> fmt_ms(1302.671), fmt_ms(17.23), fmt_ms(0.8412), fmt_ms(None)
('1,303 ms', '17.2 ms', '0.84 ms', '-')
"""

from __future__ import annotations

__all__ = ["fmt_ms"]


def fmt_ms(value: float | None, *, missing: str = "-") -> str:
    """``value`` milliseconds, to about three significant figures: whole milliseconds
    from 100 up (thousands separated), one decimal from 10, two below (``<0.01`` under
    that); ``missing`` for ``None``.

    >>> [fmt_ms(v) for v in (123456.7, 99.96, 9.996, 1, 0.004, 0)]
    ['123,457 ms', '100 ms', '10.0 ms', '1.00 ms', '<0.01 ms', '0 ms']
    """
    if value is None:
        return missing
    size = abs(value)
    if size < 0.005:
        return "0 ms" if value == 0 else "<0.01 ms"
    # the tier by the value as rounded, so 99.96 is "100 ms", never "100.0 ms"
    digits = 0 if size >= 99.95 else 1 if size >= 9.995 else 2
    return f"{value:,.{digits}f} ms"

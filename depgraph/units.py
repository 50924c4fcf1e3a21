"""Time units for what depgraph shows: seconds as ms, µs or ns, and numbers
to three significant digits.

Every value depgraph computes is in seconds (``_s``); labels, legends and
titles show it in a unit picked for it, or in the one a caller asked for.
The names of the units (``"s"``, ``"ms"``, ``"us"``, ``"ns"``) are what a
caller passes; the labels (``"µs"``) are what a picture shows.

This module sits on the base layer: it imports nothing of depgraph.

Examples
--------
>>> from depgraph.units import TIME_SCALES, UNIT_LABELS, format_duration, pick_time_unit
>>> unit = pick_time_unit(2.5e-5)
>>> f"{2.5e-5 * TIME_SCALES[unit]:g} {UNIT_LABELS[unit]}"
'25 µs'
>>> format_duration(0.0123)
'12.3 ms'
"""

from __future__ import annotations

__all__ = ["TIME_SCALES", "UNIT_LABELS", "AXIS_UNITS", "pick_time_unit", "format_3sig", "format_duration"]

#: What a value in seconds is multiplied by to show it in each unit.
TIME_SCALES: dict[str, float] = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}
#: How each unit is written in a label.
UNIT_LABELS: dict[str, str] = {"s": "s", "ms": "ms", "us": "µs", "ns": "ns"}
#: The units a time axis may be asked for (the ``unit=`` of the plots).
AXIS_UNITS: tuple[str, ...] = ("s", "ms", "us")

# the smallest value in seconds each unit shows (below it, the next smaller unit)
_LOWER_S = (("ms", 1e-3), ("us", 1e-6))


def pick_time_unit(seconds: float, *, smallest: str = "ns") -> str:
    """The unit to show ``seconds`` in: ``"ms"`` from a millisecond up, else
    ``"us"`` from a microsecond up, else ``"ns"``; never below ``smallest``.

    Parameters
    ----------
    seconds
        The value (or the largest of the values) to show.
    smallest
        ``"ns"`` (the default) or ``"us"``: the smallest unit to pick.

    Returns
    -------
    str
        A key of :data:`TIME_SCALES` and :data:`UNIT_LABELS`.

    Examples
    --------
    >>> [pick_time_unit(x) for x in (2.0, 1e-3, 5e-6, 3e-9)]
    ['ms', 'ms', 'us', 'ns']
    >>> pick_time_unit(3e-9, smallest="us")
    'us'
    """
    for unit, lower_s in _LOWER_S:
        if seconds >= lower_s or unit == smallest:
            return unit
    return "ns"


def format_3sig(x: float, *, thousands: bool = False) -> str:
    """``x`` with three significant digits and no exponent (whole numbers
    from 100 up, one decimal from 10, two below).

    Parameters
    ----------
    x
        The number.
    thousands
        Separate thousands with commas (``"1,234"``).

    Examples
    --------
    >>> format_3sig(1234.6), format_3sig(1234.6, thousands=True), format_3sig(12.34), format_3sig(0.5)
    ('1235', '1,235', '12.3', '0.50')
    """
    if abs(x) >= 100:
        return f"{x:,.0f}" if thousands else f"{x:.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def format_duration(seconds: float) -> str:
    """A duration in ms from a millisecond up, else in µs, to three
    significant digits.

    Examples
    --------
    >>> format_duration(0.002), format_duration(5e-5), format_duration(1.5)
    ('2.00 ms', '50.0 µs', '1500 ms')
    """
    unit = pick_time_unit(seconds, smallest="us")
    return f"{format_3sig(seconds * TIME_SCALES[unit])} {UNIT_LABELS[unit]}"

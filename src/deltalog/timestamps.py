"""The one parser of timestamp text: log values, partition values, filters, options.

Spark and the Delta log write date-times in a few shapes (ISO-8601 with ``T`` or a space, ``Z``
or an offset or nothing, 0 to 9 fractional digits); everything that reads one comes here.
"""

from __future__ import annotations

import datetime as dt
import re

from deltalog import errors


def parse_datetime(raw: str) -> dt.datetime:
    """A date-time from ISO-8601 or Spark's ``yyyy-MM-dd HH:mm:ss[.f...]`` text, with ``Z`` or an
    offset (then aware) or without (then naive); 1 to 9 fractional digits (kept to micros).

    Raises:
        ValueError: the text is not a date-time.
    """
    s = raw.strip().replace(" ", "T", 1)
    if s.endswith("Z"):
        s = s[:-1] + "+00:00"
    # fromisoformat accepts 1-6 fractional digits only in 3.11+ forms; normalize to 6.
    if "." in s:
        head, frac = s.split(".", 1)
        digits = "".join(ch for ch in frac if ch.isdigit())
        rest = frac[len(digits) :]
        s = f"{head}.{(digits + '000000')[:6]}{rest}"
    return dt.datetime.fromisoformat(s)


def parse_timestamp(text: str, default_tz: dt.tzinfo = dt.UTC) -> int:
    """Milliseconds since the epoch from an integer (ms), a date or an ISO timestamp.

    Timestamps without a zone are taken in ``default_tz`` (UTC unless a Spark session says
    otherwise); a bare date means its midnight.

    Raises:
        InvalidArgumentError: the text is none of these.
    """
    s = text.strip()
    if re.fullmatch(r"-?\d+", s):
        return int(s)
    try:
        value = parse_datetime(s)  # a bare date is its midnight
    except ValueError:
        raise errors.InvalidArgumentError(
            "DELTA_TIMESTAMP_INVALID",
            f"The provided timestamp ('{text}') cannot be converted to a valid timestamp.",
            help="use 'yyyy-MM-dd', 'yyyy-MM-dd HH:mm:ss[.SSS][+zone]' or milliseconds since "
            "the epoch.",
        ) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=default_tz)
    return int(value.timestamp() * 1000)


def time_zone(name: str) -> dt.tzinfo:
    """A Spark session time zone by name: a region (``Europe/Lisbon``), ``UTC``, or an offset
    (``+08:00``, ``GMT-3``).

    Raises:
        InvalidArgumentError: the name is none of these.
    """
    text = name.strip()
    offset = re.fullmatch(r"(?:UTC|GMT)?([+-])(\d{1,2}):?(\d{2})?", text)
    if offset:
        sign = -1 if offset.group(1) == "-" else 1
        minutes = int(offset.group(2)) * 60 + int(offset.group(3) or 0)
        return dt.timezone(sign * dt.timedelta(minutes=minutes))
    if text.upper() in ("UTC", "Z", "GMT"):
        return dt.UTC
    import zoneinfo

    try:
        return zoneinfo.ZoneInfo(text)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise errors.invalid_argument(f"unknown time zone {name!r}") from None

"""A cache entry's times come back as they went in, read by the one time parser."""

from __future__ import annotations

import datetime

import orjson
import pytest

from webhook.feed.cache import Entry
from webhook.model.intensity import Reading, Signal

UTC = datetime.UTC
AT = datetime.datetime(2026, 11, 23, 11, 0, 0, 5, tzinfo=UTC)


def entry(at: datetime.datetime) -> Entry:
    reading = Reading("DE", 300.0, Signal("average"), at, at + datetime.timedelta(hours=1),
                      estimated=False, source="static")  # fmt: skip
    return Entry("static", "latest", "DE", (reading,), at, at + datetime.timedelta(minutes=5))


def test_an_entry_round_trips_with_its_microseconds() -> None:
    back = Entry.from_bytes(entry(AT).to_bytes())
    assert back == entry(AT)
    assert back.fetched_at.tzinfo is UTC


def test_an_offset_time_comes_back_as_the_same_instant_in_utc() -> None:
    paris = AT.astimezone(datetime.timezone(datetime.timedelta(hours=1)))
    back = Entry.from_bytes(entry(paris).to_bytes())
    assert back.readings[0].valid_from == AT
    assert back.readings[0].valid_from.utcoffset() == datetime.timedelta(0)


def test_a_time_without_a_zone_is_not_a_cache_entry() -> None:
    data = orjson.loads(entry(AT).to_bytes())
    data["fetched_at"] = "2026-11-23T11:00:00"
    with pytest.raises(ValueError, match="not a cache entry"):
        Entry.from_bytes(orjson.dumps(data))

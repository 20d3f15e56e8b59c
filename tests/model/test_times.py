"""One time parser: RFC 3339 as Go's ``time.Parse(time.RFC3339, ...)`` reads it.

Kubernetes (``metav1.Time``) and the Karmada plugin read every time with Go's RFC 3339
layout, which on parsing also takes a fraction of a second of any length after the
seconds (``.`` or ``,``) and a zone ``Z`` or ``+hh:mm``, upper-case ``T`` and ``Z`` only.
carbonshift reads annotations, decision records and creation timestamps the same way
(:func:`webhook.model.vocabulary.parse_time`); providers' ISO 8601 goes through its laxer mode.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from webhook.model.errors import ProviderError
from webhook.model.validation import InvalidInput
from webhook.model.vocabulary import INTENSITY_SINCE, format_time, parse_time, timestamp
from webhook.providers import wire


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-01-01T12:00:00Z", datetime(2026, 1, 1, 12, tzinfo=UTC)),
        ("2026-01-01T12:00:00.5Z", datetime(2026, 1, 1, 12, 0, 0, 500000, tzinfo=UTC)),
        ("2026-01-01T12:00:00.000Z", datetime(2026, 1, 1, 12, tzinfo=UTC)),
        ("2026-01-01T12:00:00.123456789Z", datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=UTC)),
        ("2026-01-01T12:00:00.1234567891234Z", datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=UTC)),
        ("2026-01-01T12:00:00,25Z", datetime(2026, 1, 1, 12, 0, 0, 250000, tzinfo=UTC)),
        ("2026-01-01T12:00:00+05:30", datetime(2026, 1, 1, 6, 30, tzinfo=UTC)),
        ("2026-01-01T01:00:00+02:00", datetime(2025, 12, 31, 23, tzinfo=UTC)),
        ("2025-12-31T23:30:00-01:00", datetime(2026, 1, 1, 0, 30, tzinfo=UTC)),
        ("2026-01-01T12:00:00-00:00", datetime(2026, 1, 1, 12, tzinfo=UTC)),
        ("2026-01-01T12:00:00+23:59", datetime(2025, 12, 31, 12, 1, tzinfo=UTC)),
        ("2024-02-29T00:00:00Z", datetime(2024, 2, 29, tzinfo=UTC)),
        (" 2026-01-01T12:00:00Z\n", datetime(2026, 1, 1, 12, tzinfo=UTC)),
    ],
)
def test_odd_but_valid_times_are_read_as_utc(text: str, expected: datetime) -> None:
    got = parse_time(text)
    assert got == expected
    assert got.tzinfo is UTC


@pytest.mark.parametrize(
    "text",
    [
        "2026-01-01t12:00:00Z",  # Go's layout is case-sensitive: T and Z only
        "2026-01-01T12:00:00z",
        "2026-01-01 12:00:00Z",
        "2026-01-01T12:00Z",  # seconds are required
        "2026-01-01T12:00:00",  # so is a zone
        "2026-01-01T12:00:00+0100",
        "2026-01-01T12:00:00+01",
        "2026-01-01T12:00:00.Z",  # a fraction needs a digit
        "2026-01-01T12:00:00+24:00",
        "2026-01-01T12:00:00+01:60",
        "2026-01-01T12:00:60Z",
        "2026-02-29T00:00:00Z",
        "2026-13-01T00:00:00Z",
        "2026-1-01T00:00:00Z",
        "20260101T120000Z",
        "2026-01-01",
        "\uff12\uff10\uff12\uff16-01-01T12:00:00Z",  # full-width digits
        "9999-12-31T23:00:00-02:00",  # past datetime's range once in UTC
        "",
    ],
)
def test_what_go_refuses_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"\S"):
        parse_time(text)
    with pytest.raises(InvalidInput, match=f"^{INTENSITY_SINCE}: must be an RFC 3339 time"):
        timestamp(INTENSITY_SINCE, text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2023-01-01 00:00:00", datetime(2023, 1, 1, tzinfo=UTC)),  # CSV exports: no zone
        ("2026-01-01T12:00Z", datetime(2026, 1, 1, 12, tzinfo=UTC)),  # UK grid: no seconds
        ("2026-01-01T12:00:00.000Z", datetime(2026, 1, 1, 12, tzinfo=UTC)),
        ("2026-01-01t12:00:00z", datetime(2026, 1, 1, 12, tzinfo=UTC)),
        ("2026-01-01T12:00:00+0100", datetime(2026, 1, 1, 11, tzinfo=UTC)),
        ("2026-01-01T12:00:00+01", datetime(2026, 1, 1, 11, tzinfo=UTC)),
        ("2026-01-01T12:00:00+05:30", datetime(2026, 1, 1, 6, 30, tzinfo=UTC)),
    ],
)
def test_providers_iso_8601_in_the_lax_mode(text: str, expected: datetime) -> None:
    assert parse_time(text, provider=True) == expected
    assert wire.timestamp(text, "test", "a reading") == expected


def test_providers_garbage_is_still_malformed() -> None:
    with pytest.raises(ProviderError):
        wire.timestamp("yesterday", "test", "a reading")
    with pytest.raises(ValueError, match="not an RFC 3339 time"):
        parse_time("2026-01-01", provider=True)


def test_what_carbonshift_writes_it_reads_back() -> None:
    when = datetime(2026, 3, 1, 10, 20, 30, tzinfo=UTC)
    assert format_time(when) == "2026-03-01T10:20:30Z"
    assert parse_time(format_time(when)) == when


def test_a_time_read_again_reads_the_same_and_a_refused_one_is_refused_again() -> None:
    text = "2026-11-23T12:00:00.5+01:00"
    assert parse_time(text) == parse_time(text) == datetime(2026, 11, 23, 11, 0, 0, 500000, UTC)
    assert parse_time(text, provider=True) == parse_time(text)
    assert parse_time("2023-01-01 00:00", provider=True) == datetime(2023, 1, 1, tzinfo=UTC)
    for _ in range(2):
        with pytest.raises(ValueError, match="not an RFC 3339 time"):
            parse_time("2023-01-01 00:00")

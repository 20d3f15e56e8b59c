"""WattTime API v3: marginal operating emissions rate (MOER) per balancing authority.

``GET /login`` with HTTP basic auth returns a bearer token valid for 30 minutes; it is
renewed after :data:`TOKEN_LIFETIME` minus :data:`TOKEN_MARGIN` or on a 401, one login
at a time. Data comes from ``/v3/forecast`` (its first point is the real-time value),
``/v3/historical`` (when the forecast is empty) and ``/v3/signal-index``.

Values in ``lbs_co2_per_mwh`` become gCO2/kWh (times :data:`LBS_PER_MWH_TO_G_PER_KWH`) and
the signal is :attr:`Signal.MARGINAL`. Accounts without access to a region's absolute
data only get a percentile (``units: percentile``): a percentile cannot be ranked
against absolute values, so the provider raises :class:`IncomparableSignal` and the
feed falls back to the next provider, with a warning that says so.

Zone keys are WattTime region codes (``CAISO_NORTH``); option ``regions`` maps other
zone keys (``US-CAL-CISO: CAISO_NORTH``) onto them.

Config section ``watttime``:

- ``url``: base URL (env ``WATTTIME_API_URL``), default ``https://api.watttime.org``;
  login is ``<url>/login``, data ``<url>/v3/...``.
- ``username`` or ``username_file``; else env ``WATTTIME_USERNAME(_FILE)``.
- ``password_file``; else env ``WATTTIME_PASSWORD(_FILE)``.
- ``regions``: mapping of zone key to WattTime region.
- ``timeout_seconds``, ``retries``: override the ``feed`` defaults.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import structlog

from webhook.model import catalog
from webhook.model.credentials import Secret, resolve_secret
from webhook.model.errors import AuthenticationFailed, IncomparableSignal, ProviderError
from webhook.model.intensity import Reading, Signal
from webhook.model.objects import EMPTY
from webhook.model.options import base_url, parse
from webhook.model.validation import InvalidInput
from webhook.providers import wire
from webhook.providers.http import HttpClient, HttpProvider, HttpSettings

NAME = catalog.WATTTIME
PASSWORD_ENV = catalog.WATTTIME_PASSWORD_ENV
Options = catalog.WattTimeOptions
DEFAULT_URL = "https://api.watttime.org"
URL_ENV = "WATTTIME_API_URL"
USER_ENV = "WATTTIME_USERNAME"
SIGNAL_TYPE = "co2_moer"
LBS_PER_MWH_TO_G_PER_KWH = 0.453592
TOKEN_LIFETIME = 30 * 60.0
"""Seconds a WattTime login token is valid."""
TOKEN_MARGIN = 5 * 60.0
"""Renew this many seconds before the token expires."""

CALLS_PER_FETCH = 4
"""HTTP requests one :meth:`WattTimeProvider.latest` may make: login, forecast, and on a
401 a second login and forecast (or the historical / signal-index fallback)."""

log = structlog.get_logger("carbonshift.providers.watttime")


class Login(wire.Body, frozen=True, gc=False):
    """``/login``."""

    token: str


class Meta(wire.Body, frozen=True, gc=False):
    """``meta`` of a data answer: absent means MOER in lbs/MWh every 5 minutes."""

    units: str | None = None
    data_point_period_seconds: int | None = None


class Point(wire.Body, frozen=True, gc=False):
    """One point of ``data``; a point with a null value is skipped."""

    value: float | None = None
    point_time: str | None = None
    imputed_data_used: bool | None = None


class Data(wire.Body, frozen=True, gc=False):
    """``/v3/forecast``, ``/v3/historical`` and ``/v3/signal-index``."""

    data: list[Point]
    meta: Meta = msgspec.field(default_factory=Meta)


class WattTimeProvider(HttpProvider):
    """Marginal intensity from WattTime (see the module docstring)."""

    name = NAME
    calls_per_fetch = CALLS_PER_FETCH

    def __init__(
        self,
        username: Secret,
        password: Secret,
        *,
        url: str = DEFAULT_URL,
        regions: Mapping[str, str] = EMPTY,
        settings: HttpSettings | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._username = username
        self._monotonic = monotonic
        self._password = password
        self.regions = dict(regions)
        self.http = HttpClient(
            NAME,
            url,
            settings or HttpSettings(),
            auth_hint=f"check {USER_ENV}/{PASSWORD_ENV} (or {NAME}.username_file/password_file) "
            "and that the account covers this region",
        )
        self._token: Secret | None = None
        self._token_expires = 0.0
        self._login_lock = asyncio.Lock()

    @classmethod
    def from_options(
        cls, section: Mapping[str, Any] | None, http: HttpSettings, env: Mapping[str, str]
    ) -> WattTimeProvider:
        """Build from the config section and environment (see the module docstring)."""
        options = parse(section, Options, NAME)
        user = resolve_secret(
            key=f"{NAME}.username", literal=options.username, file=options.username_file,
            env_name=USER_ENV, env=env, literal_ok=True,
        )  # fmt: skip
        password = resolve_secret(
            key=f"{NAME}.password", literal=options.password, file=options.password_file,
            env_name=PASSWORD_ENV, env=env,
        )  # fmt: skip
        if user is None or password is None:
            missing = "username" if user is None else "password"
            env_name = USER_ENV if user is None else PASSWORD_ENV
            raise InvalidInput(
                f"{NAME}.{missing}_file",
                f"no WattTime {missing}: set {env_name} (or {env_name}_FILE) or "
                f"{missing}_file to a file holding it",
            )
        return cls(
            user,
            password,
            url=base_url(
                options.url, provider=NAME, env=env, env_name=URL_ENV, default=DEFAULT_URL
            ),
            regions=options.regions,
            settings=http.with_options(options),
        )

    def known_zones(self) -> frozenset[str]:
        """The zones a scheduler request may make this provider fetch
        (:mod:`webhook.feed.zones`): the keys of the ``regions`` option and the WattTime
        regions they map to. Any other key is still asked for when the configuration or
        the fleet names it."""
        return frozenset(self.regions) | frozenset(self.regions.values())

    def region(self, zone: str) -> str:
        """The WattTime region for a zone key."""
        return self.regions.get(zone, zone)

    # --- auth ------------------------------------------------------------------------

    async def _bearer(self, *, renew: bool = False) -> str:
        async with self._login_lock:
            if renew or self._token is None or self._monotonic() >= self._token_expires:
                self._token = None
                pair = f"{self._username.reveal()}:{self._password.reveal()}".encode()
                body = await self.http.get_json(
                    "login", headers={"Authorization": f"Basic {base64.b64encode(pair).decode()}"}
                )
                token = wire.decode(body, Login, NAME, self.http.where("login")).token
                if not token:
                    raise wire.malformed(NAME, self.http.where("login"))
                self._token = Secret(token)
                self._token_expires = self._monotonic() + TOKEN_LIFETIME - TOKEN_MARGIN
            return self._token.reveal()

    async def _data(self, path: str, zone: str, **params: str) -> Data:
        query = {"region": self.region(zone), "signal_type": SIGNAL_TYPE, **params}
        for attempt in (0, 1):
            token = await self._bearer(renew=attempt > 0)
            try:
                body = await self.http.get_json(
                    f"v3/{path}", params=query, headers={"Authorization": f"Bearer {token}"},
                    zone=zone,
                )  # fmt: skip
            except AuthenticationFailed as exc:
                if attempt == 0 and exc.status == 401:
                    continue  # token expired early or was revoked: log in again once
                raise
            return wire.decode(body, Data, NAME, self.http.where(f"v3/{path}"))
        raise AssertionError("unreachable")

    # --- parsing ---------------------------------------------------------------------

    def _points(self, zone: str, data: Data, what: str) -> list[Reading]:
        units = data.meta.units
        if units == "percentile":
            message = (
                f"WattTime only gives a percentile index for region {self.region(zone)} on "
                "this account; a percentile cannot be ranked against absolute intensities, "
                "so the next provider in the chain answers"
            )
            log.warning("incomparable_signal", provider=NAME, zone=zone, reason=message)
            raise IncomparableSignal(NAME, message)
        if units not in ("lbs_co2_per_mwh", None):
            raise ProviderError(NAME, f"{what} sent values in unsupported units {units!r}")
        period = data.meta.data_point_period_seconds
        step = timedelta(seconds=period if period is not None and period > 0 else 300)
        readings = []
        for point in data.data:
            value = wire.number(point.value)
            if value is None:
                continue
            start = wire.timestamp(point.point_time, NAME, what)
            readings.append(
                Reading(
                    zone=zone,
                    value=round(value * LBS_PER_MWH_TO_G_PER_KWH, 3),
                    signal=Signal.MARGINAL,
                    valid_from=start,
                    valid_to=start + step,
                    estimated=point.imputed_data_used is True,
                    source=f"{NAME}:{SIGNAL_TYPE}",
                )
            )
        return sorted(readings, key=lambda r: r.valid_from)

    # --- Provider --------------------------------------------------------------------

    async def signal_index(self, zone: str) -> float:
        """The current percentile (0-100) for the zone: only for "run now or wait"."""
        data = await self._data("signal-index", zone)
        value = wire.number(data.data[0].value) if data.data else None
        if value is None:
            raise wire.malformed(NAME, self.http.where("v3/signal-index"))
        return value

    async def latest(self, zone: str) -> Reading:
        try:
            points = await self._forecast_points(zone)
        except AuthenticationFailed:
            # Logged in, yet refused: the plan has no absolute data for this region.
            # Check what it does have so the message says what is going on.
            data = await self._data("signal-index", zone)
            self._points(zone, data, self.http.where("v3/signal-index"))  # raises if percentile
            raise
        if not points:
            points = await self.historical(zone, timedelta(hours=1))
            if not points:
                raise ProviderError(NAME, f"no MOER data for region {self.region(zone)}")
            return points[-1]
        return points[0]

    async def _forecast_points(self, zone: str) -> list[Reading]:
        data = await self._data("forecast", zone)
        return self._points(zone, data, self.http.where("v3/forecast"))

    async def forecast(self, zone: str) -> Sequence[Reading]:
        points = await self._forecast_points(zone)
        return [dataclasses.replace(p, estimated=True) for p in points]

    async def history(self, zone: str) -> Sequence[Reading]:
        """The past day's MOER values (:meth:`historical`)."""
        return await self.historical(zone, timedelta(hours=24))

    async def historical(self, zone: str, span: timedelta) -> list[Reading]:
        """Past MOER values over the last ``span`` (oldest first)."""
        end = datetime.now(UTC).replace(microsecond=0)
        data = await self._data(
            "historical", zone, start=(end - span).isoformat(), end=end.isoformat()
        )
        return self._points(zone, data, self.http.where("v3/historical"))

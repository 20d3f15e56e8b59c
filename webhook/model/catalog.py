"""What the configuration knows of each provider, without any of their code.

The provider names, their config sections' schemas (unknown keys refused) and the
credentials that may not be written into the file: everything :mod:`webhook.model.config` checks
a file against. Nothing here talks to a network or imports a provider's module, so the
configuration, and the decision core that reads it, stay free of HTTP clients and
metrics. :mod:`webhook.providers.registry` adds each provider's factory.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, Literal

import msgspec

from webhook.model.credentials import resolve_secret
from webhook.model.objects import dig
from webhook.model.options import NetworkOptions, NonEmpty, NoOptions, parse
from webhook.model.validation import GridZone

ELECTRICITYMAPS = "electricitymaps"
ELECTRICITYMAPS_TOKEN_ENV = "ELECTRICITY_MAPS_API_TOKEN"  # noqa: S105 (a variable name)
WATTTIME = "watttime"
WATTTIME_PASSWORD_ENV = "WATTTIME_PASSWORD"  # noqa: S105 (a variable name)
UKGRID = "ukgrid"
STATIC = "static"
TRACE = "trace"
TRACE_PATH_ENV = "CARBONSHIFT_TRACE_PATH"


class ElectricityMapsOptions(NetworkOptions, forbid_unknown_fields=True, kw_only=True):
    """The ``electricitymaps`` config section (see the module docstring)."""

    token: NonEmpty | None = None
    """Refused with a message: credentials do not belong in the config file."""
    token_file: NonEmpty | None = None
    emission_factor: Annotated[
        Literal["lifecycle", "direct"], msgspec.Meta(description="lifecycle (default) or direct")
    ] = "lifecycle"
    zones: Annotated[
        tuple[GridZone, ...],
        msgspec.Meta(
            description="zone keys beyond the embedded table's that scheduler requests may "
            "name, e.g. [XX, US-NW-PACW]"
        ),
    ] = ()


class WattTimeOptions(NetworkOptions, forbid_unknown_fields=True, kw_only=True):
    """The ``watttime`` config section (see the module docstring)."""

    username: NonEmpty | None = None
    username_file: NonEmpty | None = None
    password: NonEmpty | None = None
    """Refused with a message: credentials do not belong in the config file."""
    password_file: NonEmpty | None = None
    regions: Annotated[
        dict[str, NonEmpty],
        msgspec.Meta(
            description="map zone keys to WattTime regions, e.g. {US-CAL-CISO: CAISO_NORTH}"
        ),
    ] = msgspec.field(default_factory=dict)


class TraceOptions(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The ``trace`` config section (see the module docstring)."""

    path: NonEmpty | None = None
    column: Annotated[
        Literal["lifecycle", "direct"], msgspec.Meta(description="lifecycle (default) or direct")
    ] = "lifecycle"
    mode: Annotated[
        Literal["realtime", "shifted"], msgspec.Meta(description="realtime (default) or shifted")
    ] = "realtime"
    forecast_hours: Annotated[
        int, msgspec.Meta(ge=1, le=168, description="hours of forecast, 1 to 168")
    ] = 24


@dataclasses.dataclass(frozen=True, slots=True)
class Entry:
    """One provider as the configuration sees it."""

    name: str
    options: type[msgspec.Struct]
    """The struct its YAML section must fit (unknown keys are refused)."""
    summary: str
    """One line for listings: what it is and what it needs."""
    secrets: tuple[tuple[str, str], ...] = ()
    """(credential option, the environment variable to use instead): a literal value in
    the file is refused whether or not the provider is in the chain."""

    def check(self, section: Mapping[str, Any] | None) -> None:
        """Validate the section's shape (no files or environment are read) and refuse
        credentials written into it."""
        parse(section, self.options, self.name)
        for option, env_name in self.secrets:
            resolve_secret(
                key=f"{self.name}.{option}", literal=dig(section, option), file=None,
                env_name=env_name, env={},
            )  # fmt: skip


CATALOG: Mapping[str, Entry] = MappingProxyType(
    {
        entry.name: entry
        for entry in (
            Entry(
                ELECTRICITYMAPS,
                ElectricityMapsOptions,
                "Electricity Maps API v3, average intensity; needs an API token",
                (("token", ELECTRICITYMAPS_TOKEN_ENV),),
            ),
            Entry(
                WATTTIME,
                WattTimeOptions,
                "WattTime API v3, marginal intensity (MOER); needs an account",
                (("password", WATTTIME_PASSWORD_ENV),),
            ),
            Entry(
                UKGRID,
                NetworkOptions,
                "UK Carbon Intensity API, Great Britain national and regional; no key",
            ),
            Entry(STATIC, NoOptions, "embedded annual averages; no key, no network"),
            Entry(TRACE, TraceOptions, "replay of Electricity Maps hourly CSV exports; no network"),
        )
    }
)
"""Provider name -> entry, in the usual chain order."""

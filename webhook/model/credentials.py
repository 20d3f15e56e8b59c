"""Credentials for intensity providers: read from env or files, never printed.

A :class:`Secret` holds one credential. Its ``repr``/``str`` never show the value, so a
secret that ends up in a log line, an exception or a dataclass repr by mistake prints
as ``Secret('***')``. Code that must send it calls :meth:`Secret.reveal` at the edge.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from webhook.model.validation import InvalidInput


class Secret:
    """An opaque credential. Compare with ``==``; send with :meth:`reveal`."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The raw value, for the one place that puts it on the wire."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


def _read_file(path: str, key: str) -> str:
    try:
        text = Path(path).read_text("utf-8").strip()
    except OSError as exc:
        raise InvalidInput(key, f"cannot read the credential file {path}: {exc.strerror}") from None
    if not text:
        raise InvalidInput(key, f"the credential file {path} is empty")
    return text


def resolve_secret(
    *,
    key: str,
    literal: str | None,
    file: str | None,
    env_name: str,
    env: Mapping[str, str],
    literal_ok: bool = False,
) -> Secret | None:
    """Find one credential; the first source that is set wins.

    ``key`` is the option's dotted name (``watttime.password``); ``literal`` and
    ``file`` are the values of options ``<key>`` and ``<key>_file``. Order: the file
    option (a mounted Secret), env ``<env_name>_FILE``, env ``<env_name>``. A literal
    value in the YAML file is refused unless ``literal_ok`` (for a user name): config
    files end up in ConfigMaps and version control. Returns None when no source is set.
    """
    option = key.rsplit(".", 1)[-1]
    if literal is not None and literal_ok:
        return Secret(literal)
    if literal is not None:
        raise InvalidInput(
            key,
            f"do not put credentials in the config file; use {option}_file "
            f"(a mounted Secret) or the environment variable {env_name}",
        )
    if file is not None:
        return Secret(_read_file(file, f"{key}_file"))
    if env.get(f"{env_name}_FILE"):
        return Secret(_read_file(env[f"{env_name}_FILE"], f"{env_name}_FILE"))
    if env.get(env_name):
        return Secret(env[env_name].strip())
    return None

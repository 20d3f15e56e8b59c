"""Typed read-only views over Kubernetes objects, read as Go's decoders read them.

The API server, kubectl and carbonshift's own fixtures hand carbonshift plain dicts (the
object's JSON). :class:`Obj` and :class:`Meta` are thin views over such a dict (the dict
itself is kept, never copied, never written): each field a reader needs is a typed
property, so a module says ``Obj(policy).meta.annotations`` (or ``meta_of(policy)``)
instead of walking the metadata by hand, defaulting each step that may be absent.

The views never raise. A field that is absent, a JSON ``null``, or of the wrong type
reads as its zero value (``""``, ``0``, an empty mapping or tuple, ``None`` for a time),
as Go's ``encoding/json`` leaves an optional field it is not given; a label or
annotation map keeps its string values only. Whoever must *refuse* a malformed object
(the Cluster inventory, request bodies) validates it instead (:mod:`.validation`).

Pure: no I/O; times go through the one parser, :func:`.vocabulary.parse_time`.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from webhook.model.vocabulary import parse_time

Key = str | int
"""One step of a path: a mapping key, or a list index."""

_EMPTY: Mapping[str, Any] = {}

EMPTY: Mapping[str, Any] = MappingProxyType({})
"""An empty mapping no one can write to: the default of an optional mapping parameter
(``labels: Mapping[str, str] = EMPTY``), so the function reads it without a None case."""


def dig(raw: object, *keys: Key) -> Any:
    """The value at ``keys`` under ``raw``, or None when a step is missing, null or of
    the wrong type (a string key into a list, an index into a mapping, out of range)."""
    value: Any = raw
    for key in keys:
        if type(key) is str:
            # A listed object is plain dicts: test for one before asking the Mapping ABC.
            value = value.get(key) if type(value) is dict or isinstance(value, Mapping) else None
        elif isinstance(key, str):
            value = value.get(key) if isinstance(value, Mapping) else None
        elif isinstance(value, list | tuple) and -len(value) <= key < len(value):
            value = value[key]
        else:
            return None
        if value is None:
            return None
    return value


def mapping(raw: object, *keys: Key) -> Mapping[str, Any]:
    """The mapping at ``keys`` (:func:`dig`), or an empty one."""
    value = dig(raw, *keys)
    return value if type(value) is dict or isinstance(value, Mapping) else _EMPTY


def items(raw: object, *keys: Key) -> Sequence[Any]:
    """The list at ``keys`` (:func:`dig`), or an empty one. Its items are not checked.

    Without keys, ``raw`` itself when it is a list: ``items(pod.spec.containers)`` reads
    a Kubernetes client model's list attribute, None when unset."""
    value = dig(raw, *keys)
    return value if isinstance(value, list | tuple) else ()


def text(raw: object, *keys: Key) -> str:
    """The string at ``keys`` (:func:`dig`), or ``""``."""
    value = dig(raw, *keys)
    return value if isinstance(value, str) else ""


def kept(obj: Mapping[str, Any], keep: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """``obj`` with only its ``apiVersion``, ``kind`` and, of each part named in ``keep``
    (``metadata``, ``spec``, ``status``), the keys listed: what a watched cache holds of an
    object when a controller reads a few of its fields."""
    out: dict[str, Any] = {k: obj[k] for k in ("apiVersion", "kind") if k in obj}
    for part, keys in keep.items():
        section = obj.get(part)
        if isinstance(section, Mapping):
            out[part] = {k: section[k] for k in keys if k in section}
    return out


def strings(raw: object) -> Mapping[str, str]:
    """``raw`` as a string map (labels, annotations, a ConfigMap's data): entries whose
    value is not a string are dropped, anything but a mapping is empty. The mapping
    itself is returned when every value already is a string (the usual case).

    Also how a Kubernetes client model's string map is read: ``strings(node.metadata.labels)``
    (None when unset)."""
    if type(raw) is not dict and not isinstance(raw, Mapping):
        return _EMPTY
    for value in raw.values():
        if not isinstance(value, str):
            return {k: v for k, v in raw.items() if isinstance(k, str) and isinstance(v, str)}
    return raw


def _time(raw: object) -> datetime.datetime | None:
    if not isinstance(raw, str):
        return None
    try:
        return parse_time(raw)
    except ValueError:
        return None


def _integer(raw: object) -> int:
    return raw if isinstance(raw, int) and not isinstance(raw, bool) else 0


@dataclasses.dataclass(frozen=True, slots=True)
class OwnerRef:
    """One entry of ``metadata.ownerReferences``."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool


class Meta:
    """A view of an object's ``metadata`` (any value; not a mapping reads as empty)."""

    __slots__ = ("raw",)

    def __init__(self, raw: object) -> None:
        self.raw: Mapping[str, Any] = (
            raw if type(raw) is dict or isinstance(raw, Mapping) else _EMPTY
        )
        """The metadata mapping itself (empty when there is none)."""

    def __repr__(self) -> str:
        return f"Meta({self.namespace + '/' if self.namespace else ''}{self.name})"

    @property
    def name(self) -> str:
        return text(self.raw, "name")

    @property
    def generate_name(self) -> str:
        return text(self.raw, "generateName")

    @property
    def namespace(self) -> str:
        return text(self.raw, "namespace")

    @property
    def namespaced_name(self) -> str:
        """``namespace/name``, or ``name`` for a cluster-scoped object (as client-go's
        ``MetaNamespaceKeyFunc`` keys objects): the name of an object in logs."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @property
    def uid(self) -> str:
        return text(self.raw, "uid")

    @property
    def resource_version(self) -> str:
        return text(self.raw, "resourceVersion")

    @property
    def generation(self) -> int:
        return _integer(self.raw.get("generation"))

    @property
    def labels(self) -> Mapping[str, str]:
        """The string-valued labels (:func:`strings`)."""
        return strings(self.raw.get("labels"))

    @property
    def annotations(self) -> Mapping[str, str]:
        """The string-valued annotations (:func:`strings`)."""
        return strings(self.raw.get("annotations"))

    @property
    def creation_timestamp(self) -> datetime.datetime | None:
        """``creationTimestamp`` as aware UTC, or None (absent or not RFC 3339)."""
        return _time(self.raw.get("creationTimestamp"))

    @property
    def deletion_timestamp(self) -> datetime.datetime | None:
        """``deletionTimestamp`` as aware UTC, or None (absent or not RFC 3339)."""
        return _time(self.raw.get("deletionTimestamp"))

    @property
    def owner_references(self) -> tuple[OwnerRef, ...]:
        """``ownerReferences`` (entries that are not mappings are skipped)."""
        return tuple(
            OwnerRef(
                api_version=text(ref, "apiVersion"),
                kind=text(ref, "kind"),
                name=text(ref, "name"),
                uid=text(ref, "uid"),
                controller=ref.get("controller") is True,
            )
            for ref in items(self.raw, "ownerReferences")
            if isinstance(ref, Mapping)
        )


def meta_of(obj: object) -> Meta:
    """The :class:`Meta` view of ``obj["metadata"]`` (``Obj(obj).meta``)."""
    return Meta(dig(obj, "metadata"))


class Obj:
    """A view of one Kubernetes object (any value; not a mapping reads as empty).

    ``Obj(x).raw`` is ``x`` itself when it is a mapping, so a view can be handed on where
    the dict is wanted."""

    __slots__ = ("raw",)

    def __init__(self, raw: object) -> None:
        self.raw: Mapping[str, Any] = raw if isinstance(raw, Mapping) else _EMPTY
        """The object mapping itself (empty when ``raw`` is not a mapping)."""

    def __repr__(self) -> str:
        return f"Obj({self.kind or '?'} {self.meta!r})"

    @property
    def api_version(self) -> str:
        return text(self.raw, "apiVersion")

    @property
    def kind(self) -> str:
        return text(self.raw, "kind")

    @property
    def group(self) -> str:
        """The API group of ``apiVersion`` (``""`` for the core group ``v1``)."""
        group, _, version = self.api_version.rpartition("/")
        return group if version else ""

    @property
    def version(self) -> str:
        """The version of ``apiVersion`` (``v1alpha1`` of ``policy.karmada.io/v1alpha1``)."""
        return self.api_version.rpartition("/")[2]

    @property
    def meta(self) -> Meta:
        return Meta(self.raw.get("metadata"))

    @property
    def spec(self) -> Mapping[str, Any]:
        return mapping(self.raw, "spec")

    @property
    def status(self) -> Mapping[str, Any]:
        return mapping(self.raw, "status")

    def path(self, *keys: Key) -> Any:
        """The value at ``keys`` (``obj.path("spec", "template", "spec")``), or None
        (:func:`dig`)."""
        return dig(self.raw, *keys)

    def mapping(self, *keys: Key) -> Mapping[str, Any]:
        """The mapping at ``keys``, or an empty one."""
        return mapping(self.raw, *keys)

    def items(self, *keys: Key) -> Sequence[Any]:
        """The list at ``keys``, or an empty one."""
        return items(self.raw, *keys)

    def text(self, *keys: Key) -> str:
        """The string at ``keys``, or ``""``."""
        return text(self.raw, *keys)


def condition(obj: object, kind: str) -> str:
    """The ``status`` of the ``status.conditions`` entry of ``type`` ``kind`` (the first
    one), or ``""`` when there is none."""
    for found in items(obj, "status", "conditions"):
        if isinstance(found, Mapping) and found.get("type") == kind:
            return text(found, "status")
    return ""

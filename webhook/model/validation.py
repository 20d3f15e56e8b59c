"""One way to validate input: msgspec types in, one error type out.

Config files, scenario files, provider options, AdmissionReview envelopes and scheduler
requests are all described by msgspec structs and decoded (bytes) or converted (YAML
already parsed into Python objects) through this module. Whatever is wrong raises
:class:`InvalidInput`, whose ``path`` names the offending field the way a person would
write it (``feed.retries``, ``clusters[0].name``), and every HTTP endpoint answers it with
status 400 and the body ``{"error": "<path>: <message>"}`` (:func:`error_body`).
"""

from __future__ import annotations

import difflib
import functools
import re
from pathlib import Path
from typing import Annotated, Any, TypeVar

import msgspec
import msgspec.inspect
import orjson
import yaml

from webhook.model.errors import InvalidInput as InvalidInput  # noqa: PLC0414 - callers import it here
from webhook.model.errors import join

T = TypeVar("T")

_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<field>[^`]*)`$")
_MISSING = re.compile(r"^Object missing required field `(?P<field>[^`]*)`$")
_AT = re.compile(r"^(?P<message>.*?)(?: - at (?P<key>`key` in )?`\$(?P<path>[^`]*)`)?$", re.DOTALL)
_STEP = re.compile(r"\.(?P<field>[^.\[]+)|\[(?P<index>[^\]]*)\]")
_REGEX = re.compile(r"`str` matching regex '(?P<regex>.*)'", re.DOTALL)
_PATTERNS: dict[str, str] = {}
"""Regex -> what it means, for messages (filled by :func:`pattern`)."""
_JSON_WORDS = re.compile(r"\b(object|array)\b(?=[^`]*`)")
"""msgspec's JSON words for types, which :func:`convert` says as a person editing YAML
would: mapping and list."""

Step = str | int | None
"""One step of a msgspec path: a field or mapping key, a list index, or None for a mapping
key msgspec does not name (``[...]``)."""


def pattern(regex: str, means: str) -> msgspec.Meta:
    """A string constraint whose error reads ``expected <means>`` instead of the regex."""
    _PATTERNS[regex] = means
    return msgspec.Meta(pattern=regex, description=means)


GRID_ZONE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
"""A grid zone key: letters, digits, ``-`` and ``_`` (``DE``, ``US-CAL-CISO``, ``SE-SE3``)."""
GridZone = Annotated[str, pattern(GRID_ZONE_PATTERN, "a grid zone key such as DE or US-CAL-CISO")]
"""An Electricity Maps style grid zone key (config, scenarios, requests)."""


class Schema(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Base of a document's structs: immutable, unknown keys refused (``x: unknown field``).
    Subclasses repeat ``frozen=True`` for type checkers."""


def from_msgspec(
    exc: msgspec.ValidationError | msgspec.DecodeError, prefix: str = ""
) -> InvalidInput:
    """Translate msgspec's ``"<message> - at `$.a.b[0]`"`` into :class:`InvalidInput`."""
    message, steps, key = _parts(exc)
    path = _render([(s, _label(s)) for s in steps])
    unknown = _UNKNOWN.match(message)
    if unknown:  # name the field itself: ``feed.x: unknown field``
        path, message = join(path, unknown["field"]), "unknown field"
    if isinstance(exc, msgspec.DecodeError) and not isinstance(exc, msgspec.ValidationError):
        message = f"not valid JSON: {message}"
    return InvalidInput(join(prefix, path), _plain(message, key))


def _parts(exc: Exception) -> tuple[str, list[Step], bool]:
    """msgspec's message, its path as steps, and whether a mapping key is at fault."""
    match = _AT.match(str(exc))
    assert match is not None  # every part of the pattern is optional
    steps: list[Step] = []
    for step in _STEP.finditer(match["path"] or ""):
        index = step["index"]
        steps.append(step["field"] if index is None else None if index == "..." else int(index))
    message = _REGEX.sub(lambda m: _PATTERNS.get(m["regex"], m[0]), match["message"])
    return message, steps, bool(match["key"])


def _label(step: Step) -> str:
    return "[...]" if step is None else f"[{step}]" if isinstance(step, int) else step


def _render(found: list[tuple[Any, str]]) -> str:
    path = ""
    for _, label in found:
        path = join(path, label)
    return path


def _plain(message: str, key: bool = False) -> str:
    """msgspec's messages with the backticks dropped (``Expected `int` `` reads odd in YAML
    contexts) and a lower-case start, so ``<path>: <message>`` reads as one sentence."""
    text = message.replace("`", "")
    text = text[:1].lower() + text[1:]
    return f"invalid key: {text}" if key else text


def convert(data: object, kind: type[T], prefix: str = "") -> T:
    """Validate already-parsed data (e.g. from YAML) against ``kind``.

    Errors name mapping keys (``clusters.member-fr.zone``, where msgspec only says
    ``clusters[...]``), say ``mapping``/``list`` for what JSON calls object/array, and
    add the offending value to a broken constraint (``expected int >= 0, got -1``).
    """
    try:
        return msgspec.convert(data, kind, strict=True)
    except msgspec.ValidationError as exc:
        raise _located(data, kind, exc).within(prefix) from None


def _located(data: object, kind: type[Any], exc: msgspec.ValidationError) -> InvalidInput:
    message, steps, key = _parts(exc)
    if key:
        steps.append(None)
    try:
        work, found = _find(data, kind, str(exc), steps)
        value = found[-1][0] if key else _at(work, [a for a, _ in found])
    except (LookupError, TypeError, ValueError, AttributeError):  # not as the path says
        return from_msgspec(exc)
    path = _render(found)
    message = _JSON_WORDS.sub(lambda m: "mapping" if m[1] == "object" else "list", message)
    unknown, missing = _UNKNOWN.match(message), _MISSING.match(message)
    if unknown:
        path, message = join(path, unknown["field"]), "unknown field"
    elif missing:
        path, message = join(path, missing["field"]), "required, but missing"
    elif message.startswith("Invalid enum value") and not key:
        choices = _choices(msgspec.inspect.type_info(kind), [a for a, _ in found])
        message = f"Expected one of {', '.join(choices)}" if choices else message
    if message.startswith("Expected") and ", got" not in message:
        shown = repr(value)
        message += f", got {shown if len(shown) <= 60 else shown[:57] + '...'}"
    return InvalidInput(path, _plain(message, key))


def _choices(node: msgspec.inspect.Type, where: list[Any]) -> list[str]:
    """The values the enum or literal at ``where`` in ``node`` allows."""
    inspect = msgspec.inspect
    if isinstance(node, inspect.Metadata):
        return _choices(node.type, where)
    if isinstance(node, inspect.UnionType):
        return [choice for member in node.types for choice in _choices(member, where)]
    if not where:
        if isinstance(node, inspect.EnumType):
            return [str(member.value) for member in node.cls]
        return [str(v) for v in node.values] if isinstance(node, inspect.LiteralType) else []
    if isinstance(node, inspect.StructType):
        fields = [f.type for f in node.fields if f.encode_name == where[0]]
        return [choice for kind in fields for choice in _choices(kind, where[1:])]
    if isinstance(node, inspect.DictType):
        return _choices(node.value_type, where[1:])
    if isinstance(node, inspect.ListType | inspect.VarTupleType):
        return _choices(node.item_type, where[1:])
    return []


def _find(
    data: object, kind: type[Any], text: str, steps: list[Step]
) -> tuple[Any, list[tuple[Any, str]]]:
    """Walk ``steps`` through ``data``, naming each key msgspec left out: the first entry
    that alone (its siblings dropped) fails the same way. Returns the data with those
    siblings dropped and the steps as (key or index, label)."""
    work: Any = data
    found: list[tuple[Any, str]] = []
    for step in steps:
        if step is not None:
            found.append((step, _label(step)))
            continue
        where = [a for a, _ in found]
        for name, value in _at(work, where).items():
            trial = _with(work, where, {name: value})
            try:
                msgspec.convert(trial, kind, strict=True)
            except msgspec.ValidationError as again:
                if str(again) == text:
                    work = trial
                    found.append((name, str(name)))
                    break
        else:
            raise LookupError(text)
    return work, found


def _at(node: Any, where: list[Any]) -> Any:
    for step in where:
        node = node[step]
    return node


def _with(node: Any, where: list[Any], value: object) -> Any:
    """A copy of ``node`` with the part at ``where`` replaced by ``value``."""
    if not where:
        return value
    copy = list(node) if isinstance(node, list) else dict(node)
    copy[where[0]] = _with(node[where[0]], where[1:], value)
    return copy


_KEY_STEP = re.compile(r"[^.\[\]]+|\[\d+\]")


def keys_at(kind: type[Any], path: str) -> list[str] | None:
    """The keys valid next to the last key of ``path`` in the schema ``kind``
    (``clusters[0].capacty``: a cluster's keys), None when ``path`` leaves the schema."""
    *parents, _ = _KEY_STEP.findall(path) or [""]
    node: msgspec.inspect.Type = msgspec.inspect.type_info(kind)
    steps = list(parents)
    while True:
        if isinstance(node, msgspec.inspect.Metadata):
            node = node.type
        elif isinstance(node, msgspec.inspect.UnionType):
            inner = [t for t in node.types if not isinstance(t, msgspec.inspect.NoneType)]
            if len(inner) != 1:
                return None
            node = inner[0]
        elif isinstance(node, msgspec.inspect.ListType | msgspec.inspect.VarTupleType):
            if not steps or not steps[0].startswith("["):
                return None
            node, steps = node.item_type, steps[1:]
        elif isinstance(node, msgspec.inspect.DictType) and steps:
            node, steps = node.value_type, steps[1:]
        elif isinstance(node, msgspec.inspect.StructType):
            fields = {f.encode_name: f.type for f in node.fields}
            if not steps:
                return list(fields)
            if steps[0] not in fields:
                return None
            node, steps = fields[steps[0]], steps[1:]
        else:
            return None


def unknown_key_hint(word: str, known: list[str]) -> str:
    """What follows ``unknown field`` for the key ``word``: the closest valid key, and
    every valid key (``; did you mean capacity? (valid: name, zone, capacity)``)."""
    closest = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
    meant = f"; did you mean {closest[0]}?" if closest else ""
    return f"{meant} (valid: {', '.join(known)})"


def read_yaml(path: str | Path) -> object:
    """One YAML document from a file (an empty file is ``{}``); a file that cannot be read
    or parsed raises :class:`InvalidInput` whose path is the file name."""
    try:
        text = Path(path).read_text("utf-8")
    except OSError as exc:
        raise InvalidInput(str(path), f"cannot read: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidInput(str(path), f"not valid YAML: {yaml_reason(exc)}") from None
    return {} if data is None else data


def yaml_reason(exc: yaml.YAMLError, first_line: int = 1) -> str:
    """The parser's own reason for a syntax error and where it is: ``expected ',' or ']',
    but got '<stream end>' (line 3, column 1)``. ``first_line`` is the file line the parsed
    text starts on (for one document of several)."""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    reason = f"{problem} {context}" if context else problem
    mark = getattr(exc, "problem_mark", None)
    if mark is None:
        return reason
    return f"{reason} (line {mark.line + first_line}, column {mark.column + 1})"


def decoder(kind: type[T]) -> msgspec.json.Decoder[T]:
    """A reusable JSON decoder for ``kind`` (build once per type, at import)."""
    return msgspec.json.Decoder(kind)


def decode(raw: bytes | msgspec.Raw, using: msgspec.json.Decoder[T], prefix: str = "") -> T:
    """Decode and validate a JSON body with a decoder from :func:`decoder`; error paths
    start with ``prefix`` (for a part of a larger document).

    ``null`` reads as Go's decoders read it (:func:`go_nulls`): a field that cannot hold
    it takes its default, as if absent, and a map value or list item its type's zero
    value. Bodies without such nulls decode in one pass; only a refused one is read again.
    """
    try:
        return _decode(raw, using, prefix)
    except InvalidInput as first:
        try:
            data = orjson.loads(bytes(raw))
        except orjson.JSONDecodeError:  # not JSON, or beyond what orjson reads
            raise first from None
        if not go_nulls(data, using.type):
            raise
        return _decode(orjson.dumps(data), using, prefix)


def _decode(raw: bytes | msgspec.Raw, using: msgspec.json.Decoder[T], prefix: str) -> T:
    try:
        return using.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise from_msgspec(exc, prefix) from None
    except UnicodeDecodeError:  # msgspec lets a bad byte in a string through as this
        raise InvalidInput(prefix, "not valid JSON: a string is not valid UTF-8") from None
    except RecursionError:  # a free-form part (decoded as Any) nested thousands deep
        raise InvalidInput(prefix, "not valid JSON: nested too deeply") from None


def go_nulls(data: object, kind: Any) -> bool:
    """Rewrite, in place, the ``null`` values of decoded JSON ``data`` that ``kind`` (a
    msgspec type) cannot hold, the way Kubernetes' Go decoders read them: a struct field
    is left out (its default applies; Go leaves the zero value), a required one becomes
    its type's zero value, and a map value or list item becomes the zero value of its
    type (``""``, ``0``, ``false``, ``{}``, ``[]``). Fields that may be ``null`` (Go
    pointers: ``X | None``) keep it. Returns whether anything changed."""
    return _nulls(_type_info(kind), data)


@functools.cache
def _type_info(kind: Any) -> msgspec.inspect.Type:
    return msgspec.inspect.type_info(kind)


def _nulls(node: msgspec.inspect.Type, data: object) -> bool:
    inspect = msgspec.inspect
    node = _bare(node)
    if isinstance(node, inspect.UnionType):
        shape = dict if isinstance(data, dict) else list if isinstance(data, list) else None
        found = [t for t in map(_bare, node.types) if shape is not None and _holds(t, shape)]
        return _nulls(found[0], data) if found else False
    changed = False
    if isinstance(node, inspect.StructType) and isinstance(data, dict):
        for field in node.fields:
            key = field.encode_name
            if key not in data:
                continue
            if data[key] is not None or _nullable(field.type):
                changed |= _nulls(field.type, data[key])
            elif field.required:
                data[key] = _zero(field.type)
                changed = True
            else:
                del data[key]
                changed = True
    elif isinstance(node, inspect.DictType | inspect.FrozenDictType) and isinstance(data, dict):
        for key, value in data.items():
            changed |= _item(node.value_type, data, key, value)
    elif isinstance(node, inspect.CollectionType) and isinstance(data, list):
        for index, value in enumerate(data):
            changed |= _item(node.item_type, data, index, value)
    return changed


def _item(node: msgspec.inspect.Type, data: Any, where: object, value: object) -> bool:
    if value is None and not _nullable(node):
        data[where] = _zero(node)
        return True
    return _nulls(node, value)


def _bare(node: msgspec.inspect.Type) -> msgspec.inspect.Type:
    return _bare(node.type) if isinstance(node, msgspec.inspect.Metadata) else node


def _holds(node: msgspec.inspect.Type, shape: type) -> bool:
    """Whether ``node`` is read from a JSON object (``shape`` dict) or array (list)."""
    inspect = msgspec.inspect
    if shape is dict:
        return isinstance(node, inspect.StructType | inspect.DictType | inspect.FrozenDictType)
    return isinstance(node, inspect.CollectionType)


def _nullable(node: msgspec.inspect.Type) -> bool:
    inspect = msgspec.inspect
    node = _bare(node)
    if isinstance(node, inspect.UnionType):
        return any(map(_nullable, node.types))
    return isinstance(node, inspect.NoneType | inspect.AnyType | inspect.RawType)


def _zero(node: msgspec.inspect.Type) -> object:
    """Go's zero value of a type, as JSON data."""
    inspect = msgspec.inspect
    node = _bare(node)
    if isinstance(node, inspect.StructType | inspect.DictType | inspect.FrozenDictType):
        return {}
    if isinstance(node, inspect.CollectionType):
        return []
    zeros: dict[type, object] = {
        inspect.StrType: "",
        inspect.IntType: 0,
        inspect.FloatType: 0.0,
        inspect.BoolType: False,
    }
    return zeros.get(type(node))


def error_body(exc: InvalidInput | str) -> bytes:
    """The JSON error body every HTTP endpoint sends: ``{"error": "..."}``."""
    return orjson.dumps({"error": str(exc)})


def check(condition: bool, path: str, message: str) -> None:
    """Raise :class:`InvalidInput` at ``path`` unless ``condition`` holds (cross-field rules)."""
    if not condition:
        raise InvalidInput(path, message)

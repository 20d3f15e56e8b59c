"""Write the ``config`` part of the chart's values schema from the configuration model.

``charts/carbonshift/values.schema.json`` checks every value at ``helm install``; its
``config`` property is carbonshift's config file, so it is generated from the structs
``carbonshift serve`` validates that file with (:mod:`webhook.model.config`, and each
provider's section from :data:`webhook.model.catalog.CATALOG`) by
:func:`msgspec.json.schema`, then made plain JSON Schema draft-07 that reads well:
every ``$ref`` inlined, no titles, no defaults that are mappings, ``additionalProperties: false``
on every section (a misspelled key fails), the keys that are not keys of the file
left out (``provider_options``, a cluster's ``name``) and the provider sections added,
without their credential options (a literal credential is refused by carbonshift too).

What a schema cannot say (``nodepools.high_from >= low_below``, a ladder that decreases,
the zones a provider chain serves) is still checked by carbonshift at start.

    python -m devtools.chart_schema          # rewrite the chart's schema (make generate)
    python -m devtools.chart_schema --check  # exit 1 when the chart's schema is out of date
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import msgspec

from webhook.model.catalog import CATALOG
from webhook.model.config import Config

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "charts" / "carbonshift" / "values.schema.json"
COMMAND = "make generate"
NOT_KEYS = {"Config": ("provider_options",), "ClusterConfig": ("name",)}
"""Fields of the structs that are not keys of the file (filled in by the parser)."""
DESCRIPTION = (
    "carbonshift's config file (docs/configuration.md), generated from webhook/model/config.py "
    f"by devtools/chart_schema.py ({COMMAND})"
)

Schema = dict[str, Any]
_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")


def config_schema() -> Schema:
    """The JSON Schema of the config file (the chart's ``config`` value)."""
    sections = {name: entry.options for name, entry in CATALOG.items()}
    kinds: list[Any] = [Config, *sections.values()]
    refs, defs = msgspec.json.schema_components(kinds, ref_template="#/$defs/{name}")
    config: Schema
    config, *options = (_plain(_inline(ref, defs)) for ref in refs)
    _drop(config, NOT_KEYS["Config"])
    _drop(config["properties"]["clusters"]["additionalProperties"], NOT_KEYS["ClusterConfig"])
    config["properties"]["providers"] = _providers()
    for (name, entry), section in zip(CATALOG.items(), options, strict=True):
        _drop(section, tuple(option for option, _ in entry.secrets))
        section["description"] = f"{entry.summary} (docs/intensity.md)"
        config["properties"][name] = {**section, "type": ["object", "null"]}  # null: {}
    config["description"] = DESCRIPTION
    return config


def _providers() -> Schema:
    """``providers``: a chain of known names, each once; one name alone is a chain of one."""
    name = {"enum": list(CATALOG)}
    chain = {"type": "array", "items": name, "minItems": 1, "uniqueItems": True}
    return {
        "description": "the provider chain, tried in order for each zone",
        "default": ["static"],
        "anyOf": [chain, name],
    }


def _inline(node: Any, defs: dict[str, Schema]) -> Any:
    """``node`` with every ``$ref`` replaced by the definition it names."""
    if isinstance(node, list):
        return [_inline(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[1]
        rest = {k: v for k, v in node.items() if k != "$ref"}
        return _inline({**defs[name], **rest}, defs)
    return {key: _inline(value, defs) for key, value in node.items()}


def _plain(node: Any) -> Any:
    """Without titles, empty ``required`` lists, defaults that are null or mappings, and
    with the code's reStructuredText markup (double backquotes, roles) as plain quotes."""
    if isinstance(node, list):
        return [_plain(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = _or_null(node)
    out: Schema = {}
    for key, found in node.items():
        if key == "title" or (key == "required" and not found):
            continue
        if key == "default" and (found is None or isinstance(found, dict)):
            continue
        value = list(found) if isinstance(found, tuple) else found
        if key == "description" and isinstance(value, str):
            value = " ".join(_ROLE.sub(r"`\1`", value.replace("``", "`")).split())
        out[key] = value if key in ("default", "enum", "const") else _plain(value)
    return out


def _or_null(node: Schema) -> Schema:
    """``anyOf: [{type: T, ...}, {type: null}]`` (msgspec's ``X | None``) as
    ``{type: [T, null], ...}``: one message per mistake instead of one per alternative."""
    choices = node.get("anyOf")
    if not isinstance(choices, list) or len(choices) != 2 or {"type": "null"} not in choices:
        return node
    (other,) = (c for c in choices if c != {"type": "null"})
    if not isinstance(other.get("type"), str):
        return node
    rest = {k: v for k, v in node.items() if k != "anyOf"}
    return {**other, **rest, "type": [other["type"], "null"]}


def _drop(section: Schema, names: tuple[str, ...]) -> None:
    for name in names:
        del section["properties"][name]


def chart_schema(current: Schema) -> Schema:
    """The chart's values schema ``current`` with its ``config`` property regenerated (the
    keys keep their order)."""
    properties = dict(current["properties"])
    properties["config"] = config_schema()
    return {**current, "properties": properties}


def render(schema: Schema) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.chart_schema", description=__doc__)
    parser.add_argument("--check", action="store_true", help="only say whether it is current")
    args = parser.parse_args(argv)
    text = SCHEMA.read_text("utf-8")
    wanted = render(chart_schema(json.loads(text)))
    if text == wanted:
        return 0
    if args.check:
        print(f"{SCHEMA.relative_to(ROOT)} is out of date: run `{COMMAND}`", file=sys.stderr)
        return 1
    SCHEMA.write_text(wanted, "utf-8")
    print(f"wrote {SCHEMA.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

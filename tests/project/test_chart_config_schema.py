"""The chart's values schema checks the ``config`` value as carbonshift checks its config
file: it is generated from the same model (devtools/chart_schema.py, ``make generate``),
accepts every config the repository ships and documents, and refuses, naming the key,
what carbonshift refuses at start (a misspelled key, a value out of bounds, a wrong type).

The schema is checked with the ``jsonschema`` package (draft-07, as Helm reads it) and,
when hack/build-helm.sh has already built Helm into the binary cache, by ``helm lint``
too (this file never builds it)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from devtools import chart_schema
from webhook.model.config import parse
from webhook.model.validation import InvalidInput

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "carbonshift"
SCHEMA: dict[str, Any] = json.loads((CHART / "values.schema.json").read_text())
VALUES: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text())


def test_the_charts_config_schema_is_generated_from_the_model() -> None:
    wanted = chart_schema.render(chart_schema.chart_schema(SCHEMA))
    assert (CHART / "values.schema.json").read_text() == wanted, (
        "charts/carbonshift/values.schema.json no longer matches the configuration model "
        f"(webhook/model/config.py, webhook/model/catalog.py): run `{chart_schema.COMMAND}` "
        "(python -m devtools.chart_schema) and commit the result"
    )


def errors(config: object) -> list[str]:
    """What the chart's schema says of the chart's values with ``config`` as their config."""
    values = {**VALUES, "config": config}
    validator = jsonschema.Draft7Validator(SCHEMA)
    return [  # the way Helm names the value: at '/config/hysteresis/margin'
        f"at '/{'/'.join(map(str, e.absolute_path))}': {e.message}"
        for e in validator.iter_errors(values)
    ]


def _documented() -> dict[str, Any]:
    """The example of docs/configuration.md."""
    text = (ROOT / "docs" / "configuration.md").read_text()
    found = re.search(r"```yaml\n(.*?)```", text, re.DOTALL)
    assert found is not None
    return dict(yaml.safe_load(found[1]))


ACCEPTED: dict[str, Any] = {
    "chart-default": VALUES["config"],
    "config/example.yaml": yaml.safe_load((ROOT / "config" / "example.yaml").read_text()),
    "manifests/base/config.yaml": yaml.safe_load(
        (ROOT / "manifests" / "base" / "config.yaml").read_text()
    ),
    "docs/configuration.md": _documented(),
    **{
        f"ci/{path.name}": yaml.safe_load(path.read_text()).get("config", {})
        for path in sorted((CHART / "ci").glob("*-values.yaml"))
    },
    "empty": {},
    "a-chain-of-one": {"providers": "static"},
    "provider-sections": {
        "providers": ["electricitymaps", "watttime", "static"],
        "electricitymaps": {"url": "https://em.example/v3", "token_file": "/run/em"},
        "watttime": {"regions": {"US-CAL-CISO": "CAISO_NORTH"}, "retries": 1},
        "static": None,
    },
    "bounds": {
        "hysteresis": {"margin": 0, "dwell_hours": 0},
        "weighting": {"exponent": 8, "scale": 1},
        "labels": {"band": 0.99, "low_below": None},
    },
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_the_schema_accepts_what_carbonshift_accepts(name: str) -> None:
    config = ACCEPTED[name]
    parse(config)  # carbonshift accepts it
    assert errors(config) == []


# (config, what the schema's message must say): carbonshift refuses each one at start too.
REFUSED: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "typo-section": ({"hysterisis": {"margin": 0.1}}, ("/config", "'hysterisis'")),
    "typo-key": ({"hysteresis": {"margn": 0.1}}, ("/config/hysteresis", "'margn'")),
    "typo-provider-option": ({"electricitymaps": {"timeout": 3}},
                             ("/config/electricitymaps", "'timeout'")),
    "margin-out-of-bounds": ({"hysteresis": {"margin": 1.5}},
                             ("/config/hysteresis/margin", "1.5")),
    "margin-not-a-number": ({"hysteresis": {"margin": "5%"}}, ("/config/hysteresis/margin",)),
    "scale-not-whole": ({"weighting": {"scale": 1.5}}, ("/config/weighting/scale", "integer")),
    "retries-too-many": ({"feed": {"retries": 99}}, ("/config/feed/retries", "99")),
    "refresh-zero": ({"feed": {"refresh_seconds": 0}}, ("/config/feed/refresh_seconds",)),
    "flag-not-a-bool": ({"labels": {"enabled": "yes"}}, ("/config/labels/enabled",)),
    "unknown-provider": ({"providers": ["electricity-maps"]}, ("/config/providers",)),
    "provider-twice": ({"providers": ["static", "static"]}, ("/config/providers",)),
    "no-provider": ({"providers": []}, ("/config/providers",)),
    "forecast-method": ({"reevaluate": {"forecast": "tomorrow"}},
                        ("/config/reevaluate/forecast", "'tomorrow'")),
    "client-auth-group": ({"service": {"client_auth": ["admin"]}},
                          ("/config/service/client_auth/0", "'admin'")),
    "cluster-name": ({"clusters": {"Member_FR": {"zone": "FR"}}}, ("/config/clusters",)),
    "cluster-zone": ({"clusters": {"member-fr": {"zone": "F R"}}},
                     ("/config/clusters/member-fr/zone",)),
    "cluster-label-not-a-string": ({"clusters": {"member-fr": {"zone": "FR",
                                                               "labels": {"tier": 1}}}},
                                   ("/config/clusters/member-fr/labels/tier", "string")),
    "cluster-name-as-key": ({"clusters": {"member-fr": {"zone": "FR", "name": "x"}}},
                            ("/config/clusters/member-fr", "'name'")),
    "provider-options-as-key": ({"provider_options": {}}, ("/config", "'provider_options'")),
    "credential-in-the-file": ({"electricitymaps": {"token": "secret"}},
                               ("/config/electricitymaps", "'token'")),
    "static-takes-no-options": ({"static": {"year": 2022}}, ("/config/static", "'year'")),
    "ladder-too-short": ({"nodepools": {"ladder": [1.0]}}, ("/config/nodepools/ladder",)),
    "prometheus-url": ({"accounting": {"prometheus_url": "prometheus:9090"}},
                       ("/config/accounting/prometheus_url",)),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_the_schema_refuses_what_carbonshift_refuses_naming_the_key(name: str) -> None:
    config, expected = REFUSED[name]
    with pytest.raises(InvalidInput):
        parse(config)  # carbonshift refuses it at start (exit status 2)
    found = errors(config)
    assert found, f"the schema accepts {config}"
    message = "\n".join(found)
    for part in expected:
        assert part in message, f"{part!r} not in:\n{message}"


def _helm() -> Path:
    cache = os.environ.get("CARBONSHIFT_CACHE")
    path = (Path(cache).resolve() if cache else ROOT / ".cache" / "bin") / "helm"
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.skip(f"no {path} (hack/build-helm.sh builds it; tests/project/test_chart.py does)")
    return path


def test_helm_lint_refuses_a_misspelled_config_key() -> None:
    helm = _helm()
    env = {**os.environ, "HELM_CONFIG_HOME": "/nonexistent", "HELM_CACHE_HOME": "/nonexistent"}
    result = subprocess.run(
        [str(helm), "lint", str(CHART), "--set", "config.hysterisis.margin=0.1"],
        capture_output=True, text=True, check=False, timeout=120, env=env,
    )  # fmt: skip
    assert result.returncode != 0
    assert "hysterisis" in result.stdout + result.stderr

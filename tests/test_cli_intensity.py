"""``carbonshift intensity``: table, JSON, exit statuses, messages that say what to do."""

from __future__ import annotations

import argparse
import asyncio
import io
from pathlib import Path

import orjson
import pytest

from tests.support import FakeUpstream, Reply
from webhook import cli_intensity


def run(*argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="carbonshift")
    cli_intensity.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["intensity", *argv])
    out, err = io.StringIO(), io.StringIO()
    status = cli_intensity.run(args, out, err)
    return status, out.getvalue(), err.getvalue()


def test_table_with_static_data() -> None:
    status, out, err = run("DE", "FR")
    assert status == 0, err
    header, de, fr = out.splitlines()
    assert header.split() == ["ZONE", "GCO2EQ/KWH", "SIGNAL", "SOURCE", "AGE", "ESTIMATED", "STALE"]
    assert de.split()[0] == "DE"
    assert "static:" in de
    assert fr.split()[-2:] == ["yes", "no"]


def test_json_and_unknown_zone() -> None:
    status, out, err = run("DE", "XX", "--json")
    assert status == 1
    rows = orjson.loads(out)
    assert [r["zone"] for r in rows] == ["DE", "XX"]
    assert rows[0]["provider"] == "static"
    assert rows[1]["value"] is None
    assert "static" in rows[1]["problems"]
    assert "no data for XX" in err


async def test_fallback_is_explained(fake: FakeUpstream, tmp_path: Path) -> None:
    fake.on("/v3/carbon-intensity/latest", Reply({}, status=401))
    config = tmp_path / "c.yaml"
    config.write_text(
        f"providers: [electricitymaps, static]\n"
        f"electricitymaps: {{url: '{fake.url}/v3', token_file: '{tmp_path / 'token'}'}}\n"
    )
    (tmp_path / "token").write_text("secret-token-value")
    # The CLI runs its own event loop: call it from a worker thread.
    status, out, _err = await asyncio.to_thread(run, "DE", "--config", str(config))
    assert status == 0
    assert "Fallbacks:" in out
    assert "answered 401" in out
    assert "ELECTRICITY_MAPS_API_TOKEN" in out
    assert "secret-token-value" not in out


def test_configuration_problems_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ELECTRICITY_MAPS_API_TOKEN", raising=False)
    monkeypatch.delenv("ELECTRICITY_MAPS_API_TOKEN_FILE", raising=False)
    config = tmp_path / "c.yaml"
    config.write_text("providers: [electricitymaps]\n")
    status, _out, err = run("DE", "--config", str(config), "--json")
    assert status == 2
    assert "ELECTRICITY_MAPS_API_TOKEN" in err
    status, _out, err = run()
    assert status == 2
    assert "no zones" in err

"""The trace reader on gzip-compressed exports, and the trace set shipped in the package."""

from __future__ import annotations

import gzip
import hashlib
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from webhook.model import traces

HEADER = (
    "Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO\u2082eq/kWh (direct),"
    "Carbon Intensity gCO\u2082eq/kWh (LCA),Low Carbon Percentage,Renewable Percentage,"
    "Data Source,Data Estimated,Data Estimation Method"
)
ZONES = {
    "AU-NSW", "CA-ON", "DE", "GB", "JP-TK", "SG",
    "US-CAL-CISO", "US-MIDA-PJM", "US-NY-NYIS", "US-TEX-ERCO",
}  # fmt: skip


def _csv(zone: str, hours: int = 3) -> str:
    start = datetime(2023, 1, 1)
    rows = [HEADER]
    for h in range(hours):
        when = start + timedelta(hours=h)
        rows.append(f"{when:%Y-%m-%d %H:%M:%S},X,X,{zone},{10 + h},{20 + h},1,1,src,false,")
    return "\n".join(rows) + "\n"


def test_gzip_and_plain_files_read_alike(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text(_csv("AA"), "utf-8")
    (tmp_path / "b.csv.gz").write_bytes(gzip.compress(_csv("BB").encode()))
    found = traces.read_folder(tmp_path)
    assert set(found) == {"AA", "BB"}
    assert list(found["BB"].lifecycle) == list(found["AA"].lifecycle) == [20.0, 21.0, 22.0]


def test_a_damaged_gzip_file_is_a_trace_error(tmp_path: Path) -> None:
    whole = gzip.compress(_csv("CC", hours=2000).encode())
    (tmp_path / "cut.csv.gz").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(traces.TraceError, match="cannot read trace"):
        traces.read(tmp_path / "cut.csv.gz")
    (tmp_path / "plain.csv.gz").write_text(_csv("DD"), "utf-8")  # not gzip at all
    with pytest.raises(traces.TraceError, match="cannot read trace"):
        traces.read(tmp_path / "plain.csv.gz")


def test_the_shipped_set_is_the_upstream_exports_compressed() -> None:
    folder = traces.SHIPPED
    sums = dict(
        reversed(line.split("  ", 1))  # type: ignore[misc]
        for line in (folder / "SHA256SUMS").read_text().splitlines()
    )
    files = sorted(folder.glob("*.csv.gz"))
    assert [f.name.removesuffix(".gz") for f in files] == sorted(sums)
    for path in files:
        data = gzip.decompress(path.read_bytes())
        assert hashlib.sha256(data).hexdigest() == sums[path.name.removesuffix(".gz")], path
    notice = (folder / "NOTICE").read_text()
    for needed in ("Electricity Maps", "Open Database License", "odbl/1-0", "Changes made"):
        assert needed in notice
    loaded = traces.read_folder(folder)
    assert set(loaded) == ZONES
    assert {len(t) for t in loaded.values()} == {8760}

"""Every command, every bad input: one line on stderr, no traceback, the documented exit
status (docs/cli.md: 2 for bad usage or configuration, 1 for a runtime failure such as an
API server that does not answer).

The commands run in-process (as ``tests/cli/test_cli.py`` runs them); a few run through the
installed ``carbonshift`` script too, to hold the real entry point to the same line.
``serve`` cases all fail before binding; the only network is a closed port on 127.0.0.1."""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from webhook.cli import main
from webhook.serve import certs

ROOT = os.geteuid() == 0
"""Permission bits do not stop root: the unreadable-file cases are skipped then."""
SCENARIO = Path(__file__).parents[2] / "scenarios" / "spatial-2023.yaml"
MANIFEST = """\
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: web, namespace: shop}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: web}]
"""


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port  # closed again: connecting is refused at once


def _kubeconfig(server: str) -> str:
    return (
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        f"clusters: [{{name: c, cluster: {{server: '{server}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
    )


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder holding every kind of bad path the matrix names (``{tmp}/...``)."""
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "POD_NAMESPACE"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "file").write_text("junk\n")
    (tmp_path / "dir").mkdir()
    (tmp_path / "garbled.yaml").write_text(":::: [\n")
    (tmp_path / "list.json").write_text("[]\n")
    (tmp_path / "empty.yaml").write_text("# nothing\n")
    (tmp_path / "m.yaml").write_text(MANIFEST)
    (tmp_path / "unreadable").write_text(MANIFEST)
    (tmp_path / "unreadable").chmod(0)
    (tmp_path / "closed.kubeconfig").write_text(_kubeconfig(f"https://127.0.0.1:{_closed_port()}"))
    (tmp_path / "garbled.kubeconfig").write_text(":::: [\n")
    (tmp_path / "other.kubeconfig").write_text("hello: world\n")
    _pair(tmp_path / "half", certs.TLS_CERT)
    _pair(tmp_path / "keyonly", certs.TLS_KEY)
    (tmp_path / "others").mkdir()
    (tmp_path / "others" / "ca.crt").write_text("the user's CA\n")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / certs.TLS_CERT).write_text("junk\n")
    (tmp_path / "junk" / certs.TLS_KEY).write_text("junk\n")
    one, two = certs.issue(["localhost"]), certs.issue(["localhost"])
    (tmp_path / "mismatched").mkdir()
    (tmp_path / "mismatched" / certs.TLS_CERT).write_bytes(one.cert)
    (tmp_path / "mismatched" / certs.TLS_KEY).write_bytes(two.key)
    (tmp_path / "badkey").mkdir()
    (tmp_path / "badkey" / certs.TLS_CERT).write_bytes(one.cert)
    (tmp_path / "badkey" / certs.TLS_KEY).write_bytes(one.cert)
    yield tmp_path
    (tmp_path / "unreadable").chmod(0o600)


def _pair(directory: Path, only: str) -> None:
    """A half-mounted Secret: one file of the serving pair, the user's own bytes."""
    directory.mkdir()
    bundle = certs.issue(["webhook.example.com"])
    (directory / only).write_bytes(bundle.cert if only == certs.TLS_CERT else bundle.key)


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse
        code = exc.code if isinstance(exc.code, int) else 2
    out, err = capsys.readouterr()
    return code, out, err


USAGE, RUNTIME = 2, 1
SERVE = ["serve", "--host", "127.0.0.1", "--port", "8443"]
CERTS = ["certs", "--service", "carbonshift", "--namespace", "ops"]
CASES: list[tuple[str, list[str], int, str]] = [
    # serve: every case is refused before the server binds
    ("serve-port-0", ["serve", "--port", "0"], USAGE, "--port"),
    ("serve-port-99999", ["serve", "--port", "99999"], USAGE, "expected a port 1-65535"),
    ("serve-port-negative", ["serve", "--port=-1"], USAGE, "--port"),
    ("serve-port-word", ["serve", "--port", "https"], USAGE, "--port"),
    ("serve-host-bad-ip", ["serve", "--host", "999.1.1.1"], USAGE, "--host"),
    ("serve-host-bad-name", ["serve", "--host", "web hook"], USAGE, "--host"),
    ("serve-reload-zero", ["serve", "--cert-reload-seconds", "0"], USAGE, "--cert-reload"),
    ("serve-reload-nan", ["serve", "--cert-reload-seconds", "nan"], USAGE, "--cert-reload"),
    ("serve-shutdown-negative", ["serve", "--shutdown-seconds=-1"], USAGE, "--shutdown"),
    ("serve-cert-dir-file", [*SERVE, "--cert-dir", "{tmp}/file"], USAGE, "is a file"),
    (
        "serve-cert-dir-under-file",
        [*SERVE, "--cert-dir", "{tmp}/file/certs"],
        USAGE,
        "cannot create",
    ),
    ("serve-cert-dir-half", [*SERVE, "--cert-dir", "{tmp}/half"], USAGE, "tls.key missing"),
    ("serve-cert-dir-key-only", [*SERVE, "--cert-dir", "{tmp}/keyonly"], USAGE, "tls.crt missing"),
    (
        "serve-cert-dir-other-files",
        [*SERVE, "--cert-dir", "{tmp}/others"],
        USAGE,
        "tls.crt and tls.key missing",
    ),
    (
        "serve-cert-dir-junk",
        [*SERVE, "--cert-dir", "{tmp}/junk"],
        USAGE,
        "holds no PEM certificate",
    ),
    (
        "serve-cert-dir-mismatched",
        [*SERVE, "--cert-dir", "{tmp}/mismatched"],
        USAGE,
        "is not the key of",
    ),
    (
        "serve-cert-dir-bad-key",
        [*SERVE, "--cert-dir", "{tmp}/badkey"],
        USAGE,
        "holds no PEM private key",
    ),
    ("serve-config-missing", [*SERVE, "--config", "{tmp}/nowhere.yaml"], USAGE, "config"),
    ("serve-config-dir", [*SERVE, "--config", "{tmp}/dir"], USAGE, "config"),
    ("serve-config-garbled", [*SERVE, "--config", "{tmp}/garbled.yaml"], USAGE, "config"),
    (
        "serve-kubeconfig-missing",
        [*SERVE, "--kubeconfig", "{tmp}/nowhere"],
        USAGE,
        "--kubeconfig: cannot load",
    ),
    ("serve-kubeconfig-dir", [*SERVE, "--kubeconfig", "{tmp}/dir"], USAGE, "is a directory"),
    (
        "serve-kubeconfig-garbled",
        [*SERVE, "--kubeconfig", "{tmp}/garbled.kubeconfig"],
        USAGE,
        "not a usable kubeconfig",
    ),
    (
        "serve-kubeconfig-other",
        [*SERVE, "--kubeconfig", "{tmp}/other.kubeconfig"],
        USAGE,
        "not a usable kubeconfig",
    ),
    # certs
    ("certs-out-file", [*CERTS, "--out", "{tmp}/file"], USAGE, "is a file"),
    ("certs-out-under-file", [*CERTS, "--out", "{tmp}/file/certs"], USAGE, "cannot create"),
    ("certs-out-impossible", [*CERTS, "--out", "/proc/carbonshift/certs"], USAGE, "cannot create"),
    ("certs-out-missing", CERTS, USAGE, "--out"),
    (
        "certs-ip-out-of-range",
        [*CERTS, "--out", "{tmp}/o", "--ip", "999.1.1.1"],
        USAGE,
        "--ip 999.1.1.1: not an IPv4 or IPv6 address",
    ),
    ("certs-ip-short", [*CERTS, "--out", "{tmp}/o", "--ip", "10.1.2"], USAGE, "--ip"),
    ("certs-ip-v6", [*CERTS, "--out", "{tmp}/o", "--ip", "fe80::zz"], USAGE, "--ip"),
    ("certs-dns-space", [*CERTS, "--out", "{tmp}/o", "--dns", "web hook"], USAGE, "--dns"),
    ("certs-dns-hyphen", [*CERTS, "--out", "{tmp}/o", "--dns", "-a.example.com"], USAGE, "--dns"),
    ("certs-dns-empty-label", [*CERTS, "--out", "{tmp}/o", "--dns", "a..example"], USAGE, "--dns"),
    (
        "certs-dns-an-ip",
        [*CERTS, "--out", "{tmp}/o", "--dns", "999.1.1.1"],
        USAGE,
        "looks like an IP address",
    ),
    (
        "certs-dns-too-long",
        [*CERTS, "--out", "{tmp}/o", "--dns", "a" * 64 + ".com"],
        USAGE,
        "--dns",
    ),
    (
        "certs-service-bad",
        ["certs", "--service", "Web_Hook", "--namespace", "ops", "--out", "{tmp}/o"],
        USAGE,
        "--service",
    ),
    (
        "certs-namespace-bad",
        ["certs", "--service", "web", "--namespace", "ops!", "--out", "{tmp}/o"],
        USAGE,
        "--namespace",
    ),
    # mutate
    ("mutate-missing", ["mutate", "-f", "{tmp}/nowhere.yaml"], USAGE, "cannot read"),
    ("mutate-empty-dir", ["mutate", "-f", "{tmp}/dir"], USAGE, "no .yaml"),
    ("mutate-no-objects", ["mutate", "-f", "{tmp}/empty.yaml"], USAGE, "holds no objects"),
    ("mutate-under-file", ["mutate", "-f", "{tmp}/file/m.yaml"], USAGE, "cannot read"),
    ("mutate-unreadable", ["mutate", "-f", "{tmp}/unreadable"], USAGE, "cannot read"),
    (
        "mutate-config-missing",
        ["mutate", "-f", "{tmp}/m.yaml", "--config", "{tmp}/nowhere"],
        USAGE,
        "config",
    ),
    (
        "mutate-config-dir",
        ["mutate", "-f", "{tmp}/m.yaml", "--config", "{tmp}/dir"],
        USAGE,
        "config",
    ),
    ("mutate-output", ["mutate", "-f", "{tmp}/m.yaml", "-o", "xml"], USAGE, "--output"),
    (
        "mutate-kubeconfig-unreachable",
        ["mutate", "-f", "{tmp}/m.yaml", "--kubeconfig", "{tmp}/closed.kubeconfig"],
        RUNTIME,
        "carbonshift: cannot reach the API server https://127.0.0.1:",
    ),
    ("mutate-no-file", ["mutate"], USAGE, "--filename"),
    # intensity
    ("intensity-config-missing", ["intensity", "--config", "{tmp}/nowhere"], USAGE, "config"),
    ("intensity-config-dir", ["intensity", "--config", "{tmp}/dir"], USAGE, "config"),
    (
        "intensity-config-garbled",
        ["intensity", "--config", "{tmp}/garbled.yaml"],
        USAGE,
        "not valid YAML",
    ),
    ("intensity-output", ["intensity", "DE", "-o", "xml"], USAGE, "--output"),
    ("intensity-unknown-zone", ["intensity", "NOWHERE"], RUNTIME, "no data for NOWHERE"),
    (
        "intensity-kubeconfig-missing",
        ["intensity", "--clusters", "--kubeconfig", "{tmp}/nowhere"],
        USAGE,
        "--kubeconfig",
    ),
    (
        "intensity-kubeconfig-dir",
        ["intensity", "--clusters", "--kubeconfig", "{tmp}/dir"],
        USAGE,
        "--kubeconfig",
    ),
    (
        "intensity-kubeconfig-garbled",
        ["intensity", "--clusters", "--kubeconfig", "{tmp}/garbled.kubeconfig"],
        USAGE,
        "--kubeconfig",
    ),
    (
        "intensity-kubeconfig-unreachable",
        ["intensity", "--clusters", "--kubeconfig", "{tmp}/closed.kubeconfig"],
        RUNTIME,
        "cannot reach the API server",
    ),
    # simulate: every case is refused before the simulation runs
    ("simulate-missing", ["simulate", "{tmp}/nowhere.yaml"], USAGE, "cannot read"),
    ("simulate-dir", ["simulate", "{tmp}/dir"], USAGE, "cannot read"),
    ("simulate-garbled", ["simulate", "{tmp}/garbled.yaml"], USAGE, "not valid YAML"),
    ("simulate-not-a-scenario", ["simulate", "{tmp}/file"], USAGE, "expected mapping"),
    (
        "simulate-traces-missing",
        ["simulate", str(SCENARIO), "--traces", "{tmp}/nowhere"],
        USAGE,
        "does not exist",
    ),
    (
        "simulate-traces-file",
        ["simulate", str(SCENARIO), "--traces", "{tmp}/file"],
        USAGE,
        "is a file",
    ),
    (
        "simulate-report-file",
        ["simulate", str(SCENARIO), "--report", "{tmp}/file"],
        USAGE,
        "--report",
    ),
    (
        "simulate-report-under-file",
        ["simulate", str(SCENARIO), "--report", "{tmp}/file/report"],
        USAGE,
        "--report",
    ),
    (
        "simulate-set-type",
        ["simulate", str(SCENARIO), "--set", "policy.hysteresis.margin=lots"],
        USAGE,
        "policy.hysteresis.margin: expected float, got str",
    ),
    (
        "simulate-set-unknown",
        ["simulate", str(SCENARIO), "--set", "policy.hysteresis.nosuch=1"],
        USAGE,
        "policy.hysteresis.nosuch: unknown key (known: margin, dwell_hours)",
    ),
    (
        "simulate-set-unknown-compare",
        ["simulate", str(SCENARIO), "--set", "compare.nosuch=1"],
        USAGE,
        "compare.nosuch: unknown field",
    ),
    (
        "simulate-set-no-section",
        ["simulate", str(SCENARIO), "--set", "nosuch=1"],
        USAGE,
        "nosuch: expected policy.KEY or compare.KEY",
    ),
    (
        "simulate-set-moved",
        ["simulate", str(SCENARIO), "--set", "margin=0.1"],
        USAGE,
        "margin: moved to policy.hysteresis.margin",
    ),
    (
        "simulate-sweep-form",
        ["simulate", str(SCENARIO), "--sweep", "policy.hysteresis.margin"],
        USAGE,
        "--sweep",
    ),
    # report
    ("report-no-cluster", ["report"], USAGE, "no cluster"),
    (
        "report-kubeconfig-missing",
        ["report", "--kubeconfig", "{tmp}/nowhere"],
        USAGE,
        "--kubeconfig: cannot load",
    ),
    ("report-kubeconfig-dir", ["report", "--kubeconfig", "{tmp}/dir"], USAGE, "is a directory"),
    (
        "report-kubeconfig-garbled",
        ["report", "--kubeconfig", "{tmp}/garbled.kubeconfig"],
        USAGE,
        "not a usable kubeconfig",
    ),
    (
        "report-kubeconfig-other",
        ["report", "--kubeconfig", "{tmp}/other.kubeconfig"],
        USAGE,
        "not a usable kubeconfig",
    ),
    (
        "report-kubeconfig-unreadable",
        ["report", "--kubeconfig", "{tmp}/unreadable"],
        USAGE,
        "permission denied",
    ),
    (
        "report-unreachable",
        ["report", "--kubeconfig", "{tmp}/closed.kubeconfig"],
        RUNTIME,
        "cannot reach the API server https://127.0.0.1:",
    ),
    (
        "report-unreachable-namespace",
        ["report", "--kubeconfig", "{tmp}/closed.kubeconfig", "--namespace", "ops"],
        RUNTIME,
        "connection refused",
    ),
    (
        "report-namespace-bad",
        ["report", "--kubeconfig", "{tmp}/closed.kubeconfig", "--namespace", "Ops_1"],
        USAGE,
        "--namespace",
    ),
    (
        "report-configmap-bad",
        ["report", "--kubeconfig", "{tmp}/closed.kubeconfig", "--configmap", "a/b"],
        USAGE,
        "--configmap",
    ),
    (
        "report-since-word",
        ["report", "--input", "{tmp}/list.json", "--since", "soon"],
        USAGE,
        "--since",
    ),
    (
        "report-since-zero",
        ["report", "--input", "{tmp}/list.json", "--since", "0d"],
        USAGE,
        "--since",
    ),
    ("report-input-missing", ["report", "--input", "{tmp}/nowhere.json"], USAGE, "no such file"),
    ("report-input-dir", ["report", "--input", "{tmp}/dir"], USAGE, "is a directory"),
    ("report-input-garbled", ["report", "--input", "{tmp}/garbled.yaml"], USAGE, "not JSON"),
    (
        "report-input-not-an-object",
        ["report", "--input", "{tmp}/list.json"],
        USAGE,
        "expected a JSON object",
    ),
    ("report-output", ["report", "-o", "pdf"], USAGE, "--output"),
    # the command itself
    ("no-command", [], USAGE, "COMMAND"),
    ("unknown-command", ["deploy"], USAGE, "invalid choice"),
]
NEEDS_PERMISSIONS = {"mutate-unreadable", "report-kubeconfig-unreadable"}


@pytest.mark.parametrize(
    ("argv", "status", "says"),
    [
        pytest.param(argv, status, says, id=name, marks=[pytest.mark.skipif(
            ROOT and name in NEEDS_PERMISSIONS, reason="root reads any file")])
        for name, argv, status, says in CASES
    ],
)  # fmt: skip
def test_a_bad_input_is_one_line_and_the_documented_status(
    place: Path, capsys: pytest.CaptureFixture[str], argv: list[str], status: int, says: str
) -> None:
    code, out, err = run(capsys, [a.format(tmp=place) for a in argv])
    assert "Traceback" not in err
    assert err.count("\n") == 1, err
    assert err.endswith("\n"), err
    assert err.startswith("carbonshift"), err
    assert says in err, err
    assert code == status, err
    if status == USAGE:
        assert out == ""


def test_serve_leaves_a_half_filled_cert_dir_byte_identical(
    place: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A half-mounted Secret: the user's tls.crt is never replaced by a development one."""
    half = place / "half"
    (half / "ca.crt").write_text("the user's CA\n")
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in half.iterdir()}
    code, _out, err = run(capsys, [*SERVE, "--cert-dir", str(half)])
    assert code == USAGE
    assert err == (
        f"carbonshift: --cert-dir {half}: tls.key missing: put the serving certificate and "
        "its key there as tls.crt and tls.key, or pass an empty directory for a development "
        "certificate (files already there are never replaced)\n"
    )
    after = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in half.iterdir()}
    assert after == before


def test_certs_out_refusals_write_nothing(place: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, _ = run(capsys, [*CERTS, "--out", str(place / "new"), "--ip", "999.1.1.1"])
    assert code == USAGE
    assert not (place / "new").exists()  # refused before the directory is made


@pytest.mark.parametrize(
    "argv",
    [
        ["serve", "--port", "99999"],
        ["serve", "--host", "127.0.0.1", "--port", "8443", "--cert-dir", "{tmp}/half"],
        ["report", "--kubeconfig", "{tmp}/closed.kubeconfig"],
        ["certs", "--service", "s", "--namespace", "n", "--out", "{tmp}/file"],
    ],
    ids=["usage", "half-cert-dir", "unreachable", "certs-out-file"],
)
def test_the_installed_script_says_the_same_one_line(place: Path, argv: list[str]) -> None:
    script = Path(sys.executable).with_name("carbonshift")
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    done = subprocess.run(
        [str(script), *(a.format(tmp=place) for a in argv)],
        capture_output=True, text=True, timeout=30, check=False, env=env,
    )  # fmt: skip
    assert "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.returncode in (USAGE, RUNTIME)

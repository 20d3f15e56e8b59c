"""The carbonshift command line."""

from __future__ import annotations

import argparse
import base64
import io
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from cryptography import x509

from webhook.cli import PIPE_CLOSED, main, parser

PP = """\
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: web, namespace: shop}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: web}]
  placement:
    replicaScheduling: {replicaSchedulingType: Divided}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: np
  labels: {carbonshift.io/enabled: "true"}
  annotations: {carbonshift.io/strategy: pause}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
  limits: {cpu: "64"}
"""

CONFIG = "zone: PL\nclusters:\n  member-fr: {zone: FR}\n  member-pl: {zone: PL}\n"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_help_lists_every_command() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "webhook.cli", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for command in ("serve", "certs", "mutate"):
        assert command in out


def test_mutate_prints_what_would_be_stored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "m.yaml").write_text(PP)
    (tmp_path / "c.yaml").write_text(CONFIG)
    code, out, _ = run(
        capsys, "mutate", "-f", str(tmp_path / "m.yaml"), "--config", str(tmp_path / "c.yaml")
    )
    assert code == 0
    docs = list(yaml.safe_load_all(out))
    terms = docs[0]["spec"]["placement"]["clusterAffinities"]
    assert terms[0]["clusterNames"] == ["member-fr"]  # the ordered fill's greenest tier
    tiers = next(line for line in out.splitlines() if line.startswith("#   tiers: "))
    assert tiers.index("member-fr") < tiers.index("member-pl")
    # offline, karmada.version auto: failover groups, every release keeps them, and why
    assert "#   shape: failover groups (clusterAffinities, each adding the next tier)" in out
    assert "karmada.version auto: the shape every Karmada keeps" in out
    assert "#   room: Karmada takes the first group whose clusters can hold every replica" in out
    assert docs[1]["spec"]["limits"] == {"cpu": "0"}
    assert "# carbonshift: PropagationPolicy web: patched" in out


def test_mutate_names_the_overflow_tiers_for_a_karmada_that_keeps_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "m.yaml").write_text(PP)
    (tmp_path / "c.yaml").write_text(CONFIG + "karmada: {version: '1.18'}\n")
    code, out, _ = run(
        capsys, "mutate", "-f", str(tmp_path / "m.yaml"), "--config", str(tmp_path / "c.yaml")
    )
    assert code == 0
    (term,) = next(yaml.safe_load_all(out))["spec"]["placement"]["clusterAffinities"]
    overflow = term["overflowAffinities"]
    assert [o["affinityName"] for o in overflow] == ["carbonshift-tier-1", "carbonshift-others"]
    assert "#   shape: overflow tiers (overflowAffinities): karmada.version 1.18" in out
    assert "#   room: each tier takes what Karmada estimates" in out


def test_mutate_json_output_and_stdin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(PP))
    (tmp_path / "c.yaml").write_text(CONFIG)
    code, out, _ = run(
        capsys, "mutate", "-f", "-", "-o", "json", "--config", str(tmp_path / "c.yaml")
    )
    assert code == 0
    results = orjson.loads(out)
    assert [r["outcome"] for r in results] == ["patched", "patched"]
    assert results[1]["decision"]["class"] == "high"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            "zone: [",
            "c.yaml: not valid YAML: expected the node content, but found '<stream end>' "
            "while parsing a flow node (line 1, column 8)",
        ),
        ("providers: [nope]\n", "c.yaml: providers[0]: unknown provider 'nope'"),
        ("feed: {retries: -1}\n", "c.yaml: feed.retries: expected int >= 0, got -1"),
        ("feeds: {}\n", "c.yaml: feeds: unknown key (known: zone, clusters, providers,"),
    ],
)
def test_bad_config_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: str, message: str
) -> None:
    (tmp_path / "c.yaml").write_text(config)
    (tmp_path / "m.yaml").write_text(PP)
    code, _, err = run(
        capsys, "mutate", "-f", str(tmp_path / "m.yaml"), "--config", str(tmp_path / "c.yaml")
    )
    assert code == 2
    assert err.startswith(f"carbonshift: config {tmp_path / 'c.yaml'}: ")
    assert message in err
    assert err.count("\n") == 1


def test_mutate_names_documents_it_cannot_read_and_shows_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = "metadata: {name: x}\n---\nkind: [unclosed\n---\n"
    (tmp_path / "m.yaml").write_text(broken + PP)
    code, out, err = run(capsys, "mutate", "-f", str(tmp_path / "m.yaml"))
    assert code == 1
    problems = err.splitlines()
    assert problems[0].endswith("m.yaml: document 1: needs apiVersion and kind; skipped")
    assert "m.yaml: document 2: not valid YAML or JSON" in problems[1]
    assert len(problems) == 2
    assert "# carbonshift: PropagationPolicy" in out  # document 3 was still decided


def test_mutate_warns_for_api_versions_the_webhook_does_not_register(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: old}\nspec: {}\n"
    (tmp_path / "m.yaml").write_text(old)
    code, out, _ = run(capsys, "mutate", "-f", str(tmp_path / "m.yaml"))
    assert code == 0
    assert "# carbonshift: NodePool old: ignored" in out
    assert (
        "NodePool karpenter.sh/v1beta1 is not mutated; the webhook handles karpenter.sh/v1" in out
    )


def test_mutate_reports_a_malformed_object_and_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    odd = "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: 7}\n"
    (tmp_path / "m.yaml").write_text(odd + "---\n" + PP)
    (tmp_path / "c.yaml").write_text(CONFIG)
    code, out, _ = run(
        capsys, "mutate", "-f", str(tmp_path / "m.yaml"), "-o", "json",
        "--config", str(tmp_path / "c.yaml"),
    )  # fmt: skip
    assert code == 0
    first, *others = orjson.loads(out)
    assert first["outcome"] == "invalid"
    assert "request.name" in first["reason"]
    assert others[0]["outcome"] == "patched"


def test_certs_writes_a_bundle_and_prints_the_ca(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys,
        "certs",
        "--service",
        "carbonshift",
        "--namespace",
        "ops",
        "--ip",
        "127.0.0.1",
        "--out",
        str(tmp_path),
    )
    assert code == 0
    assert base64.b64decode(out.strip()) == (tmp_path / "ca.crt").read_bytes()
    cert = x509.load_pem_x509_certificate((tmp_path / "tls.crt").read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "carbonshift.ops.svc" in sans.get_values_for_type(x509.DNSName)
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert (tmp_path / "tls.key").stat().st_mode & 0o077 == 0


def test_mutate_reevaluate_shows_what_the_leader_would_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Objects as stored, put through the leader's re-evaluation: the grid under member-fr
    and member-pl swapped since admission (no dwell), so the policy switches (history
    recorded) and the paused NodePool stays paused."""
    (tmp_path / "m.yaml").write_text(PP)
    (tmp_path / "c.yaml").write_text(CONFIG)
    code, stored, _ = run(
        capsys, "mutate", "-f", str(tmp_path / "m.yaml"), "--config", str(tmp_path / "c.yaml")
    )
    assert code == 0
    (tmp_path / "stored.yaml").write_text(stored)
    swapped = (
        "zone: PL\nhysteresis: {dwell_hours: 0}\n"
        "clusters:\n  member-fr: {zone: PL}\n  member-pl: {zone: FR}\n"
    )
    (tmp_path / "later.yaml").write_text(swapped)
    args = ["-f", str(tmp_path / "stored.yaml"), "--config", str(tmp_path / "later.yaml")]
    code, out, _ = run(capsys, "mutate", "--reevaluate", "-o", "json", *args)
    assert code == 0
    policy, pool = orjson.loads(out)
    assert policy["outcome"] == "switched"
    assert "greener than the placement in force" in policy["reason"]
    terms = policy["object"]["spec"]["placement"]["clusterAffinities"]
    assert terms[0]["clusterNames"] == ["member-pl"]
    (switch,) = policy["decision"]["switches"]
    assert switch["before"] > switch["after"]
    assert pool["outcome"] == "kept"
    assert pool["object"]["spec"]["limits"] == {"cpu": "0"}
    code, text, _ = run(capsys, "mutate", "--reevaluate", *args)
    assert "# carbonshift: PropagationPolicy web: switched" in text
    assert "# carbonshift: NodePool np: kept" in text


def test_mutate_reevaluate_leaves_kinds_it_does_not_follow(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "m.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    code, out, _ = run(
        capsys, "mutate", "--reevaluate", "-o", "json", "-f", str(tmp_path / "m.yaml")
    )
    assert code == 0
    (result,) = orjson.loads(out)
    assert result["outcome"] == "ignored"
    assert result["reason"] == "v1 ConfigMap is not re-evaluated"


# --- first-run rough edges ----------------------------------------------------------------

WEB, POOL = PP.split("---\n")


def test_mutate_reads_a_directory_as_kubectl_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every *.yaml, *.yml and *.json file of the directory, sorted by name; other files
    and subdirectories (without -R) are left alone."""
    (tmp_path / "b.yml").write_text(POOL)
    (tmp_path / "a.yaml").write_text(WEB)
    (tmp_path / "c.json").write_text(orjson.dumps(yaml.safe_load(WEB)).decode())
    (tmp_path / "notes.txt").write_text("not a manifest")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "d.yaml").write_text(POOL.replace("name: np", "name: deep"))
    code, out, err = run(capsys, "mutate", "-f", str(tmp_path), "-o", "json")
    assert (code, err) == (0, "")
    assert [(r["object"]["kind"], r["object"]["metadata"]["name"]) for r in orjson.loads(out)] == [
        ("PropagationPolicy", "web"),
        ("NodePool", "np"),
        ("PropagationPolicy", "web"),
    ]
    code, out, _ = run(capsys, "mutate", "-R", "-f", str(tmp_path), "-o", "json")
    assert code == 0
    assert [r["object"]["metadata"]["name"] for r in orjson.loads(out)][-1] == "deep"


def test_mutate_takes_several_files_and_stdin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "web.yaml").write_text(WEB)
    monkeypatch.setattr(sys, "stdin", io.StringIO(POOL))
    code, out, _ = run(capsys, "mutate", "-f", str(tmp_path / "web.yaml"), "-f", "-", "-o", "json")
    assert code == 0
    assert [r["object"]["kind"] for r in orjson.loads(out)] == ["PropagationPolicy", "NodePool"]


@pytest.mark.parametrize("content", ["", "\n# only a comment\n", "---\n---\n"])
def test_mutate_of_input_with_no_object_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str
) -> None:
    (tmp_path / "empty.yaml").write_text(content)
    code, out, err = run(capsys, "mutate", "-f", str(tmp_path / "empty.yaml"))
    assert (code, out) == (2, "")
    assert err == f"carbonshift: {tmp_path / 'empty.yaml'} holds no objects: nothing to mutate\n"


def test_mutate_of_a_directory_without_manifests_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "x.yaml").write_text(WEB)
    code, _, err = run(capsys, "mutate", "-f", str(tmp_path))
    assert code == 2
    assert err == (
        f"carbonshift: {tmp_path}: no .yaml, .yml or .json files in this directory "
        "(pass -R to read its subdirectories)\n"
    )


def test_a_yaml_syntax_error_gives_the_parsers_reason_and_the_files_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "m.yaml").write_text(WEB + "---\nkind: PropagationPolicy\n  name: x\n")
    code, out, err = run(capsys, "mutate", "-f", str(tmp_path / "m.yaml"))
    assert code == 1
    assert "# carbonshift: PropagationPolicy web" in out
    line = WEB.count("\n") + 3  # the document starts after the separator line
    assert err == (
        f"carbonshift: {tmp_path / 'm.yaml'}: document 2: not valid YAML or JSON: mapping "
        f"values are not allowed here (line {line}, column 7); skipped\n"
    )


def test_certs_refuses_to_replace_a_ca_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["certs", "--service", "carbonshift", "--namespace", "ops", "--out", str(tmp_path)]
    assert run(capsys, *args)[0] == 0
    ca = (tmp_path / "ca.crt").read_bytes()
    code, out, err = run(capsys, *args)
    assert (code, out) == (2, "")
    assert err.startswith(f"carbonshift: {tmp_path / 'ca.crt'} exists: pass --force to replace")
    assert err.count("\n") == 1
    assert (tmp_path / "ca.crt").read_bytes() == ca
    (tmp_path / "ca.crt").unlink()  # any one of the four files is enough to refuse
    assert run(capsys, *args)[0] == 2
    code, out, _ = run(capsys, *args, "--force")
    assert code == 0
    assert base64.b64decode(out.strip()) == (tmp_path / "ca.crt").read_bytes() != ca


def test_help_of_every_command_is_plain_text() -> None:
    """No reStructuredText or Markdown markup from docstrings in --help."""
    top = parser()
    (commands,) = [a for a in top._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(commands.choices) >= {"serve", "certs", "mutate", "intensity", "simulate"}
    for name, sub in [("carbonshift", top), *commands.choices.items()]:
        text = sub.format_help()
        assert "`" not in text, (name, text)
        assert not re.search(r":(class|func|meth|data|mod|attr):", text), name


def _carbonshift(*argv: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    kwargs.setdefault("stdout", subprocess.PIPE)
    return subprocess.run(
        [sys.executable, "-m", "webhook.cli", *argv],
        stderr=subprocess.PIPE, text=True, timeout=60, check=False, **kwargs,
    )  # fmt: skip


def test_serve_on_a_busy_port_says_so_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = _carbonshift(
            "serve", "--host", "127.0.0.1", "--port", str(port),
            "--cert-dir", str(tmp_path / "certs"), "--shutdown-seconds", "0.1",
            env={k: v for k, v in os.environ.items() if k != "KUBECONFIG"},
        )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr == (
        f"carbonshift: cannot listen on 127.0.0.1:{port}: address already in use "
        "(another process listens there; stop it or pass another --port)\n"
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["certs", "--service", "s", "--namespace", "n", "--out", "{tmp}/certs"],
        ["mutate", "-f", "{tmp}/m.yaml"],
        ["intensity", "DE", "FR"],
        ["--help"],
    ],
)
def test_a_closed_pipe_ends_every_command_quietly(tmp_path: Path, argv: list[str]) -> None:
    """`carbonshift ... | head`: the reader is gone before anything is written."""
    (tmp_path / "m.yaml").write_text(PP)
    read, write = os.pipe()
    os.close(read)
    with os.fdopen(write, "wb") as closed:
        result = _carbonshift(*(a.format(tmp=tmp_path) for a in argv), stdout=closed)
    assert result.stderr == ""
    assert result.returncode in (0, PIPE_CLOSED)


def test_every_command_reports_a_config_error_the_same_way(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("feed: {retries: 99}\n")
    (tmp_path / "m.yaml").write_text(PP)
    expected = f"carbonshift: config {config}: feed.retries: expected int <= 10, got 99\n"
    for argv in (
        ["mutate", "-f", str(tmp_path / "m.yaml")],
        ["intensity", "DE"],
        ["intensity", "--clusters"],
        ["serve", "--port", "8443", "--cert-dir", str(tmp_path / "certs")],
    ):
        code, out, err = run(capsys, *argv, "--config", str(config))
        assert (code, out, err) == (2, "", expected), argv

"""The Helm chart (charts/carbonshift): `helm lint`, every ci/ values file renders, the
values schema refuses bad values with a message naming the value, each target registers
the webhook the way it must (karmada: `url:`, cluster: `service:`), and the chart's
cluster target renders what the kustomize base and overlays render, so the two never drift.

Helm comes from hack/build-helm.sh and kubectl (for `kubectl kustomize`) from
hack/build-binaries.sh, both into the binary cache; a missing one is built when Go is
installed, else the tests skip (under CI=true they fail).
"""

from __future__ import annotations

import base64
import copy
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes

from webhook.cli import main as carbonshift
from webhook.model.config import parse

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "carbonshift"
CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
MANIFESTS = ROOT / "manifests"
NAMESPACE = "carbonshift-system"
IN_CI = os.environ.get("CI", "").lower() == "true"

# A cold build of Helm or kubectl takes minutes; it happens once, in the first test's setup.
pytestmark = pytest.mark.timeout(1800)

Doc = dict[str, Any]


def _cache() -> Path:
    cache = os.environ.get("CARBONSHIFT_CACHE")
    return Path(cache).resolve() if cache else ROOT / ".cache" / "bin"


def _tool(name: str, build: list[str]) -> Path:
    path = _cache() / name
    if not (path.is_file() and os.access(path, os.X_OK)) and shutil.which("go"):
        result = subprocess.run(
            build, capture_output=True, text=True, check=False, timeout=1700, cwd=ROOT
        )
        if result.returncode != 0:
            pytest.fail(f"{' '.join(build)} failed:\n{result.stdout[-3000:]}{result.stderr}")
    if not (path.is_file() and os.access(path, os.X_OK)):
        reason = f"no {path} and no Go to build it ({' '.join(build)})"
        if IN_CI:
            pytest.fail(reason)
        pytest.skip(reason)
    return path


@pytest.fixture(scope="module")
def helm() -> Path:
    return _tool("helm", [str(ROOT / "hack" / "build-helm.sh")])


@pytest.fixture(scope="module")
def kubectl() -> Path:
    return _tool("kubectl", [str(ROOT / "hack" / "build-binaries.sh"), "kubectl"])


def run_helm(helm: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # HOME-independent: no repositories, plugins or registry logins are read.
    env = {**os.environ, "HELM_CONFIG_HOME": "/nonexistent", "HELM_CACHE_HOME": "/nonexistent"}
    return subprocess.run(
        [str(helm), *args], capture_output=True, text=True, check=False, timeout=120, env=env
    )


def template(helm: Path, *args: str, namespace: str = NAMESPACE) -> list[Doc]:
    """`helm template carbonshift charts/carbonshift -n NAMESPACE ARGS`: the documents."""
    result = run_helm(helm, "template", "carbonshift", str(CHART), "-n", namespace, *args)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


@pytest.fixture(scope="module")
def render(helm: Path) -> Callable[..., list[Doc]]:
    def _render(*args: str) -> list[Doc]:
        return template(helm, *args)

    return _render


def by_key(docs: list[Doc]) -> dict[tuple[str, str], Doc]:
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def kinds(docs: list[Doc]) -> set[str]:
    return {d["kind"] for d in docs}


# ----------------------------------------------------------------------------- lint, ci/


def test_ci_has_a_values_file_for_each_target() -> None:
    targets = {
        (v["target"], v.get("install", "all"))
        for v in (yaml.safe_load(p.read_text()) for p in CI_VALUES)
    }
    assert {("cluster", "all"), ("karmada", "host"), ("karmada", "karmada-apiserver")} <= targets


@pytest.mark.parametrize("values", CI_VALUES, ids=lambda p: p.name)
def test_helm_lint_is_clean(helm: Path, values: Path) -> None:
    result = run_helm(helm, "lint", "--strict", str(CHART), "-f", str(values))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout
    assert "[WARNING]" not in result.stdout, result.stdout


HOST_KINDS = {"Deployment", "Service", "PodDisruptionBudget", "ConfigMap", "ServiceAccount"}
API_KINDS = {"MutatingWebhookConfiguration", "ClusterRole", "ClusterRoleBinding", "Role",
             "RoleBinding"}  # fmt: skip


@pytest.mark.parametrize("values", CI_VALUES, ids=lambda p: p.name)
def test_each_ci_values_file_renders(render: Callable[..., list[Doc]], values: Path) -> None:
    docs = render("-f", str(values))
    found = kinds(docs)
    settings = yaml.safe_load(values.read_text())
    install = settings.get("install", "all") if settings["target"] == "karmada" else "all"
    if install in ("host", "all"):
        assert found >= HOST_KINDS
    else:
        assert not found & {"Deployment", "Service", "ConfigMap", "PodDisruptionBudget"}
    if install in ("karmada-apiserver", "all"):
        assert found >= API_KINDS
    else:
        assert not found & API_KINDS
    cluster_scoped = {"MutatingWebhookConfiguration", "ClusterRole", "ClusterRoleBinding"}
    for doc in docs:
        assert doc["metadata"]["labels"]["app.kubernetes.io/name"] == "carbonshift"
        if doc["kind"] not in cluster_scoped:
            assert doc["metadata"]["namespace"] == NAMESPACE, doc["metadata"]
    for config_map in (d for d in docs if d["kind"] == "ConfigMap"):
        config = yaml.safe_load(config_map["data"]["config.yaml"])
        parse(config)  # carbonshift accepts it
        assert "zone" not in config  # the local zone comes from the cluster's Nodes


def test_no_shipped_values_name_the_local_zone() -> None:
    """Neither the defaults nor a ci/ file pins the NodePools' grid zone: by default it
    comes from the cluster's Nodes (tests/serve/test_hardening_manifests.py checks the
    kustomize side)."""
    for path in (CHART / "values.yaml", *CI_VALUES):
        config = (yaml.safe_load(path.read_text()) or {}).get("config") or {}
        assert "zone" not in config, f"{path.name} sets config.zone: {config['zone']}"


# ----------------------------------------------------------------------------- the targets


def _webhook(docs: list[Doc]) -> Doc:
    return next(d for d in docs if d["kind"] == "MutatingWebhookConfiguration")


def _values(name: str) -> str:
    return str(CHART / "ci" / name)


def test_the_karmada_target_registers_the_webhook_by_url(
    render: Callable[..., list[Doc]],
) -> None:
    docs = render("-f", _values("karmada-apiserver-values.yaml"))
    ca = yaml.safe_load((CHART / "ci" / "karmada-apiserver-values.yaml").read_text())
    bundle = base64.b64encode(ca["certificates"]["caBundle"].encode()).decode()
    hooks = _webhook(docs)["webhooks"]
    assert len(hooks) == 2
    for hook in hooks:
        assert hook["clientConfig"] == {
            "url": "https://carbonshift.carbonshift-system.svc:443/mutate",
            "caBundle": bundle,
        }
    # cert-manager cannot inject into the karmada-apiserver.
    assert "annotations" not in _webhook(docs)["metadata"]
    # The identity the host's pod uses, and the RBAC bound to it, in the karmada-apiserver.
    objects = by_key(docs)
    subject = {"kind": "ServiceAccount", "name": "carbonshift", "namespace": NAMESPACE}
    assert objects["ClusterRoleBinding", "carbonshift"]["subjects"] == [subject]
    assert objects["RoleBinding", "carbonshift"]["subjects"] == [subject]
    token = objects["Secret", "carbonshift-token"]
    assert token["type"] == "kubernetes.io/service-account-token"
    assert token["metadata"]["annotations"] == {"kubernetes.io/service-account.name": "carbonshift"}


def test_the_karmada_webhook_url_defaults_to_the_host_service(
    render: Callable[..., list[Doc]],
) -> None:
    docs = render("-f", _values("karmada-apiserver-values.yaml"), "--set", "webhook.url=")
    for hook in _webhook(docs)["webhooks"]:
        assert (
            hook["clientConfig"]["url"] == "https://carbonshift.carbonshift-system.svc:443/mutate"
        )


def test_the_cluster_target_registers_the_webhook_by_service(
    render: Callable[..., list[Doc]],
) -> None:
    for values in ("cluster-values.yaml", "cluster-self-managed-values.yaml"):
        for hook in _webhook(render("-f", _values(values)))["webhooks"]:
            assert "url" not in hook["clientConfig"]
            assert hook["clientConfig"]["service"] == {
                "name": "carbonshift", "namespace": NAMESPACE, "path": "/mutate", "port": 443,
            }  # fmt: skip


def test_the_karmada_host_pod_reads_the_karmada_apiserver_through_the_kubeconfig(
    render: Callable[..., list[Doc]],
) -> None:
    docs = by_key(render("-f", _values("karmada-host-values.yaml")))
    pod = docs["Deployment", "carbonshift"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert "--kubeconfig=/etc/carbonshift/karmada/kubeconfig" in container["args"]
    assert f"--lease-namespace={NAMESPACE}" in container["args"]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "karmada-kubeconfig")
    assert mount == {"name": "karmada-kubeconfig", "mountPath": "/etc/carbonshift/karmada",
                     "readOnly": True}  # fmt: skip
    volume = next(v for v in pod["volumes"] if v["name"] == "karmada-kubeconfig")
    assert volume["secret"]["secretName"] == "carbonshift-karmada-kubeconfig"
    # It needs nothing from the host cluster's API server: no token, no host RBAC.
    assert pod["automountServiceAccountToken"] is False
    assert not {k for k, _ in docs} & API_KINDS


def test_install_all_renders_both_halves_once(
    render: Callable[..., list[Doc]], ca_file: Path
) -> None:
    """`install: all` (for `helm template`) is the host half and the karmada-apiserver half
    together, each object once."""
    docs = render(
        "--set", "target=karmada", "--set", "install=all",
        "--set", "karmada.kubeconfigSecret.name=kubeconfig",
        "--set-file", f"certificates.caBundle={ca_file}",
    )  # fmt: skip
    keys = [(d["kind"], d["metadata"]["name"]) for d in docs]
    assert len(keys) == len(set(keys)), keys
    assert kinds(docs) >= HOST_KINDS | API_KINDS


def _new_ca(directory: Path) -> x509.Certificate:
    status = carbonshift(["certs", "--service", "carbonshift", "--namespace", NAMESPACE,
                          "--out", str(directory)])  # fmt: skip
    assert status == 0
    return x509.load_pem_x509_certificate((directory / "ca.crt").read_bytes())


@pytest.mark.parametrize(
    "target",
    [("--set", "certificates.mode=self-managed",
      "--set", "certificates.selfManaged.existingSecret=carbonshift-tls"),
     ("--set", "target=karmada", "--set", "install=karmada-apiserver")],
    ids=["cluster-self-managed", "karmada-apiserver"],
)  # fmt: skip
def test_the_webhook_trusts_both_cas_during_a_rotation(
    render: Callable[..., list[Doc]], tmp_path: Path, target: tuple[str, ...]
) -> None:
    """docs/upgrade.md, "Rotating the webhook's CA", step 1: `certificates.caBundle` holds
    the old and the new CA, concatenated, and the API server is given both."""
    old, new = _new_ca(tmp_path / "old"), _new_ca(tmp_path / "new")
    assert old.fingerprint(hashes.SHA256()) != new.fingerprint(hashes.SHA256())
    both = tmp_path / "both.crt"
    both.write_bytes((tmp_path / "old" / "ca.crt").read_bytes()
                     + (tmp_path / "new" / "ca.crt").read_bytes())  # fmt: skip
    docs = render(*target, "--set-file", f"certificates.caBundle={both}")
    hooks = _webhook(docs)["webhooks"]
    assert len(hooks) == 2
    for hook in hooks:
        bundle = base64.b64decode(hook["clientConfig"]["caBundle"])
        trusted = x509.load_pem_x509_certificates(bundle)
        assert trusted == [old, new], [c.subject.rfc4514_string() for c in trusted]
    # Pinned, so cert-manager's injector would not overwrite it.
    assert "annotations" not in _webhook(docs)["metadata"]


def test_provider_credentials_come_from_the_existing_secret(
    render: Callable[..., list[Doc]],
) -> None:
    docs = by_key(render("-f", _values("cluster-self-managed-values.yaml")))
    container = docs["Deployment", "carbonshift"]["spec"]["template"]["spec"]["containers"][0]
    assert container["envFrom"] == [{"secretRef": {"name": "carbonshift-providers"}}]
    none = by_key(render("-f", _values("cluster-values.yaml")))
    assert (
        "envFrom"
        not in none["Deployment", "carbonshift"]["spec"]["template"]["spec"]["containers"][0]
    )


def test_a_config_change_rolls_the_pods(render: Callable[..., list[Doc]]) -> None:
    def checksum(*args: str) -> str:
        deployment = by_key(render(*args))["Deployment", "carbonshift"]
        value: str = deployment["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
        return value

    assert checksum() != checksum("--set", "config.zone=FR")


def test_the_service_monitor_scrapes_https_with_verification(
    render: Callable[..., list[Doc]],
) -> None:
    docs = by_key(render("--set", "serviceMonitor.enabled=true"))
    endpoint = docs["ServiceMonitor", "carbonshift"]["spec"]["endpoints"][0]
    assert endpoint["scheme"] == "https"
    assert endpoint["tlsConfig"] == {
        "serverName": "carbonshift.carbonshift-system.svc",
        "ca": {"secret": {"name": "carbonshift-tls", "key": "ca.crt"}},
    }
    assert "ServiceMonitor" not in kinds(render())


# ----------------------------------------------------------------------------- the schema

PEM = (CHART / "ci" / "karmada-apiserver-values.yaml").read_text()
KARMADA_HOST = ("--set", "target=karmada", "--set", "install=host")

# (values, what the message must say): one rule each.
REFUSED: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "unknown-target": (("--set", "target=aws"), ("/target", "'cluster'", "'karmada'")),
    "unknown-install": (("--set", "target=karmada", "--set", "install=both"),
                        ("/install", "'host'", "'karmada-apiserver'")),
    "typo-top-level": (("--set", "replica=3"), ("additional properties", "'replica'")),
    "typo-nested": (("--set", "networkPolicy.enable=true"), ("/networkPolicy", "'enable'")),
    "zero-replicas": (("--set", "replicas=0"), ("/replicas", "minimum")),
    "replicas-not-a-number": (("--set", "replicas=two"), ("/replicas", "integer")),
    "unknown-certificate-mode": (("--set", "certificates.mode=vault"),
                                 ("/certificates/mode", "'cert-manager'", "'self-managed'")),
    "network-policy-without-api-server": (("--set", "networkPolicy.enabled=true"),
                                          ("/networkPolicy", "apiServerCIDRs")),
    "network-policy-empty-api-server": (
        ("--set", "networkPolicy.enabled=true", "--set-json", "networkPolicy.apiServerCIDRs=[]"),
        ("/networkPolicy/apiServerCIDRs", "minItems")),
    "network-policy-not-a-cidr": (
        ("--set", "networkPolicy.enabled=true", "--set", "networkPolicy.apiServerCIDRs={10.0.0.1}"),
        ("/networkPolicy/apiServerCIDRs/0", "does not match pattern")),
    "self-managed-without-ca": (
        ("--set", "certificates.mode=self-managed",
         "--set", "certificates.selfManaged.existingSecret=tls"),
        ("/certificates/caBundle", "minLength")),
    "self-managed-without-certificate": (
        ("--set", "certificates.mode=self-managed", "--set-file", "certificates.caBundle=@CA@"),
        ("/certificates", "existingSecret", "tlsCrt")),
    "ca-bundle-not-pem": (("--set", "certificates.caBundle=hello"),
                          ("/certificates/caBundle", "does not match pattern")),
    "karmada-host-without-kubeconfig": (KARMADA_HOST, ("/karmada/kubeconfigSecret/name",
                                                       "minLength")),
    "karmada-apiserver-without-ca": (
        ("--set", "target=karmada", "--set", "install=karmada-apiserver"),
        ("/certificates/caBundle", "minLength")),
    "webhook-url-not-https": (("--set", "webhook.url=http://carbonshift:80/mutate"),
                              ("/webhook/url", "does not match pattern")),
    "failure-policy": (("--set", "webhook.failurePolicy=Retry"),
                       ("/webhook/failurePolicy", "'Ignore'", "'Fail'")),
    "webhook-timeout": (("--set", "webhook.timeoutSeconds=60"),
                        ("/webhook/timeoutSeconds", "maximum")),
    "image-pull-policy": (("--set", "image.pullPolicy=Sometimes"), ("/image/pullPolicy",)),
    "config-not-a-map": (("--set", "config=zone"), ("/config", "object")),
}  # fmt: skip


@pytest.fixture(scope="module")
def ca_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    values = yaml.safe_load(PEM)
    path = tmp_path_factory.mktemp("ca") / "ca.crt"
    path.write_text(values["certificates"]["caBundle"])
    return path


@pytest.mark.parametrize("rule", sorted(REFUSED))
def test_the_schema_refuses_bad_values_naming_them(helm: Path, ca_file: Path, rule: str) -> None:
    args, expected = REFUSED[rule]
    args = tuple(a.replace("@CA@", str(ca_file)) for a in args)
    result = run_helm(helm, "template", "carbonshift", str(CHART), "-n", NAMESPACE, *args)
    assert result.returncode != 0, f"accepted: {args}"
    message = result.stderr
    assert "values don't meet the specifications of the schema" in message, message
    for part in expected:
        assert part in message, f"{part!r} not in:\n{message}"


def test_the_schema_accepts_the_defaults_and_each_ci_file(helm: Path) -> None:
    for args in ([], *(["-f", str(p)] for p in CI_VALUES)):
        result = run_helm(helm, "template", "carbonshift", str(CHART), *args)
        assert result.returncode == 0, f"{args}: {result.stderr}"


# ----------------------------------------------------------------------------- kustomize


def kustomize(kubectl: Path, directory: Path) -> list[Doc]:
    result = subprocess.run(
        [str(kubectl), "kustomize", str(directory)],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def _pod_template(deployment: Doc) -> Doc:
    """The Deployment's spec without what only the chart adds to the pod's metadata (the
    config checksum annotation, the release's instance label)."""
    spec = copy.deepcopy(deployment["spec"])
    metadata = spec["template"]["metadata"]
    metadata.pop("annotations", None)
    metadata["labels"].pop("app.kubernetes.io/instance", None)
    return dict(spec)


def _comparable(doc: Doc) -> Doc:
    """What must be the same in both renderings: everything but metadata, plus the name,
    the namespace and the annotations."""
    out = {k: copy.deepcopy(v) for k, v in doc.items() if k != "metadata"}
    meta = doc["metadata"]
    out["metadata"] = {k: meta[k] for k in ("name", "namespace", "annotations") if k in meta}
    if doc["kind"] == "Deployment":
        out["spec"] = _pod_template(doc)
    if doc["kind"] == "ConfigMap":
        out["data"] = {k: yaml.safe_load(v) for k, v in doc["data"].items()}
    if doc["kind"] == "Secret":  # kustomize wraps base64 at 76 columns, Helm does not
        out["data"] = {k: base64.b64decode("".join(v.split())) for k, v in doc["data"].items()}
    for hook in out.get("webhooks", []):
        bundle = hook.get("clientConfig", {}).get("caBundle")
        if bundle:
            hook["clientConfig"]["caBundle"] = base64.b64decode("".join(bundle.split()))
    return out


APP_VERSION = str(yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"])


def _same_image(chart: list[Doc], kust: list[Doc]) -> None:
    """Both pull the released image (ghcr.io/<owner>/carbonshift,
    .github/workflows/release.yml) at the chart's appVersion."""
    for docs in (chart, kust):
        deployment = next(d for d in docs if d["kind"] == "Deployment")
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        assert container["image"] == f"ghcr.io/carbonshift/carbonshift:{APP_VERSION}"


def test_the_kustomize_base_pulls_the_charts_image_at_its_app_version() -> None:
    kustomization = yaml.safe_load((MANIFESTS / "base" / "kustomization.yaml").read_text())
    (image,) = kustomization["images"]
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert image["newName"] == values["image"]["repository"]
    assert str(image["newTag"]) == APP_VERSION


def _assert_agree(chart: list[Doc], kust: list[Doc], *, ignore: set[tuple[str, str]]) -> None:
    _same_image(chart, kust)
    ours, theirs = by_key(chart), by_key(kust)
    assert set(ours) == set(theirs) - ignore, (
        f"only in the chart: {sorted(set(ours) - set(theirs))}; "
        f"only in kustomize: {sorted(set(theirs) - set(ours) - ignore)}"
    )
    for key, doc in ours.items():
        theirs_doc = theirs[key]
        # The kustomize base's labels are on every object the chart renders too.
        assert theirs_doc["metadata"].get("labels", {}).items() <= doc["metadata"]["labels"].items()
        assert _comparable(doc) == _comparable(theirs_doc), key


@pytest.fixture(scope="module")
def self_managed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of manifests/ with certificates for the self-managed overlay."""
    copy_dir = tmp_path_factory.mktemp("manifests") / "manifests"
    shutil.copytree(MANIFESTS, copy_dir, ignore=shutil.ignore_patterns("certs"))
    certs = copy_dir / "overlays" / "self-managed" / "certs"
    status = carbonshift(["certs", "--service", "carbonshift", "--namespace", NAMESPACE,
                          "--out", str(certs)])  # fmt: skip
    assert status == 0
    return copy_dir


def with_network_policy(manifests: Path, overlay: str, cidr: str) -> Path:
    """An overlay of ``manifests/overlays/<overlay>`` with the opt-in NetworkPolicy
    component and the API server's CIDR set, as README "Deploying to a cluster" shows."""
    directory = manifests / "overlays" / f"{overlay}-network-policy"
    directory.mkdir()
    patch = f"- {{op: replace, path: /spec/ingress/0/from/0/ipBlock/cidr, value: {cidr}}}"
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [f"../{overlay}"],
        "components": ["../../components/networkpolicy"],
        "patches": [{"target": {"kind": "NetworkPolicy", "name": "carbonshift"}, "patch": patch}],
    }
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return directory


def test_the_chart_renders_what_the_cert_manager_overlay_renders(
    render: Callable[..., list[Doc]], kubectl: Path, tmp_path: Path
) -> None:
    chart = render("-f", _values("cluster-values.yaml"))
    manifests = tmp_path / "manifests"
    shutil.copytree(MANIFESTS, manifests, ignore=shutil.ignore_patterns("certs"))
    kust = kustomize(kubectl, with_network_policy(manifests, "cert-manager", "10.0.0.0/8"))
    # The namespace: Helm installs into one (`-n carbonshift-system --create-namespace`,
    # labelled as README "Install" says); it does not own it.
    _assert_agree(chart, kust, ignore={("Namespace", NAMESPACE)})


def test_the_chart_renders_what_the_self_managed_overlay_renders(
    render: Callable[..., list[Doc]], kubectl: Path, self_managed: Path
) -> None:
    certs = self_managed / "overlays" / "self-managed" / "certs"
    chart = render(
        "--set", "certificates.mode=self-managed",
        "--set-file", f"certificates.selfManaged.tlsCrt={certs / 'tls.crt'}",
        "--set-file", f"certificates.selfManaged.tlsKey={certs / 'tls.key'}",
        "--set-file", f"certificates.caBundle={certs / 'ca.crt'}",
        "--set", "networkPolicy.enabled=true",
        "--set", "networkPolicy.apiServerCIDRs={10.0.0.0/8}",
    )  # fmt: skip
    kust = kustomize(kubectl, with_network_policy(self_managed, "self-managed", "10.0.0.0/8"))
    # kustomize names the generated Secret by its content (carbonshift-tls-<hash>) and
    # points the Deployment at that name; the chart's is carbonshift-tls.
    secret = next(d for d in kust if d["kind"] == "Secret")
    hashed = secret["metadata"]["name"]
    assert hashed.startswith("carbonshift-tls-")
    secret["metadata"]["name"] = "carbonshift-tls"
    volumes = next(d for d in kust if d["kind"] == "Deployment")["spec"]["template"]["spec"][
        "volumes"
    ]
    for volume in volumes:
        if volume.get("secret", {}).get("secretName") == hashed:
            volume["secret"]["secretName"] = "carbonshift-tls"
    _assert_agree(chart, kust, ignore={("Namespace", NAMESPACE)})


def test_the_base_is_the_overlays_common_part(kubectl: Path) -> None:
    """The base holds every object of the chart's cluster target except TLS, so the two
    overlay comparisons above cover all of it."""
    base = {(d["kind"], d["metadata"]["name"]) for d in kustomize(kubectl, MANIFESTS / "base")}
    overlay = kustomize(kubectl, MANIFESTS / "overlays" / "cert-manager")
    tls = {"Issuer", "Certificate"}
    assert base == {(d["kind"], d["metadata"]["name"]) for d in overlay if d["kind"] not in tls}

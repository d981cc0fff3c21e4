"""Certificates, service-account keys, tokens and kubeconfigs for a throwaway local control plane.

Uses the ``openssl`` command (present on every Debian image) so the cluster needs no extra Python package.
Identities are bearer tokens from a ``--token-auth-file``: one per component, each mapped to the user the
bootstrap RBAC policy already knows (``system:kube-controller-manager``, ``system:kube-scheduler``), an admin
in ``system:masters`` for tests and the simulator, one per CSI sidecar mapped to the ServiceAccount user its
upstream RBAC manifests bind (``system:serviceaccount:kube-system:csi-provisioner``, ...), and one for the local
Prometheus's service discovery (``csibench-prometheus``, read-only by the ClusterRole ``prometheus.rbac_objects``).
"""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

from localcluster import prometheus
from localcluster.sidecars import NAMESPACE, SIDECARS


@dataclass(frozen=True)
class Identity:
    """A token-file user: the file name stem of its kubeconfig, its user name and groups."""

    name: str
    user: str
    groups: tuple[str, ...]


IDENTITIES = (
    Identity("admin", "csibench-admin", ("system:masters",)),
    Identity("controller-manager", "system:kube-controller-manager", ()),
    Identity("scheduler", "system:kube-scheduler", ()),
    *(Identity(sidecar.name, sidecar.user, ("system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}"))
      for sidecar in SIDECARS),
    Identity("prometheus", prometheus.USER, ()),
)


def identity(name: str) -> Identity:
    """The identity whose kubeconfig is ``<name>.kubeconfig`` (admin: the simulator's and the tests')."""
    return next(i for i in IDENTITIES if i.name == name)


def _openssl(*args: str, cwd: Path) -> None:
    completed = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if completed.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed: {completed.stderr}")


def generate_pki(pki_dir: Path) -> None:
    """A CA, serving certs for the API server (127.0.0.1/localhost) and the nodes' log endpoints, and the
    service-account key pair."""
    pki_dir.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
             "-days", "365", "-subj", "/CN=csibench-local-ca", cwd=pki_dir)
    (pki_dir / "apiserver.ext").write_text(
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n"
        "subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
        "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\n"
    )
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "apiserver.key", "-out", "apiserver.csr",
             "-subj", "/CN=kube-apiserver", cwd=pki_dir)
    _openssl("x509", "-req", "-in", "apiserver.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "apiserver.crt", "-days", "365", "-extfile", "apiserver.ext", cwd=pki_dir)
    # The simulated nodes' log endpoints (127.0.1.N): the API server proxies `kubectl logs` to them.
    (pki_dir / "kubelet.ext").write_text(
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n"
        "subjectAltName=" + ",".join(f"IP:127.0.1.{n}" for n in range(1, 33)) + "\n")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "kubelet.key", "-out", "kubelet.csr",
             "-subj", "/CN=csibench-simulated-kubelet", cwd=pki_dir)
    _openssl("x509", "-req", "-in", "kubelet.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "kubelet.crt", "-days", "365", "-extfile", "kubelet.ext", cwd=pki_dir)
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=pki_dir)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki_dir)


def write_token_file(path: Path) -> dict[str, str]:
    """Write the API server's token CSV; return the token of each identity by name."""
    tokens = {identity.name: secrets.token_hex(16) for identity in IDENTITIES}
    rows = []
    for index, identity in enumerate(IDENTITIES):
        groups = ",".join(identity.groups)
        rows.append(f'{tokens[identity.name]},{identity.user},uid-{index},"{groups}"')
    path.write_text("\n".join(rows) + "\n")
    path.chmod(0o600)
    return tokens


def build_kubeconfig(server: str, ca_file: Path, user: str, token: str, cluster_name: str) -> str:
    """A single-context kubeconfig (YAML is a superset of JSON, so plain JSON text is valid)."""
    import json

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name, "cluster": {"server": server, "certificate-authority": str(ca_file)}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": user}}],
        "current-context": cluster_name,
    }
    return json.dumps(config, indent=2) + "\n"

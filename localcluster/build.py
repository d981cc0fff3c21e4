"""Build etcd, the Kubernetes control plane and kubectl from Go modules, once per pinned version.

There is no container engine and no binary download on these machines, only the Go module proxy. So the
recipe writes a tiny Go module that requires ``k8s.io/kubernetes`` (or ``go.etcd.io/etcd/server/v3``) and runs
``go build`` on the upstream ``main`` packages. Binaries land in a per-version cache directory outside the
source tree; a second call finds them and returns at once.

Why the ``replace`` block: k8s.io/kubernetes points its staging modules (k8s.io/api, k8s.io/client-go, ...) at
``./staging/...`` and Go ignores a dependency's replaces, so the published ``v0.x.y`` of each must be named here.
The list is read from the pinned release's own go.mod, so it never drifts from the version.

The CSI sidecars (external-provisioner, external-attacher, external-snapshotter's csi-snapshotter and
snapshot-controller) are built the same way: their modules carry ``replace`` directives, so ``go install
module@version`` refuses them, and a wrapper module that requires the sidecar module and repeats its replaces
builds them. external-snapshotter replaces its ``client/v8`` with ``./client``, a path inside its repository;
the wrapper pins the published ``client/v8`` of the same version instead.

csi-sanity (the CSI community's conformance suite, ``github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity``) is
built by the same wrapper-module recipe, so tests can check the simulated driver against the CSI spec. So is helm
(``helm.sh/helm/v4/cmd/helm``, stamped through its ``internal/version`` package), which the chart's tests run.

Prometheus is built from its module too (``github.com/prometheus/prometheus/cmd/prometheus``, with upstream's
build tags that keep only its Kubernetes service discovery): Debian's package has none, and the local cluster's
Prometheus finds the machinery's pods through the API server as it would on a real cluster.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from localcluster import versions

KUBERNETES_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
ETCD_COMMANDS = ("etcd",)
_STAGING_REPLACE = re.compile(r"^\s*(k8s\.io/[\w.-]+)\s*=>\s*\./staging/", re.MULTILINE)


def cache_root() -> Path:
    """Where built binaries and build modules live (outside the source tree, shared across checkouts)."""
    configured = os.environ.get("CSIBENCH_CACHE_DIR")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME", str(Path.home() / ".cache"))) / "csibench"


@dataclass(frozen=True)
class Binaries:
    """Absolute paths of every binary the local cluster runs."""

    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kubectl: Path
    csi_provisioner: Path
    csi_attacher: Path
    csi_snapshotter: Path
    snapshot_controller: Path
    csi_resizer: Path
    prometheus: Path
    csi_sanity: Path  # not run by the cluster: the conformance suite tests run against the simulated driver
    helm: Path  # not run by the cluster: the chart's tests (charts/csibench) lint, render and install with it

    @property
    def snapshot_crd_dir(self) -> Path:
        """The VolumeSnapshot CRDs of the pinned external-snapshotter (shipped in its published client module)."""
        return module_dir(versions.SNAPSHOTTER_CLIENT_MODULE, versions.SNAPSHOTTER.version) / "config" / "crd"

    def sidecars(self) -> tuple[Path, ...]:
        return (self.csi_provisioner, self.csi_attacher, self.csi_snapshotter, self.snapshot_controller,
                self.csi_resizer)


def kubernetes_bin_dir() -> Path:
    return cache_root() / "bin" / f"kubernetes-{versions.KUBERNETES_VERSION}"


def etcd_bin_dir() -> Path:
    return cache_root() / "bin" / f"etcd-{versions.ETCD_VERSION}"


def sidecar_bin_dir(sidecar: versions.SidecarModule) -> Path:
    return cache_root() / "bin" / f"{sidecar.name}-{sidecar.version}"


def prometheus_bin_dir() -> Path:
    return cache_root() / "bin" / f"prometheus-{versions.PROMETHEUS_VERSION}"


def expected_binaries() -> Binaries:
    k8s = kubernetes_bin_dir()
    snapshotter = sidecar_bin_dir(versions.SNAPSHOTTER)
    return Binaries(
        etcd=etcd_bin_dir() / "etcd",
        kube_apiserver=k8s / "kube-apiserver",
        kube_controller_manager=k8s / "kube-controller-manager",
        kube_scheduler=k8s / "kube-scheduler",
        kubectl=k8s / "kubectl",
        csi_provisioner=sidecar_bin_dir(versions.PROVISIONER) / "csi-provisioner",
        csi_attacher=sidecar_bin_dir(versions.ATTACHER) / "csi-attacher",
        csi_snapshotter=snapshotter / "csi-snapshotter",
        snapshot_controller=snapshotter / "snapshot-controller",
        csi_resizer=sidecar_bin_dir(versions.RESIZER) / "csi-resizer",
        prometheus=prometheus_bin_dir() / "prometheus",
        csi_sanity=sidecar_bin_dir(versions.CSI_TEST) / "csi-sanity",
        helm=sidecar_bin_dir(versions.HELM) / "helm",
    )


def _log(message: str) -> None:
    print(f"[localcluster build {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _go_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update({"CGO_ENABLED": "0", "GOTOOLCHAIN": versions.GO_TOOLCHAIN, "GOFLAGS": "-mod=mod"})
    return env


def _run(args: list[str], cwd: Path) -> str:
    completed = subprocess.run(args, cwd=cwd, env=_go_env(), capture_output=True, text=True)
    if completed.returncode != 0:
        raise BuildError(f"{' '.join(args)} failed in {cwd}:\n{completed.stderr[-4000:]}")
    return completed.stdout


class BuildError(RuntimeError):
    """A go command failed; the message carries its stderr tail."""


def module_dir(module: str, version: str) -> Path:
    """Download one module (if needed) and return where Go unpacked it."""
    scratch = cache_root() / "build"
    scratch.mkdir(parents=True, exist_ok=True)
    info = json.loads(_run(["go", "mod", "download", "-json", f"{module}@{version}"], scratch))
    return Path(info["Dir"])


def staging_replaces(kubernetes_go_mod: str, staging_version: str) -> list[str]:
    """``replace`` lines mapping each staging module of a k8s.io/kubernetes go.mod to its published version."""
    modules = sorted(set(_STAGING_REPLACE.findall(kubernetes_go_mod)))
    if not modules:
        raise BuildError("no staging replaces found in k8s.io/kubernetes go.mod: unexpected layout")
    return [f"\t{name} => {name} {staging_version}" for name in modules]


def sidecar_replaces(go_mod_json: dict[str, object], sidecar: versions.SidecarModule) -> list[str]:
    """``replace`` lines for a sidecar's wrapper module: the sidecar's own replaces (from ``go mod edit -json``),
    with a replace into its own repository (``=> ./client``) pointed at the published module of the same version
    (pure)."""
    lines = []
    for entry in go_mod_json.get("Replace") or []:  # type: ignore[attr-defined]
        old, new = entry["Old"], entry["New"]
        old_spec = old["Path"] + (f" {old['Version']}" if old.get("Version") else "")
        if new.get("Version"):
            lines.append(f"\t{old_spec} => {new['Path']} {new['Version']}")
        elif old["Path"] == versions.SNAPSHOTTER_CLIENT_MODULE:
            lines.append(f"\t{old_spec} => {old['Path']} {sidecar.version}")
        else:
            raise BuildError(f"{sidecar.module} replaces {old['Path']} with local path {new['Path']}: "
                             "no published module to pin")
    return lines


def build_go_mod(module_name: str, requires: dict[str, str], replaces: list[str]) -> str:
    """The go.mod text of a build module."""
    lines = [f"module {module_name}", "", "go 1.26.0", "", "require ("]
    lines += [f"\t{name} {version}" for name, version in sorted(requires.items())]
    lines.append(")")
    if replaces:
        lines += ["", "replace (", *replaces, ")"]
    return "\n".join(lines) + "\n"


def _version_ldflags() -> str:
    version = versions.KUBERNETES_VERSION
    major, minor = version.lstrip("v").split(".")[:2]
    values = {"gitVersion": version, "gitMajor": major, "gitMinor": minor, "gitTreeState": "clean"}
    flags = ["-s", "-w"]
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {package}.{key}={value}" for key, value in values.items()]
    return " ".join(flags)


def _go_build(workdir: Path, out_dir: Path, packages: list[str], ldflags: str, label: str,
              tags: tuple[str, ...] = ()) -> None:
    """Run ``go build -v`` and report progress every 200 compiled packages, and every 30 s while Go is quiet
    (downloading modules on a cold cache prints nothing and can take minutes)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    args = ["go", "build", "-v", "-trimpath", *([f"-tags={','.join(tags)}"] if tags else []), "-ldflags", ldflags,
            "-o", str(out_dir) + "/", *packages]
    started = time.monotonic()
    process = subprocess.Popen(args, cwd=workdir, env=_go_env(), stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    tail: list[str] = []
    compiled = 0
    finished = threading.Event()

    def heartbeat() -> None:
        while not finished.wait(30):
            doing = "downloading modules" if compiled == 0 else f"{compiled} packages compiled"
            _log(f"{label}: still working, {doing} ({time.monotonic() - started:.0f}s)")

    threading.Thread(target=heartbeat, daemon=True).start()
    try:
        for line in process.stderr:
            compiled += 1
            tail = ([*tail, line.rstrip()])[-40:]
            if compiled % 200 == 0:
                _log(f"{label}: {compiled} packages compiled ({time.monotonic() - started:.0f}s)")
    finally:
        finished.set()
    if process.wait() != 0:
        raise BuildError(f"go build of {label} failed:\n" + "\n".join(tail))
    _log(f"{label}: built in {time.monotonic() - started:.0f}s")


def _build_kubernetes() -> None:
    version = versions.KUBERNETES_VERSION
    workdir = cache_root() / "build" / f"kubernetes-{version}"
    workdir.mkdir(parents=True, exist_ok=True)
    source = module_dir("k8s.io/kubernetes", version)
    replaces = staging_replaces((source / "go.mod").read_text(), versions.KUBERNETES_STAGING_VERSION)
    (workdir / "go.mod").write_text(
        build_go_mod("csibench.local/kubernetes-build", {"k8s.io/kubernetes": version}, replaces)
    )
    _log(f"building {', '.join(KUBERNETES_COMMANDS)} {version} (first build takes several minutes)")
    packages = [f"k8s.io/kubernetes/cmd/{name}" for name in KUBERNETES_COMMANDS]
    _go_build(workdir, kubernetes_bin_dir(), packages, _version_ldflags(), f"kubernetes {version}")


def _build_etcd() -> None:
    version = versions.ETCD_VERSION
    workdir = cache_root() / "build" / f"etcd-{version}"
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "go.mod").write_text(
        build_go_mod("csibench.local/etcd-build", {"go.etcd.io/etcd/server/v3": version}, [])
    )
    _log(f"building etcd {version}")
    tmp_out = workdir / "out"
    _go_build(workdir, tmp_out, ["go.etcd.io/etcd/server/v3"], "-s -w", f"etcd {version}")
    etcd_bin_dir().mkdir(parents=True, exist_ok=True)
    # Go names a /v3 module's binary after the element before the suffix ("server"); keep whatever it chose.
    (built,) = list(tmp_out.iterdir())
    built.replace(etcd_bin_dir() / "etcd")


def _build_sidecar(sidecar: versions.SidecarModule) -> None:
    workdir = cache_root() / "build" / f"{sidecar.name}-{sidecar.version}"
    workdir.mkdir(parents=True, exist_ok=True)
    source = module_dir(sidecar.module, sidecar.version)
    go_mod = json.loads(_run(["go", "mod", "edit", "-json", str(source / "go.mod")], workdir))
    (workdir / "go.mod").write_text(
        build_go_mod(f"csibench.local/{sidecar.name}-build", {sidecar.module: sidecar.version},
                     sidecar_replaces(go_mod, sidecar))
    )
    _log(f"building {', '.join(sidecar.commands)} {sidecar.version} (first build takes minutes)")
    packages = [f"{sidecar.module}/cmd/{command}" for command in sidecar.commands]
    ldflags = f"-s -w -X {sidecar.version_package}.{sidecar.version_variable}={sidecar.version}"
    _go_build(workdir, sidecar_bin_dir(sidecar), packages, ldflags, f"{sidecar.name} {sidecar.version}")


def _build_prometheus() -> None:
    version = versions.PROMETHEUS_VERSION
    workdir = cache_root() / "build" / f"prometheus-{version}"
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "go.mod").write_text(build_go_mod(
        "csibench.local/prometheus-build", {versions.PROMETHEUS_MODULE: versions.PROMETHEUS_MODULE_VERSION}, []))
    _log(f"building prometheus {version} (Kubernetes service discovery only; first build takes minutes)")
    ldflags = f"-s -w -X github.com/prometheus/common/version.Version={version.lstrip('v')}"
    _go_build(workdir, prometheus_bin_dir(), [f"{versions.PROMETHEUS_MODULE}/cmd/prometheus"], ldflags,
              f"prometheus {version}", versions.PROMETHEUS_BUILD_TAGS)


def ensure_binaries() -> Binaries:
    """Build whatever is missing and return the binaries; idempotent and quick when all are cached."""
    binaries = expected_binaries()
    if not binaries.etcd.exists():
        _build_etcd()
    k8s = [binaries.kube_apiserver, binaries.kube_controller_manager, binaries.kube_scheduler, binaries.kubectl]
    if not all(path.exists() for path in k8s):
        _build_kubernetes()
    for sidecar in (*versions.SIDECAR_MODULES, versions.CSI_TEST, versions.HELM):
        if not all((sidecar_bin_dir(sidecar) / command).exists() for command in sidecar.commands):
            _build_sidecar(sidecar)
    if not binaries.prometheus.exists():
        _build_prometheus()
    missing = [str(path) for path in (binaries.etcd, *k8s, *binaries.sidecars(), binaries.prometheus,
                                      binaries.csi_sanity, binaries.helm) if not path.exists()]
    if missing:
        raise BuildError(f"build finished but binaries are missing: {missing}")
    return binaries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localcluster.build", description=__doc__.splitlines()[0])
    parser.add_argument("--print-dir", action="store_true", help="print the binary directories and exit")
    args = parser.parse_args(argv)
    if args.print_dir:
        print(kubernetes_bin_dir())
        print(etcd_bin_dir())
        for sidecar in (*versions.SIDECAR_MODULES, versions.CSI_TEST, versions.HELM):
            print(sidecar_bin_dir(sidecar))
        print(prometheus_bin_dir())
        return 0
    started = time.monotonic()
    binaries = ensure_binaries()
    _log(f"binaries ready in {time.monotonic() - started:.1f}s: {binaries.kube_apiserver.parent}, {binaries.etcd}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Start and stop a local cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, the simulator
(the simulated CSI driver and nodes), the real CSI sidecars (csi-provisioner, csi-attacher, csi-snapshotter,
csi-resizer) and snapshot-controller talking to it, and a Prometheus that scrapes the sidecars' and the
simulator's process metrics every second (``localcluster.prometheus``).

Everything a cluster owns lives in one state directory (certificates, tokens, kubeconfigs, etcd data, logs and
``state.json`` with the PIDs it started), so two clusters on different ports coexist and ``down`` stops exactly
the processes that ``up`` started, by PID, after checking each PID still runs the binary we launched.

Whether a process runs is decided two ways. Children this object spawned are judged by their Popen handle
(``poll()``): ``Popen`` returns once the child's execve has closed its close-on-exec pipe, which is before the
kernel has set up the new command line, so ``/proc/<pid>/cmdline`` can read empty for a moment (long enough to
see on a loaded machine). Only processes recorded by another invocation (``state.json``) are checked through
``/proc``, and those have long finished their execve.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from localcluster import build, pki, prometheus, sidecars
from localcluster.simulator.__main__ import controller_socket
from localcluster.simulator.config import DRIVER_NAME, HOME_ZONE_PARAMETER, ZONAL_PARAMETER
from localcluster.simulator.nodes import node_address

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_STATE_DIR = REPO_ROOT / ".localcluster" / "default"
DEFAULT_API_PORT = 17443
SERVICE_CIDR = "10.96.0.0/16"
DEFAULT_STORAGE_CLASS = "csibench-sim"
FILESYSTEM_STORAGE_CLASS = "csibench-sim-ext4"  # volumes that are ext4 filesystems of their size (the data path)
# VolumeAttributesClasses of the simulated driver (the modifyVolume step): a QoS policy the array enforces on an
# ext4 volume's loop device (simulator/qos.py), and one without limits to go back to (0: no limit; mutable
# parameters merge, so a class lifts a limit by naming it).
LIMITED_ATTRIBUTES_CLASS, LIMITED_IOPS = "csibench-sim-200iops", 200
UNLIMITED_ATTRIBUTES_CLASS = "csibench-sim-unlimited"
ZONAL_STORAGE_CLASS = "csibench-sim-zonal"  # volumes that live in one of the nodes' three zones (config.ZONES)
# ext4 volumes that live in zone-a but that any node may use, held to 1000 IOPS and 100 MiB/s each way from a node
# of another zone (config.HOME_ZONE_PARAMETER): the cost of crossing zones, for a data-path row to show.
HOME_ZONE_STORAGE_CLASS = "csibench-sim-homezone"
HOME_ZONE, CROSS_ZONE_IOPS, CROSS_ZONE_MIBPS = "zone-a", 1000, 100
# An array whose attaches slow as a node fills (2 s, plus 0.5 s per volume of it already attached or attaching to
# the node): examples/density.yaml's curve is not flat by construction, and its shape is known.
DENSITY_STORAGE_CLASS = "csibench-sim-dense"
DENSITY_PARAMETERS = {"attachLatency": "2s", "attachLatencyPerAttached": "500ms"}
DEFAULT_SNAPSHOT_CLASS = "csibench-sim-snapclass"
GROUP_SNAPSHOT_CLASS = "csibench-sim-groupsnapclass"  # groupsnapshot.storage.k8s.io/v1, the simulated driver's
# The simulator's mirror pod (sim-node-0) and container: the simulated CSI driver, as a vendor's driver pod stands.
DOWN_GRACE_SECONDS = 4.0  # then ``down`` kills what still runs (supervisors release their Leases within 2 s)
FIRST_NODE = "sim-node-0"  # where the component pods are registered (the simulator names nodes sim-node-<i>)
STANDBY_NODE = "sim-node-1"  # where a sidecar's standby replica's pod is registered (``standby_sidecars``)
STANDBY_SUFFIX = "-standby"  # a standby replica's process name: "<component>-standby" (its log, its state)
SIMULATOR_COMPONENT = "csi-sim-driver"
SIMULATOR_IMAGE = "csibench.io/csi-sim-driver:local"  # recorded on its mirror pod; nothing pulls it


class ClusterError(RuntimeError):
    """The cluster could not start or is not running; the message carries the failing component's log tail."""


@dataclass(frozen=True)
class ClusterConfig:
    """Where a cluster lives and which ports it uses: on 127.0.0.1, but the metrics endpoints of the sidecars and
    the simulator and the nodes' log endpoints, which are on the nodes' addresses (the first node's: 127.0.1.1)."""

    state_dir: Path = DEFAULT_STATE_DIR
    api_port: int = DEFAULT_API_PORT
    nodes: int = 3
    max_volumes_per_node: int = 128  # the simulated driver's per-node limit (CSINode allocatable.count)
    # Client rate limits of the controller-manager and scheduler: their defaults (20/30) throttle the PV binder
    # at thousands of PVCs, and then the cluster, not the storage, is what gets measured.
    control_plane_qps: int = 500
    control_plane_burst: int = 1000
    ready_timeout_seconds: float = 90.0
    # Per component (csi-provisioner, csi-attacher, csi-snapshotter, snapshot-controller): flag name -> value,
    # e.g. {"snapshot-controller": {"kube-api-qps": "100", "kube-api-burst": "200"}}. They come last on the
    # command line, so they override the launcher's own choices.
    sidecar_flags: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # True: start the sidecars with upstream's client limits (QPS 5 / burst 10) instead of the raised 500/1000.
    upstream_sidecar_defaults: bool = False
    # Components that run a second replica, its pod on the second node: a standing candidate for the leader
    # Lease, as in a two-replica Deployment (it serves no metrics: the metrics ports are one per component).
    standby_sidecars: tuple[str, ...] = ()
    # A Prometheus (built from its Go module) scraping the sidecars and the simulator every second.
    prometheus: bool = True
    # ... and the API server and the controller-manager every 5 s (localcluster.prometheus: the scale benches).
    scrape_control_plane: bool = False

    @property
    def etcd_client_port(self) -> int:
        return self.api_port + 1

    @property
    def etcd_peer_port(self) -> int:
        return self.api_port + 2

    @property
    def controller_manager_port(self) -> int:
        return self.api_port + 3

    @property
    def scheduler_port(self) -> int:
        return self.api_port + 4

    @property
    def kubelet_port(self) -> int:
        """The simulated nodes' log endpoints (one per node address): per cluster, so two clusters never meet."""
        return self.api_port + 5

    @property
    def prometheus_port(self) -> int:
        return self.api_port + 6

    @property
    def prometheus_url(self) -> str:
        return f"http://127.0.0.1:{self.prometheus_port}"

    @property
    def metrics_host(self) -> str:
        """Where the sidecars and the simulator serve their metrics: the node their mirror pods stand on."""
        return node_address(0)

    def sidecar_metrics_port(self, sidecar: str) -> int:
        """The sidecars' ``--http-endpoint`` ports, in ``sidecars.SIDECARS`` order: the API port + 7 to + 11."""
        return self.api_port + 7 + sidecars.SIDECAR_NAMES.index(sidecar)

    @property
    def simulator_metrics_port(self) -> int:
        return self.api_port + 12

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "admin.kubeconfig"

    @property
    def ground_truth(self) -> Path:
        return self.state_dir / "ground-truth.jsonl"

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def csi_dir(self) -> Path:
        """The driver's unix sockets (a unix socket path must stay under 108 bytes)."""
        return self.state_dir / "csi"

    @property
    def data_dir(self) -> Path:
        """Volume and snapshot data directories, and the simulated kubelets' root directories."""
        return self.state_dir / "data"

    def ports(self) -> list[int]:
        """Every port the cluster listens on: the API port and the twelve after it."""
        return [self.api_port, self.etcd_client_port, self.etcd_peer_port, self.controller_manager_port,
                self.scheduler_port, self.kubelet_port, self.prometheus_port,
                *(self.sidecar_metrics_port(name) for name in sidecars.SIDECAR_NAMES), self.simulator_metrics_port]


@dataclass
class ProcessRecord:
    name: str
    pid: int
    executable: str
    log: str
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class ClusterState:
    """What ``up`` wrote to ``state.json``: enough for ``down`` and ``status`` in another process."""

    api_port: int
    kubeconfig: str
    processes: list[ProcessRecord] = field(default_factory=list)

    @classmethod
    def load(cls, state_dir: Path) -> ClusterState | None:
        path = state_dir / "state.json"
        if not path.exists():
            return None
        raw = json.loads(path.read_text())
        return cls(raw["api_port"], raw["kubeconfig"], [ProcessRecord(**p) for p in raw["processes"]])

    def save(self, state_dir: Path) -> None:
        (state_dir / "state.json").write_text(json.dumps(asdict(self), indent=2) + "\n")


def describe_exit(returncode: int) -> str:
    """How a child ended, from its Popen return code: "exit code 3" or "killed by signal SIGKILL" (pure)."""
    if returncode >= 0:
        return f"exit code {returncode}"
    try:
        return f"killed by signal {signal.Signals(-returncode).name}"
    except ValueError:
        return f"killed by signal {-returncode}"


def _children_of(pid: int) -> list[int]:
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return []


def _argv0(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    except OSError:
        return ""


def pid_runs(record: ProcessRecord) -> bool:
    """True when the PID is alive and still runs what we launched (PIDs get reused). Only for processes another
    invocation started: a child of ours may show an empty command line right after ``Popen`` returns."""
    try:
        cmdline = Path(f"/proc/{record.pid}/cmdline").read_bytes().split(b"\0")
        status = Path(f"/proc/{record.pid}/stat").read_text()
    except OSError:
        return False
    if status.split(") ", 1)[-1].startswith("Z"):
        return False
    return any(record.executable.encode() in part for part in cmdline[:3])


def log_tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class LocalCluster:
    """A local control plane with simulated storage; ``up()`` is idempotent, ``down()`` stops what it started."""

    def __init__(self, config: ClusterConfig | None = None) -> None:
        self.config = config or ClusterConfig()
        self.binaries = build.expected_binaries()
        self._processes: list[ProcessRecord] = []
        self._children: dict[int, subprocess.Popen[bytes]] = {}  # pid -> handle, for processes we spawned

    # -- public API ---------------------------------------------------------------------------------------
    def up(self) -> None:
        """Build binaries if needed, start every component and wait until the cluster is usable."""
        if self.running():
            return
        self.binaries = build.ensure_binaries()
        config = self.config
        hosts = ("127.0.0.1", config.metrics_host)
        busy = [port for port in config.ports() if any(_port_in_use(port, host) for host in hosts)]
        if busy:
            raise ClusterError(f"ports already in use on {' or '.join(hosts)}: {busy}; pick another api port")
        if config.state_dir.exists():
            shutil.rmtree(config.state_dir)
        config.log_dir.mkdir(parents=True)
        self._write_credentials()
        try:
            self._start_etcd()
            self._start_apiserver()
            self._wait_http(f"{config.server}/readyz", "kube-apiserver", authenticated=True)
            self._start_controller_manager()
            self._start_scheduler()
            self._wait_http(f"https://127.0.0.1:{config.controller_manager_port}/healthz", "kube-controller-manager")
            self._wait_http(f"https://127.0.0.1:{config.scheduler_port}/healthz", "kube-scheduler")
            self._install_snapshot_api()
            self._install_sidecar_rbac()
            self._start_simulator()
            self._wait_driver_socket()
            self._start_sidecars()
            self._start_pauser()
            if config.prometheus:
                self._start_prometheus()
            self._wait_nodes_ready()
            self._register_mirror_pods()
            if config.prometheus:
                self._wait_prometheus()
            self._wait_default_service_account()
        except BaseException:
            self.down()
            raise

    def down(self) -> None:
        """Stop every process this cluster started, newest first; SIGKILL what ignores SIGTERM for 4 s. The API
        server drains its watches on SIGTERM and, with etcd, outlasted 10 s every time: nothing of a cluster being
        torn down needs a graceful stop (the next ``up`` starts from an empty state directory), and the 10 s cost
        every test session and benchmark its wait."""
        state = ClusterState.load(self.config.state_dir)
        records = list(state.processes) if state else []
        records += [r for r in self._processes if r.pid not in {s.pid for s in records}]
        for record in reversed(records):
            self._signal(record, signal.SIGTERM)
        deadline = time.monotonic() + DOWN_GRACE_SECONDS
        for record in reversed(records):
            while self.exit_of(record) is None and time.monotonic() < deadline:
                time.sleep(0.1)
            self._signal(record, signal.SIGKILL)
            self._reap(record)
        self._processes = []
        state_file = self.config.state_dir / "state.json"
        if state_file.exists():
            state_file.unlink()

    def restart(self, component: str, downtime_seconds: float = 0.0) -> float:
        """Stop one component (SIGTERM, by PID), wait ``downtime_seconds``, start it again with the same command
        line; return how long it was down. For failure tests: e.g. an API server restart mid-run."""
        stopped_at = time.monotonic()
        with self.stopped(component):
            time.sleep(downtime_seconds)
        return time.monotonic() - stopped_at

    @contextlib.contextmanager
    def stopped(self, component: str) -> Iterator[None]:
        """One component stopped (SIGTERM, then SIGKILL after 15 s) for the ``with`` block, then started again
        with the same command line: for failure tests that act while, say, the snapshot-controller is away."""
        record = next(p for p in self._processes if p.name == component)
        stopped_at = time.monotonic()
        self._signal(record, signal.SIGTERM)
        while self.exit_of(record) is None and time.monotonic() - stopped_at < 15:
            time.sleep(0.05)
        self._signal(record, signal.SIGKILL)
        self._reap(record)
        try:
            yield
        finally:
            self._processes.remove(record)
            self._spawn(record.name, record.executable, record.args, record.env)
            if component == "kube-apiserver":
                self._wait_http(f"{self.config.server}/readyz", component, authenticated=True)

    @contextlib.contextmanager
    def paused(self, component: str) -> Iterator[float]:
        """One component frozen (SIGSTOP) for the ``with`` block, then resumed (SIGCONT, whatever the block
        raised): a slow API server or etcd as its clients see it, a process that answers nothing and keeps its
        connections. Yields the wall-clock time it was frozen at."""
        record = next((p for p in self._processes if p.name == component), None)
        if record is None or self.exit_of(record) is not None:
            raise ClusterError(f"{component} is not running; running: {[p.name for p in self._processes]}")
        os.kill(record.pid, signal.SIGSTOP)
        try:
            yield time.time()
        finally:
            os.kill(record.pid, signal.SIGCONT)

    def ground_truth_records(self) -> list[dict[str, Any]]:
        """What the simulated arrays did, one record per operation (op, object, storageClass, start, finish,
        result), as the simulator appends them to the ground-truth file."""
        path = self.config.ground_truth
        text = path.read_text() if path.exists() else ""
        return [json.loads(line) for line in text.splitlines() if line]

    def reconfigure_sidecar(self, component: str, flags: Mapping[str, str]) -> None:
        """Restart one sidecar with ``flags`` merged over its current ones, and re-register its mirror pod, so a
        benchmark can compare settings side by side on one cluster (e.g. the snapshot-controller's QPS)."""
        sidecar = self._known_sidecar(component)
        merged = {name: dict(values) for name, values in self.config.sidecar_flags.items()}
        merged.setdefault(component, {}).update(flags)
        self.config = replace(self.config, sidecar_flags=merged)
        record = next(p for p in self._processes if p.name == component)
        old_uid = self._sidecar_pod_uid(sidecar)
        self._stop_for_good(record)
        self._start_sidecar(sidecar)  # its supervisor replaces the pod with one carrying the new flags
        self._wait_sidecar_pod(sidecar, old_uid)
        if any(p.name == component + STANDBY_SUFFIX for p in self._processes):  # its standby runs the same flags
            self.stop_standby(component)
            self.start_standby(component)

    def _sidecar_pod(self, sidecar: sidecars.Sidecar) -> dict[str, Any] | None:
        text = self.kubectl("get", "pod", "-n", sidecars.NAMESPACE, f"{sidecar.name}-{FIRST_NODE}", "-o", "json",
                            "--ignore-not-found", check=False)
        found = json.loads(text) if text.strip().startswith("{") else None
        return found if isinstance(found, dict) else None

    def _sidecar_pod_uid(self, sidecar: sidecars.Sidecar) -> str | None:
        pod = self._sidecar_pod(sidecar)
        return str(pod["metadata"]["uid"]) if pod else None

    def _wait_sidecar_pod(self, sidecar: sidecars.Sidecar, old_uid: str | None, timeout: float = 60.0) -> None:
        """Wait until the sidecar's new pod (not ``old_uid``) runs with its current command line (its supervisor
        registers it)."""
        _, args = self.sidecar_command(sidecar)
        name = f"{sidecar.name}-{FIRST_NODE}"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pod = self._sidecar_pod(sidecar)
            if (pod and pod["metadata"].get("uid") != old_uid and (pod.get("status") or {}).get("phase") == "Running"
                    and pod["spec"]["containers"][0].get("args") == args):
                return
            time.sleep(0.2)
        raise ClusterError(f"{name} did not run with its new command line within {timeout:.0f}s\n"
                           + self.component_logs())

    def process_pids(self) -> dict[str, int]:
        """component -> the pid of the process doing its work: a supervised sidecar's child (the binary itself, not
        ``localcluster.staticpod``), every other component's own."""
        state = ClusterState.load(self.config.state_dir)
        pids = {}
        for record in state.processes if state else []:
            pids[record.name] = record.pid
            if record.args[:2] == ["-m", "localcluster.staticpod"] and "--" in record.args:
                binary = record.args[record.args.index("--") + 1]
                pids[record.name] = next((pid for pid in _children_of(record.pid) if _argv0(pid) == binary),
                                         record.pid)
        return pids

    def running(self) -> bool:
        state = ClusterState.load(self.config.state_dir)
        return bool(state and state.processes and all(self.exit_of(p) is None for p in state.processes))

    def status(self) -> dict[str, object]:
        state = ClusterState.load(self.config.state_dir)
        components = {p.name: ("running" if self.exit_of(p) is None else "stopped")
                      for p in (state.processes if state else [])}
        return {"server": self.config.server, "kubeconfig": str(self.config.kubeconfig),
                "prometheus": self.config.prometheus_url if "prometheus" in components else None,
                "components": components}

    def exit_of(self, record: ProcessRecord) -> str | None:
        """None while the process runs; otherwise how it ended ("exit code 1", "killed by signal SIGKILL"), or
        "not running" for a process another invocation started (its exit status is not ours to read)."""
        child = self._children.get(record.pid)
        if child is not None:
            code = child.poll()
            return None if code is None else describe_exit(code)
        return None if pid_runs(record) else "not running"

    def _signal(self, record: ProcessRecord, sig: signal.Signals) -> None:
        """Signal a process that still runs. A child of ours is signalled through its handle, which refuses once
        the child has been reaped, so a reused PID is never hit."""
        if self.exit_of(record) is not None:
            return
        child = self._children.get(record.pid)
        try:
            if child is not None:
                child.send_signal(sig)
            else:
                os.kill(record.pid, sig)
        except ProcessLookupError:
            pass

    def _reap(self, record: ProcessRecord) -> None:
        child = self._children.pop(record.pid, None)
        if child is not None:
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                self._children[record.pid] = child

    @property
    def prometheus_url(self) -> str:
        """The cluster's Prometheus (``ClusterConfig.prometheus_url``): http://127.0.0.1:<api port + 6>."""
        return self.config.prometheus_url

    def env(self) -> str:
        """Shell exports for this cluster: KUBECONFIG and, when it runs one, its Prometheus as the operator's
        default (``CSIBENCH_PROMETHEUS_URL``)."""
        lines = [f"export KUBECONFIG={self.config.kubeconfig}"]
        if self._runs_prometheus():
            lines.append(f"export CSIBENCH_PROMETHEUS_URL={self.config.prometheus_url}")
        return "\n".join(lines)

    def _runs_prometheus(self) -> bool:
        state = ClusterState.load(self.config.state_dir)
        records = [*self._processes, *(state.processes if state else [])]
        return any(record.name == "prometheus" for record in records)

    def wait_established(self, *crds: str, timeout: float = 60.0) -> None:
        """Wait until each CRD is Established. Polled rather than ``kubectl wait --for=condition=Established``:
        on a busy machine the wait can read the CRD before the API server wrote any status and fails at once
        (".status.conditions accessor error: <nil>")."""
        deadline = time.monotonic() + timeout
        for crd in crds:
            while True:
                status = self.kubectl("get", f"crd/{crd}", "-o",
                                      'jsonpath={.status.conditions[?(@.type=="Established")].status}', check=False)
                if status.strip() == "True":
                    break
                if time.monotonic() > deadline:
                    raise ClusterError(f"CRD {crd} not Established within {timeout:.0f}s")
                time.sleep(0.2)

    def kubectl(self, *args: str, input_text: str | None = None, check: bool = True) -> str:
        completed = subprocess.run(
            [str(self.binaries.kubectl), f"--kubeconfig={self.config.kubeconfig}", *args],
            input=input_text, capture_output=True, text=True,
        )
        if check and completed.returncode != 0:
            raise ClusterError(f"kubectl {' '.join(args)} failed: {completed.stderr.strip()}")
        return completed.stdout

    def component_logs(self, lines: int = 30) -> str:
        """The tail of every component's log, for failure messages."""
        parts = []
        for log in sorted(self.config.log_dir.glob("*.log")):
            parts.append(f"--- {log.name} (last {lines} lines)\n{log_tail(log, lines)}")
        return "\n".join(parts)

    # -- steps of up() --------------------------------------------------------------------------------------
    def _write_credentials(self) -> None:
        config = self.config
        pki_dir = config.state_dir / "pki"
        pki.generate_pki(pki_dir)
        tokens = pki.write_token_file(config.state_dir / "tokens.csv")
        self._tokens = tokens
        for identity in pki.IDENTITIES:
            text = pki.build_kubeconfig(config.server, pki_dir / "ca.crt", identity.user, tokens[identity.name],
                                        f"csibench-local-{config.api_port}")
            path = config.state_dir / f"{identity.name}.kubeconfig"
            path.write_text(text)
            path.chmod(0o600)
        (config.state_dir / "scheduler.yaml").write_text(json.dumps({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": str(config.state_dir / "scheduler.kubeconfig"),
                                 "qps": config.control_plane_qps, "burst": config.control_plane_burst},
            "leaderElection": {"leaderElect": False},
        }, indent=2))

    def _spawn(self, name: str, executable: str, args: list[str], env: dict[str, str] | None = None) -> ProcessRecord:
        log_path = self.config.log_dir / f"{name}.log"
        with log_path.open("ab") as log:
            process = subprocess.Popen([executable, *args], stdout=log, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True, cwd=self.config.state_dir,
                                       env={**os.environ, **(env or {})})
        record = ProcessRecord(name, process.pid, executable, str(log_path), args, env or {})
        self._children[process.pid] = process
        self._processes.append(record)
        ClusterState(self.config.api_port, str(self.config.kubeconfig), self._processes).save(self.config.state_dir)
        return record

    def _start_etcd(self) -> None:
        c = self.config
        client, peer = f"http://127.0.0.1:{c.etcd_client_port}", f"http://127.0.0.1:{c.etcd_peer_port}"
        self._spawn("etcd", str(self.binaries.etcd), [
            "--name=local", f"--data-dir={c.state_dir / 'etcd'}",
            f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=local={peer}", "--unsafe-no-fsync", "--quota-backend-bytes=8589934592",
            "--log-level=warn",
        ])

    def _start_apiserver(self) -> None:
        c, p = self.config, self.config.state_dir / "pki"
        self._spawn("kube-apiserver", str(self.binaries.kube_apiserver), [
            f"--etcd-servers=http://127.0.0.1:{c.etcd_client_port}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={c.api_port}",
            f"--tls-cert-file={p / 'apiserver.crt'}", f"--tls-private-key-file={p / 'apiserver.key'}",
            f"--client-ca-file={p / 'ca.crt'}", f"--token-auth-file={c.state_dir / 'tokens.csv'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={p / 'sa.pub'}", f"--service-account-signing-key-file={p / 'sa.key'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--authorization-mode=Node,RBAC",
            "--endpoint-reconciler-type=none", "--profiling=false", "--max-requests-inflight=1000",
            "--max-mutating-requests-inflight=500",
            # The simulated nodes' Hostname addresses do not resolve: reach their log endpoints by InternalIP.
            "--kubelet-preferred-address-types=InternalIP",
        ])

    def _start_controller_manager(self) -> None:
        c, p = self.config, self.config.state_dir / "pki"
        kubeconfig = c.state_dir / "controller-manager.kubeconfig"
        self._spawn("kube-controller-manager", str(self.binaries.kube_controller_manager), [
            f"--kubeconfig={kubeconfig}", f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}", "--leader-elect=false", "--controllers=*",
            "--use-service-account-credentials", f"--service-account-private-key-file={p / 'sa.key'}",
            f"--root-ca-file={p / 'ca.crt'}", "--bind-address=127.0.0.1",
            f"--secure-port={c.controller_manager_port}", f"--cert-dir={c.state_dir / 'kcm-certs'}",
            f"--kube-api-qps={c.control_plane_qps}", f"--kube-api-burst={c.control_plane_burst}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
        ])

    def _start_scheduler(self) -> None:
        c = self.config
        kubeconfig = c.state_dir / "scheduler.kubeconfig"
        self._spawn("kube-scheduler", str(self.binaries.kube_scheduler), [
            f"--config={c.state_dir / 'scheduler.yaml'}", f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}", "--bind-address=127.0.0.1",
            f"--secure-port={c.scheduler_port}", f"--cert-dir={c.state_dir / 'scheduler-certs'}",
        ])

    def simulator_command(self) -> tuple[str, list[str]]:
        """The executable and arguments the launcher starts the simulator with."""
        c = self.config
        return sys.executable, [
            "-m", "localcluster.simulator", f"--kubeconfig={c.kubeconfig}", f"--nodes={c.nodes}",
            f"--ground-truth={c.ground_truth}", f"--csi-dir={c.csi_dir.resolve()}",
            f"--data-dir={c.data_dir.resolve()}", f"--kubelet-port={c.kubelet_port}",
            f"--tls-cert={(c.state_dir / 'pki' / 'kubelet.crt').resolve()}",
            f"--tls-key={(c.state_dir / 'pki' / 'kubelet.key').resolve()}",
            f"--max-volumes-per-node={c.max_volumes_per_node}",
            f"--metrics-address={c.metrics_host}:{c.simulator_metrics_port}",
        ]

    def _start_simulator(self) -> None:
        socket = controller_socket(self.config.csi_dir.resolve())
        if len(str(socket)) > 100:
            raise ClusterError(f"state directory too deep for a unix socket path ({socket}): use a shorter --dir")
        executable, args = self.simulator_command()
        self._spawn("simulator", executable, args, env={"PYTHONPATH": str(REPO_ROOT), "PYTHONUNBUFFERED": "1"})

    def _wait_driver_socket(self) -> None:
        """The sidecars probe the driver as they start: start them once its controller socket listens."""
        socket = controller_socket(self.config.csi_dir.resolve())
        deadline = time.monotonic() + self.config.ready_timeout_seconds
        while time.monotonic() < deadline:
            self._check_alive()
            if socket.exists():
                return
            time.sleep(0.1)
        raise ClusterError(f"the simulated CSI driver never opened {socket}\n" + self.component_logs())

    def sidecar_command(self, sidecar: sidecars.Sidecar, standby: bool = False) -> tuple[str, list[str]]:
        """The executable and arguments the launcher starts one sidecar with (a standby replica: no metrics
        endpoint, the component's port being its first replica's)."""
        c = self.config
        executable = str(getattr(self.binaries, sidecar.name.replace("-", "_")))
        args = sidecars.command_args(sidecar, c.state_dir.resolve() / f"{sidecar.name}.kubeconfig",
                                     controller_socket(c.csi_dir.resolve()) if sidecar.csi else None,
                                     c.sidecar_flags.get(sidecar.name, {}), c.upstream_sidecar_defaults,
                                     http_endpoint=None if standby else
                                     f"{c.metrics_host}:{c.sidecar_metrics_port(sidecar.name)}")
        return executable, args

    def _start_sidecars(self) -> None:
        unknown = (set(self.config.sidecar_flags) | set(self.config.standby_sidecars)) - set(sidecars.SIDECAR_NAMES)
        if unknown:
            raise ClusterError(f"flags or standbys for unknown components {sorted(unknown)}; known: "
                               f"{sidecars.SIDECAR_NAMES}")
        if self.config.standby_sidecars and self.config.nodes < 2:
            raise ClusterError("a standby replica runs on the second node: start the cluster with --nodes 2 or more")
        for sidecar in sidecars.SIDECARS:
            self._start_sidecar(sidecar)
            if sidecar.name in self.config.standby_sidecars:
                self._start_sidecar(sidecar, standby=True)

    def start_standby(self, component: str) -> None:
        """A second replica of a running cluster's sidecar, its pod on the second node, Running when this returns
        (a benchmark or test compares a lease handover with and without a standing candidate)."""
        sidecar = self._known_sidecar(component)
        if self.config.nodes < 2:
            raise ClusterError("a standby replica runs on the second node: the cluster has one")
        if any(p.name == component + STANDBY_SUFFIX for p in self._processes):
            return
        self._start_sidecar(sidecar, standby=True)
        self.wait_standby(component)

    def wait_standby(self, component: str, timeout: float = 60.0) -> None:
        """Wait until the standby's pod runs with the standby's command line (not a pod an earlier one left)."""
        sidecar = self._known_sidecar(component)
        name, (_, args) = f"{component}-{STANDBY_NODE}", self.sidecar_command(sidecar, standby=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.kubectl("get", "pod", "-n", sidecars.NAMESPACE, name, "-o", "json", "--ignore-not-found",
                                check=False)
            pod = json.loads(text) if text.strip().startswith("{") else {}
            if (pod.get("status") or {}).get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp") \
                    and pod["spec"]["containers"][0].get("args") == args:
                return
            time.sleep(0.2)
        raise ClusterError(f"the standby {name} did not run within {timeout:.0f} s\n" + self.component_logs())

    def _stop_for_good(self, record: ProcessRecord) -> None:
        """One process stopped (SIGTERM, SIGKILL after 15 s), reaped, and no longer the cluster's."""
        self._signal(record, signal.SIGTERM)
        deadline = time.monotonic() + 15
        while self.exit_of(record) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        self._signal(record, signal.SIGKILL)
        self._reap(record)
        self._processes.remove(record)

    def stop_standby(self, component: str) -> None:
        """The standby replica stopped (its supervisor releases the Leases its process held) and its pod removed."""
        record = next((p for p in self._processes if p.name == component + STANDBY_SUFFIX), None)
        if record is None:
            return
        self._stop_for_good(record)
        ClusterState(self.config.api_port, str(self.config.kubeconfig), self._processes).save(self.config.state_dir)
        self.kubectl("delete", "pod", "-n", sidecars.NAMESPACE, f"{component}-{STANDBY_NODE}", "--ignore-not-found",
                     "--grace-period=0", "--force", "--timeout=30s")

    def _known_sidecar(self, component: str) -> sidecars.Sidecar:
        sidecar = next((s for s in sidecars.SIDECARS if s.name == component), None)
        if sidecar is None:
            raise ClusterError(f"unknown sidecar {component!r}; known: {sidecars.SIDECAR_NAMES}")
        return sidecar

    def _start_sidecar(self, sidecar: sidecars.Sidecar, standby: bool = False) -> None:
        """The sidecar under ``localcluster.staticpod``, which registers its pod on the first node (a standby's on
        the second) and restarts the process when that pod is deleted."""
        executable, args = self.sidecar_command(sidecar, standby)
        node, process = (STANDBY_NODE, sidecar.name + STANDBY_SUFFIX) if standby else (FIRST_NODE, sidecar.name)
        pod = self.sidecar_pod(sidecar, {"metadata": {"name": node, "uid": ""}}, standby)  # the supervisor owns it
        pod_file = self.config.state_dir / "pods" / f"{process}.json"
        pod_file.parent.mkdir(exist_ok=True)
        pod_file.write_text(json.dumps(pod, indent=2) + "\n")
        self._spawn(process, sys.executable, [
            "-m", "localcluster.staticpod", f"--kubeconfig={self.config.kubeconfig.resolve()}",
            f"--pod={pod_file.resolve()}", "--", executable, *args,
        ], env={"PYTHONPATH": str(REPO_ROOT), "PYTHONUNBUFFERED": "1"})

    def _start_pauser(self) -> None:
        """``localcluster.pauser``: the control plane's mirror pods, and a pause when a run asks on one."""
        self._spawn("pauser", sys.executable, [
            "-m", "localcluster.pauser", f"--kubeconfig={self.config.kubeconfig.resolve()}",
            f"--state-dir={self.config.state_dir.resolve()}", f"--node={FIRST_NODE}",
        ], env={"PYTHONPATH": str(REPO_ROOT), "PYTHONUNBUFFERED": "1"})

    def _install_sidecar_rbac(self) -> None:
        """The upstream RBAC manifests of each sidecar, moved to kube-system, and Prometheus's read-only role."""
        objects = []
        for sidecar in sidecars.SIDECARS:
            module = build.module_dir(sidecar.module.module, sidecar.module.version)
            objects += sidecars.rbac_objects((module / sidecar.rbac_manifest).read_text())
        if self.config.prometheus:
            objects += prometheus.rbac_objects()
        self.kubectl("apply", "-f", "-", input_text=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                 "items": objects}))

    def sidecar_pod(self, sidecar: sidecars.Sidecar, node: dict[str, Any], standby: bool = False) -> dict[str, Any]:
        """The pod a sidecar runs as on ``node``, with its real command line and metrics port (a standby: none)."""
        executable, args = self.sidecar_command(sidecar, standby)
        return sidecars.mirror_pod(sidecar, node["metadata"]["name"], node["metadata"]["uid"], executable, args,
                                   metrics_port=None if standby else self.config.sidecar_metrics_port(sidecar.name))

    def mirror_pods(self, node: dict[str, Any]) -> list[dict[str, Any]]:
        """A pod per sidecar and one for the simulator (the simulated driver) on ``node``, with their real command
        lines and metrics ports. The launcher registers the simulator's; each sidecar's supervisor its own."""
        items = [self.sidecar_pod(sidecar, node) for sidecar in sidecars.SIDECARS]
        executable, args = self.simulator_command()
        items.append(sidecars.process_mirror_pod(
            SIMULATOR_COMPONENT, node["metadata"]["name"], node["metadata"]["uid"], image=SIMULATOR_IMAGE,
            identity=pki.identity("admin").user, executable=executable, args=args,
            metrics_port=self.config.simulator_metrics_port))
        return items

    def _register_mirror_pods(self) -> None:
        node = json.loads(self.kubectl("get", "node", FIRST_NODE, "-o", "json"))
        simulator = [pod for pod in self.mirror_pods(node)
                     if pod["metadata"]["annotations"].get("kubernetes.io/config.mirror") == SIMULATOR_COMPONENT]
        self.kubectl("create", "-f", "-", input_text=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                  "items": simulator}))

    def _start_prometheus(self) -> None:
        """Prometheus with its config, its SD token and its data in the state directory."""
        c = self.config
        token_file = c.state_dir / "prometheus.token"
        token_file.touch(mode=0o600)
        token_file.chmod(0o600)  # before the token is in it
        token_file.write_text(self._tokens["prometheus"])
        config_file = c.state_dir / "prometheus.yml"
        config_file.write_text(yaml.safe_dump(prometheus.build_prometheus_config(
            c.server, (c.state_dir / "pki" / "ca.crt").resolve(), token_file.resolve(),
            f"127.0.0.1:{c.controller_manager_port}" if c.scrape_control_plane else None), sort_keys=False))
        self._spawn("prometheus", str(self.binaries.prometheus), prometheus.command_args(
            config_file.resolve(), (c.state_dir / "prometheus").resolve(), c.prometheus_port))

    def _wait_prometheus(self) -> None:
        """Prometheus ready, then every mirror pod's target scraped and up (``up == 1``)."""
        c = self.config
        self._wait_http(f"{c.prometheus_url}/-/ready", "prometheus")
        expected = len(sidecars.SIDECARS) + 1
        query = urllib.parse.urlencode({"query": f'up{{job="{prometheus.JOB_MACHINERY}"}}'})
        deadline = time.monotonic() + c.ready_timeout_seconds
        up = 0
        while time.monotonic() < deadline:
            self._check_alive()
            up = prometheus.up_targets(_get_json(f"{c.prometheus_url}/api/v1/query?{query}"))
            if up >= expected:
                return
            time.sleep(0.5)
        problems = prometheus.target_problems(_get_json(f"{c.prometheus_url}/api/v1/targets"),
                                              prometheus.JOB_MACHINERY)
        log = c.log_dir / "prometheus.log"
        raise ClusterError(f"prometheus: {up} of {expected} {prometheus.JOB_MACHINERY} targets up within "
                           f"{c.ready_timeout_seconds:.0f}s\n" + "\n".join(problems)
                           + f"\n--- prometheus.log (last 30 lines)\n{log_tail(log)}")

    def _install_snapshot_api(self) -> None:
        """The snapshot and group snapshot CRDs of the pinned external-snapshotter (the snapshot-controller's own
        version; v8.7.0 serves groupsnapshot.storage.k8s.io/v1, its CSIVolumeGroupSnapshot gate on by default), the
        local classes and the snapshot classes."""
        crds = [f"--filename={crd}" for crd in sorted(self.binaries.snapshot_crd_dir.glob("*.yaml"))
                if crd.name != "kustomization.yaml"]
        self.kubectl("apply", "--server-side", *crds)
        self.wait_established("volumesnapshots.snapshot.storage.k8s.io",
                              "volumesnapshotcontents.snapshot.storage.k8s.io",
                              "volumesnapshotclasses.snapshot.storage.k8s.io",
                              *(f"{kind}.groupsnapshot.storage.k8s.io" for kind in (
                                  "volumegroupsnapshots", "volumegroupsnapshotcontents",
                                  "volumegroupsnapshotclasses")))
        self.kubectl("apply", "-f", "-", input_text=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
             "metadata": {"name": DEFAULT_STORAGE_CLASS}, "provisioner": DRIVER_NAME,
             "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate", "allowVolumeExpansion": True,
             "parameters": {}},
            {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
             "metadata": {"name": FILESYSTEM_STORAGE_CLASS}, "provisioner": DRIVER_NAME,
             "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate", "allowVolumeExpansion": True,
             "parameters": {"csi.storage.k8s.io/fstype": "ext4"}},
            {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
             "metadata": {"name": ZONAL_STORAGE_CLASS}, "provisioner": DRIVER_NAME,
             "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate", "allowVolumeExpansion": True,
             "parameters": {ZONAL_PARAMETER: "true"}},
            {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
             "metadata": {"name": HOME_ZONE_STORAGE_CLASS}, "provisioner": DRIVER_NAME,
             "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate", "allowVolumeExpansion": True,
             "parameters": {"csi.storage.k8s.io/fstype": "ext4", HOME_ZONE_PARAMETER: HOME_ZONE,
                            "crossZoneMaxIOPS": str(CROSS_ZONE_IOPS), "crossZoneMaxMiBps": str(CROSS_ZONE_MIBPS)}},
            {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
             "metadata": {"name": DENSITY_STORAGE_CLASS}, "provisioner": DRIVER_NAME,
             "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate", "allowVolumeExpansion": True,
             "parameters": DENSITY_PARAMETERS},
            {"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotClass",
             "metadata": {"name": DEFAULT_SNAPSHOT_CLASS,
                          "annotations": {"snapshot.storage.kubernetes.io/is-default-class": "true"}},
             "driver": DRIVER_NAME, "deletionPolicy": "Delete"},
            {"apiVersion": "groupsnapshot.storage.k8s.io/v1", "kind": "VolumeGroupSnapshotClass",
             "metadata": {"name": GROUP_SNAPSHOT_CLASS}, "driver": DRIVER_NAME, "deletionPolicy": "Delete"},
            {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttributesClass",
             "metadata": {"name": LIMITED_ATTRIBUTES_CLASS}, "driverName": DRIVER_NAME,
             "parameters": {"qosPolicy": "limited", "maxIOPS": str(LIMITED_IOPS)}},
            {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttributesClass",
             "metadata": {"name": UNLIMITED_ATTRIBUTES_CLASS}, "driverName": DRIVER_NAME,
             "parameters": {"qosPolicy": "unlimited", "maxIOPS": "0", "maxMiBps": "0"}},
        ]}))

    def _wait_nodes_ready(self) -> None:
        """Nodes are usable once Ready and the node lifecycle controller has lifted the not-ready taint."""
        deadline = time.monotonic() + self.config.ready_timeout_seconds
        while time.monotonic() < deadline:
            self._check_alive()
            nodes = json.loads(self.kubectl("get", "nodes", "-o", "json"))["items"]
            usable = [n for n in nodes if _node_usable(n)]
            if len(usable) >= self.config.nodes:
                return
            time.sleep(0.5)
        raise ClusterError(f"nodes not Ready within {self.config.ready_timeout_seconds:.0f}s\n"
                           + self.component_logs())

    def _wait_default_service_account(self) -> None:
        deadline = time.monotonic() + self.config.ready_timeout_seconds
        while time.monotonic() < deadline:
            if self.kubectl("get", "serviceaccount", "default", "-n", "default", "--ignore-not-found",
                            "-o", "name").strip():
                return
            time.sleep(0.3)
        raise ClusterError("controller-manager never created the default ServiceAccount\n" + self.component_logs())

    def _admin_token(self) -> str:
        tokens = getattr(self, "_tokens", None)
        if tokens:
            return str(tokens["admin"])
        config = json.loads(self.config.kubeconfig.read_text())
        return str(config["users"][0]["user"]["token"])

    def _check_alive(self) -> None:
        for record in self._processes:
            ended = self.exit_of(record)
            if ended is not None:
                raise ClusterError(f"{record.name} exited during start-up ({ended}); log tail:\n"
                                   f"{log_tail(Path(record.log), 40)}")

    def _wait_http(self, url: str, component: str, authenticated: bool = False) -> None:
        context = ssl.create_default_context(cafile=str(self.config.state_dir / "pki" / "ca.crt"))
        if not authenticated:
            # Controller-manager and scheduler serve /healthz with a self-signed certificate of their own.
            context = ssl._create_unverified_context()
        request = urllib.request.Request(url)
        if authenticated:
            request.add_header("Authorization", f"Bearer {self._admin_token()}")
        deadline = time.monotonic() + self.config.ready_timeout_seconds
        last_error = ""
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                with urllib.request.urlopen(request, context=context, timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError) as error:
                last_error = str(error)
            time.sleep(0.2)
        raise ClusterError(f"{component} not ready at {url} within {self.config.ready_timeout_seconds:.0f}s "
                           f"({last_error})\n" + self.component_logs())


def _node_usable(node: dict[str, object]) -> bool:
    status = node.get("status") or {}
    spec = node.get("spec") or {}
    assert isinstance(status, dict) and isinstance(spec, dict)
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    taints = [t.get("key", "") for t in spec.get("taints") or []]
    tainted = any("not-ready" in key or "unreachable" in key for key in taints)
    return ready and not tainted


def _port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        return probe.connect_ex((host, port)) == 0


def _get_json(url: str) -> dict[str, Any]:
    """A JSON answer from a local HTTP endpoint; {} while it does not answer (a start-up poll tries again)."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            answer = json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError):
        return {}
    return answer if isinstance(answer, dict) else {}

"""Run the simulator: ``python -m localcluster.simulator --kubeconfig FILE --csi-dir DIR [--nodes N]``.

It serves the simulated CSI driver (controller plugin on ``<csi-dir>/controller.sock``, one node plugin per
node on ``<csi-dir>/<node>.sock``) and plays the nodes: Node objects, Leases, CSINode, CSIDriver, a kubelet that
mounts volumes through the node plugins and runs non-pause containers as processes, and each node's log endpoint
(``--kubelet-port``, HTTPS with ``--tls-cert``/``--tls-key``) that ``kubectl logs`` reaches through the API server.
With ``--metrics-address host:port`` it serves prometheus_client's default registry there (its process collector:
``process_cpu_seconds_total``, ``process_resident_memory_bytes``), so the local Prometheus measures what the
simulated driver costs beside what the real sidecars cost.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from pathlib import Path

import prometheus_client

from localcluster.simulator import api
from localcluster.simulator.audit import Auditor
from localcluster.simulator.backend import GroundTruth
from localcluster.simulator.context import Context, Informers
from localcluster.simulator.driver import Driver, serve_controller, serve_node
from localcluster.simulator.faults import FaultAnswerer, FaultWindows
from localcluster.simulator.kubelet import Kubelet
from localcluster.simulator.logserver import LogServers
from localcluster.simulator.nodes import DEFAULT_KUBELET_PORT, Nodes, node_address
from localcluster.simulator.plugins import NodePlugins

log = logging.getLogger("simulator")


def controller_socket(csi_dir: Path) -> Path:
    return csi_dir / "controller.sock"


def node_socket(csi_dir: Path, node: str) -> Path:
    return csi_dir / f"{node}.sock"


async def run(kubeconfig: Path, node_names: list[str], ground_truth: Path | None, csi_dir: Path,
              data_dir: Path, kubelet_port: int = DEFAULT_KUBELET_PORT,
              tls: tuple[Path, Path] | None = None, max_volumes_per_node: int = 128,
              metrics_address: tuple[str, int] | None = None) -> None:
    metrics = None
    if metrics_address is not None:
        host, port = metrics_address
        metrics, _ = prometheus_client.start_http_server(port, addr=host)
        log.info("metrics on http://%s:%d/metrics", host, port)
    async with api.Client(kubeconfig) as client:
        node_set = set(node_names)
        informers = Informers(
            storage_classes=api.Informer(client, api.STORAGE_CLASS),
            pvcs=api.Informer(client, api.PVC),
            pvs=api.Informer(client, api.PV),
            pods=api.Informer(client, api.POD, keep=lambda pod: pod["spec"].get("nodeName") in node_set),
            attachments=api.Informer(client, api.VOLUME_ATTACHMENT),
        )
        windows = FaultWindows()
        ctx = Context(client=client, informers=informers, truth=GroundTruth(ground_truth), node_names=node_set,
                      faults=windows)
        sockets = {name: node_socket(csi_dir, name) for name in node_names}
        driver = Driver(ctx, data_dir, max_volumes_per_node)
        driver.nodes.update(sockets)
        auditor = Auditor(client, driver)
        faults = FaultAnswerer(client, windows, informers.storage_classes)
        controller = await serve_controller(driver, controller_socket(csi_dir))
        plugins = NodePlugins(client, sockets, lambda node, socket: serve_node(driver, node, socket))
        await plugins.start()
        log.info("CSI driver serving: controller %s, nodes %s", controller_socket(csi_dir),
                 ", ".join(str(path) for path in sockets.values()))
        nodes = Nodes(client, node_names, kubelet_port, max_volumes_per_node)
        await nodes.register()
        kubelet = Kubelet(ctx, sockets, data_dir / "kubelet")
        informers.pods.handlers.append(plugins.on_pod)
        logs = None
        if tls is not None:
            logs = LogServers([node_address(i) for i in range(len(node_names))], kubelet_port, *tls,
                              lookup=kubelet.log_lookup)
            logs.start()
        tasks = [asyncio.create_task(informer.run(), name=f"informer:{informer.resource.plural}")
                 for informer in informers.all()]
        tasks.append(asyncio.create_task(nodes.heartbeat(), name="heartbeat"))
        tasks.append(asyncio.create_task(auditor.informer.run(), name="informer:audits"))
        tasks.append(asyncio.create_task(faults.informer.run(), name="informer:faults"))
        await asyncio.gather(*(informer.synced.wait() for informer in informers.all()))
        await plugins.register()
        log.info("simulator ready: %d nodes, all informers synced", len(node_names))
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        for task in tasks:
            task.cancel()
        await kubelet.shutdown()
        if logs is not None:
            logs.stop()
        await plugins.stop()
        await controller.stop(grace=None)
        if metrics is not None:
            metrics.shutdown()
            metrics.server_close()
        log.info("simulator stopped")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localcluster.simulator", description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--node-prefix", default="sim-node-")
    parser.add_argument("--ground-truth", type=Path, default=None, help="JSON-lines file of backend operations")
    parser.add_argument("--csi-dir", type=Path, required=True, help="directory of the CSI unix sockets")
    parser.add_argument("--data-dir", type=Path, required=True,
                        help="volume and snapshot data directories, and the kubelets' root directories")
    parser.add_argument("--kubelet-port", type=int, default=DEFAULT_KUBELET_PORT,
                        help="port of every node's log endpoint (one per node address, 127.0.1.N)")
    parser.add_argument("--tls-cert", type=Path, default=None, help="serving certificate of the log endpoints")
    parser.add_argument("--tls-key", type=Path, default=None, help="its key (both, or no log endpoints)")
    parser.add_argument("--max-volumes-per-node", type=int, default=128,
                        help="volumes each node takes (NodeGetInfo, CSINode allocatable.count; one more is refused)")
    parser.add_argument("--metrics-address", type=_host_port, default=None, metavar="HOST:PORT",
                        help="serve the process's metrics (prometheus_client's default registry) there")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    names = [f"{args.node_prefix}{index}" for index in range(args.nodes)]
    tls = (args.tls_cert, args.tls_key) if args.tls_cert and args.tls_key else None
    asyncio.run(run(args.kubeconfig, names, args.ground_truth, args.csi_dir.resolve(), args.data_dir.resolve(),
                    args.kubelet_port, tls, args.max_volumes_per_node, args.metrics_address))
    return 0


def _host_port(text: str) -> tuple[str, int]:
    """``127.0.1.1:19455`` -> ("127.0.1.1", 19455)."""
    host, colon, port = text.rpartition(":")
    if not colon or not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: expected HOST:PORT, e.g. 127.0.1.1:17455")
    return host, int(port)


if __name__ == "__main__":
    raise SystemExit(main())

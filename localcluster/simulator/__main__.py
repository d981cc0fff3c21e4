"""Run the simulator: ``python -m localcluster.simulator --kubeconfig FILE [--nodes N] [--ground-truth FILE]``."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from pathlib import Path

from localcluster.simulator import api
from localcluster.simulator.attacher import Attacher
from localcluster.simulator.backend import GroundTruth
from localcluster.simulator.context import Context, Informers
from localcluster.simulator.kubelet import Kubelet
from localcluster.simulator.nodes import Nodes
from localcluster.simulator.provisioner import Provisioner
from localcluster.simulator.snapshots import Snapshots

log = logging.getLogger("simulator")


async def run(kubeconfig: Path, node_names: list[str], ground_truth: Path | None) -> None:
    async with api.Client(kubeconfig) as client:
        node_set = set(node_names)
        informers = Informers(
            storage_classes=api.Informer(client, api.STORAGE_CLASS),
            snapshot_classes=api.Informer(client, api.SNAPSHOT_CLASS),
            pvcs=api.Informer(client, api.PVC),
            pvs=api.Informer(client, api.PV),
            pods=api.Informer(client, api.POD, keep=lambda pod: pod["spec"].get("nodeName") in node_set),
            attachments=api.Informer(client, api.VOLUME_ATTACHMENT),
            snapshots=api.Informer(client, api.SNAPSHOT),
            contents=api.Informer(client, api.SNAPSHOT_CONTENT),
        )
        ctx = Context(client=client, informers=informers, truth=GroundTruth(ground_truth), node_names=node_set)
        nodes = Nodes(client, node_names)
        await nodes.register()
        Provisioner(ctx)
        Attacher(ctx)
        Kubelet(ctx)
        Snapshots(ctx)
        tasks = [asyncio.create_task(informer.run(), name=f"informer:{informer.resource.plural}")
                 for informer in informers.all()]
        tasks.append(asyncio.create_task(nodes.heartbeat(), name="heartbeat"))
        await asyncio.gather(*(informer.synced.wait() for informer in informers.all()))
        log.info("simulator ready: %d nodes, all informers synced", len(node_names))
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        for task in tasks:
            task.cancel()
        log.info("simulator stopped")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localcluster.simulator", description=__doc__)
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--node-prefix", default="sim-node-")
    parser.add_argument("--ground-truth", type=Path, default=None, help="JSON-lines file of backend operations")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    names = [f"{args.node_prefix}{index}" for index in range(args.nodes)]
    asyncio.run(run(args.kubeconfig, names, args.ground_truth))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

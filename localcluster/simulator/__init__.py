"""A project-owned stand-in for what a storage vendor and the nodes run: the CSI driver, its arrays, kubelets.

Parts (one module each): ``driver`` (the simulated CSI driver: Identity, Controller and Node services over unix
sockets, called by the real csi-provisioner, csi-attacher, csi-snapshotter and csi-resizer and by the kubelet),
``backend`` (the array behind each StorageClass: latency, jitter, concurrency, failures, hangs, ground truth),
``nodes`` (Node, Lease, CSINode, CSIDriver) and ``kubelet`` (NodeStage/NodePublish before Running, NodeUnpublish/
NodeUnstage on delete, NodeExpandVolume where a grown volume is mounted; non-pause pods run as processes through
``runtime`` and ``sandbox``, with ``projected`` volumes (the ServiceAccount token) and ``probes``/``prober``). The
real sidecars, snapshot-controller, PV controller, attach/detach controller, scheduler, garbage collector and
namespace controller do their own jobs; the simulator never does theirs.
"""

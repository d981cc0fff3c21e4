"""A project-owned stand-in for what a storage vendor and the nodes run: driver sidecars, kubelets, arrays.

Roles (one module each): ``nodes`` (Node, Lease, CSINode, CSIDriver), ``provisioner`` (PVC -> PV, clones,
PV deletion), ``attacher`` (VolumeAttachment), ``kubelet`` (mount, Running, unmount), ``snapshots`` (snapshot
controller and snapshotter). ``backend`` models the array behind each StorageClass (latency, jitter,
concurrency, failures, hangs) and records ground truth. The real PV controller, attach/detach controller,
scheduler, garbage collector and namespace controller do their own jobs; the simulator never does theirs.
"""

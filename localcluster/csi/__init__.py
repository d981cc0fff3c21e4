"""CSI over gRPC: stubs generated from the pinned spec's csi.proto (see ``generate.py``)."""

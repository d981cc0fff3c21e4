"""Regenerate the committed CSI gRPC stubs from the pinned spec's ``csi.proto``.

``python -m localcluster.csi.generate`` downloads github.com/container-storage-interface/spec at
``versions.CSI_SPEC_VERSION`` through the Go module proxy (the same source the sidecars are built from), runs
grpcio-tools' protoc on its ``csi.proto`` and writes ``csi_pb2.py``, ``csi_pb2.pyi`` and ``csi_pb2_grpc.py``
beside this file. ``--check`` only compares, for CI. The stubs are committed so that running the cluster needs
grpcio and protobuf only.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from localcluster import build, versions

HERE = Path(__file__).resolve().parent
OUTPUTS = ("csi_pb2.py", "csi_pb2.pyi", "csi_pb2_grpc.py")


def generate(out_dir: Path) -> None:
    from grpc_tools import protoc  # only the recipe needs grpcio-tools

    proto = build.module_dir(versions.CSI_SPEC_MODULE, versions.CSI_SPEC_VERSION) / "csi.proto"
    include = Path(protoc.__file__).parent / "_proto"  # google/protobuf/*.proto shipped with grpcio-tools
    with tempfile.TemporaryDirectory() as scratch:
        (Path(scratch) / "csi.proto").write_text(proto.read_text())
        code = protoc.main(["protoc", f"-I{scratch}", f"-I{include}", f"--python_out={out_dir}",
                            f"--pyi_out={out_dir}", f"--grpc_python_out={out_dir}", str(Path(scratch) / "csi.proto")])
    if code != 0:
        raise SystemExit(f"protoc failed with exit code {code}")
    grpc_stub = out_dir / "csi_pb2_grpc.py"
    # protoc writes an absolute "import csi_pb2"; the stubs live in a package.
    grpc_stub.write_text(grpc_stub.read_text().replace("import csi_pb2 as csi__pb2",
                                                       "from localcluster.csi import csi_pb2 as csi__pb2"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localcluster.csi.generate", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the committed stubs differ")
    args = parser.parse_args(argv)
    if not args.check:
        generate(HERE)
        print(f"wrote {', '.join(OUTPUTS)} from csi.proto {versions.CSI_SPEC_VERSION}", file=sys.stderr)
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        generate(Path(scratch))
        stale = [name for name in OUTPUTS if (Path(scratch) / name).read_text() != (HERE / name).read_text()]
    if stale:
        print(f"stale CSI stubs: {stale}; run python -m localcluster.csi.generate", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

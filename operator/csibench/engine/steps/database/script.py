"""The database pod's side: one fixed POSIX shell script and its environment (pure).

The pod runs one fixed script (``SCRIPT``); everything that varies comes in through its environment, from
validated fields only (integers, enums and patterns in the CRD and the models), so nothing in the spec can reach a
shell as code. The script initdb's a data directory on the PVC (``/data/pgdata``: a subdirectory, since a
filesystem's root may hold ``lost+found``), starts ``postgres`` itself (not ``pg_ctl``, which detaches it from the
container's process group: deleting the pod must reach it) with its socket in an emptyDir and no TCP listener,
then for each scale runs ``pgbench -i -q -s SCALE`` and every mode x clients run with the pauses, and ends with a
fast shutdown. A TERM (the pod deleted) becomes a fast shutdown too. pgbench writes into a file in the emptyDir
that is printed in one piece when it ends, because PostgreSQL logs to the same stream meanwhile and pgbench writes
its error lines in pieces that the server's lines would otherwise split. Before each run the script does what
pgbench's own pre-run vacuum does (VACUUM the branches and tellers, TRUNCATE the history) and runs pgbench with
``-n``, so that the vacuum's WAL is not counted as the run's: a readOnly run then generates (next to) none. What
it prints is read by ``pgbench.py``.
"""

from __future__ import annotations

from csibench.api.models import DatabaseSpec

MOUNT_PATH = "/data"
SCRATCH_PATH = "/scratch"  # an emptyDir: PostgreSQL's unix socket and lock file, pgbench's output; gone with the pod
PGBENCH_BIN = "/usr/lib/postgresql/15/bin"  # Debian's PostgreSQL 15, in the workload image and on the host
PATH = f"{PGBENCH_BIN}:/usr/local/bin:/usr/bin:/bin"

SCRIPT = r"""set -u
emit() { printf 'csibench-db %s\n' "$1"; }
now() { date +%s%N; }
export PGHOST="$SCRATCH_DIR" PGUSER=postgres PGDATABASE=postgres
pg=
child=
stop() {
  if [ -n "$child" ]; then kill -TERM "$child" 2>/dev/null; fi
  if [ -n "$pg" ]; then kill -INT "$pg" 2>/dev/null; wait "$pg"; fi
  exit "$1"
}
trap 'stop 143' TERM INT
# A trap runs only between commands: long ones (pgbench -T, the pauses) run in the background and are waited
# for, so a TERM (the pod deleted) reaches the script at once and it stops them and PostgreSQL within the grace.
run() { "$@" & child=$!; wait "$child"; code=$?; child=; }
ready() {
  tries=0
  until pg_isready -q; do
    tries=$((tries + 1))
    if [ "$tries" -gt 600 ] || ! kill -0 "$pg" 2>/dev/null; then
      emit "{\"event\":\"setup\",\"stage\":\"$1\"}"; stop 1
    fi
    sleep 0.1
  done
}
if ! initdb -D "$PGDATA" -U postgres --auth=trust --no-instructions 2>&1; then
  emit '{"event":"setup","stage":"initdb"}'; exit 1
fi
postgres -D "$PGDATA" -c 'log_line_prefix=postgres[%p] ' -c listen_addresses= \
  -c unix_socket_directories="$SCRATCH_DIR" -c shared_buffers="$SHARED_BUFFERS" -c max_wal_size="$MAX_WAL_SIZE" \
  -c synchronous_commit="$SYNCHRONOUS_COMMIT" -c checkpoint_timeout="$CHECKPOINT_TIMEOUT" \
  -c max_connections="$MAX_CONNECTIONS" -c log_checkpoints=on 2>&1 &
pg=$!
ready postgres
cpus=$(nproc)
out="$SCRATCH_DIR/pgbench.out"
row=0
for scale in $SCALES; do
  what="\"row\":$row,\"kind\":\"initialize\",\"scale\":$scale"
  emit "{\"event\":\"start\",$what}"
  t0=$(now)
  run pgbench -i -q -s "$scale" >"$out" 2>&1
  t1=$(now)
  cat "$out"
  emit "{\"event\":\"end\",$what,\"exit\":$code,\"ns\":$((t1 - t0))}"
  row=$((row + 1))
  [ "$code" -eq 0 ] || stop 1
  for mode in $MODES; do
    if [ "$mode" = readOnly ]; then script=-S; duration=$READ_ONLY_SECONDS
    else script=; duration=$READ_WRITE_SECONDS; fi
    progress=10
    [ "$duration" -lt 10 ] && progress=$duration
    pause=$PHASE_PAUSE_SECONDS
    for clients in $CLIENTS; do
      run sleep "$pause"
      pause=$PAUSE_SECONDS
      threads=${THREADS:-$cpus}
      [ "$threads" -gt "$clients" ] && threads=$clients
      psql -XAtq -c 'VACUUM pgbench_branches' -c 'VACUUM pgbench_tellers' -c 'TRUNCATE pgbench_history' 2>&1
      before=$(psql -XAtqc 'SELECT pg_current_wal_lsn()')
      what="\"row\":$row,\"kind\":\"run\",\"scale\":$scale,\"mode\":\"$mode\",\"clients\":$clients"
      emit "{\"event\":\"start\",$what}"
      t0=$(now)
      run pgbench -n $script -c "$clients" -j "$threads" -T "$duration" --progress="$progress" >"$out" 2>&1
      t1=$(now)
      cat "$out"
      wal=$(psql -XAtqc "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '$before')::bigint")
      case "$wal" in ''|*[!0-9]*) wal=null ;; esac
      emit "{\"event\":\"end\",$what,\"threads\":$threads,\"exit\":$code,\"ns\":$((t1 - t0)),\"walBytes\":$wal}"
      row=$((row + 1))
      kill -0 "$pg" 2>/dev/null || { emit '{"event":"setup","stage":"postgres exited"}'; exit 1; }
      [ "$code" -eq 0 ] || ready "postgres recovering"  # after a PANIC, the next row waits for crash recovery
    done
  done
done
stop 0
"""


def build_env(spec: DatabaseSpec) -> dict[str, str]:
    """The script's parameters (every value from a validated field)."""
    settings = spec.postgres
    env = {"PATH": PATH, "PGDATA": f"{MOUNT_PATH}/pgdata", "SCRATCH_DIR": SCRATCH_PATH,
           "SCALES": " ".join(str(s) for s in spec.scales), "MODES": " ".join(m.value for m in spec.modes),
           "CLIENTS": " ".join(str(c) for c in spec.clients),
           "READ_ONLY_SECONDS": str(spec.durationSeconds.readOnly),
           "READ_WRITE_SECONDS": str(spec.durationSeconds.readWrite),
           "PAUSE_SECONDS": str(spec.pauseSeconds), "PHASE_PAUSE_SECONDS": str(spec.phasePauseSeconds),
           "SHARED_BUFFERS": settings.sharedBuffers, "MAX_WAL_SIZE": settings.maxWalSize,
           "SYNCHRONOUS_COMMIT": settings.synchronousCommit.value,
           "CHECKPOINT_TIMEOUT": f"{settings.checkpointTimeoutSeconds}s",
           "MAX_CONNECTIONS": str(max(spec.clients) + 10)}
    if spec.threads is not None:
        env["THREADS"] = str(spec.threads)
    return env


def build_command() -> list[str]:
    return ["/bin/sh", "-c", SCRIPT]

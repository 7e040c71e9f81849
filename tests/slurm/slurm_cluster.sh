#!/bin/bash
# A real two-node Slurm cluster on this one machine, for the tests: munged, slurmctld and two
# slurmd (nodes n1 and n2, both NodeAddr=127.0.0.1 with their own ports), all in the foreground
# under DIR, on free ports. `start DIR` leaves DIR/env (SLURM_CONF=...) for the tests to source;
# `stop DIR` ends exactly the processes it started, by the PIDs it recorded, never by name.
#
#   tests/slurm/slurm_cluster.sh start DIR
#   tests/slurm/slurm_cluster.sh stop DIR
set -euo pipefail

action=${1:?usage: slurm_cluster.sh start|stop DIR}
dir=${2:?usage: slurm_cluster.sh start|stop DIR}

stop() {
  local pidfile pid
  for pidfile in "$dir"/pids/*.pid; do
    [ -e "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    # Only a process this script started: its PID file names it and its command line matches.
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && grep -qa -- "$dir" "/proc/$pid/cmdline"; then
      kill -TERM "$pid" 2>/dev/null || true
    fi
  done
  for pidfile in "$dir"/pids/*.pid; do
    [ -e "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null && grep -qa -- "$dir" "/proc/$pid/cmdline"; then kill -KILL "$pid" || true; fi
    rm -f "$pidfile"
  done
  if [ -f "$dir/munge-socket-dir" ]; then
    case $(cat "$dir/munge-socket-dir") in /tmp/ckptcheck-munge.*) rm -rf "$(cat "$dir/munge-socket-dir")" ;; esac
    rm -f "$dir/munge-socket-dir"
  fi
}

if [ "$action" = stop ]; then
  stop
  exit 0
fi
[ "$action" = start ] || { echo "slurm_cluster.sh: unknown action '$action' (start|stop)" >&2; exit 2; }

for tool in munged slurmctld slurmd srun scontrol; do
  command -v "$tool" >/dev/null || {
    echo "slurm_cluster.sh: $tool not found: run scripts/install-deps.sh (Debian slurmctld slurmd slurm-client munge)" >&2
    exit 2
  }
done

[ -d "$dir/pids" ] && stop
rm -rf "$dir"
mkdir -p "$dir"/{pids,munge-key,ctld,spool-n1,spool-n2,log}
chmod 755 "$dir"
chmod 700 "$dir/munge-key"
# munge's socket lives in a short dir of its own (a Unix socket path has at most 108 bytes, and a
# checkout's build dir can be deeper); munged wants that dir reachable by all.
sock_dir=$(mktemp -d /tmp/ckptcheck-munge.XXXXXX)
chmod 755 "$sock_dir"
echo "$sock_dir" >"$dir/munge-socket-dir"
dir=$(cd "$dir" && pwd)

# Three free TCP ports: slurmctld, slurmd n1, slurmd n2. The reserved range (MpiParams=ports)
# gives each step its own SLURM_STEP_RESV_PORTS, so concurrent steps never share a MASTER_PORT.
read -r ctld_port n1_port n2_port <<<"$(/usr/bin/python3 - <<'PY'
import socket
socks = [socket.socket() for _ in range(3)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])
PY
)"
# The reserved range lies below the kernel's ephemeral ports (ip_local_port_range starts at 32768
# by default), where no client socket of another test can be holding one of them.
resv_lo=$(( 10000 + (ctld_port % 220) * 100 ))
resv_hi=$(( resv_lo + 99 ))

head -c 1024 /dev/urandom >"$dir/munge-key/munge.key"
chmod 400 "$dir/munge-key/munge.key"
cpus=$(nproc)

cat >"$dir/slurm.conf" <<CONF
ClusterName=ckptcheck-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmUser=$(id -un)
SlurmdUser=$(id -un)
AuthType=auth/munge
AuthInfo=socket=$sock_dir/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/ctld
SlurmdSpoolDir=$dir/spool-%n
SlurmctldPidFile=$dir/ctld/slurmctld.pid
SlurmdPidFile=$dir/spool-%n/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
MpiParams=ports=$resv_lo-$resv_hi
# A TmpFS per node: srun --mpi=pmix makes its step's PMIx dir there, and two slurmd sharing /tmp
# would collide on it ("spmix_appdir_UID_JOB.STEP: File exists").
TmpFS=$dir/tmp-%n
ReturnToService=2
SlurmdParameters=config_overrides
KillWait=5
InactiveLimit=0
MinJobAge=60
PlugStackConfig=$dir/plugstack.conf
NodeName=n1 NodeAddr=127.0.0.1 NodeHostname=$(hostname) Port=$n1_port CPUs=$cpus State=UNKNOWN
NodeName=n2 NodeAddr=127.0.0.1 NodeHostname=$(hostname) Port=$n2_port CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
CONF
: >"$dir/plugstack.conf"
echo "export SLURM_CONF=$dir/slurm.conf" >"$dir/env"

munged -F --socket="$sock_dir/munge.socket" --key-file="$dir/munge-key/munge.key" \
  --pid-file="$sock_dir/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge-key/seed" \
  >"$dir/log/munged.out" 2>&1 &
echo $! >"$dir/pids/munged.pid"
export SLURM_CONF="$dir/slurm.conf"
for _ in $(seq 50); do [ -S "$sock_dir/munge.socket" ] && break; sleep 0.1; done
slurmctld -D -i -f "$SLURM_CONF" >"$dir/log/slurmctld.out" 2>&1 &
echo $! >"$dir/pids/slurmctld.pid"
for node in n1 n2; do
  mkdir -p "$dir/tmp-$node"
  slurmd -D -N "$node" -f "$SLURM_CONF" >"$dir/log/slurmd-$node.out" 2>&1 &
  echo $! >"$dir/pids/slurmd-$node.pid"
done

# Ready when both nodes are idle.
deadline=$((SECONDS + 30))
while [ $SECONDS -lt $deadline ]; do
  if [ "$(timeout 5 sinfo -h -N -o '%N %t' 2>/dev/null | grep -c ' idle')" = 2 ]; then
    echo "slurm_cluster.sh: nodes n1 n2 up (slurmctld port $ctld_port) under $dir"
    exit 0
  fi
  sleep 0.2
done
echo "slurm_cluster.sh: the cluster did not come up in 30 s; logs under $dir/log:" >&2
tail -n 5 "$dir"/log/* >&2 || true
stop
exit 2

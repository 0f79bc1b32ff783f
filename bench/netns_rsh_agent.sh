#!/bin/sh
# The "remote shell" through which mpirun (plm_rsh_agent) starts its daemons on the nodes of an
# emulated cluster: mpirun calls `netns_rsh_agent.sh [options] HOST COMMAND...`, HOST being a
# node's address; the agent runs COMMAND with /bin/sh inside that node's network namespace.
# GRAVAC_NETNS_HOSTS maps addresses to namespaces: "ADDR=NETNS ADDR=NETNS ...".
# Used by bench/collectives_driver.py; needs root (ip netns exec).
while [ $# -gt 0 ]; do
  case "$1" in
    -*) shift ;;  # ssh-style options mpirun may pass (none with plm_rsh_agent set to this)
    *) break ;;
  esac
done
host="$1"
shift
for pair in $GRAVAC_NETNS_HOSTS; do
  if [ "${pair%%=*}" = "$host" ]; then
    # Every node has the machine's hostname: a session directory of its own per node keeps the
    # daemons' (and PMIx's) files in /tmp apart.
    TMPDIR="${TMPDIR:-/tmp}/${pair#*=}"
    export TMPDIR
    mkdir -p "$TMPDIR"
    exec ip netns exec "${pair#*=}" /bin/sh -c "$*"
  fi
done
echo "netns_rsh_agent: no namespace for host '$host' in GRAVAC_NETNS_HOSTS" >&2
exit 255

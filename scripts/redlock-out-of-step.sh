#!/bin/bash
# Measures what a Redlock set with one server out of step costs: three
# `electd run` agents on one job over three local redis-servers; unless
# RESTART=0, the third server is restarted empty 5 s after the agents start.
# Prints each server's commands/s (INFO stats total_commands_processed) and
# each agent's CPU over 10 s. Usage: scripts/redlock-out-of-step.sh ELECTD [PORT]
# (ports PORT..PORT+2, default 26381). docs/providers/redis.md has the figures.
set -eu
BIN=$1
BASE=${2:-26381}
P=($BASE $((BASE + 1)) $((BASE + 2)))
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
start() { mkdir -p "$D/r$1"; redis-server --daemonize yes --bind 127.0.0.1 --port "$1" --save '' --appendonly no --dir "$D/r$1" --pidfile "$D/r$1/p" --logfile "$D/r$1/log"; }
for p in "${P[@]}"; do start "$p"; done
sleep 0.5
PIDS=()
for n in 1 2 3; do
	cat >"$D/n$n.hcl" <<HCL
agent {
  node_id = "n$n"
  listen  = ""
}
provider "redis" "r" {
  addresses = ["127.0.0.1:${P[0]}", "127.0.0.1:${P[1]}", "127.0.0.1:${P[2]}"]
}
job "j" {
  ttl         = "3s"
  renew_every = "500ms"
  retry_every = "200ms"
}
HCL
	"$BIN" run -config "$D/n$n.hcl" >"$D/n$n.log" 2>&1 &
	PIDS+=($!)
done
sleep 5
if [ "${RESTART:-1}" != 0 ]; then
	redis-cli -p "${P[2]}" shutdown nosave >/dev/null
	rm -rf "$D/r${P[2]}"
	start "${P[2]}"
fi
sleep 2
cmds() { for p in "${P[@]}"; do redis-cli -p "$p" info stats | awk -F: '/total_commands_processed/{print $2}' | tr -d '\r'; done; }
cpu() { for pid in "${PIDS[@]}"; do awk '{print $14+$15}' "/proc/$pid/stat"; done; }
c0=($(cmds)); u0=($(cpu)); t0=$(date +%s.%N)
sleep 10
c1=($(cmds)); u1=($(cpu)); t1=$(date +%s.%N)
dt=$(echo "$t1 - $t0" | bc)
hz=$(getconf CLK_TCK)
for i in 0 1 2; do echo "server ${P[$i]}: $(echo "(${c1[$i]} - ${c0[$i]}) / $dt" | bc) commands/s"; done
for i in 0 1 2; do echo "agent n$((i + 1)): $(echo "scale=1; (${u1[$i]} - ${u0[$i]}) * 100 / $hz / $dt" | bc) % of a core"; done
for pid in "${PIDS[@]}"; do kill "$pid"; done
wait 2>/dev/null || true
for p in "${P[@]}"; do redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || true; done

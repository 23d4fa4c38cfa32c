#!/usr/bin/env bash
# idle.sh - relay holding many idle keep-alive client connections while a
# load runs beside them.
#
# Three nginx backends answer on 127.0.0.1:8001-8003 and relay balances over
# them on 127.0.0.1:8080. wrk keeps a steady load on relay (-t1 -c50) while
# bench/idleconns.go opens --conns keep-alive connections (at most 2,000 a
# second, from 127.0.0.2-254), sends one request on each, holds them idle
# for --hold and sends a last request on each. The script reports whether
# every idle connection answered at the end, wrk's throughput and errors
# beside them, and relay's peak memory (VmHWM summed over the supervisor and
# its serving processes) and descriptors. The whole run repeats --rounds
# times with a fresh relay.
#
# Usage: bench/idle.sh [options]
#   --conns N           idle connections to hold (default 10000)
#   --hold D            how long to hold them idle, e.g. 12s (default 12s)
#   --processes N       relay's processes setting; 0 = one per core (default 2)
#   --rounds N          repetitions, each with a fresh relay (default 3)
#   --out DIR           where results go (default: a new directory under /tmp)
#   -h, --help          print this help
#
# wrk, nginx and curl are installed with apt-get when missing, which needs
# root. relay's hard open-file limit must hold the connections (about
# conns + 2,000); the script raises its own soft limit to the hard one and
# stops if that is too low.
set -u

PROG=idle.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CONNS=10000
HOLD=12s
PROCESSES=2
ROUNDS=3
OUT=""
WRK_THREADS=1
LOAD_CONNS=50

BALANCER_ADDR=127.0.0.1:8080
BACKEND_PORTS="8001 8002 8003"

while [ $# -gt 0 ]; do
  case "$1" in
    --conns)     need_value "$@"; CONNS=$2; shift 2;;
    --hold)      need_value "$@"; HOLD=$2; shift 2;;
    --processes) need_value "$@"; PROCESSES=$2; shift 2;;
    --rounds)    need_value "$@"; ROUNDS=$2; shift 2;;
    --out)       need_value "$@"; OUT=$2; shift 2;;
    -h|--help)   help; exit 0;;
    *)           unknown_argument "$1";;
  esac
done

positive "$CONNS" || die "--conns must be a positive number, not '$CONNS'"
positive "$ROUNDS" || die "--rounds must be a positive number, not '$ROUNDS'"
[[ "$PROCESSES" =~ ^[0-9]+$ ]] || die "--processes must be a number, not '$PROCESSES'"
HOLD_S=$(seconds "$HOLD") && [ "$HOLD_S" -gt 0 ] || die "--hold must look like 12s, 1m or 30, not '$HOLD'"

install_missing wrk:wrk nginx:nginx curl:curl ss:iproute2
need_tools go wrk nginx curl ss
ulimit -n "$(ulimit -Hn)" 2>/dev/null
[ "$(ulimit -n)" = unlimited ] || [ "$(ulimit -n)" -ge $(( CONNS + 2000 )) ] ||
  die "the open-file limit ($(ulimit -n)) cannot hold $CONNS connections; raise the hard limit (ulimit -Hn)"

make_out_dir relay-idle
stop_all_on_exit
RAW=$OUT/raw.tsv

for port in $BACKEND_PORTS; do need_free "127.0.0.1:$port"; done
need_free "$BALANCER_ADDR"

build_relay
(cd "$REPO" && timeout 600 go build -o "$OUT/idleconns" bench/idleconns.go) || die "building bench/idleconns.go failed"
cat >"$RUN/relay.yml" <<EOF
# relay as the balancer: round-robin over the three backends.
listen: "$BALANCER_ADDR"
admin_listen: ""
backends:
$(for port in $BACKEND_PORTS; do echo "  - http://127.0.0.1:$port"; done)
health_check_path: /health
processes: $PROCESSES
max_connections: $(( CONNS + 1000 ))
access_log: false
EOF
"$OUT/relay" -check -config "$RUN/relay.yml" >&2 || die "relay rejects $RUN/relay.yml"
# shellcheck disable=SC2086 # BACKEND_PORTS is a list
write_greeting_backends $BACKEND_PORTS

{
  echo "date:     $(date -Is)"
  echo "host:     $(uname -srm), $NCPU cores, $(awk '/^model name/ { sub(/^[^:]*: /, ""); print; exit }' /proc/cpuinfo)"
  echo "relay:    $(cd "$REPO" && git rev-parse --short HEAD 2>/dev/null || echo unknown)$(cd "$REPO" && git diff --quiet HEAD 2>/dev/null || echo ' (uncommitted changes)'), $(go version | awk '{ print $3 }'), processes=$PROCESSES"
  echo "settings: rounds=$ROUNDS conns=$CONNS hold=${HOLD_S}s load=wrk -t$WRK_THREADS -c$LOAD_CONNS"
  echo "output:   $OUT"
} | tee "$OUT/env.txt" >&2

printf 'round\tidle_conns\tidle_failed\topen_s\twrk_rps\twrk_errors\trss_mb\tfds\twrk_p99_ms\tcpu_us_per_req\n' >"$RAW"

# shellcheck disable=SC2086 # BACKEND_PORTS is a list
start_greeting_backends $BACKEND_PORTS

for round in $(seq "$ROUNDS"); do
  wait_free "$BALANCER_ADDR"
  start "$LOGS/relay-$round.log" "$OUT/relay" -config "$RUN/relay.yml"
  pid=$STARTED_PID
  wait_ready "http://$BALANCER_ADDR/" "$pid" 20 || die "relay did not answer within 20 s; see $LOGS/relay-$round.log"
  owned_by "$BALANCER_ADDR" "$pid" || die "$BALANCER_ADDR answers, but not from the relay this script started"

  # The load runs for the whole hold plus the time the connections take to
  # open (at 2,000 a second) and a margin.
  load_s=$(( HOLD_S + CONNS / 2000 + 6 ))
  t0=$(cpu_ticks "$pid")
  start "$WRK/wrk-$round.txt" timeout -k 5 $(( load_s + 30 )) \
    wrk -t"$WRK_THREADS" -c"$LOAD_CONNS" -d"${load_s}s" --timeout 5s --latency "http://$BALANCER_ADDR/"
  wrk_pid=$STARTED_PID

  fds_peak=0
  run_bounded $(( HOLD_S + CONNS / 500 + 30 )) "$WRK/idle-$round.txt" \
    "$OUT/idleconns" -addr "$BALANCER_ADDR" -conns "$CONNS" -hold "${HOLD_S}s" &
  idle_pid=$!
  while kill -0 "$idle_pid" 2>/dev/null; do
    fds=0
    for p in $(group_pids "$pid"); do fds=$(( fds + $(find "/proc/$p/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l) )); done
    [ "$fds" -gt "$fds_peak" ] && fds_peak=$fds
    pause 1
  done
  wait "$idle_pid"; idle_rc=$?
  wait "$wrk_pid"; forget "$wrk_pid"
  t1=$(cpu_ticks "$pid")
  rss_kb=$(group_status "$pid" VmHWM)
  stop "$pid"

  read -r rps reqs _ p99 se n2 < <(wrk_fields "$WRK/wrk-$round.txt")
  # relay's CPU over the load's run, every idle connection's work included,
  # per request of the load.
  us=$(awk -v t="$(( t1 - t0 ))" -v hz="$HZ" -v n="${reqs:-0}" 'BEGIN { if (n > 0) printf "%.1f", t / hz / n * 1e6; else print "NA" }')
  field() { grep -o "$1=[^ ]*" "$WRK/idle-$round.txt" | head -n 1 | cut -d= -f2; }
  opened=$(field opened); failed=$(field failed); open_s=$(field open_time)
  [ "$idle_rc" = 0 ] || note "round $round: idleconns exited $idle_rc; see $WRK/idle-$round.txt"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "${opened:-0}" "${failed:-NA}" "${open_s:-NA}" \
    "${rps:-0}" $(( ${se:-0} + ${n2:-0} )) "$(awk -v k="$rss_kb" 'BEGIN { printf "%.1f", k / 1024 }')" "$fds_peak" \
    "${p99:-NA}" "$us" >>"$RAW"
  note "  round $round: $(tail -n 1 "$RAW" | awk -F'\t' '{ printf "%s idle connections, %s failed, load %s req/s with %s errors, peak RSS %s MB, %s descriptors", $2, $3, $5, $6, $7, $8 }')"
done

echo
{
  printf '%-6s %10s %7s %9s %7s %8s %7s %7s %7s\n' round "idle conns" failed "load r/s" "p99 ms" "errors" "us/req" "rss MB" fds
  awk -F'\t' 'NR > 1 { printf "%-6s %10s %7s %9s %7s %8s %7s %7s %7s\n", $1, $2, $3, $5, $9, $6, $10, $7, $8 }' "$RAW"
} | tee "$OUT/table.txt"
cat <<EOF

$CONNS keep-alive connections held idle for ${HOLD_S}s beside wrk -t$WRK_THREADS -c$LOAD_CONNS, relay at processes: $PROCESSES.
failed: idle connections whose first or last request failed. p99 ms: the load's. us/req: relay's CPU time (every
process) over the load's run, the idle connections' work included, per request of the load.
rss MB: peak VmHWM summed over relay's processes.
fds: the most descriptors relay's processes held at once (sampled each second).
Raw rows: $RAW
EOF

#!/usr/bin/env bash
# tracing.sh - relay's W3C Trace Context and OTLP export, end to end, against
# a real OpenTelemetry Collector, on one machine over loopback.
#
# One nginx serves three backends on 127.0.0.1:8201-8203, each logging the
# traceparent it gets ($http_traceparent). The collector of bench/otelcol
# (built with bench/otelcol/build.sh into a directory outside the
# repository, or taken from --otelcol) takes OTLP/gRPC on 127.0.0.1:14317
# and writes every span to a file as OTLP JSON. relay listens on
# 127.0.0.1:8280 with processes: 2, round-robin over the backends, and its
# tracing section exporting to the collector. Then, for each sample ratio:
#
#   1     (honour_parent: true)   bench/tracecheck sends --requests requests
#         over --conns keep-alive connections, each with a sampled
#         traceparent of its own; the collector must get exactly one span
#         per request: in the client's trace, the client's span as its
#         parent, the id the backend got as relay's span, status 200.
#   0.01  (honour_parent: false)  the same requests (other ids): the spans
#         must be exactly those of the traces the ratio admits, 70 to 130 of
#         10,000, and the backend's traceparent sampled for those only.
#
# relay and the collector are started afresh for each ratio, the spans going
# to a file of its own. The trace ids come from --seed, so a run's counts
# can be repeated; --seed 0 draws them at random.
#
# Usage: bench/tracing.sh [options]
#   --requests N     requests per ratio (default 10000)
#   --conns N        keep-alive client connections (default 8)
#   --seed N         seed of the ids; 0 = random (default 1)
#   --otelcol DIR    a directory holding otelcol-relay already built by
#                    bench/otelcol/build.sh (default: build it into OUT/otelcol)
#   --out DIR        where results go (default: a new directory under /tmp)
#   -h, --help       print this help
#
# Needs Go (relay, the client and the collector are built here), nginx and
# curl; nginx and curl are installed with apt-get when missing, which needs
# root. Every process the script starts runs in its own session and is
# stopped by its process group on exit; nothing is stopped by name.
set -u

PROG=tracing.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REQUESTS=10000
CONNS=8
SEED=1
OTELCOL_DIR=""
OUT=""

BACKEND_PORTS="8201 8202 8203"
RELAY_ADDR=127.0.0.1:8280
COLLECTOR_GRPC=127.0.0.1:14317
COLLECTOR_HTTP=127.0.0.1:14318
# The readiness checks carry this traceparent, unsampled and of a trace id
# no ratio below 1 admits, so they leave no span behind under either
# section: honour_parent follows its flags, a ratio judges its id.
READY_TP=00-00000000000000000000000000000001-0000000000000001-00
READY_TP_RATIO=00-0000000000000000ffffffffffffffff-0000000000000001-00

while [ $# -gt 0 ]; do
  case "$1" in
    --requests) need_value "$@"; REQUESTS=$2; shift 2;;
    --conns)    need_value "$@"; CONNS=$2; shift 2;;
    --seed)     need_value "$@"; SEED=$2; shift 2;;
    --otelcol)  need_value "$@"; OTELCOL_DIR=$2; shift 2;;
    --out)      need_value "$@"; OUT=$2; shift 2;;
    -h|--help)  help; exit 0;;
    *)          unknown_argument "$1";;
  esac
done

positive "$REQUESTS" || die "--requests must be a positive integer, not '$REQUESTS'"
positive "$CONNS" || die "--conns must be a positive integer, not '$CONNS'"
[[ "$SEED" =~ ^[0-9]+$ ]] || die "--seed must be a whole number, not '$SEED'"
if [ -n "$OTELCOL_DIR" ]; then
  [ -x "$OTELCOL_DIR/otelcol-relay" ] || die "--otelcol: no $OTELCOL_DIR/otelcol-relay (build it with bench/otelcol/build.sh DIR)"
  OTELCOL_DIR=$(cd "$OTELCOL_DIR" && pwd)
fi

install_missing nginx:nginx curl:curl
need_tools go nginx curl ss setsid timeout
make_out_dir relay-tracing
stop_all_on_exit
for port in $BACKEND_PORTS; do need_free "127.0.0.1:$port"; done
need_free "$RELAY_ADDR"
need_free "$COLLECTOR_GRPC"
need_free "$COLLECTOR_HTTP"

# ------------------------------------------------------------------ builds

build_relay
note "building bench/tracecheck"
(cd "$REPO" && timeout 600 go build -o "$OUT/tracecheck" ./bench/tracecheck) || die "go build of bench/tracecheck failed"
if [ -z "$OTELCOL_DIR" ]; then
  OTELCOL_DIR=$OUT/otelcol
  note "building the collector into $OTELCOL_DIR (a few minutes cold, well under one warm)"
  "$REPO/bench/otelcol/build.sh" "$OTELCOL_DIR" 1200 >"$LOGS/otelcol-build.log" 2>&1 \
    || die "bench/otelcol/build.sh failed; its output:
$(tail -n 20 "$LOGS/otelcol-build.log")"
fi
OTELCOL=$OTELCOL_DIR/otelcol-relay
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(uname -srm), $NCPU cores"
  echo "relay: $(cd "$REPO" && git describe --always --dirty 2>/dev/null)"
  echo "go: $(go version)"
  echo "collector: $("$OTELCOL" --version 2>&1)"
  echo "nginx: $(nginx -v 2>&1)"
  echo "requests: $REQUESTS, connections: $CONNS, seed: $SEED"
} >"$OUT/env.txt"

# ------------------------------------------------------------------ backends

# The backends in one nginx, each answering / with its greeting and logging
# the traceparent of every request there to one file.
server_blocks=""
for port in $BACKEND_PORTS; do
  server_blocks+="    server {
        listen 127.0.0.1:$port backlog=4096;
        location = /health { access_log off; return 200 \"ok\\n\"; }
        location / { return 200 \"Hello World from $port server\\n\"; }
    }
"
done
mkdir -p "$RUN/backends-tmp"
cat >"$RUN/backends.conf" <<EOF
worker_processes 1;
pid $RUN/backends.pid;
error_log $RUN/backends.err warn;
events { worker_connections 4096; }
http {
    default_type text/plain;
    log_format traceparent '\$http_traceparent';
    access_log $OUT/backend-traceparents.log traceparent;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
$(nginx_temp_paths "$RUN/backends-tmp")
$server_blocks}
EOF
start_greeting_backends $BACKEND_PORTS

# ------------------------------------------------------------------ one ratio

# start_collector FILE: a collector writing spans to FILE; waits until it
# listens for OTLP/gRPC and sets COLLECTOR_PID.
start_collector() {
  local _
  start "$LOGS/collector.$(basename "$1" .json).log" env OTELCOL_GRPC="$COLLECTOR_GRPC" OTELCOL_HTTP="$COLLECTOR_HTTP" \
    OTELCOL_OUT="$1" "$OTELCOL" --config="$REPO/bench/otelcol/config.yaml"
  COLLECTOR_PID=$STARTED_PID
  for _ in $(seq 300); do
    kill -0 "$COLLECTOR_PID" 2>/dev/null || break
    owned_by "$COLLECTOR_GRPC" "$COLLECTOR_PID" && return 0
    sleep 0.1
  done
  die "the collector did not listen on $COLLECTOR_GRPC within 30 s; its output:
$(tail -n 20 "$LOGS/collector.$(basename "$1" .json).log")"
}

# run_ratio NAME SAMPLE HONOUR SEED MIN MAX: one ratio, start to check.
run_ratio() {
  local name=$1 sample=$2 honour=$3 seed=$4 min=$5 max=$6 port ready_tp=$READY_TP
  [ "$honour" = false ] && ready_tp=$READY_TP_RATIO
  local conf=$RUN/relay-$name.yml spans=$OUT/spans-$name.json sent=$OUT/sent-$name.txt
  {
    echo "listen: \"$RELAY_ADDR\""
    echo "processes: 2"
    echo "algorithm: round-robin"
    echo "backends:"
    for port in $BACKEND_PORTS; do echo "  - http://127.0.0.1:$port"; done
    echo "health_check_path: /health"
    echo "access_log: false"
    echo "tracing:"
    echo "  sample: $sample"
    echo "  honour_parent: $honour"
    echo "  service_name: relay-bench"
    echo "  exporter: {endpoint: \"$COLLECTOR_GRPC\", insecure: true, batch_timeout: 200ms}"
  } >"$conf"
  "$OUT/relay" -check -config "$conf" >"$LOGS/relay-check-$name.log" 2>&1 \
    || die "relay -check refuses $conf: $(cat "$LOGS/relay-check-$name.log")"

  start_collector "$spans"
  wait_free "$RELAY_ADDR"
  start "$LOGS/relay-$name.log" "$OUT/relay" -config "$conf"
  local relay_pid=$STARTED_PID
  wait_ready "http://$RELAY_ADDR/" "$relay_pid" 20 -H "traceparent: $ready_tp" \
    || die "relay did not answer on $RELAY_ADDR within 20 s; its output:
$(tail -n 20 "$LOGS/relay-$name.log")"
  owned_by "$RELAY_ADDR" "$relay_pid" || die "$RELAY_ADDR answers, but not from the relay this script started"
  note "sample $sample: collector (pgid $COLLECTOR_PID) and relay (pgid $relay_pid, $(group_pids "$relay_pid" | wc -l) processes) ready"

  run_bounded 120 "$OUT/load-$name.txt" "$OUT/tracecheck" -load "http://$RELAY_ADDR/" \
    -n "$REQUESTS" -c "$CONNS" -seed "$seed" -sent "$sent" \
    || die "the load failed: $(cat "$OUT/load-$name.txt")"
  note "  $(cat "$OUT/load-$name.txt")"
  run_bounded 70 "$OUT/check-$name.txt" "$OUT/tracecheck" -check -sent "$sent" -spans "$spans" \
    -backend-log "$OUT/backend-traceparents.log" -ratio "$sample" -min "$min" -max "$max" -wait 60s
  local rc=$?
  note "  $(head -n 1 "$OUT/check-$name.txt")"
  [ "$rc" = 0 ] || { tail -n +2 "$OUT/check-$name.txt" >&2; FAILED=1; }
  { echo "$(cat "$OUT/load-$name.txt")"; cat "$OUT/check-$name.txt"; } >>"$OUT/results.txt"

  stop "$relay_pid"
  stop "$COLLECTOR_PID"
}

FAILED=0
: >"$OUT/results.txt"
run_ratio all 1 true "$SEED" "$REQUESTS" "$REQUESTS"
seed2=0
[ "$SEED" != 0 ] && seed2=$((SEED + 1))
# 70 to 130 of 10,000: the binomial's mean 1% of --requests, within about
# three standard deviations.
mean=$(( REQUESTS / 100 ))
spread=$(awk -v m="$mean" 'BEGIN { printf "%d", 3 * sqrt(m * 0.99) + 0.999 }')
run_ratio ratio 0.01 false "$seed2" $(( mean > spread ? mean - spread : 0 )) $(( mean + spread ))

echo
cat "$OUT/results.txt"
echo "results in $OUT"
if [ "$FAILED" != 0 ]; then
  echo "$PROG: FAILED" >&2
  exit 1
fi
echo "$PROG: every check passed"

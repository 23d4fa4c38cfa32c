#!/usr/bin/env bash
# grpc.sh - relay beside nginx and HAProxy as gRPC balancers, on one machine,
# over loopback.
#
# Three gRPC backends (bench/grpcbackend, one Go process, google.golang.org/grpc)
# serve grpc.testing.TestService/UnaryCall over h2c on 127.0.0.1:9101-9103 and
# count the calls each serves (GET http://127.0.0.1:9100/counts). One
# balancer at a time listens on 127.0.0.1:8080 for h2c (HTTP/2 with prior
# knowledge) and spreads the calls round-robin over the backends, speaking
# HTTP/2 to them:
#   nginx    worker_processes 2, grpc_pass grpc://backends, upstream keepalive
#   haproxy  nbthread 2, bind ... proto h2, server ... proto h2, balance roundrobin
#   relay    processes: 2 (--processes), h2c: true, protocol: h2c, round-robin
# For every load CxM in --loads (C connections, M concurrent streams on each:
# C x M calls in flight) it runs
#   h2load -tT -cC -mM -D SECONDS -H 'content-type: application/grpc'
#          -H 'te: trailers' -d REQUEST http://127.0.0.1:8080/grpc.testing.TestService/UnaryCall
# where REQUEST is one length-prefixed gRPC message (a SimpleRequest with a
# --size byte payload asking for as many bytes back), and records calls per
# second, p50 and p99 latency (from h2load's per-request log), failures, the
# balancer's and the backends' CPU time per call (user + system over each one's
# process group, from /proc), the balancer's peak memory and how the calls
# split over the three backends. The whole set repeats --rounds times, each
# round starting one balancer further down the list; the table shows medians
# over rounds and the ratios of those medians to the better of nginx and
# HAProxy at each load.
#
# h2load counts any 2xx answer as a success, and gRPC reports a failed call
# in a 200 answer's trailers. So before loading a balancer the script makes
# --check-calls real gRPC calls through it, one after another on one
# connection (grpcbackend -check: each must end with grpc-status 0 and carry
# the payload asked for; a balancer that fails is reported as "answered no
# gRPC call" and left out), and after every run it compares the calls the
# backends counted with the successes h2load counted, and the response bytes
# per call with a real answer's.
#
# Usage: bench/grpc.sh [options]
#   --rounds N          rounds of the whole set (default 3)
#   --duration D        length of each measured run, e.g. 10s, 1m (default 10s)
#   --warmup D          unmeasured run before each measured one; 0 skips (default 2s)
#   --loads "CxM ..."   h2load connections x streams per connection
#                       (default "1x50 4x50": 50 and 200 calls in flight)
#   --size BYTES        payload of each request and of each response (default 100)
#   --processes N       relay's processes setting; 0 = one per core (default 2)
#   --peers "P ..."     subset of "nginx haproxy relay" (default: all three)
#   --lb 'NAME::CMD'    also run the balancer CMD (run with bash -c in its own
#                       session), named NAME; it must listen on 127.0.0.1:8080
#                       for h2c and balance over 127.0.0.1:9101-9103. NAME
#                       relay replaces the relay this script builds, e.g.
#                       --lb 'relay::/usr/local/bin/relay -config grpc.yml'.
#                       May be given more than once.
#   --check-calls N     calls of the gRPC check through each balancer (default 30)
#   --out DIR           where results go (default: a new directory under /tmp)
#   -h, --help          print this help
#
# h2load (nghttp2-client), nginx, HAProxy and curl are installed with apt-get
# when missing, which needs root; otherwise the apt-get command is printed. Go
# must be installed already (relay and the backends are built from this
# repository). Every process the script starts runs in its own session and is
# stopped by its process group on exit.
set -u

PROG=grpc.sh
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROUNDS=3
DURATION=10s
WARMUP=2s
LOADS="1x50 4x50"
SIZE=100
PROCESSES=2
PEERS="nginx haproxy relay"
CHECK_CALLS=30
OUT=""
H2_THREADS=2
NGINX_WORKERS=2
HAPROXY_THREADS=2
LB_NAMES=()
LB_CMDS=()

BALANCER_ADDR=127.0.0.1:8080
BACKEND_PORTS="9101 9102 9103"
STATS_ADDR=127.0.0.1:9100
METHOD=/grpc.testing.TestService/UnaryCall

while [ $# -gt 0 ]; do
  case "$1" in
    --rounds)      need_value "$@"; ROUNDS=$2; shift 2;;
    --duration)    need_value "$@"; DURATION=$2; shift 2;;
    --warmup)      need_value "$@"; WARMUP=$2; shift 2;;
    --loads)       need_value "$@"; LOADS=$2; shift 2;;
    --size)        need_value "$@"; SIZE=$2; shift 2;;
    --processes)   need_value "$@"; PROCESSES=$2; shift 2;;
    --peers)       need_value "$@"; PEERS=$2; shift 2;;
    --lb)          need_value "$@"
                   [[ "$2" == *::* ]] || die "--lb takes NAME::COMMAND, not '$2'"
                   LB_NAMES+=("${2%%::*}"); LB_CMDS+=("${2#*::}"); shift 2;;
    --check-calls) need_value "$@"; CHECK_CALLS=$2; shift 2;;
    --out)         need_value "$@"; OUT=$2; shift 2;;
    -h|--help)     help; exit 0;;
    *)             unknown_argument "$1";;
  esac
done

# ------------------------------------------------------------------ checking options

positive "$ROUNDS" || die "--rounds must be a positive integer, not '$ROUNDS'"
[[ "$PROCESSES" =~ ^[0-9]+$ ]] || die "--processes must be 0 or a positive integer, not '$PROCESSES'"
if ! DURATION_S=$(seconds "$DURATION") || [ "$DURATION_S" -eq 0 ]; then
  die "--duration must look like 10s, 2m or 30, not '$DURATION'"
fi
if [ "$WARMUP" = 0 ]; then WARMUP_S=0; else
  WARMUP_S=$(seconds "$WARMUP") || die "--warmup must look like 2s or 0, not '$WARMUP'"
fi
[ -n "$LOADS" ] || die "--loads is empty"
for l in $LOADS; do
  [[ "$l" =~ ^([1-9][0-9]*)x([1-9][0-9]*)$ ]] || die "--loads values must look like 4x50 (connections x streams), not '$l'"
done
[[ "$SIZE" =~ ^[0-9]+$ ]] && [ "$SIZE" -le 1000000 ] || die "--size must be an integer from 0 to 1000000, not '$SIZE'"
positive "$CHECK_CALLS" || die "--check-calls must be a positive integer, not '$CHECK_CALLS'"
for p in $PEERS; do
  case "$p" in nginx|haproxy|relay) ;; *) die "--peers: unknown peer '$p' (choose from: nginx haproxy relay)";; esac
done
for i in "${!LB_NAMES[@]}"; do
  [[ "${LB_NAMES[$i]}" =~ ^[A-Za-z0-9][A-Za-z0-9_.+-]*$ ]] || die "--lb: the name '${LB_NAMES[$i]}' must be letters, digits and _.+-"
  [ -n "${LB_CMDS[$i]}" ] || die "--lb ${LB_NAMES[$i]}:: has no command"
  case "${LB_NAMES[$i]}" in nginx|haproxy) die "--lb: the name ${LB_NAMES[$i]} is a built-in peer; choose another";; esac
  for ((j = 0; j < i; j++)); do [ "${LB_NAMES[$j]}" != "${LB_NAMES[$i]}" ] || die "--lb: the name ${LB_NAMES[$i]} is given twice"; done
done

# custom_cmd NAME: the --lb command named NAME, or nothing.
custom_cmd() {
  local i
  for i in "${!LB_NAMES[@]}"; do [ "${LB_NAMES[$i]}" = "$1" ] && { echo "${LB_CMDS[$i]}"; return; }; done
}

# The balancers in the order of round 1: the built-in peers, then the --lb
# ones (a --lb relay takes the built-in relay's place).
BALANCERS=()
for p in nginx haproxy relay; do
  [[ " $PEERS " == *" $p "* ]] && [ -z "$(custom_cmd "$p")" ] && BALANCERS+=("$p")
done
BALANCERS+=("${LB_NAMES[@]}")
[ ${#BALANCERS[@]} -gt 0 ] || die "nothing to measure: --peers is empty and no --lb is given"

# ------------------------------------------------------------------ tools

install_missing h2load:nghttp2-client nginx:nginx haproxy:haproxy curl:curl ss:iproute2
need_tools go setsid timeout awk sort

# ------------------------------------------------------------------ output directory

make_out_dir relay-grpc
RAW=$OUT/raw.tsv
MEDIANS=$OUT/medians.tsv
TABLE=$OUT/table.txt
FAILED=$OUT/failed.txt
REQUEST=$OUT/request.bin
URL="http://$BALANCER_ADDR$METHOD"
stop_all_on_exit
: >"$FAILED"

# ------------------------------------------------------------------ configurations

write_nginx_conf() {
  local port upstreams=""
  for port in $BACKEND_PORTS; do upstreams+="        server 127.0.0.1:$port;
"; done
  cat >"$RUN/nginx.conf" <<EOF
# nginx as the gRPC balancer: h2c from clients, grpc_pass to h2c backends,
# round-robin (its default) with an upstream keep-alive pool. nginx carries
# one call at a time on each upstream connection, so the pool is large.
worker_processes $NGINX_WORKERS;
pid $RUN/nginx.pid;
error_log $RUN/nginx.err warn;
worker_rlimit_nofile 65536;
events { worker_connections 8192; multi_accept on; }
http {
    access_log off;
    # Also the limit of calls on one client HTTP/2 connection: at nginx's
    # default of 1000 each h2load connection would be closed, and h2load stalls.
    keepalive_requests 1000000;
    keepalive_timeout 120s;
    http2_max_concurrent_streams 1000;
$(nginx_temp_paths "$RUN/nginx-tmp")
    upstream backends {
$upstreams        keepalive 1024;
        keepalive_requests 1000000;
        keepalive_timeout 120s;
    }
    server {
$(nginx_h2c_listen)
        location / {
            grpc_pass grpc://backends;
        }
    }
}
EOF
}

# nginx_h2c_listen: the listen line and HTTP/2 switch for this nginx; 1.25.1
# replaced "listen ... http2" with "http2 on". Without ssl, HTTP/2 is h2c
# with prior knowledge.
nginx_h2c_listen() {
  local v
  v=$(nginx -v 2>&1 | sed -n 's|^nginx version: nginx/\([0-9.]*\).*|\1|p')
  if [ -n "$v" ] && [ "$(printf '%s\n' 1.25.1 "$v" | sort -V | head -n 1)" = 1.25.1 ]; then
    printf '        listen %s backlog=4096;\n        http2 on;\n' "$BALANCER_ADDR"
  else
    printf '        listen %s http2 backlog=4096;\n' "$BALANCER_ADDR"
  fi
}

write_haproxy_conf() {
  local i=0 port servers=""
  for port in $BACKEND_PORTS; do i=$((i + 1)); servers+="    server s$i 127.0.0.1:$port proto h2
"; done
  cat >"$RUN/haproxy.cfg" <<EOF
# HAProxy as the gRPC balancer: $HAPROXY_THREADS threads, h2c from clients and to
# the backends, round-robin per call, idle server connections shared.
global
    nbthread $HAPROXY_THREADS
    maxconn $(haproxy_maxconn)
    tune.h2.max-concurrent-streams 1000
defaults
    mode http
    option http-keep-alive
    http-reuse always
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    timeout http-keep-alive 120s
frontend clients
    bind $BALANCER_ADDR proto h2
    default_backend backends
backend backends
    balance roundrobin
$servers
EOF
}

write_relay_conf() {
  local port
  {
    echo "# relay as the gRPC balancer: h2c from clients and to the backends, round-robin per call."
    echo "listen: \"$BALANCER_ADDR\""
    echo "h2c: true"
    echo "protocol: h2c"
    echo "algorithm: round-robin"
    echo "backends:"
    for port in $BACKEND_PORTS; do echo "  - http://127.0.0.1:$port"; done
    echo "# The backends speak only gRPC over HTTP/2; an HTTP/1.1 GET would fail."
    echo "health_check_type: tcp"
    echo "processes: $PROCESSES"
    echo "access_log: false"
    echo "admin_listen: \"\""
  } >"$RUN/relay.yml"
}

# threads_of NAME: the worker processes or threads each balancer runs with.
threads_of() {
  case "$1" in
    nginx) echo "$NGINX_WORKERS";;
    haproxy) echo "$HAPROXY_THREADS";;
    relay) [ -n "$(custom_cmd relay)" ] && { echo "-"; return; }
           if [ "$PROCESSES" = 0 ]; then echo "$NCPU"; else echo "$PROCESSES"; fi;;
    *) echo "-";;
  esac
}

# start_balancer NAME LOGFILE: starts it and sets STARTED_PID.
start_balancer() {
  local cmd
  cmd=$(custom_cmd "$1")
  if [ -n "$cmd" ]; then
    start "$2" bash -c "$cmd"
    return
  fi
  case "$1" in
    nginx)   start "$2" nginx -p "$RUN" -c "$RUN/nginx.conf" -g 'daemon off;';;
    haproxy) start "$2" haproxy -db -f "$RUN/haproxy.cfg";;
    relay)   start "$2" "$OUT/relay" -config "$RUN/relay.yml";;
  esac
}

# ------------------------------------------------------------------ backends

start_backends() {
  local port addrs="" _
  for port in $BACKEND_PORTS; do addrs+="${addrs:+,}127.0.0.1:$port"; done
  start "$LOGS/backends.log" "$OUT/grpcbackend" -serve "$addrs" -stats "$STATS_ADDR"
  BACKENDS_PID=$STARTED_PID
  for _ in $(seq 200); do
    kill -0 "$BACKENDS_PID" 2>/dev/null || break
    curl -s --max-time 1 "http://$STATS_ADDR/counts" >/dev/null 2>&1 && break
    sleep 0.05
  done
  for port in $BACKEND_PORTS; do
    owned_by "127.0.0.1:$port" "$BACKENDS_PID" || die "the backend 127.0.0.1:$port is not up, or not from the grpcbackend this script started; its output:
$(tail -n 20 "$LOGS/backends.log")"
    "$OUT/grpcbackend" -check "127.0.0.1:$port" -calls 3 -size "$SIZE" >/dev/null 2>"$LOGS/backend-check.log" \
      || die "the backend 127.0.0.1:$port fails a gRPC call: $(cat "$LOGS/backend-check.log")"
  done
  note "backends ready on $BACKEND_PORTS (pgid $BACKENDS_PID), calls counted on http://$STATS_ADDR/counts"
}

# backend_counts: the calls each backend has served, in BACKEND_PORTS order.
backend_counts() {
  curl -s --max-time 2 "http://$STATS_ADDR/counts" |
    awk -v ports="$BACKEND_PORTS" '
      { split($1, a, ":"); n[a[2]] = $2 }
      END { k = split(ports, p, " "); for (i = 1; i <= k; i++) printf "%s%s", (i > 1 ? " " : ""), (p[i] in n ? n[p[i]] : "NA"); print "" }'
}

# ------------------------------------------------------------------ load

# run_h2load SECONDS CONNS STREAMS OUTFILE [H2LOAD OPTION...]: one run of
# unary calls, bounded by run_bounded.
run_h2load() {
  local t=$H2_THREADS
  [ "$2" -lt "$t" ] && t=$2
  run_bounded "$1" "$4" h2load -t"$t" -c"$2" -m"$3" -D "$1" "${@:5}" \
    -H 'content-type: application/grpc' -H 'te: trailers' -d "$REQUEST" "$URL"
}

# h2load_fields OUT LOG prints "rps calls p50 p99 errors failed data_bytes":
# from h2load's summary
#   finished in 10.00s, 30521.40 req/s, 4.12MB/s
#   requests: 305214 total, 305264 started, 305214 done, 305214 succeeded, 0 failed, 0 errored, 0 timeout
#   traffic: 43.31MB (45411000) total, 1.96KB (2012) headers (space savings 94.71%), 33.80MB (35099725) data
# and p50 and p99 in ms from its per-request log (start, status, microseconds).
h2load_fields() {
  local rps calls err failed data p50 p99
  read -r rps calls failed err data < <(awk '
    /^finished in/ { rps = $4 }
    /^requests:/   { calls = $8; failed = $10; err = $12 }
    /^traffic:/    { for (i = 1; i <= NF; i++) if ($i ~ /^data/) { d = $(i - 1); gsub(/[()]/, "", d) } }
    END { printf "%s %s %s %s %s\n", rps + 0, calls + 0, failed + 0, err + 0, d + 0 }' "$1")
  read -r p50 p99 < <(awk -F'\t' '$2 ~ /^2/ { print $3 }' "$2" 2>/dev/null | sort -n |
    awk '{ v[NR] = $1 } END {
      if (NR == 0) { print "NA NA"; exit }
      i50 = int(NR * 0.50); if (i50 < 1) i50 = 1; i99 = int(NR * 0.99); if (i99 < 1) i99 = 1
      printf "%.3f %.3f\n", v[i50] / 1000, v[i99] / 1000 }')
  echo "$rps $calls $p50 $p99 $err $failed $data"
}

# grpc_check ADDR: CHECK_CALLS real gRPC calls through ADDR; prints the
# check's line, and returns its status.
grpc_check() {
  "$OUT/grpcbackend" -check "$1" -calls "$CHECK_CALLS" -size "$SIZE" -timeout 10s 2>&1
}

# ------------------------------------------------------------------ one balancer

# measure ROUND NAME: start the balancer, check it answers gRPC calls, load it
# at every --loads value, stop it. A balancer that answers no gRPC call is
# noted in FAILED and left out of the later rounds.
measure() {
  local round=$1 name=$2 pid _ log="$LOGS/$name.round$round.log" checked=""
  wait_free "$BALANCER_ADDR"
  start_balancer "$name" "$log"; pid=$STARTED_PID
  for _ in $(seq 200); do
    kill -0 "$pid" 2>/dev/null || break
    owned_by "$BALANCER_ADDR" "$pid" && break
    sleep 0.1
  done
  if owned_by "$BALANCER_ADDR" "$pid"; then
    # A balancer may take a moment to find its backends healthy.
    for _ in $(seq 10); do
      checked=$(grpc_check "$BALANCER_ADDR") && break
      checked="FAIL $checked"
      kill -0 "$pid" 2>/dev/null || break
      sleep 1
    done
  else
    checked="FAIL it does not listen on $BALANCER_ADDR"
  fi
  if [[ "$checked" == FAIL* ]]; then
    note "$name answered no gRPC call: ${checked#FAIL }; its output ($log):
$(tail -n 10 "$log")"
    echo "$name	${checked#FAIL }" >>"$FAILED"
    stop "$pid"
    return 1
  fi
  note "round $round: $name ready (pgid $pid, $(group_pids "$pid" | wc -l) processes); gRPC check: $checked"

  local l
  for l in $LOADS; do
    local c=${l%x*} m=${l#*x}
    [ "$WARMUP_S" -gt 0 ] && run_h2load "$WARMUP_S" "$c" "$m" /dev/null
    local out="$WRK/round$round.$name.$l.txt" rlog="$WRK/round$round.$name.$l.log"
    local lb0 lb1 be0 be1 box0 box1 n0 n1 rss rc
    n0=$(backend_counts)
    lb0=$(cpu_ticks "$pid"); be0=$(cpu_ticks "$BACKENDS_PID"); box0=$(busy_jiffies)
    run_h2load "$DURATION_S" "$c" "$m" "$out" --log-file="$rlog"; rc=$?
    box1=$(busy_jiffies); be1=$(cpu_ticks "$BACKENDS_PID"); lb1=$(cpu_ticks "$pid")
    n1=$(backend_counts)
    rss=$(awk -v k="$(group_status "$pid" VmHWM)" 'BEGIN { printf "%.1f", k / 1024 }')
    kill -0 "$pid" 2>/dev/null || note "  $name exited during the $l run (see $log)"
    [ "$rc" = 0 ] || note "  h2load exited with status $rc at $l (see $out)"
    grep -q '^Application protocol: h2c$' "$out" || note "  h2load did not report h2c (Application protocol: h2c); see $out"

    local rps calls p50 p99 err failed data
    read -r rps calls p50 p99 err failed data < <(h2load_fields "$out" "$rlog")
    rm -f "$rlog"
    awk -v r="$round" -v n="$name" -v l="$l" -v th="$(threads_of "$name")" -v rps="$rps" -v calls="$calls" \
        -v p50="$p50" -v p99="$p99" -v err="$err" -v failed="$failed" -v data="$data" \
        -v lb0="$lb0" -v lb1="$lb1" -v be0="$be0" -v be1="$be1" -v hz="$HZ" -v rss="$rss" \
        -v b0="$box0" -v b1="$box1" -v n0="$n0" -v n1="$n1" 'BEGIN {
      split(b0, x, " "); split(b1, y, " "); tot = y[1] - x[1]
      busy = tot > 0 ? sprintf("%.0f", 100 * (tot - (y[2] - x[2])) / tot) : "NA"
      lbus = calls > 0 ? sprintf("%.1f", (lb1 - lb0) / hz * 1e6 / calls) : "NA"
      beus = calls > 0 ? sprintf("%.1f", (be1 - be0) / hz * 1e6 / calls) : "NA"
      k = split(n0, a, " "); split(n1, b, " "); split_ = ""; seen = 0
      for (i = 1; i <= k; i++) { d[i] = (a[i] == "NA" || b[i] == "NA") ? "NA" : b[i] - a[i]; split_ = split_ (i > 1 ? "/" : "") d[i]; if (d[i] != "NA") seen += d[i] }
      bpc = calls > 0 ? sprintf("%.0f", data / calls) : "NA"
      printf "%s\t%s\t%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%s\t%s\t%s\t%s\n",
        r, n, l, th, rps, calls, p50, p99, err, failed, seen, split_, (lb1 - lb0) / hz, lbus, beus, rss, busy
      # bytes per call go to the note only: "data" in h2load counts whole DATA frames.
      printf "%s\n", bpc > "/dev/stderr" }' >>"$RAW" 2>"$RUN/bpc"
    note "  $(tail -n 1 "$RAW" | awk -F'\t' '{ printf "%-8s %-5s %9s calls/s  p50 %s ms  p99 %s ms  errors %s+%s  lb %s us/call  backends %s us/call  split %s  rss %s MB  box %s%% busy", $2, $3, $5, $7, $8, $9, $10, $14, $15, $12, $16, $17 }')"
    check_counts "$name" "$l" "$(tail -n 1 "$RAW")" "$(cat "$RUN/bpc")"
  done

  stop "$pid"
  return 0
}

# check_counts NAME LOAD RAWROW BYTES_PER_CALL: notes when the backends'
# count of calls and h2load's count of successes disagree by more than the
# calls in flight when h2load stopped, or when answers are smaller than a
# real UnaryCall answer (a gRPC error answer carries no message).
check_counts() {
  local calls seen c=${2%x*} m=${2#*x} want
  calls=$(cut -f6 <<<"$3"); seen=$(cut -f11 <<<"$3")
  if [ $(( seen > calls ? seen - calls : calls - seen )) -gt $(( c * m )) ]; then
    note "  WARNING: the backends served $seen calls while h2load counted $calls successes ($1 at $2)"
  fi
  want=$(( SIZE + 5 ))
  if [ "$calls" -gt 0 ] && [ "${4:-0}" -lt "$want" ]; then
    note "  WARNING: $1 answered $4 bytes of gRPC data per call, less than a real answer's $want at least"
  fi
}

# ------------------------------------------------------------------ summary

# summarize reads raw.tsv and writes medians.tsv: for each balancer and load,
# the median over rounds of every figure and the backend split summed over
# rounds; the better peer at a load is whichever of nginx and HAProxy has the
# higher median calls/s there, and the ratios are those of the medians. The
# *_rounds column gives the range of the calls/s ratio to the better peer
# taken within each round.
summarize() {
  awk -F'\t' -v OFS='\t' "$AWK_ROUNDS"'
    NR == 1 { next }
    {
      k = $2 SUBSEP $3
      if (!(k in seen)) { seen[k] = 1; order[++n] = k; threads[k] = $4 }
      rps[$1, $2, $3] = $5; rounds[$1] = 1
      keep("rps" SUBSEP k, $5); keep("p50" SUBSEP k, $7); keep("p99" SUBSEP k, $8)
      keep("lb" SUBSEP k, $14); keep("be" SUBSEP k, $15); keep("rss" SUBSEP k, $16)
      errors[k] += $9 + $10; calls[k] += $6; served[k] += $11; runs[k]++
      m = split($12, s, "/"); for (i = 1; i <= m; i++) if (s[i] != "NA") part[k, i] += s[i]
      parts = m > parts ? m : parts
    }
    END {
      print "peer", "load", "threads", "rounds", "calls_per_s", "p50_ms", "p99_ms", "errors", "lb_cpu_us_per_call",
            "backend_cpu_us_per_call", "rss_mb", "split_pct", "backend_calls_vs_h2load", "better_peer",
            "rps_vs_nginx", "rps_vs_haproxy", "rps_vs_better", "cpu_vs_better", "rps_vs_better_rounds"
      for (i = 1; i <= n; i++) {
        k = order[i]; mrps[k] = median(list["rps" SUBSEP k]); mlb[k] = median(list["lb" SUBSEP k])
      }
      for (i = 1; i <= n; i++) {
        k = order[i]; split(k, kl, SUBSEP); name = kl[1]; l = kl[2]
        ng = "nginx" SUBSEP l; hp = "haproxy" SUBSEP l
        best = ""
        if (ng in mrps && mrps[ng] != "NA") best = "nginx"
        if (hp in mrps && mrps[hp] != "NA" && (best == "" || mrps[hp] + 0 > mrps[ng] + 0)) best = "haproxy"
        bk = best SUBSEP l
        for (r in rounds)
          if ((r, name, l) in rps && best != "" && (r, best, l) in rps) keep("rb" SUBSEP k, ratio(rps[r, name, l], rps[r, best, l]))
        sp = ""; tot = 0
        for (j = 1; j <= parts; j++) tot += part[k, j]
        for (j = 1; j <= parts; j++) sp = sp (j > 1 ? "/" : "") (tot > 0 ? sprintf("%.1f", 100 * part[k, j] / tot) : "NA")
        print name, l, threads[k], runs[k], fmt(mrps[k], "%.0f"),
          fmt(median(list["p50" SUBSEP k]), "%.3f"), fmt(median(list["p99" SUBSEP k]), "%.3f"), errors[k],
          fmt(mlb[k], "%.1f"), fmt(median(list["be" SUBSEP k]), "%.1f"), fmt(median(list["rss" SUBSEP k]), "%.1f"),
          sp, (calls[k] > 0 ? sprintf("%.4f", served[k] / calls[k]) : "NA"), (best == "" ? "NA" : best),
          fmt(ratio(mrps[k], mrps[ng]), "%.2f"), fmt(ratio(mrps[k], mrps[hp]), "%.2f"),
          (best == "" ? "NA" : fmt(ratio(mrps[k], mrps[bk]), "%.2f")),
          (best == "" ? "NA" : fmt(ratio(mlb[k], mlb[bk]), "%.2f")), span(list["rb" SUBSEP k])
      }
    }' "$RAW" >"$MEDIANS"
}

# print_table renders medians.tsv for people: loads in the order given, and
# within a load the balancers in the order of round 1.
print_table() {
  {
    printf '%-5s %-8s %7s %9s %7s %7s %6s %7s %7s %6s %-14s %7s %7s %6s\n' \
      load balancer threads "calls/s" "p50 ms" "p99 ms" errors "lb us" "be us" "rss MB" "split %" "x best" "cpu/bst" best
    awk -F'\t' -v loads="$LOADS" -v bals="${BALANCERS[*]}" '
      BEGIN { n = split(loads, ll, " "); for (i = 1; i <= n; i++) lo[ll[i]] = i
              n = split(bals, bl, " "); for (i = 1; i <= n; i++) bo[bl[i]] = i }
      NR > 1 { printf "%d %d\t%s\n", lo[$2], bo[$1], $0 }' "$MEDIANS" | sort -k1,1n -k2,2n | cut -f2- |
      awk -F'\t' '{ printf "%-5s %-8s %7s %9s %7s %7s %6s %7s %7s %6s %-14s %7s %7s %6s\n",
                    $2, $1, $3, $5, $6, $7, $8, $9, $10, $11, $12, $17, $18, $14 }'
    if [ -s "$FAILED" ]; then
      echo
      awk -F'\t' '!seen[$1]++ { printf "%s answered no gRPC call: %s\n", $1, $2 }' "$FAILED"
    fi
  } | tee "$TABLE"
}

# ------------------------------------------------------------------ main

for port in $BACKEND_PORTS; do need_free "127.0.0.1:$port"; done
need_free "$STATS_ADDR"
need_free "$BALANCER_ADDR"

note "building bench/grpcbackend from $REPO"
(cd "$REPO" && timeout 600 go build -o "$OUT/grpcbackend" ./bench/grpcbackend) || die "go build of bench/grpcbackend failed"
"$OUT/grpcbackend" -write-request "$REQUEST" -size "$SIZE" || die "cannot write the gRPC request to $REQUEST"

if [[ " ${BALANCERS[*]} " == *" relay "* ]] && [ -z "$(custom_cmd relay)" ]; then
  build_relay
  write_relay_conf
  if ! "$OUT/relay" -check -config "$RUN/relay.yml" >"$LOGS/relay-check.log" 2>&1; then
    note "relay answered no gRPC call: it rejects $RUN/relay.yml (h2c to backends needs protocol: h2c): $(tail -n 3 "$LOGS/relay-check.log" | tr '\n' ' ')"
    printf 'relay\tit rejects its configuration: %s\n' "$(tail -n 1 "$LOGS/relay-check.log")" >>"$FAILED"
    kept=()
    for b in "${BALANCERS[@]}"; do [ "$b" != relay ] && kept+=("$b"); done
    BALANCERS=("${kept[@]}")
  fi
fi
mkdir -p "$RUN/nginx-tmp"
write_nginx_conf
write_haproxy_conf
for p in "${BALANCERS[@]}"; do
  [ -n "$(custom_cmd "$p")" ] && continue
  case "$p" in
    nginx) nginx -t -q -p "$RUN" -c "$RUN/nginx.conf" >"$LOGS/nginx-check.log" 2>&1 \
             || die "nginx rejects $RUN/nginx.conf: $(cat "$LOGS/nginx-check.log")";;
    haproxy) haproxy -c -q -f "$RUN/haproxy.cfg" >"$LOGS/haproxy-check.log" 2>&1 \
               || die "HAProxy rejects $RUN/haproxy.cfg: $(cat "$LOGS/haproxy-check.log")";;
  esac
done

{
  echo "date:     $(date -Is)"
  echo "host:     $(uname -srm), $NCPU cores, $(awk '/^model name/ { sub(/^[^:]*: /, ""); print; exit }' /proc/cpuinfo)"
  [ -n "$(custom_cmd relay)" ] && echo "relay:    the --lb command below" ||
  echo "relay:    $(cd "$REPO" && git rev-parse --short HEAD 2>/dev/null || echo unknown)$(cd "$REPO" && git diff --quiet HEAD 2>/dev/null || echo ' (uncommitted changes)'), $(go version | awk '{ print $3 }'), processes=$PROCESSES (0 = one per core)"
  echo "nginx:    $(nginx -v 2>&1 | sed 's/^nginx version: //'), $NGINX_WORKERS workers"
  echo "haproxy:  $(haproxy -v 2>&1 | awk 'NR == 1 { print $3 }'), nbthread $HAPROXY_THREADS"
  echo "h2load:   $(h2load --version 2>&1 | awk 'NR == 1 { print $2 }')"
  echo "backends: bench/grpcbackend (google.golang.org/grpc $(cd "$REPO" && go list -m -f '{{.Version}}' google.golang.org/grpc)) on $BACKEND_PORTS, UnaryCall with $SIZE-byte payloads ($(stat -c %s "$REQUEST")-byte request message)"
  echo "settings: rounds=$ROUNDS duration=${DURATION_S}s warmup=${WARMUP_S}s loads=[$LOADS] (connections x streams)"
  for i in "${!LB_NAMES[@]}"; do echo "--lb:     ${LB_NAMES[$i]}: ${LB_CMDS[$i]}"; done
  echo "output:   $OUT"
} | tee "$OUT/env.txt" >&2

printf 'round\tpeer\tload\tthreads\tcalls_per_s\tcalls\tp50_ms\tp99_ms\terrored\tfailed\tbackend_calls\tbackend_split\tlb_cpu_s\tlb_cpu_us_per_call\tbackend_cpu_us_per_call\trss_mb\tbox_busy_pct\n' >"$RAW"

start_backends

for round in $(seq "$ROUNDS"); do
  n=${#BALANCERS[@]}
  [ "$n" -gt 0 ] || break
  order=()
  for ((i = 0; i < n; i++)); do order+=("${BALANCERS[$(( (i + round - 1) % n ))]}"); done
  note "round $round of $ROUNDS: ${order[*]}"
  for name in "${order[@]}"; do
    kill -0 "$BACKENDS_PID" 2>/dev/null || die "the backends exited; see $LOGS/backends.log"
    if ! measure "$round" "$name"; then
      kept=()
      for b in "${BALANCERS[@]}"; do [ "$b" != "$name" ] && kept+=("$b"); done
      BALANCERS=("${kept[@]}")
    fi
  done
done

summarize
echo
print_table
cat <<EOF

Medians over $ROUNDS round(s) of ${DURATION_S}s runs on one $NCPU-core machine; everything shares its cores.
load CxM: h2load with C connections and M concurrent streams on each, so CxM unary calls in flight;
each call is grpc.testing.TestService/UnaryCall with a $SIZE-byte payload each way.
errors: h2load's failed and errored calls, summed over rounds. lb us, be us: the balancer's and the
backends' CPU time (user + system, whole process group) per call h2load completed. rss MB: the balancer's peak RSS.
split %: the calls each backend (${BACKEND_PORTS// //}) served, summed over rounds.
x best, cpu/bst: the median calls/s and lb us divided by those of the better peer at that load (best: the one
of nginx and HAProxy with more calls/s). medians.tsv also gives the ratios to each and their range over rounds.
Raw rows: $RAW
Medians:  $MEDIANS
EOF

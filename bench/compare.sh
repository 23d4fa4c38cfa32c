#!/usr/bin/env bash
# compare.sh - relay beside nginx and HAProxy on one machine, over loopback.
#
# Three nginx backends answer on 127.0.0.1:8001-8003. Then one balancer at a
# time listens on 127.0.0.1:8080 and spreads requests round-robin over them:
# nginx, HAProxy, relay, and "direct" (wrk straight at 127.0.0.1:8001, the
# ceiling no balancer can beat). For every concurrency in --conns it runs
#   wrk -t2 -cC -dDURATION --latency http://127.0.0.1:8080/
# and records requests per second, p50 and p99 latency, errors, the
# balancer's CPU time per request and its peak memory. The whole set repeats
# --rounds times in a rotated order; the table shows medians over rounds and
# the ratios of those medians against nginx and HAProxy.
#
# Usage: bench/compare.sh [options]
#   --rounds N           rounds of the whole set (default 3)
#   --duration D         length of each measured wrk run, e.g. 10s, 1m (default 10s)
#   --warmup D           unmeasured wrk run before each measured one; 0 skips (default 2s)
#   --conns "C ..."      concurrencies to measure (default "50 100 200 400")
#   --workers N          relay's workers setting; 0 = all cores (default 0)
#   --processes N        relay's processes setting; 0 = one per core (default 1)
#   --cpu-affinity       relay's cpu_affinity setting on (needs --processes other than 1)
#   --peers "P ..."      subset of "nginx haproxy relay direct" (default: all four)
#   --access-log         also run relay with its access log on, written to a
#                        file in the output directory (row "relay+log")
#   --routes N           also run relay with a table of N host and path prefix
#                        routes in front of its pools (bench/routes-config.sh;
#                        the load's requests take the last route), row
#                        "relay+routes", beside relay without routes
#   --rate-limit         also run relay with a rate limit by client address
#                        that the load never reaches (rate and burst
#                        1,000,000,000, all of wrk's requests one key in the
#                        table the processes share), row "relay+limit"
#   --relay-config FILE  run relay with this configuration file instead of the
#                        generated one (the listen address is forced to 127.0.0.1:8080)
#   --out DIR            where results go (default: a new directory under /tmp)
#   -h, --help           print this help
#
# wrk, nginx, HAProxy and curl are installed with apt-get when missing, which
# needs root; otherwise the apt-get command is printed. Go must be installed
# already (relay is built from this repository). Every process the script
# starts runs in its own session and is stopped by its process group on exit.
set -u

PROG=compare.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROUNDS=3
DURATION=10s
WARMUP=2s
CONNS="50 100 200 400"
WORKERS=0
PROCESSES=1
CPU_AFFINITY=false
PEERS="nginx haproxy relay direct"
ACCESS_LOG=0
ROUTES=""
RATE_LIMIT=0
RELAY_CONFIG=""
OUT=""
WRK_THREADS=2

BALANCER_ADDR=127.0.0.1:8080
BACKEND_PORTS="8001 8002 8003"

while [ $# -gt 0 ]; do
  case "$1" in
    --rounds)       need_value "$@"; ROUNDS=$2; shift 2;;
    --duration)     need_value "$@"; DURATION=$2; shift 2;;
    --warmup)       need_value "$@"; WARMUP=$2; shift 2;;
    --conns)        need_value "$@"; CONNS=$2; shift 2;;
    --workers)      need_value "$@"; WORKERS=$2; shift 2;;
    --processes)    need_value "$@"; PROCESSES=$2; shift 2;;
    --cpu-affinity) CPU_AFFINITY=true; shift;;
    --peers)        need_value "$@"; PEERS=$2; shift 2;;
    --access-log)   ACCESS_LOG=1; shift;;
    --relay-config) need_value "$@"; RELAY_CONFIG=$2; shift 2;;
    --routes)       need_value "$@"; ROUTES=$2; shift 2;;
    --rate-limit)   RATE_LIMIT=1; shift;;
    --out)          need_value "$@"; OUT=$2; shift 2;;
    -h|--help)      help; exit 0;;
    *)              unknown_argument "$1";;
  esac
done

# ------------------------------------------------------------------ checking options

positive "$ROUNDS" || die "--rounds must be a positive integer, not '$ROUNDS'"
[[ "$WORKERS" =~ ^[0-9]+$ ]] || die "--workers must be 0 or a positive integer, not '$WORKERS'"
[[ "$PROCESSES" =~ ^[0-9]+$ ]] || die "--processes must be 0 or a positive integer, not '$PROCESSES'"
[ "$CPU_AFFINITY" = false ] || [ "$PROCESSES" != 1 ] || die "--cpu-affinity needs --processes other than 1"
DURATION_S=$(seconds "$DURATION") && [ "$DURATION_S" -gt 0 ] || die "--duration must look like 10s, 2m or 30, not '$DURATION'"
if [ "$WARMUP" = 0 ]; then WARMUP_S=0; else
  WARMUP_S=$(seconds "$WARMUP") || die "--warmup must look like 2s or 0, not '$WARMUP'"
fi
for c in $CONNS; do
  [[ "$c" =~ ^[0-9]+$ ]] && [ "$c" -ge "$WRK_THREADS" ] || die "--conns values must be integers of at least $WRK_THREADS, not '$c'"
done
[ -n "$CONNS" ] || die "--conns is empty"
for p in $PEERS; do
  case "$p" in nginx|haproxy|relay|direct) ;; *) die "--peers: unknown peer '$p' (choose from: nginx haproxy relay direct)";; esac
done
if [ -n "$ROUTES" ]; then
  positive "$ROUTES" || die "--routes must be a positive integer, not '$ROUTES'"
  [ -z "$RELAY_CONFIG" ] || die "--routes builds relay's configuration itself: give it or --relay-config, not both"
fi
if [ "$RATE_LIMIT" = 1 ] && [ -n "$RELAY_CONFIG" ]; then
  die "--rate-limit builds relay's configuration itself: give it or --relay-config, not both"
fi
if [ -n "$RELAY_CONFIG" ]; then
  [ -r "$RELAY_CONFIG" ] || die "--relay-config: cannot read $RELAY_CONFIG"
  RELAY_CONFIG=$(cd "$(dirname "$RELAY_CONFIG")" && pwd)/$(basename "$RELAY_CONFIG")
fi

# The balancers, in the order of round 1.
BALANCERS=()
for p in direct nginx haproxy relay; do
  [[ " $PEERS " == *" $p "* ]] && BALANCERS+=("$p")
done
[ "$ACCESS_LOG" = 1 ] && BALANCERS+=("relay+log")
[ -n "$ROUTES" ] && BALANCERS+=("relay+routes")
[ "$RATE_LIMIT" = 1 ] && BALANCERS+=("relay+limit")
[ ${#BALANCERS[@]} -gt 0 ] || die "nothing to measure: --peers is empty"

# ------------------------------------------------------------------ tools

install_missing wrk:wrk nginx:nginx haproxy:haproxy curl:curl ss:iproute2
need_tools go setsid timeout awk sort

# ------------------------------------------------------------------ output directory

make_out_dir relay-bench
RAW=$OUT/raw.tsv
MEDIANS=$OUT/medians.tsv
TABLE=$OUT/table.txt
stop_all_on_exit

# ------------------------------------------------------------------ configurations

write_nginx_conf() {
  local port upstreams=""
  for port in $BACKEND_PORTS; do upstreams+="        server 127.0.0.1:$port;
"; done
  cat >"$RUN/nginx.conf" <<EOF
# nginx as the balancer: round-robin (its default) with an upstream keep-alive pool.
worker_processes auto;
pid $RUN/nginx.pid;
error_log $RUN/nginx.err warn;
worker_rlimit_nofile 65536;
events { worker_connections 8192; multi_accept on; }
http {
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
$(nginx_temp_paths "$RUN/nginx-tmp")
    upstream backends {
$upstreams        keepalive 512;
        keepalive_requests 1000000;
        keepalive_timeout 120s;
    }
    server {
        listen $BALANCER_ADDR backlog=4096;
        location / {
            proxy_pass http://backends;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
EOF
}

write_haproxy_conf() {
  local i=0 port servers=""
  for port in $BACKEND_PORTS; do i=$((i + 1)); servers+="    server s$i 127.0.0.1:$port
"; done
  cat >"$RUN/haproxy.cfg" <<EOF
# HAProxy as the balancer: two threads, round-robin, idle server connections shared.
global
    nbthread 2
    maxconn $(haproxy_maxconn)
defaults
    mode http
    option http-keep-alive
    http-reuse always
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    timeout http-keep-alive 120s
frontend clients
    bind $BALANCER_ADDR
    default_backend backends
backend backends
    balance roundrobin
$servers
EOF
}

# write_relay_conf FILE ACCESS_LOG(true|false)
write_relay_conf() {
  local file=$1 access=$2 port
  if [ -n "$RELAY_CONFIG" ]; then
    # A given file is used as it is, except that the access-log variant
    # replaces its logging keys.
    if [ "$access" = true ]; then
      grep -v -E '^(access_log|access_log_file|access_log_format|log_file|log_max_size_mb|log_max_backups):' "$RELAY_CONFIG" >"$file"
      relay_log_keys >>"$file"
    else
      cp "$RELAY_CONFIG" "$file"
    fi
    return
  fi
  {
    echo "# relay as the balancer: round-robin over the three backends."
    echo "listen: \"$BALANCER_ADDR\""
    echo "algorithm: round-robin"
    echo "backends:"
    for port in $BACKEND_PORTS; do echo "  - http://127.0.0.1:$port"; done
    echo "health_check_path: /health"
    echo "workers: $WORKERS"
    echo "processes: $PROCESSES"
    echo "cpu_affinity: $CPU_AFFINITY"
    if [ "$access" = true ]; then relay_log_keys; else echo "access_log: false"; fi
  } >"$file"
}

# write_routes_conf FILE: relay's own configuration (write_relay_conf) with
# the pools and routes of bench/routes-config.sh --routes in front of the
# same three backends, the load's requests taking the last route. Without
# --routes it writes nothing.
write_routes_conf() {
  [ -n "$ROUTES" ] || return 0
  local file=$1
  write_relay_conf "$file" false
  grep -v -E '^(listen|admin_listen|processes|access_log|log_level):' <("$REPO/bench/routes-config.sh" "$ROUTES") |
    grep -v '^#' >>"$file"
}

# write_limit_conf FILE: relay's own configuration (write_relay_conf) with
# a rate limit by client address the load never reaches. Without
# --rate-limit it writes nothing.
write_limit_conf() {
  [ "$RATE_LIMIT" = 1 ] || return 0
  write_relay_conf "$1" false
  echo "rate_limit: {rate: 1000000000, burst: 1000000000, key: client}" >>"$1"
}

# relay_log_keys: access log on (JSON, with request ids), in a file of its
# own in the output directory, bounded in size.
relay_log_keys() {
  echo "access_log: true"
  echo "access_log_file: \"$OUT/relay-access.log\""
  echo "log_max_size_mb: 100"
  echo "log_max_backups: 1"
}

# threads_of NAME: the worker processes or threads each balancer runs with;
# for relay, processes x scheduler threads in each (as relay resolves 0s).
threads_of() {
  case "$1" in
    nginx) echo "$NCPU";;
    haproxy) echo 2;;
    relay|relay+log|relay+routes|relay+limit)
      local w=$WORKERS p=$PROCESSES
      if [ -n "$RELAY_CONFIG" ]; then
        w=$(awk -F: '/^workers:/ { gsub(/[ "\r]/, "", $2); print $2 }' "$RELAY_CONFIG")
        p=$(awk -F: '/^processes:/ { gsub(/[ "\r]/, "", $2); print $2 }' "$RELAY_CONFIG")
      fi
      [ -z "$p" ] && p=1
      [ "$p" = 0 ] && p=$NCPU
      if [ -z "$w" ] || [ "$w" = 0 ]; then w=$(( NCPU / p )); [ "$w" -lt 1 ] && w=1; fi
      if [ "$p" = 1 ]; then echo "$w"; else echo "${p}x$w"; fi;;
    *) echo "-";;
  esac
}

# start_balancer NAME LOGFILE: starts it and sets STARTED_PID.
start_balancer() {
  case "$1" in
    nginx)   start "$2" nginx -p "$RUN" -c "$RUN/nginx.conf" -g 'daemon off;';;
    haproxy) start "$2" haproxy -db -f "$RUN/haproxy.cfg";;
    relay)     start "$2" "$OUT/relay" -config "$RUN/relay.yml" -listen "$BALANCER_ADDR";;
    relay+log) start "$2" "$OUT/relay" -config "$RUN/relay-log.yml" -listen "$BALANCER_ADDR";;
    relay+routes) start "$2" "$OUT/relay" -config "$RUN/relay-routes.yml" -listen "$BALANCER_ADDR";;
    relay+limit) start "$2" "$OUT/relay" -config "$RUN/relay-limit.yml" -listen "$BALANCER_ADDR";;
  esac
}

# ------------------------------------------------------------------ one balancer

# measure ROUND NAME: start the balancer, load it at every concurrency, stop it.
measure() {
  local round=$1 name=$2 url="http://$BALANCER_ADDR/" pid="" i c
  if [ "$name" = direct ]; then
    url="http://127.0.0.1:${BACKEND_PORTS%% *}/"
  else
    # The previous balancer has been stopped; the kernel may take a moment
    # to release its listening socket.
    wait_free "$BALANCER_ADDR"
    local log="$LOGS/$name.round$round.log"
    start_balancer "$name" "$log"; pid=$STARTED_PID
    if ! wait_ready "$url" "$pid" 20; then
      die "$name did not answer on $url within 20 s; its output ($log):
$(tail -n 20 "$log")"
    fi
    owned_by "$BALANCER_ADDR" "$pid" || die "$BALANCER_ADDR answers, but not from the $name this script started"
  fi
  local hits; hits=$(for i in 1 2 3 4 5 6; do curl -s --max-time 2 "$url" | awk '{ print $4 }'; done | tr '\n' ' ')
  note "round $round: $name ready${pid:+ (pgid $pid, $(group_pids "$pid" | wc -l) processes)}; six requests answered by: $hits"

  for c in $CONNS; do
    [ "$WARMUP_S" -gt 0 ] && run_wrk "$WARMUP_S" "$c" "$url" /dev/null
    local wf="$WRK/round$round.$name.c$c.txt" cpu0=0 cpu1=0 box0 box1 rss=NA
    [ -n "$pid" ] && cpu0=$(cpu_ticks "$pid")
    box0=$(busy_jiffies)
    run_wrk "$DURATION_S" "$c" "$url" "$wf"
    local rc=$?
    box1=$(busy_jiffies)
    if [ -n "$pid" ]; then
      cpu1=$(cpu_ticks "$pid")
      rss=$(awk -v k="$(group_status "$pid" VmHWM)" 'BEGIN { printf "%.1f", k / 1024 }')
      kill -0 "$pid" 2>/dev/null || note "  $name exited during the run at $c connections (see $LOGS)"
    fi
    [ "$rc" = 0 ] || note "  wrk exited with status $rc at $c connections (see $wf)"
    local rps reqs p50 p99 se n2
    read -r rps reqs p50 p99 se n2 < <(wrk_fields "$wf")
    awk -v r="$round" -v n="$name" -v c="$c" -v th="$(threads_of "$name")" -v rps="$rps" -v reqs="$reqs" \
        -v p50="$p50" -v p99="$p99" -v se="$se" -v n2="$n2" -v has="${pid:+1}" -v t0="$cpu0" -v t1="$cpu1" \
        -v hz="$HZ" -v rss="$rss" -v b0="$box0" -v b1="$box1" 'BEGIN {
      split(b0, x, " "); split(b1, y, " "); tot = y[1] - x[1]
      busy = tot > 0 ? sprintf("%.0f", 100 * (tot - (y[2] - x[2])) / tot) : "NA"
      cpu = has ? sprintf("%.2f", (t1 - t0) / hz) : "NA"
      us = (has && reqs > 0) ? sprintf("%.1f", (t1 - t0) / hz * 1e6 / reqs) : "NA"
      printf "%s\t%s\t%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
        r, n, c, th, rps, reqs, p50, p99, se, n2, cpu, us, rss, busy }' >>"$RAW"
    note "  $(tail -n 1 "$RAW" | awk -F'\t' '{ printf "%-9s c=%-5s %9s req/s  p50 %s ms  p99 %s ms  errors %s+%s  cpu %s us/req  rss %s MB  box %s%% busy", $2, $3, $5, $7, $8, $9, $10, $12, $13, $14 }')"
  done

  [ -n "$pid" ] && stop "$pid"
  return 0
}

# ------------------------------------------------------------------ summary

# summarize reads raw.tsv and writes medians.tsv: for each balancer and
# concurrency, the median over rounds of every figure; the ratios to nginx,
# HAProxy and relay are those of the medians (so they agree with the figures
# beside them), and the *_rounds columns give the range of the same ratio
# taken within each round (same round, same concurrency), which shows how
# much the machine's background load moved it.
summarize() {
  awk -F'\t' -v OFS='\t' "$AWK_ROUNDS"'
    NR == 1 { next }
    {
      k = $2 SUBSEP $3
      if (!(k in seen)) { seen[k] = 1; order[++n] = k; threads[k] = $4 }
      rps[$1, $2, $3] = $5; cpu[$1, $2, $3] = $12; rounds[$1] = 1
      keep("rps" SUBSEP k, $5); keep("p50" SUBSEP k, $7); keep("p99" SUBSEP k, $8)
      keep("cpu" SUBSEP k, $12); keep("rss" SUBSEP k, $13)
      errors[k] += $9 + $10; runs[k]++
    }
    END {
      print "peer", "conns", "threads", "rounds", "rps", "p50_ms", "p99_ms", "errors", "cpu_us_per_req", "rss_mb",
            "rps_vs_nginx", "rps_vs_haproxy", "cpu_vs_nginx", "cpu_vs_haproxy", "rps_vs_relay",
            "rps_vs_nginx_rounds", "rps_vs_haproxy_rounds"
      for (i = 1; i <= n; i++) {
        k = order[i]; mrps[k] = median(list["rps" SUBSEP k]); mcpu[k] = median(list["cpu" SUBSEP k])
      }
      for (i = 1; i <= n; i++) {
        k = order[i]; split(k, kc, SUBSEP); name = kc[1]; c = kc[2]
        ng = "nginx" SUBSEP c; hp = "haproxy" SUBSEP c; rl = "relay" SUBSEP c
        for (r in rounds) {
          if (!((r, name, c) in rps)) continue
          if ((r, "nginx", c) in rps) keep("rn" SUBSEP k, ratio(rps[r, name, c], rps[r, "nginx", c]))
          if ((r, "haproxy", c) in rps) keep("rh" SUBSEP k, ratio(rps[r, name, c], rps[r, "haproxy", c]))
        }
        print name, c, threads[k], runs[k], fmt(mrps[k], "%.0f"),
          fmt(median(list["p50" SUBSEP k]), "%.3f"), fmt(median(list["p99" SUBSEP k]), "%.3f"), errors[k],
          fmt(mcpu[k], "%.1f"), fmt(median(list["rss" SUBSEP k]), "%.1f"),
          fmt(ratio(mrps[k], mrps[ng]), "%.2f"), fmt(ratio(mrps[k], mrps[hp]), "%.2f"),
          fmt(ratio(mcpu[k], mcpu[ng]), "%.2f"), fmt(ratio(mcpu[k], mcpu[hp]), "%.2f"),
          fmt(ratio(mrps[k], mrps[rl]), "%.2f"), span(list["rn" SUBSEP k]), span(list["rh" SUBSEP k])
      }
    }' "$RAW" >"$MEDIANS"
}

# print_table renders medians.tsv for people, sorted by concurrency.
print_table() {
  {
    printf '%-10s %5s %7s %9s %7s %7s %6s %6s %6s %7s %9s %6s %7s\n' \
      balancer conns threads "req/s" "p50 ms" "p99 ms" errors "us/req" "rss MB" "x nginx" "x haproxy" "cpu/ng" "cpu/hap"
    awk -F'\t' 'NR > 1' "$MEDIANS" | sort -t "$(printf '\t')" -k2,2n -s |
      awk -F'\t' '{ printf "%-10s %5s %7s %9s %7s %7s %6s %6s %6s %7s %9s %6s %7s\n",
                    $1, $2, $3, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14 }'
    # The access log's cost, as a share of relay's own throughput.
    awk -F'\t' 'NR > 1 && $1 == "relay+log" && $15 != "NA" {
      if (!head++) printf "\nwith the access log on, relay keeps this share of its throughput:\n"
      printf "  %5s connections: %s\n", $2, $15 }' "$MEDIANS"
    awk -F'\t' -v n="$ROUTES" 'NR > 1 && $1 == "relay+routes" && $15 != "NA" {
      if (!head++) printf "\nwith %s routes, relay keeps this share of its throughput:\n", n
      printf "  %5s connections: %s\n", $2, $15 }' "$MEDIANS"
    awk -F'\t' 'NR > 1 && $1 == "relay+limit" && $15 != "NA" {
      if (!head++) printf "\nwith a rate limit it never reaches, relay keeps this share of its throughput:\n"
      printf "  %5s connections: %s\n", $2, $15 }' "$MEDIANS"
  } | tee "$TABLE"
}

# ------------------------------------------------------------------ main

for port in $BACKEND_PORTS; do need_free "127.0.0.1:$port"; done
need_free "$BALANCER_ADDR"

if [[ " ${BALANCERS[*]} " == *" relay"* ]]; then
  build_relay
  write_relay_conf "$RUN/relay.yml" false
  write_relay_conf "$RUN/relay-log.yml" true
  write_routes_conf "$RUN/relay-routes.yml"
  write_limit_conf "$RUN/relay-limit.yml"
  for f in relay.yml relay-log.yml relay-routes.yml relay-limit.yml; do
    [ -f "$RUN/$f" ] || continue
    "$OUT/relay" -check -config "$RUN/$f" -listen "$BALANCER_ADDR" >&2 || die "relay rejects $RUN/$f"
  done
fi
# shellcheck disable=SC2086 # BACKEND_PORTS is a list
write_greeting_backends $BACKEND_PORTS
write_nginx_conf
write_haproxy_conf
mkdir -p "$RUN/nginx-tmp"

{
  echo "date:     $(date -Is)"
  echo "host:     $(uname -srm), $NCPU cores, $(awk '/^model name/ { sub(/^[^:]*: /, ""); print; exit }' /proc/cpuinfo)"
  echo "relay:    $(cd "$REPO" && git rev-parse --short HEAD 2>/dev/null || echo unknown)$(cd "$REPO" && git diff --quiet HEAD 2>/dev/null || echo ' (uncommitted changes)'), $(go version | awk '{ print $3 }')"
  echo "nginx:    $(nginx -v 2>&1 | sed 's/^nginx version: //')"
  echo "haproxy:  $(haproxy -v 2>&1 | awk 'NR == 1 { print $3 }')"
  echo "wrk:      $(wrk -v 2>&1 | awk 'NR == 1 { print $2 }')"
  echo "settings: rounds=$ROUNDS duration=${DURATION_S}s warmup=${WARMUP_S}s conns=[$CONNS] wrk threads=$WRK_THREADS"
  if [ -n "$RELAY_CONFIG" ]; then echo "relay config: $RELAY_CONFIG"
  else echo "relay config: generated, processes=$PROCESSES workers=$WORKERS cpu_affinity=$CPU_AFFINITY (0 = one process per core / all cores)"; fi
  echo "output:   $OUT"
} | tee "$OUT/env.txt" >&2

printf 'round\tpeer\tconns\tthreads\trps\trequests\tp50_ms\tp99_ms\tsocket_errors\tnon2xx\tcpu_s\tcpu_us_per_req\trss_mb\tbox_busy_pct\n' >"$RAW"

# shellcheck disable=SC2086 # BACKEND_PORTS is a list
start_greeting_backends $BACKEND_PORTS

n=${#BALANCERS[@]}
for round in $(seq "$ROUNDS"); do
  order=()
  for ((i = 0; i < n; i++)); do order+=("${BALANCERS[$(( (i + round - 1) % n ))]}"); done
  note "round $round of $ROUNDS: ${order[*]}"
  for name in "${order[@]}"; do
    kill -0 "$BACKENDS_PID" 2>/dev/null || die "the backends exited; see $LOGS/backends.log"
    measure "$round" "$name"
  done
done

summarize
echo
print_table
cat <<EOF

Medians over $ROUNDS round(s) of ${DURATION_S}s wrk runs (-t$WRK_THREADS) on one $NCPU-core machine; everything shares its cores.
threads: worker processes or threads the balancer runs with. errors: socket errors + non-2xx, summed over rounds.
us/req: the balancer's CPU time (user + system, whole process group) per completed request. rss MB: its peak RSS.
x nginx, x haproxy: the median req/s divided by nginx's and HAProxy's median req/s; cpu/ng, cpu/hap: the same for
us/req. medians.tsv also gives the range of the req/s ratios taken within each round (*_rounds).
Raw rows: $RAW
Medians:  $MEDIANS
EOF

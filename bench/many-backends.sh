#!/usr/bin/env bash
# many-backends.sh - relay balancing over 1,000 backends against 3, over loopback.
#
# One nginx serves 1,003 backends: 500 on 127.0.0.1 and 500 on [::1] (ports
# BASE..BASE+499 and BASE+500..BASE+999), plus three on 127.0.0.1 ports
# BASE+1000..BASE+1002. Each answers / with "Hello World from PORT server"
# and /health with 200. relay is built from this checkout and run with one of
# two generated configurations, both round-robin, access log off, health
# checks every 5 s with a 1 s timeout:
#   relay-3     the three backends
#   relay-1000  the 1,000 backends
# The script then
#   1. checks that round-robin really reaches every one of the 1,000: it sends
#      --spread sequential requests through relay-1000 (access log on, to a
#      file) and counts the distinct backends in the answers and in relay's
#      access log;
#   2. loads relay-3 and relay-1000 in turn, alternating which goes first, for
#      --rounds rounds: a fresh relay each time, one health interval of
#      settling, an unmeasured warm-up, then
#        wrk -tTHREADS -cCONNS -dDURATION --latency http://127.0.0.1:RELAY_PORT/
#      recording req/s, p50/p99, errors and relay's CPU time per request;
#      the ratio relay-1000/relay-3 is that of the medians (per-round ratios beside it);
#   3. measures health checking alone: each relay idle (no traffic) for --idle,
#      its CPU time from /proc/PID/stat as a share of one core, --idle-repeats
#      times, alternating, median.
#
# Usage: bench/many-backends.sh [options]
#   --rounds N          load rounds (default 3)
#   --duration D        each measured wrk run, e.g. 10s, 1m (default 10s)
#   --warmup D          unmeasured wrk run before each measured one; 0 skips (default 2s)
#   --conns C           wrk connections (default 100)
#   --threads T         wrk threads (default 2)
#   --idle D            span of each no-traffic CPU measurement (default 30s)
#   --idle-repeats N    repeats of the no-traffic measurement (default 3)
#   --spread N          sequential requests of the spread check; 0 skips (default 3000)
#   --workers N         relay's workers setting; 0 = all cores (default 0)
#   --processes N       relay's processes setting; 0 = one per core (default 1).
#                       Each process checks every backend, so the health
#                       figure covers them all
#   --nginx-reference   also load nginx as the balancer over the same 3 and
#                       1,000 backends (rows nginx-3, nginx-1000), to show what
#                       the larger set costs a balancer on this machine at all
#   --base-port P       first backend port (default 24001; uses P..P+1002)
#   --relay-port P      port relay listens on, on 127.0.0.1 (default 25080)
#   --out DIR           where results go (default: a new directory under /tmp)
#   -h, --help          print this help
#
# wrk, nginx, curl and ss are installed with apt-get when missing, which needs
# root; otherwise the apt-get command is printed. Go must be installed already.
# Everything listens on and connects to loopback only. Every process the script
# starts runs in its own session and is stopped by its process group on exit;
# nothing is stopped by name. Every wait and every run is bounded in time.
set -u

PROG=many-backends.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROUNDS=3
DURATION=10s
WARMUP=2s
CONNS=100
WRK_THREADS=2
IDLE=30s
IDLE_REPEATS=3
SPREAD=3000
WORKERS=0
PROCESSES=1
BASE_PORT=24001
RELAY_PORT=25080
NGINX_REF=0
OUT=""

# Fixed by the benchmark's definition.
PER_FAMILY=500
HC_INTERVAL_S=5
HC_TIMEOUT=1s
# nginx runs one worker per core, like the backends in compare.sh, so the
# 3-backend figures here can be set beside that script's.
NGINX_WORKERS=auto

while [ $# -gt 0 ]; do
  case "$1" in
    --rounds)       need_value "$@"; ROUNDS=$2; shift 2;;
    --duration)     need_value "$@"; DURATION=$2; shift 2;;
    --warmup)       need_value "$@"; WARMUP=$2; shift 2;;
    --conns)        need_value "$@"; CONNS=$2; shift 2;;
    --threads)      need_value "$@"; WRK_THREADS=$2; shift 2;;
    --idle)         need_value "$@"; IDLE=$2; shift 2;;
    --idle-repeats) need_value "$@"; IDLE_REPEATS=$2; shift 2;;
    --spread)       need_value "$@"; SPREAD=$2; shift 2;;
    --workers)      need_value "$@"; WORKERS=$2; shift 2;;
    --processes)    need_value "$@"; PROCESSES=$2; shift 2;;
    --nginx-reference) NGINX_REF=1; shift;;
    --base-port)    need_value "$@"; BASE_PORT=$2; shift 2;;
    --relay-port)   need_value "$@"; RELAY_PORT=$2; shift 2;;
    --out)          need_value "$@"; OUT=$2; shift 2;;
    -h|--help)      help; exit 0;;
    *)              unknown_argument "$1";;
  esac
done

# ------------------------------------------------------------------ checking options

positive "$ROUNDS" || die "--rounds must be a positive integer, not '$ROUNDS'"
positive "$IDLE_REPEATS" || die "--idle-repeats must be a positive integer, not '$IDLE_REPEATS'"
positive "$WRK_THREADS" || die "--threads must be a positive integer, not '$WRK_THREADS'"
positive "$CONNS" && [ "$CONNS" -ge "$WRK_THREADS" ] || die "--conns must be an integer of at least --threads, not '$CONNS'"
[[ "$SPREAD" =~ ^[0-9]+$ ]] || die "--spread must be 0 or a positive integer, not '$SPREAD'"
[[ "$WORKERS" =~ ^[0-9]+$ ]] || die "--workers must be 0 or a positive integer, not '$WORKERS'"
[[ "$PROCESSES" =~ ^[0-9]+$ ]] || die "--processes must be 0 or a positive integer, not '$PROCESSES'"
DURATION_S=$(seconds "$DURATION") && [ "$DURATION_S" -gt 0 ] || die "--duration must look like 10s, 2m or 30, not '$DURATION'"
IDLE_S=$(seconds "$IDLE") && [ "$IDLE_S" -gt 0 ] || die "--idle must look like 30s or 1m, not '$IDLE'"
if [ "$WARMUP" = 0 ]; then WARMUP_S=0; else
  WARMUP_S=$(seconds "$WARMUP") || die "--warmup must look like 2s or 0, not '$WARMUP'"
fi
positive "$BASE_PORT" && [ "$BASE_PORT" -ge 1024 ] && [ $(( BASE_PORT + 1002 )) -le 65535 ] \
  || die "--base-port must leave room for 1,003 ports between 1024 and 65535, not '$BASE_PORT'"
positive "$RELAY_PORT" && [ "$RELAY_PORT" -le 65535 ] || die "--relay-port must be a port number, not '$RELAY_PORT'"
[ "$RELAY_PORT" -ge "$BASE_PORT" ] && [ "$RELAY_PORT" -le $(( BASE_PORT + 1002 )) ] \
  && die "--relay-port $RELAY_PORT falls among the backend ports $BASE_PORT-$(( BASE_PORT + 1002 ))"

V4_FIRST=$BASE_PORT
V6_FIRST=$(( BASE_PORT + PER_FAMILY ))
THREE_FIRST=$(( BASE_PORT + 2 * PER_FAMILY ))
THREE_PORTS="$THREE_FIRST $(( THREE_FIRST + 1 )) $(( THREE_FIRST + 2 ))"
RELAY_ADDR=127.0.0.1:$RELAY_PORT
RELAY_URL=http://$RELAY_ADDR/

# ------------------------------------------------------------------ tools

# Listed in sorted order: that is how a missing set is named.
install_missing curl:curl ip:iproute2 nginx:nginx ss:iproute2 wrk:wrk
need_tools go setsid timeout awk sort getconf

# ------------------------------------------------------------------ output directory

make_out_dir relay-many
mkdir -p "$RUN/tmp"
LOAD_TSV=$OUT/load.tsv
IDLE_TSV=$OUT/idle.tsv
SPREAD_TSV=$OUT/spread.tsv
TABLE=$OUT/table.txt
stop_all_on_exit

# ------------------------------------------------------------------ reading /proc

# group_fds PGID: how many descriptors the group's processes hold.
group_fds() {
  local p n=0
  for p in $(group_pids "$1"); do n=$(( n + $(ls "/proc/$p/fd" 2>/dev/null | wc -l) )); done
  echo "$n"
}

# fd_limit PID: the process's soft open-file limit.
fd_limit() { awk '/^Max open files/ { print $4 }' "/proc/$1/limits" 2>/dev/null; }

# upstream_conns WHICH(3|1000): established TCP connections whose remote end
# is one of that case's backends: relay's pooled connections and any health
# probe in flight.
upstream_conns() {
  local lo=$V4_FIRST hi=$(( V6_FIRST + PER_FAMILY - 1 ))
  [ "$1" = 3 ] && lo=$THREE_FIRST && hi=$(( THREE_FIRST + 2 ))
  ss -Htn state established 2>/dev/null | awk -v lo="$lo" -v hi="$hi" '
    { n = split($4, a, ":"); p = a[n] + 0; if (p >= lo && p <= hi) c++ } END { print c + 0 }'
}

loadavg() { awk '{ print $1, $2, $3 }' /proc/loadavg; }

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# ------------------------------------------------------------------ ports

# ports_in_use prints the listening sockets on any port this run needs, on
# any address: a wildcard listener would keep a loopback one from binding.
ports_in_use() {
  ss -Hltn 2>/dev/null | awk -v lo="$BASE_PORT" -v hi=$(( BASE_PORT + 1002 )) -v r="$RELAY_PORT" '
    { n = split($4, a, ":"); p = a[n] + 0; if ((p >= lo && p <= hi) || p == r) print }'
}

# relay_port_listener prints the listening socket on relay's port, if any.
relay_port_listener() {
  ss -Hltn 2>/dev/null | awk -v r="$RELAY_PORT" '{ n = split($4, a, ":"); if (a[n] + 0 == r) print }'
}

# listeners_of PGID: how many of the backend ports are listened on by that group.
listeners_of() {
  local pids
  pids=$(group_pids "$1" | tr '\n' ' ')
  ss -Hltnp 2>/dev/null | awk -v lo="$BASE_PORT" -v hi=$(( BASE_PORT + 1002 )) -v pids=" $pids" '
    { n = split($4, a, ":"); p = a[n] + 0
      if (p < lo || p > hi) next
      rest = $0
      while (match(rest, /pid=[0-9]+/)) {
        if (index(pids, " " substr(rest, RSTART + 4, RLENGTH - 4) " ")) { seen[p] = 1; break }
        rest = substr(rest, RSTART + RLENGTH)
      } }
    END { for (p in seen) k++; print k + 0 }'
}

# ------------------------------------------------------------------ IPv6

# ipv6_works reports whether [::1] is configured on lo and a listener on it
# answers. It starts a one-server nginx on the first IPv6 port and stops it.
ipv6_works() {
  ip -6 addr show dev lo 2>/dev/null | grep -q 'inet6 ::1/128' || { IPV6_WHY="lo has no ::1 address"; return 1; }
  cat >"$RUN/ipv6-probe.conf" <<EOF
# Does a listener on [::1] work here? One server, started and stopped at once.
worker_processes 1;
pid $RUN/ipv6-probe.pid;
error_log $RUN/ipv6-probe.err warn;
events { worker_connections 64; }
http {
    access_log off;
$(nginx_temp_paths "$RUN/tmp")
    server {
        listen [::1]:$V6_FIRST;
        location / { return 200 "Hello World from $V6_FIRST server\\n"; }
    }
}
EOF
  start "$LOGS/ipv6-probe.log" nginx -e "$RUN/ipv6-probe.err" -p "$RUN" -c "$RUN/ipv6-probe.conf" -g 'daemon off;'
  local pid=$STARTED_PID ok=1
  wait_ready "http://[::1]:$V6_FIRST/" "$pid" 10 && ok=0
  stop "$pid"
  [ "$ok" = 0 ] || IPV6_WHY="a listener on [::1]:$V6_FIRST did not answer: $(tail -n 3 "$RUN/ipv6-probe.err" "$LOGS/ipv6-probe.log" 2>/dev/null | tr '\n' ' ')"
  return $ok
}

# ------------------------------------------------------------------ configurations

# backend_hosts prints "HOST PORT URL-HOST" for each of the 1,000 backends.
backend_hosts() {
  local i
  for ((i = 0; i < PER_FAMILY; i++)); do echo "127.0.0.1 $(( V4_FIRST + i )) 127.0.0.1"; done
  for ((i = 0; i < PER_FAMILY; i++)); do echo "$SECOND_LISTEN $(( V6_FIRST + i )) $SECOND_HOST"; done
}

write_backends_conf() {
  local nofile=$1 host port _
  {
    cat <<EOF
# 1,003 backends in one nginx: every port answers with its own number.
worker_processes $NGINX_WORKERS;
pid $RUN/backends.pid;
error_log $RUN/backends.err warn;
worker_rlimit_nofile $nofile;
# Each worker holds all 1,003 listening sockets as connections of its own.
events { worker_connections $(( nofile - 64 )); multi_accept on; }
http {
    access_log off;
    default_type text/plain;
    # relay keeps connections to the backends open; nginx's default of 1000
    # requests per connection would close and reopen them all the time.
    keepalive_requests 1000000;
    keepalive_timeout 120s;
$(nginx_temp_paths "$RUN/tmp")
EOF
    { backend_hosts; for port in $THREE_PORTS; do echo "127.0.0.1 $port 127.0.0.1"; done; } |
      while read -r host port _; do
        printf '    server { listen %s:%s backlog=4096; location = /health { return 200 "ok\\n"; } location / { return 200 "Hello World from %s server\\n"; } }\n' \
          "$host" "$port" "$port"
      done
    echo "}"
  } >"$RUN/backends.conf"
}

# write_relay_conf FILE WHICH(3|1000) ACCESS_LOG(true|false)
write_relay_conf() {
  local file=$1 which=$2 access=$3 port _ host
  {
    echo "# relay round-robin over $which backends, health-checked every ${HC_INTERVAL_S}s."
    echo "listen: \"$RELAY_ADDR\""
    echo "algorithm: round-robin"
    echo "backends:"
    if [ "$which" = 3 ]; then
      for port in $THREE_PORTS; do echo "  - \"http://127.0.0.1:$port\""; done
    else
      backend_hosts | while read -r _ port host; do echo "  - \"http://$host:$port\""; done
    fi
    echo "health_check_type: http"
    echo "health_check_path: /health"
    echo "health_check_interval: ${HC_INTERVAL_S}s"
    echo "health_check_timeout: $HC_TIMEOUT"
    echo "workers: $WORKERS"
    echo "processes: $PROCESSES"
    echo "shutdown_timeout: 3s"
    if [ "$access" = true ]; then
      echo "access_log: true"
      echo "log_file: \"$OUT/spread-access.log\""
      echo "log_max_size_mb: 100"
      echo "log_max_backups: 1"
    else
      echo "access_log: false"
    fi
  } >"$file"
}

# write_nginx_balancer_conf WHICH(3|1000) NOFILE: nginx as the balancer, for reference.
write_nginx_balancer_conf() {
  local which=$1 nofile=$2 port _ host servers=""
  if [ "$which" = 3 ]; then
    for port in $THREE_PORTS; do servers+="        server 127.0.0.1:$port;
"; done
  else
    servers=$(backend_hosts | while read -r _ port host; do echo "        server $host:$port;"; done)
    servers+="
"
  fi
  cat >"$RUN/nginx-$which.conf" <<EOF
# nginx as the balancer over $which backends: round-robin (its default), an
# upstream keep-alive cache large enough for one connection per backend. nginx
# has no active health checks in its open-source build.
worker_processes auto;
pid $RUN/nginx-$which.pid;
error_log $RUN/nginx-$which.err warn;
worker_rlimit_nofile $nofile;
events { worker_connections $(( nofile - 64 )); multi_accept on; }
http {
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
$(nginx_temp_paths "$RUN/tmp")
    upstream backends {
$servers        keepalive 1024;
        keepalive_requests 1000000;
        keepalive_timeout 120s;
    }
    server {
        listen $RELAY_ADDR backlog=4096;
        location / {
            proxy_pass http://backends;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
EOF
}

# ------------------------------------------------------------------ balancers

# start_balancer LOG COMMAND...: starts a balancer on RELAY_ADDR, waits until
# it proxies a request and checks that the socket is its own. Sets BAL_PID
# and READY_MS (start to first proxied answer).
start_balancer() {
  local log=$1 i t0; shift
  # The previous balancer has been stopped; give the kernel a moment to
  # release the listening socket before deciding the port is taken.
  for i in $(seq 50); do [ -z "$(relay_port_listener)" ] && break; sleep 0.1; done
  [ -z "$(relay_port_listener)" ] || die "$RELAY_ADDR is taken by another process; stop it and run again:
$(relay_port_listener)"
  t0=$(now_ms)
  start "$log" "$@"
  BAL_PID=$STARTED_PID
  wait_ready "$RELAY_URL" "$BAL_PID" 60 || die "$* did not answer on $RELAY_URL within 60 s; its output ($log):
$(tail -n 20 "$log")"
  READY_MS=$(( $(now_ms) - t0 ))
  local mine=1 p pids
  pids=" $(group_pids "$BAL_PID" | tr '\n' ' ')"
  for p in $(ss -Hltnp "sport = :$RELAY_PORT" 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2); do
    [[ "$pids" == *" $p "* ]] && mine=0
  done
  [ "$mine" = 0 ] || die "$RELAY_ADDR answers, but not from the balancer this script started"
}

# start_case CASE LOG: starts relay-3, relay-1000, nginx-3 or nginx-1000.
start_case() {
  case "$1" in
    relay-*) start_balancer "$2" "$OUT/relay" -config "$RUN/$1.yml";;
    nginx-*) start_balancer "$2" nginx -e "$RUN/$1.err" -p "$RUN" -c "$RUN/$1.conf" -g 'daemon off;';;
  esac
}

# healthy_at_start LOG: the "healthy" count relay logged when it started.
healthy_at_start() {
  grep -m1 '"msg":"relay started"' "$1" 2>/dev/null | grep -o '"healthy":[0-9]*' | cut -d: -f2
}

# downs LOG: how many "backend down" lines relay logged.
downs() { grep -c '"msg":"backend down"' "$1" 2>/dev/null; }

# settle: one health interval, so every backend has been probed by the loops.
settle() { pause "$HC_INTERVAL_S"; }

# ------------------------------------------------------------------ the three parts

# spread_check: SPREAD sequential requests through relay-1000 with its access
# log on; count distinct backends in the bodies and in the log.
spread_check() {
  local log=$LOGS/relay-1000-spread.log bodies=$OUT/spread-bodies.txt
  rm -f "$OUT/spread-access.log"
  start_balancer "$log" "$OUT/relay" -config "$RUN/relay-1000-log.yml"
  note "spread check: relay-1000 with its access log on, ready in $READY_MS ms, $(healthy_at_start "$OUT/spread-access.log") healthy at start"
  # One curl, one keep-alive connection, SPREAD requests in sequence (the
  # [1-N] range is curl's URL globbing).
  timeout 300 curl -s --max-time 240 "${RELAY_URL}?n=[1-$SPREAD]" >"$bodies" 2>/dev/null \
    || note "  curl exited with an error during the spread check"
  stop "$BAL_PID"
  # relay flushed its access log on its clean exit.
  local answers distinct_body access distinct_log minmax
  answers=$(grep -c '^Hello World from [0-9]* server$' "$bodies")
  distinct_body=$(awk '/^Hello World from [0-9]+ server$/ { print $4 }' "$bodies" | sort -u | wc -l)
  access=$(grep '"msg":"access"' "$OUT/spread-access.log" | grep -v '"path":"/"' | grep -o '"backend":"[^"]*"' | cut -d'"' -f4)
  distinct_log=$(printf '%s\n' "$access" | grep . | sort -u | wc -l)
  minmax=$(printf '%s\n' "$access" | grep . | sort | uniq -c | awk 'NR == 1 { mn = mx = $1 } { if ($1 < mn) mn = $1; if ($1 > mx) mx = $1 } END { print mn + 0, mx + 0 }')
  local v4 v6
  v4=$(printf '%s\n' "$access" | grep -c '//127\.0\.0\.1:')
  v6=$(printf '%s\n' "$access" | grep -vc '//127\.0\.0\.1:')
  printf 'requests\tanswers\tdistinct_in_bodies\taccess_lines\tdistinct_in_access_log\tmin_per_backend\tmax_per_backend\tfirst_half_lines\tsecond_half_lines\n' >"$SPREAD_TSV"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$SPREAD" "$answers" "$distinct_body" "$(printf '%s\n' "$access" | grep -c .)" \
    "$distinct_log" ${minmax} "$v4" "$v6" >>"$SPREAD_TSV"
  note "  $answers of $SPREAD answered; distinct backends: $distinct_body in the bodies, $distinct_log in the access log (requests per backend min/max: ${minmax/ //})"
}

# load_run ROUND CASE: a fresh balancer, settled (relay), warmed, loaded by wrk.
load_run() {
  local round=$1 name=$2 which=${2##*-} log=$LOGS/$2.round$1.log wf=$WRK/round$1.$2.txt
  start_case "$name" "$log"
  local healthy=NA down=NA
  if [[ "$name" == relay-* ]]; then healthy=$(healthy_at_start "$log"); settle; fi
  [ "$WARMUP_S" -gt 0 ] && run_wrk "$WARMUP_S" "$CONNS" "$RELAY_URL" /dev/null
  local la cpu0 cpu1 ng0 ng1 box0 box1 rc
  la=$(awk '{ print $1 }' /proc/loadavg)
  cpu0=$(cpu_ticks "$BAL_PID"); ng0=$(cpu_ticks "$BACKENDS_PID"); box0=$(busy_jiffies)
  run_wrk "$DURATION_S" "$CONNS" "$RELAY_URL" "$wf"; rc=$?
  cpu1=$(cpu_ticks "$BAL_PID"); ng1=$(cpu_ticks "$BACKENDS_PID"); box1=$(busy_jiffies)
  kill -0 "$BAL_PID" 2>/dev/null || note "  $name exited during the run (see $log)"
  [ "$rc" = 0 ] || note "  wrk exited with status $rc (see $wf)"
  local rss fds lim thr up
  rss=$(awk -v k="$(group_status "$BAL_PID" VmHWM)" 'BEGIN { printf "%.1f", k / 1024 }')
  fds=$(group_fds "$BAL_PID"); lim=$(fd_limit "$(group_pids "$BAL_PID" | tail -n 1)"); thr=$(group_status "$BAL_PID" Threads)
  up=$(upstream_conns "$which")
  stop "$BAL_PID"
  [[ "$name" == relay-* ]] && down=$(downs "$log")
  local rps reqs p50 p99 se n2
  read -r rps reqs p50 p99 se n2 < <(wrk_fields "$wf")
  awk -v r="$round" -v w="$name" -v rps="$rps" -v reqs="$reqs" -v p50="$p50" -v p99="$p99" \
      -v se="$se" -v n2="$n2" -v t0="$cpu0" -v t1="$cpu1" -v hz="$HZ" -v rss="$rss" -v fds="$fds" \
      -v lim="$lim" -v thr="$thr" -v up="$up" -v ready="$READY_MS" -v healthy="$healthy" \
      -v downs="$down" -v b0="$box0" -v b1="$box1" -v la="$la" -v n0="$ng0" -v n1="$ng1" 'BEGIN {
    split(b0, x, " "); split(b1, y, " "); tot = y[1] - x[1]
    busy = tot > 0 ? sprintf("%.0f", 100 * (tot - (y[2] - x[2])) / tot) : "NA"
    us = reqs > 0 ? sprintf("%.1f", (t1 - t0) / hz * 1e6 / reqs) : "NA"
    ng = reqs > 0 ? sprintf("%.1f", (n1 - n0) / hz * 1e6 / reqs) : "NA"
    printf "%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%.2f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
      r, w, rps, reqs, p50, p99, se, n2, (t1 - t0) / hz, us, rss, fds, lim, thr, up, ready, healthy, downs, busy, la, ng }' >>"$LOAD_TSV"
  note "  $(tail -n 1 "$LOAD_TSV" | awk -F'\t' '{ printf "%-11s %7s req/s  p99 %s ms  errors %s+%s  %s us/req  rss %s MB  fds %s  upstream conns %s  ready %s ms  healthy %s  downs %s  box %s%% busy  load %s", $2, $3, $6, $7, $8, $10, $11, $12, $15, $16, $17, $18, $19, $20 }')  backends $(tail -n 1 "$LOAD_TSV" | cut -f21) us/req"
}

# idle_run REPEAT WHICH: a fresh relay-WHICH, settled, then IDLE_S seconds of
# nothing but health checks; relay's CPU time as a share of one core.
idle_run() {
  local rep=$1 which=$2 log=$LOGS/relay-$2.idle$1.log
  start_case "relay-$which" "$log"
  settle
  local la cpu0 cpu1 t0 t1 ng0 ng1
  la=$(awk '{ print $1 }' /proc/loadavg)
  cpu0=$(cpu_ticks "$BAL_PID"); ng0=$(cpu_ticks "$BACKENDS_PID"); t0=$(now_ms)
  pause "$IDLE_S"
  cpu1=$(cpu_ticks "$BAL_PID"); ng1=$(cpu_ticks "$BACKENDS_PID"); t1=$(now_ms)
  kill -0 "$BAL_PID" 2>/dev/null || note "  relay-$which exited while idle (see $log)"
  local rss; rss=$(awk -v k="$(group_status "$BAL_PID" VmRSS)" 'BEGIN { printf "%.1f", k / 1024 }')
  local fds; fds=$(group_fds "$BAL_PID")
  stop "$BAL_PID"
  awk -v r="$rep" -v w="relay-$which" -v c0="$cpu0" -v c1="$cpu1" -v n0="$ng0" -v n1="$ng1" -v t0="$t0" -v t1="$t1" \
      -v hz="$HZ" -v rss="$rss" -v fds="$fds" -v downs="$(downs "$log")" -v la="$la" 'BEGIN {
    s = (t1 - t0) / 1000
    printf "%s\t%s\t%.1f\t%.2f\t%.3f\t%.3f\t%s\t%s\t%s\t%s\n",
      r, w, s, (c1 - c0) / hz, 100 * (c1 - c0) / hz / s, 100 * (n1 - n0) / hz / s, rss, fds, downs, la }' >>"$IDLE_TSV"
  note "  $(tail -n 1 "$IDLE_TSV" | awk -F'\t' '{ printf "%-10s idle %ss: relay cpu %ss = %s%% of one core (backends %s%%)  rss %s MB  fds %s  downs %s  load %s", $2, $3, $4, $5, $6, $7, $8, $9, $10 }')"
}

# ------------------------------------------------------------------ summary

# median_of: the median of the numbers on standard input, one per line.
median_of() {
  sort -g | awk '{ v[++n] = $1 } END { if (n == 0) print "NA"; else if (n % 2) print v[(n + 1) / 2]; else print (v[n / 2] + v[n / 2 + 1]) / 2 }'
}

# col TSV CASE N: column N of every row of TSV whose second column is CASE.
col() { awk -F'\t' -v w="$2" -v c="$3" 'NR > 1 && $2 == w { print $c }' "$1"; }

summary() {
  local w ratios
  echo "load: wrk -t$WRK_THREADS -c$CONNS -d${DURATION_S}s --latency, medians of $ROUNDS round(s)"
  printf '%-11s %9s %8s %8s %7s %7s %8s %7s %5s %9s %9s %8s\n' case "req/s" "p50 ms" "p99 ms" errors "us/req" "backends" "rss MB" fds upstream "start ms" healthy
  for w in $CASES; do
    printf '%-11s %9.0f %8.3f %8.3f %7s %7.1f %8.1f %7.1f %5.0f %9.0f %9.0f %8s\n' "$w" \
      "$(col "$LOAD_TSV" "$w" 3 | median_of)" "$(col "$LOAD_TSV" "$w" 5 | median_of)" \
      "$(col "$LOAD_TSV" "$w" 6 | median_of)" \
      "$(awk -F'\t' -v w="$w" 'NR > 1 && $2 == w { e += $7 + $8 } END { print e + 0 }' "$LOAD_TSV")" \
      "$(col "$LOAD_TSV" "$w" 10 | median_of)" "$(col "$LOAD_TSV" "$w" 21 | median_of)" "$(col "$LOAD_TSV" "$w" 11 | median_of)" \
      "$(col "$LOAD_TSV" "$w" 12 | median_of)" "$(col "$LOAD_TSV" "$w" 15 | median_of)" \
      "$(col "$LOAD_TSV" "$w" 16 | median_of)" "$(col "$LOAD_TSV" "$w" 17 | sort -u | tr '\n' ' ' | sed 's/ $//')"
  done
  echo
  local kind
  for kind in relay nginx; do
    [[ " $CASES " == *" $kind-3 "* ]] || continue
    ratios=$(awk -F'\t' -v k="$kind" 'NR > 1 { v[$1, $2] = $3; c[$1, $2] = $10; if ($1 > n) n = $1 }
      END { for (r = 1; r <= n; r++) if (v[r, k "-3"] > 0) printf "%.3f %.3f\n", v[r, k "-1000"] / v[r, k "-3"], (c[r, k "-3"] > 0 ? c[r, k "-1000"] / c[r, k "-3"] : 0) }' "$LOAD_TSV")
    echo "$kind-1000 / $kind-3 throughput: $(awk -v a="$(col "$LOAD_TSV" "$kind-1000" 3 | median_of)" -v b="$(col "$LOAD_TSV" "$kind-3" 3 | median_of)" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }') of the medians above$([ "$kind" = relay ] && echo " (target >= 0.9)"); per round: $(echo "$ratios" | awk '{ printf "%s ", $1 }')"
    echo "$kind-1000 / $kind-3 CPU per request: $(awk -v a="$(col "$LOAD_TSV" "$kind-1000" 10 | median_of)" -v b="$(col "$LOAD_TSV" "$kind-3" 10 | median_of)" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }') of the medians above; per round: $(echo "$ratios" | awk '{ printf "%s ", $2 }')"
  done
  echo
  echo "health checking alone: no traffic, ${IDLE_S}s per repeat, median of $IDLE_REPEATS"
  printf '%-11s %14s  %-26s %12s %7s %5s\n' case "cpu % of core" "each repeat" "backends %" "rss MB" fds
  for w in relay-3 relay-1000; do
    printf '%-11s %14.3f  %-26s %12.3f %7.1f %5.0f\n' "$w" "$(col "$IDLE_TSV" "$w" 5 | median_of)" \
      "$(col "$IDLE_TSV" "$w" 5 | tr '\n' ' ')" "$(col "$IDLE_TSV" "$w" 6 | median_of)" \
      "$(col "$IDLE_TSV" "$w" 7 | median_of)" "$(col "$IDLE_TSV" "$w" 8 | median_of)"
  done
  local m3 m1000
  m3=$(col "$IDLE_TSV" relay-3 5 | median_of); m1000=$(col "$IDLE_TSV" relay-1000 5 | median_of)
  echo "health checks of 1,000 backends every ${HC_INTERVAL_S}s: $m1000% of one core; above the 3-backend baseline: $(awk -v a="$m1000" -v b="$m3" 'BEGIN { printf "%.3f", a - b }')% (target < 2%)"
  echo "that is about $(awk -v a="$m1000" -v i="$HC_INTERVAL_S" 'BEGIN { printf "%.0f", a / 100 * i / 1000 * 1e6 }') us of relay CPU per probe"
  if [ -s "$SPREAD_TSV" ]; then
    echo
    awk -F'\t' 'NR == 2 { printf "spread: %s sequential requests through relay-1000, %s answered: %s distinct backends in the answers, %s in relay'"'"'s access log (%s lines; per backend min %s, max %s; first half %s lines, second half %s)\n", $1, $2, $3, $5, $4, $6, $7, $8, $9 }' "$SPREAD_TSV"
  fi
}

# ------------------------------------------------------------------ main

[ -z "$(ports_in_use)" ] || die "ports this run needs ($BASE_PORT-$(( BASE_PORT + 1002 )), $RELAY_PORT) are taken; choose others with --base-port/--relay-port or stop these:
$(ports_in_use)"

LOAD_START=$(loadavg)
if ipv6_works; then
  SECOND_LISTEN="[::1]"; SECOND_HOST="[::1]"; IPV6="yes: the second 500 backends listen on [::1]"
else
  SECOND_LISTEN=127.0.0.2; SECOND_HOST=127.0.0.2
  IPV6="NO ($IPV6_WHY): the second 500 backends listen on 127.0.0.2 instead of [::1]"
  note "IPv6 loopback does not work here: $IPV6_WHY; using 127.0.0.2 for the second half"
fi

build_relay
write_relay_conf "$RUN/relay-3.yml" 3 false
write_relay_conf "$RUN/relay-1000.yml" 1000 false
write_relay_conf "$RUN/relay-1000-log.yml" 1000 true
for f in relay-3.yml relay-1000.yml relay-1000-log.yml; do
  timeout 60 "$OUT/relay" -check -config "$RUN/$f" >&2 || die "relay rejects $RUN/$f"
done

HARD=$(ulimit -Hn); [ "$HARD" = unlimited ] && HARD=1048576
NOFILE=$(( HARD > 65536 ? 65536 : HARD ))
write_backends_conf "$NOFILE"
CASES="relay-3 relay-1000"
if [ "$NGINX_REF" = 1 ]; then
  write_nginx_balancer_conf 3 "$NOFILE"
  write_nginx_balancer_conf 1000 "$NOFILE"
  CASES="$CASES nginx-3 nginx-1000"
fi

{
  echo "date:     $(date -Is)"
  echo "host:     $(uname -srm), $NCPU cores, $(awk '/^model name/ { sub(/^[^:]*: /, ""); print; exit }' /proc/cpuinfo)"
  echo "load avg: $LOAD_START at start (other work shares these cores)"
  echo "relay:    $(cd "$REPO" && git rev-parse --short HEAD 2>/dev/null || echo unknown)$(cd "$REPO" && git diff --quiet HEAD -- . 2>/dev/null || echo ' (uncommitted changes)'), $(go version | awk '{ print $3 }'), workers=$WORKERS (0 = all cores), processes=$PROCESSES"
  echo "nginx:    $(nginx -v 2>&1 | sed 's/^nginx version: //'), worker_processes $NGINX_WORKERS, worker_rlimit_nofile $NOFILE"
  echo "wrk:      $(wrk -v 2>&1 | awk 'NR == 1 { print $2 }')"
  echo "files:    ulimit -n $(ulimit -Sn) soft, $HARD hard (relay raises its soft limit to the hard one)"
  echo "ipv6:     $IPV6"
  echo "backends: 127.0.0.1:$V4_FIRST-$(( V4_FIRST + PER_FAMILY - 1 )), $SECOND_HOST:$V6_FIRST-$(( V6_FIRST + PER_FAMILY - 1 )); three on 127.0.0.1:${THREE_PORTS// /,}"
  echo "relay:    listens on $RELAY_ADDR; round-robin, access log off, health checks http /health every ${HC_INTERVAL_S}s, timeout $HC_TIMEOUT"
  echo "settings: rounds=$ROUNDS duration=${DURATION_S}s warmup=${WARMUP_S}s conns=$CONNS threads=$WRK_THREADS idle=${IDLE_S}s x $IDLE_REPEATS spread=$SPREAD"
  echo "output:   $OUT"
} | tee "$OUT/env.txt" >&2

start "$LOGS/backends.log" nginx -e "$RUN/backends.err" -p "$RUN" -c "$RUN/backends.conf" -g 'daemon off;'
BACKENDS_PID=$STARTED_PID
for url in "http://127.0.0.1:$V4_FIRST/" "http://$SECOND_HOST:$V6_FIRST/" "http://$SECOND_HOST:$(( V6_FIRST + PER_FAMILY - 1 ))/" \
           "http://127.0.0.1:$THREE_FIRST/"; do
  wait_ready "$url" "$BACKENDS_PID" 30 || die "backend $url did not answer within 30 s; nginx's output:
$(tail -n 20 "$LOGS/backends.log" "$RUN/backends.err" 2>/dev/null)"
done
OWNED=$(listeners_of "$BACKENDS_PID")
[ "$OWNED" = 1003 ] || die "the nginx this script started listens on $OWNED of the 1,003 backend ports"
note "backends ready: 1,003 ports held by nginx (pgid $BACKENDS_PID, $(group_pids "$BACKENDS_PID" | wc -l) processes)"

if [ "$SPREAD" -gt 0 ]; then spread_check; fi

printf 'round\tcase\trps\trequests\tp50_ms\tp99_ms\tsocket_errors\tnon2xx\tcpu_s\tcpu_us_per_req\trss_mb\tfds\tfd_limit\tthreads\tupstream_conns\tready_ms\thealthy_at_start\tbackend_downs\tbox_busy_pct\tloadavg1\tbackends_us_per_req\n' >"$LOAD_TSV"
for round in $(seq "$ROUNDS"); do
  # Odd rounds run the cases in order, even rounds in reverse.
  if (( round % 2 )); then order=$CASES; else order=$(echo "$CASES" | tr ' ' '\n' | tac | tr '\n' ' '); fi
  order=$(echo $order)
  note "load round $round of $ROUNDS: ${order// / then }"
  for name in $order; do
    kill -0 "$BACKENDS_PID" 2>/dev/null || die "the backends exited; see $LOGS/backends.log"
    load_run "$round" "$name"
  done
done

printf 'repeat\tcase\tseconds\tcpu_s\tcpu_pct_of_core\tbackends_cpu_pct\trss_mb\tfds\tbackend_downs\tloadavg1\n' >"$IDLE_TSV"
for rep in $(seq "$IDLE_REPEATS"); do
  if (( rep % 2 )); then order="1000 3"; else order="3 1000"; fi
  note "idle repeat $rep of $IDLE_REPEATS: health checks only"
  for which in $order; do
    kill -0 "$BACKENDS_PID" 2>/dev/null || die "the backends exited; see $LOGS/backends.log"
    idle_run "$rep" "$which"
  done
done

echo "load avg: $(loadavg) at the end" | tee -a "$OUT/env.txt" >&2
echo
summary | tee "$TABLE"
cat <<EOF

us/req: the balancer's CPU time (user + system, all its processes) per completed request, relay's health checks
included; backends: the same for the backends' nginx. fds: descriptors the balancer held right after the run;
upstream: established connections to that case's backend ports then. start ms: from starting relay to its first proxied
answer (relay checks every backend once before it listens). healthy: backends healthy at start, from relay's log.
nginx-3/nginx-1000 (--nginx-reference): nginx as the balancer over the same backends, without active health checks.
cpu % of core: relay's utime+stime over the idle span; backends %: nginx's, answering the probes; us/probe
assumes every backend was probed once per interval. Everything shares the machine's $NCPU cores with wrk, nginx
and any other work running at the time (see the load averages above).
Rows: $LOAD_TSV, $IDLE_TSV, $SPREAD_TSV
EOF

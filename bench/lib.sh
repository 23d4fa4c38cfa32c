# shellcheck shell=bash
# lib.sh - shell functions compare.sh, tls.sh and many-backends.sh share:
# messages and option checks, installing missing tools, the output directory,
# starting and stopping servers by process group, reading CPU time and memory
# from /proc, who listens on a port, the greeting backends and waiting for
# their greeting, running and reading wrk, and medians over rounds.
#
# It is sourced, not run. The sourcing script sets PROG (its own name, used in
# messages and for its log file) and runs under `set -u`. Nothing here starts a
# process or sets a trap until the script calls for it.

# help prints the comment block at the top of the script being run.
help() { sed -n '2,/^set -u/{/^set -u/d; s/^# \{0,1\}//; p}' "$0"; }

die() { echo "$PROG: $*" >&2; exit 1; }

# unknown_argument ARG: names ARG, prints the help to stderr and exits 2.
unknown_argument() { echo "$PROG: unknown argument: $1" >&2; help >&2; exit 2; }

need_value() { [ $# -ge 2 ] || die "$1 needs a value (see --help)"; }

# seconds turns a wrk duration (10, 10s, 2m, 1h) into whole seconds.
seconds() {
  [[ "$1" =~ ^([0-9]+)([smh]?)$ ]] || return 1
  local n=$((10#${BASH_REMATCH[1]}))
  case "${BASH_REMATCH[2]}" in
    h) echo $(( n * 3600 ));;
    m) echo $(( n * 60 ));;
    *) echo "$n";;
  esac
}

positive() { [[ "$1" =~ ^[1-9][0-9]*$ ]]; }

# The checkout relay is built from: the parent of this directory.
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# ------------------------------------------------------------------ tools

# missing_packages COMMAND:PACKAGE...: the packages whose command is missing,
# each named once, in the order given.
missing_packages() {
  local pkgs=() pair
  for pair in "$@"; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || pkgs+=("${pair#*:}")
  done
  printf '%s\n' "${pkgs[@]}" | awk 'NF && !seen[$0]++' | tr '\n' ' ' | sed 's/ $//'
}

# install_missing COMMAND:PACKAGE...: installs the missing packages with
# apt-get when running as root; otherwise prints the command and exits.
install_missing() {
  local missing install
  missing=$(missing_packages "$@")
  [ -n "$missing" ] || return 0
  install="apt-get install -y --no-install-recommends $missing"
  if [ "$(id -u)" != 0 ]; then
    echo "$PROG: missing packages: $missing" >&2
    echo "install them as root, then run again:" >&2
    echo "  apt-get update && $install" >&2
    exit 1
  fi
  echo "installing: $missing" >&2
  # The Debian nginx and haproxy packages start their own system services
  # (nginx on port 80); they do not use the ports measured here, and the
  # scripts leave them alone. $install is split into words on purpose.
  # shellcheck disable=SC2015,SC2086
  timeout 900 apt-get update >&2 && DEBIAN_FRONTEND=noninteractive timeout 900 $install >&2 \
    || die "apt-get failed"
  missing=$(missing_packages "$@")
  [ -z "$missing" ] || die "still missing after apt-get: $missing"
}

# need_tools COMMAND...: stops unless every command is on PATH.
need_tools() {
  local t
  for t in "$@"; do
    command -v "$t" >/dev/null 2>&1 || die "missing tool: $t$([ "$t" = go ] && echo " (install Go as go.mod asks: https://go.dev/dl/)")"
  done
}

# build_relay: builds relay from this checkout into OUT.
build_relay() {
  note "building relay from $REPO"
  (cd "$REPO" && timeout 600 go build -o "$OUT/relay" ./cmd/relay) || die "go build failed"
}

# ------------------------------------------------------------------ output directory

# make_out_dir PREFIX: uses OUT, or a new /tmp/PREFIX.XXXXXX when OUT is
# empty, and sets RUN (generated configurations and server scratch space),
# LOGS (each server's own output), WRK (each wrk run's full output), HZ and NCPU.
make_out_dir() {
  if [ -z "$OUT" ]; then
    OUT=$(mktemp -d "/tmp/$1.XXXXXX") || die "cannot make a temporary directory"
    # nginx workers drop root privileges and must still reach their scratch space.
    chmod 755 "$OUT"
  else
    mkdir -p "$OUT" || die "cannot make --out directory $OUT"
    OUT=$(cd "$OUT" && pwd)
  fi
  RUN=$OUT/run
  LOGS=$OUT/logs
  WRK=$OUT/wrk
  mkdir -p "$RUN" "$LOGS" "$WRK"
  # HZ and NCPU are for the scripts that source this file.
  # shellcheck disable=SC2034
  HZ=$(getconf CLK_TCK)
  # shellcheck disable=SC2034
  NCPU=$(nproc)
}

# note prints a timestamped line to stderr and appends it to the script's log.
note() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$OUT/${PROG%.sh}.log" >&2; }

# ------------------------------------------------------------------ processes

# STARTED holds the PID of every process the script started and has not yet
# stopped. Each was started with setsid, so it leads its own process group
# (PGID = PID) and every worker it forks belongs to that group: the group is
# the server.
STARTED=()
STARTED_PID=""
PAUSE_PID=""

# start LOGFILE COMMAND... starts COMMAND in a new session and records it.
start() {
  local log=$1; shift
  setsid "$@" </dev/null >"$log" 2>&1 &
  STARTED_PID=$!
  STARTED+=("$STARTED_PID")
}

# group_pids PGID prints the PIDs of the live processes in that group.
group_pids() {
  cat /proc/[0-9]*/stat 2>/dev/null | awk -v g="$1" '
    { pid = $1; sub(/^.*\) /, ""); if ($3 == g) print pid }'
}

# stop PID stops the process group PID leads: TERM, up to 5 s, then KILL.
stop() {
  local pid=$1 _
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null
    for _ in $(seq 50); do
      [ -z "$(group_pids "$pid")" ] && break
      sleep 0.1
    done
    [ -n "$(group_pids "$pid")" ] && kill -KILL -- "-$pid" 2>/dev/null
  fi
  wait "$pid" 2>/dev/null
  forget "$pid"
}

# forget PID drops PID from STARTED once it has been stopped or has exited.
forget() {
  local kept=() p
  for p in "${STARTED[@]}"; do [ "$p" != "$1" ] && kept+=("$p"); done
  STARTED=("${kept[@]}")
}

stop_all() {
  local p
  [ -n "$PAUSE_PID" ] && kill "$PAUSE_PID" 2>/dev/null
  for p in "${STARTED[@]}"; do stop "$p"; done
}

# stop_all_on_exit: every started group is stopped however the script ends.
# Called once OUT exists, since the interrupt handlers write to its log.
stop_all_on_exit() {
  trap stop_all EXIT
  trap 'note "interrupted"; exit 130' INT
  trap 'note "terminated"; exit 143' TERM
}

# pause SECONDS sleeps in the background and waits, so that an interrupt
# reaches the traps at once rather than when a long sleep ends.
pause() {
  sleep "$1" &
  PAUSE_PID=$!
  wait "$PAUSE_PID"
  PAUSE_PID=""
}

# ------------------------------------------------------------------ reading /proc

# cpu_ticks PGID: utime+stime of every process in the group, in clock ticks.
# Threads are counted within their process; workers that already exited
# are not, which is why a server stays up for every run it is measured in.
cpu_ticks() {
  cat /proc/[0-9]*/stat 2>/dev/null | awk -v g="$1" '
    { sub(/^.*\) /, ""); if ($3 == g) t += $12 + $13 } END { print t + 0 }'
}

# group_status PGID FIELD: a number from /proc/PID/status (VmHWM, Threads ...)
# summed over the group.
group_status() {
  local files=() p
  for p in $(group_pids "$1"); do files+=("/proc/$p/status"); done
  [ ${#files[@]} -gt 0 ] || { echo 0; return; }
  cat "${files[@]}" 2>/dev/null | awk -v f="$2:" '$1 == f { t += $2 } END { print t + 0 }'
}

# busy_jiffies: "total idle" jiffies of the whole machine.
busy_jiffies() { awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print t, $5 + $6 }' /proc/stat; }

# ------------------------------------------------------------------ ports

# listening ADDR prints the listening socket on that address, if any.
# Wildcard listeners count too: they keep a specific address from binding.
listening() {
  local port=${1##*:}
  ss -Hltnp "sport = :$port" 2>/dev/null | awk -v a="$1" -v p="$port" '
    $4 == a || $4 == "0.0.0.0:" p || $4 == "*:" p || $4 == "[::]:" p || $4 == "[::ffff:" a "]"'
}

# owned_by ADDR PGID: is the socket listening on ADDR held by that group?
owned_by() {
  local p
  for p in $(listening "$1" | grep -o 'pid=[0-9]*' | cut -d= -f2); do
    [ "$(awk '{ sub(/^.*\) /, ""); print $3 }' "/proc/$p/stat" 2>/dev/null)" = "$2" ] && return 0
  done
  return 1
}

# need_free ADDR: stops, naming the holder, unless ADDR is free.
need_free() {
  [ -z "$(listening "$1")" ] || die "$1 is taken by another process; stop it and run again:
$(listening "$1")"
}

# wait_free ADDR: need_free, once the kernel has had up to 5 s to release the
# listening socket of a server just stopped.
wait_free() {
  local _
  for _ in $(seq 50); do [ -z "$(listening "$1")" ] && break; sleep 0.1; done
  need_free "$1"
}

# ------------------------------------------------------------------ readiness

# greets URL [CURL OPTION...]: does URL answer with a backend's greeting?
# (-g: [::1] is an address, not a curl glob.)
greets() {
  [[ "$(curl -gs --max-time 1 "${@:2}" "$1" 2>/dev/null)" =~ ^Hello\ World\ from\ [0-9]+\ server$ ]]
}

# wait_ready URL PID SECONDS [CURL OPTION...]: wait until URL greets, while
# PID is alive.
wait_ready() {
  local url=$1 pid=$2 _
  for _ in $(seq $(( $3 * 20 ))); do
    kill -0 "$pid" 2>/dev/null || return 1
    greets "$url" "${@:4}" && return 0
    sleep 0.05
  done
  return 1
}

# nginx_temp_paths DIR: nginx's scratch directories under DIR, as lines of an
# http block.
nginx_temp_paths() {
  local k
  for k in client_body:body proxy:proxy fastcgi:fastcgi uwsgi:uwsgi scgi:scgi; do
    echo "    ${k%%:*}_temp_path $1/${k#*:};"
  done
}

# ------------------------------------------------------------------ backends

# write_greeting_backends PORT...: RUN/backends.conf, one nginx serving a
# backend on 127.0.0.1:PORT for each PORT. Each answers / with "Hello World
# from PORT server" and /health with 200.
write_greeting_backends() {
  local port server_blocks=""
  for port in "$@"; do
    server_blocks+="    server {
        listen 127.0.0.1:$port backlog=4096;
        location = /health { return 200 \"ok\\n\"; }
        location / { return 200 \"Hello World from $port server\\n\"; }
    }
"
  done
  mkdir -p "$RUN/backends-tmp"
  cat >"$RUN/backends.conf" <<EOF
# The backends in one nginx: the same fixed answer from each port.
worker_processes auto;
pid $RUN/backends.pid;
error_log $RUN/backends.err warn;
worker_rlimit_nofile 65536;
events { worker_connections 8192; multi_accept on; }
http {
    access_log off;
    default_type text/plain;
    # Balancers keep connections to the backends open; nginx's default of
    # 1000 requests per connection would close and reopen them all the time.
    keepalive_requests 1000000;
    keepalive_timeout 120s;
$(nginx_temp_paths "$RUN/backends-tmp")
$server_blocks}
EOF
}

# start_greeting_backends PORT...: starts the backends written by
# write_greeting_backends, waits until each port greets from the nginx just
# started, and sets BACKENDS_PID.
start_greeting_backends() {
  local port
  start "$LOGS/backends.log" nginx -p "$RUN" -c "$RUN/backends.conf" -g 'daemon off;'
  BACKENDS_PID=$STARTED_PID
  for port in "$@"; do
    wait_ready "http://127.0.0.1:$port/" "$BACKENDS_PID" 20 \
      || die "backend 127.0.0.1:$port did not answer within 20 s; its output:
$(tail -n 20 "$LOGS/backends.log" "$RUN/backends.err" 2>/dev/null)"
    owned_by "127.0.0.1:$port" "$BACKENDS_PID" || die "127.0.0.1:$port answers, but not from the backends this script started"
  done
  note "backends ready on $* (pgid $BACKENDS_PID)"
}

# haproxy_maxconn: the highest maxconn (up to 50,000) HAProxy starts with
# here. It sizes its file limit from maxconn (about two descriptors per
# connection) and refuses to start when the hard limit is lower.
haproxy_maxconn() {
  local hard maxconn
  hard=$(ulimit -Hn)
  [ "$hard" = unlimited ] && hard=1048576
  maxconn=$(( (hard - 256) / 2 ))
  [ "$maxconn" -gt 50000 ] && maxconn=50000
  echo "$maxconn"
}

# ------------------------------------------------------------------ wrk

# run_bounded SECONDS OUTFILE COMMAND...: runs a load generator meant to take
# SECONDS, killed if it overstays by 30 s. It runs in the background and is
# waited for, so that an interrupt stops it at once through the EXIT trap.
run_bounded() {
  local secs=$1 out=$2 pid rc
  shift 2
  start "$out" timeout -k 5 $(( secs + 30 )) "$@"
  pid=$STARTED_PID
  wait "$pid"; rc=$?
  forget "$pid"
  return $rc
}

# run_wrk SECONDS CONNS URL OUTFILE [WRK OPTION...]: one wrk run with
# WRK_THREADS threads, bounded by run_bounded.
run_wrk() {
  run_bounded "$1" "$4" wrk -t"$WRK_THREADS" -c"$2" -d"$1s" --timeout 5s --latency "${@:5}" "$3"
}

# ms turns a wrk latency (850.00us, 1.23ms, 1.02s, 1.50m) into milliseconds.
ms() {
  awk -v v="$1" 'BEGIN {
    if (v ~ /us$/)      printf "%.3f", substr(v, 1, length(v) - 2) / 1000
    else if (v ~ /ms$/) printf "%.3f", substr(v, 1, length(v) - 2)
    else if (v ~ /s$/)  printf "%.3f", substr(v, 1, length(v) - 1) * 1000
    else if (v ~ /m$/)  printf "%.3f", substr(v, 1, length(v) - 1) * 60000
    else                printf "NA" }'
}

# wrk_fields FILE prints "rps requests p50 p99 sockerr non2xx" from wrk's output.
wrk_fields() {
  local f=$1 rps reqs p50 p99 se n2
  rps=$(awk '/^Requests\/sec:/ { print $2 }' "$f")
  reqs=$(awk '/ requests in / { print $1 }' "$f")
  p50=$(ms "$(awk '$1 == "50%" { print $2 }' "$f")")
  p99=$(ms "$(awk '$1 == "99%" { print $2 }' "$f")")
  se=$(awk '/Socket errors:/ { gsub(/,/, ""); print $4 + $6 + $8 + $10 }' "$f")
  n2=$(awk '/Non-2xx or 3xx responses:/ { print $NF }' "$f")
  echo "${rps:-0} ${reqs:-0} ${p50:-NA} ${p99:-NA} ${se:-0} ${n2:-0}"
}

# ------------------------------------------------------------------ medians over rounds

# AWK_ROUNDS: awk functions for summaries over rounds, put in front of an awk
# program ('awk "$AWK_ROUNDS"'...'):
#   keep(K, X)   appends X to list[K] unless X is NA or empty
#   median(L)    the median of the space-separated numbers in L, or NA
#   ratio(A, B)  A / B to three places; NA when either is NA or B is 0
#   span(L)      "MIN-MAX" of the space-separated numbers in L to two places, or NA
#   fmt(X, F)    X printed with format F; NA stays NA
# shellcheck disable=SC2034 # used by the scripts that source this file
AWK_ROUNDS='
    function median(list,   v, n, i, j, t) {
      n = split(list, v, " ")
      if (n == 0) return "NA"
      for (i = 2; i <= n; i++) { t = v[i] + 0; for (j = i - 1; j >= 1 && v[j] + 0 > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
      return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
    }
    function keep(k, x) { if (x != "NA" && x != "") list[k] = list[k] " " x }
    function ratio(a, b) { return (a != "NA" && b != "NA" && b + 0 > 0) ? sprintf("%.3f", a / b) : "NA" }
    function fmt(x, f) { return x == "NA" ? x : sprintf(f, x) }
    function span(list,   v, n, i, lo, hi) {
      n = split(list, v, " ")
      if (n == 0) return "NA"
      lo = hi = v[1] + 0
      for (i = 2; i <= n; i++) { if (v[i] + 0 < lo) lo = v[i] + 0; if (v[i] + 0 > hi) hi = v[i] + 0 }
      return sprintf("%.2f-%.2f", lo, hi)
    }
'

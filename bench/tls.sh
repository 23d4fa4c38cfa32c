#!/usr/bin/env bash
# tls.sh - relay beside nginx and HAProxy as TLS-terminating balancers, on one
# machine, over loopback.
#
# Three nginx backends answer in cleartext on 127.0.0.1:18441-18443. One
# balancer at a time listens on 127.0.0.1:8443 with the same self-signed ECDSA
# P-256 certificate, offers TLS 1.2 and 1.3 and ALPN h2 and http/1.1, and
# spreads requests round-robin over the backends: nginx (2 workers), HAProxy
# (nbthread 2) and relay (--processes). Each test gets a freshly started
# balancer:
#   h1       HTTP/1.1 keep-alive:  wrk -t2 -c100 -dD https://127.0.0.1:8443/
#   h2       HTTP/2:               h2load -t2 -c20 -m10 -D SECONDS https://127.0.0.1:8443/
#   hs       a new TLS connection for every request:
#            wrk -t2 -c50 -dD -H 'Connection: close' https://127.0.0.1:8443/
#   hs-full  hs with session resumption turned off in nginx
#            (ssl_session_tickets off, ssl_session_cache off) and HAProxy
#            (no-tls-tickets, tune.ssl.cachesize 0). relay has no setting for
#            it: its hs-full run is another hs run.
# relay-acme is relay again with its certificate ordered by ACME in place of
# the file: the script builds Pebble (Let's Encrypt's test CA, from the module
# relay's tests use) and runs it on 127.0.0.1:14443 with validation skipped
# (PEBBLE_VA_ALWAYS_VALID), and relay orders an ECDSA P-256 certificate for
# bench.relay.test from it, kept in a file storage for the later runs. Its
# clients ask for 127.0.0.1, a name relay has no certificate for, so they get
# the default certificate, the first ordered name's: the path of every
# handshake is the managed one. Pebble's chain is a leaf and an intermediate,
# one certificate more on the wire than the self-signed file.
# and records requests per second, errors, the balancer's CPU time per
# request (user + system over its whole process group, from /proc) and its
# peak memory. The whole set repeats --rounds times, each round starting one
# balancer further down the list; the table shows medians over rounds and
# the ratios of those medians against nginx and HAProxy.
#
# Session resumption: wrk resumes TLS sessions. Each wrk connection keeps
# one SSL object for its whole life; on reconnecting it calls SSL_shutdown
# and SSL_clear (wrk's src/ssl.c), which keeps the negotiated session, so the
# next SSL_connect offers it again. In a 3 s trial against nginx over TLS
# 1.3, $ssl_session_reused logged 7,302 handshakes: 7,252 resumed, and the
# other 50 were the first of each of wrk's 50 connections. nginx's workers
# and HAProxy's threads share their session-ticket keys, and so do relay's
# processes (the supervisor makes the keys), so all three resume every
# reconnection, whichever worker, thread or process takes it. With TLS 1.3,
# which all three negotiate here, a resumed handshake still does an X25519
# exchange; it saves the certificate and its ECDSA
# signature. To show what happened, before each hs and hs-full run the
# script makes --probes sequential connections with `openssl s_client`, each
# offering the session of the one before, and the "resumed" column reports
# the share that resumed.
#
# Usage: bench/tls.sh [options]
#   --rounds N          rounds of the whole set (default 3)
#   --duration D        length of each measured run, e.g. 10s, 1m (default 10s)
#   --warmup D          unmeasured run before each measured one; 0 skips (default 2s)
#   --processes N       relay's processes setting; 0 = one per core (default 2)
#   --peers "P ..."     subset of "nginx haproxy relay relay-acme" (default:
#                       nginx haproxy relay)
#   --tests "T ..."     subset of "h1 h2 hs hs-full" (default: all four)
#   --h1-conns C        wrk connections for h1 (default 100)
#   --hs-conns C        wrk connections for hs and hs-full (default 50)
#   --h2-clients C      h2load connections for h2 (-c, default 20)
#   --h2-streams M      h2load concurrent streams per connection (-m, default 10)
#   --probes N          reconnections of the resumption probe (default 10)
#   --out DIR           where results go (default: a new directory under /tmp)
#   -h, --help          print this help
#
# wrk, h2load (nghttp2-client), nginx, HAProxy, openssl and curl are installed
# with apt-get when missing, which needs root; otherwise the apt-get command
# is printed. Go must be installed already (relay is built from this
# repository). Every process the script starts runs in its own session and is
# stopped by its process group on exit.
set -u

PROG=tls.sh
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROUNDS=3
DURATION=10s
WARMUP=2s
PROCESSES=2
PEERS="nginx haproxy relay"
TESTS="h1 h2 hs hs-full"
H1_CONNS=100
HS_CONNS=50
H2_CLIENTS=20
H2_STREAMS=10
PROBES=10
OUT=""
WRK_THREADS=2
H2_THREADS=2
NGINX_WORKERS=2
HAPROXY_THREADS=2

# Away from compare.sh's 8080 and 8001-8003 and from h2spec.sh's 18001, so
# that they can run on one machine.
BALANCER_ADDR=127.0.0.1:8443
BACKEND_PORTS="18441 18442 18443"

while [ $# -gt 0 ]; do
  case "$1" in
    --rounds)     need_value "$@"; ROUNDS=$2; shift 2;;
    --duration)   need_value "$@"; DURATION=$2; shift 2;;
    --warmup)     need_value "$@"; WARMUP=$2; shift 2;;
    --processes)  need_value "$@"; PROCESSES=$2; shift 2;;
    --peers)      need_value "$@"; PEERS=$2; shift 2;;
    --tests)      need_value "$@"; TESTS=$2; shift 2;;
    --h1-conns)   need_value "$@"; H1_CONNS=$2; shift 2;;
    --hs-conns)   need_value "$@"; HS_CONNS=$2; shift 2;;
    --h2-clients) need_value "$@"; H2_CLIENTS=$2; shift 2;;
    --h2-streams) need_value "$@"; H2_STREAMS=$2; shift 2;;
    --probes)     need_value "$@"; PROBES=$2; shift 2;;
    --out)        need_value "$@"; OUT=$2; shift 2;;
    -h|--help)    help; exit 0;;
    *)            unknown_argument "$1";;
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
for v in "--h1-conns:$H1_CONNS:$WRK_THREADS" "--hs-conns:$HS_CONNS:$WRK_THREADS" "--h2-clients:$H2_CLIENTS:$H2_THREADS"; do
  IFS=: read -r opt n least <<<"$v"
  if ! positive "$n" || [ "$n" -lt "$least" ]; then die "$opt must be an integer of at least $least, not '$n'"; fi
done
positive "$H2_STREAMS" || die "--h2-streams must be a positive integer, not '$H2_STREAMS'"
positive "$PROBES" || die "--probes must be a positive integer, not '$PROBES'"
for p in $PEERS; do
  case "$p" in nginx|haproxy|relay|relay-acme) ;; *) die "--peers: unknown peer '$p' (choose from: nginx haproxy relay relay-acme)";; esac
done
for t in $TESTS; do
  case "$t" in h1|h2|hs|hs-full) ;; *) die "--tests: unknown test '$t' (choose from: h1 h2 hs hs-full)";; esac
done

# The balancers in the order of round 1, and the tests in the order run.
BALANCERS=()
for p in nginx haproxy relay relay-acme; do [[ " $PEERS " == *" $p "* ]] && BALANCERS+=("$p"); done
[ ${#BALANCERS[@]} -gt 0 ] || die "nothing to measure: --peers is empty"
TEST_LIST=()
for t in h1 h2 hs hs-full; do [[ " $TESTS " == *" $t "* ]] && TEST_LIST+=("$t"); done
[ ${#TEST_LIST[@]} -gt 0 ] || die "nothing to measure: --tests is empty"

# ------------------------------------------------------------------ tools

install_missing wrk:wrk h2load:nghttp2-client nginx:nginx haproxy:haproxy openssl:openssl curl:curl ss:iproute2
need_tools go setsid timeout awk sort

# ------------------------------------------------------------------ output directory

make_out_dir relay-tls
RAW=$OUT/raw.tsv
MEDIANS=$OUT/medians.tsv
TABLE=$OUT/table.txt
CERT=$OUT/cert.pem
KEY=$OUT/key.pem
COMBINED=$OUT/combined.pem
URL="https://$BALANCER_ADDR/"
stop_all_on_exit

# ------------------------------------------------------------------ certificate

# make_certificate: one self-signed ECDSA P-256 certificate for 127.0.0.1 and
# localhost, its key, and both in one file for HAProxy.
make_certificate() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 7 \
    -subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
    -keyout "$KEY" -out "$CERT" 2>"$LOGS/openssl.log" || die "openssl could not make a certificate; see $LOGS/openssl.log"
  (umask 077 && cat "$CERT" "$KEY" >"$COMBINED") || die "cannot write $COMBINED"
}

# ------------------------------------------------------------------ configurations

# nginx_listen: the listen line and HTTP/2 switch for this nginx; 1.25.1
# replaced "listen ... http2" with "http2 on".
nginx_listen() {
  local v
  v=$(nginx -v 2>&1 | sed -n 's|^nginx version: nginx/\([0-9.]*\).*|\1|p')
  if [ -n "$v" ] && [ "$(printf '%s\n' 1.25.1 "$v" | sort -V | head -n 1)" = 1.25.1 ]; then
    printf '        listen %s ssl backlog=4096;\n        http2 on;\n' "$BALANCER_ADDR"
  else
    printf '        listen %s ssl http2 backlog=4096;\n' "$BALANCER_ADDR"
  fi
}

# write_nginx_conf FILE RESUMPTION(on|off)
write_nginx_conf() {
  local port upstreams="" resumption=""
  for port in $BACKEND_PORTS; do upstreams+="        server 127.0.0.1:$port;
"; done
  [ "$2" = off ] && resumption="
        # No session resumption: every new connection is a full handshake.
        ssl_session_tickets off;
        ssl_session_cache off;"
  cat >"$1" <<EOF
# nginx as the TLS balancer: round-robin (its default) with an upstream keep-alive pool.
worker_processes $NGINX_WORKERS;
pid $RUN/nginx.pid;
error_log $RUN/nginx.err warn;
worker_rlimit_nofile 65536;
events { worker_connections 8192; multi_accept on; }
http {
    access_log off;
    # Also the limit of requests on one HTTP/2 connection: at nginx's default
    # of 1000 each h2load connection would be closed, and h2load stalls.
    keepalive_requests 1000000;
    keepalive_timeout 120s;
$(nginx_temp_paths "$RUN/nginx-tmp")
    upstream backends {
$upstreams        keepalive 64;
        keepalive_requests 1000000;
        keepalive_timeout 120s;
    }
    server {
$(nginx_listen)
        ssl_certificate $CERT;
        ssl_certificate_key $KEY;
        # nginx before 1.23.4 leaves TLS 1.3 off unless it is listed; relay
        # and HAProxy offer it.
        ssl_protocols TLSv1.2 TLSv1.3;$resumption
        location / {
            proxy_pass http://backends;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
EOF
}

# write_haproxy_conf FILE RESUMPTION(on|off)
write_haproxy_conf() {
  local i=0 port servers="" cache="" tickets=""
  for port in $BACKEND_PORTS; do i=$((i + 1)); servers+="    server s$i 127.0.0.1:$port
"; done
  if [ "$2" = off ]; then
    cache="
    # No session resumption: no session cache here, no tickets on the bind line.
    tune.ssl.cachesize 0"
    tickets=" no-tls-tickets"
  fi
  cat >"$1" <<EOF
# HAProxy as the TLS balancer: $HAPROXY_THREADS threads, round-robin, idle server connections shared.
global
    nbthread $HAPROXY_THREADS
    maxconn $(haproxy_maxconn)$cache
defaults
    mode http
    option http-keep-alive
    http-reuse always
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    timeout http-keep-alive 120s
frontend clients
    bind $BALANCER_ADDR ssl crt $COMBINED alpn h2,http/1.1$tickets
    default_backend backends
backend backends
    balance roundrobin
$servers
EOF
}

# write_relay_conf FILE [acme]: relay with the certificate file, or with its
# certificate ordered from Pebble.
write_relay_conf() {
  local port
  {
    echo "# relay as the TLS balancer: round-robin over the three backends, TLS only."
    echo "# relay has no setting that turns session resumption off."
    echo "listen: \"\""
    echo "tls_listen: \"$BALANCER_ADDR\""
    if [ "${2:-}" = acme ]; then
      echo "acme:"
      echo "  ca: \"https://$PEBBLE_ADDR/dir\""
      echo "  ca_root: \"$PEBBLE_CERT\""
      echo "  domains: [bench.relay.test]"
      echo "  key_type: ecdsa-p256"
      echo "  storage: {type: file, dir: \"$RUN/acme\"}"
    else
      echo "tls_certificates:"
      echo "  - cert_file: \"$CERT\""
      echo "    key_file: \"$KEY\""
    fi
    echo "algorithm: round-robin"
    echo "backends:"
    for port in $BACKEND_PORTS; do echo "  - http://127.0.0.1:$port"; done
    echo "health_check_path: /health"
    echo "processes: $PROCESSES"
    echo "access_log: false"
    echo "admin_listen: \"\""
  } >"$1"
}

# ------------------------------------------------------------------ the CA of relay-acme

PEBBLE_ADDR=127.0.0.1:14443
PEBBLE_MGMT_ADDR=127.0.0.1:15443

# start_pebble: builds Pebble from the module relay's tests use, gives it a
# certificate of its own for 127.0.0.1 (relay's ca_root), and starts it.
start_pebble() {
  PEBBLE_CERT=$OUT/pebble-cert.pem
  (cd "$REPO" && timeout 600 go build -o "$OUT/pebble" github.com/letsencrypt/pebble/v2/cmd/pebble) || die "building Pebble failed"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 7 -subj /CN=pebble \
    -addext "subjectAltName=IP:127.0.0.1" -keyout "$OUT/pebble-key.pem" -out "$PEBBLE_CERT" 2>>"$LOGS/openssl.log" ||
    die "openssl could not make Pebble's certificate; see $LOGS/openssl.log"
  cat >"$RUN/pebble.json" <<EOF
{"pebble": {"listenAddress": "$PEBBLE_ADDR", "managementListenAddress": "$PEBBLE_MGMT_ADDR",
  "certificate": "$PEBBLE_CERT", "privateKey": "$OUT/pebble-key.pem",
  "httpPort": 80, "tlsPort": 443, "ocspResponderURL": "", "externalAccountBindingRequired": false}}
EOF
  # Validation always passes (the CA would otherwise connect to port 443),
  # and no nonce is refused on purpose.
  start "$LOGS/pebble.log" env PEBBLE_VA_ALWAYS_VALID=1 PEBBLE_WFE_NONCEREJECT=0 "$OUT/pebble" -config "$RUN/pebble.json"
  PEBBLE_PID=$STARTED_PID
  local _
  for _ in $(seq 100); do
    curl -s --max-time 1 --cacert "$PEBBLE_CERT" -o /dev/null "https://$PEBBLE_ADDR/dir" && return 0
    kill -0 "$PEBBLE_PID" 2>/dev/null || break
    sleep 0.1
  done
  die "Pebble did not answer on https://$PEBBLE_ADDR/dir; see $LOGS/pebble.log"
}

# served_issuer prints the issuer of the certificate the balancer serves.
served_issuer() {
  timeout 5 openssl s_client -connect "$BALANCER_ADDR" </dev/null 2>/dev/null |
    openssl x509 -noout -issuer 2>/dev/null | sed 's/^issuer=//'
}

# start_balancer NAME TEST LOGFILE: starts it and sets STARTED_PID.
start_balancer() {
  local resumption=on
  [ "$2" = hs-full ] && resumption=off
  case "$1" in
    nginx)   start "$3" nginx -p "$RUN" -c "$RUN/nginx-resumption-$resumption.conf" -g 'daemon off;';;
    haproxy) start "$3" haproxy -db -f "$RUN/haproxy-resumption-$resumption.cfg";;
    relay)   start "$3" "$OUT/relay" -config "$RUN/relay.yml";;
    relay-acme) start "$3" "$OUT/relay" -config "$RUN/relay-acme.yml";;
  esac
}

# ------------------------------------------------------------------ load

# run_load TEST SECONDS OUTFILE: one run of TEST's load generator.
run_load() {
  case "$1" in
    h1)         run_wrk "$2" "$H1_CONNS" "$URL" "$3";;
    hs|hs-full) run_wrk "$2" "$HS_CONNS" "$URL" "$3" -H 'Connection: close';;
    h2)         run_bounded "$2" "$3" h2load -t"$H2_THREADS" -c"$H2_CLIENTS" -m"$H2_STREAMS" -D "$2" "$URL";;
  esac
}

# h2load_fields FILE prints "rps requests p50 p99 errors non2xx" as
# wrk_fields does, from h2load's summary:
#   finished in 3.01s, 52746.33 req/s, 5.53MB/s
#   requests: 158239 total, 158439 started, 158239 done, 158239 succeeded, 0 failed, 0 errored, 0 timeout
# requests counts those done; errors are h2load's "errored" (failures below
# HTTP, timeouts included), non2xx the rest of "failed". h2load reports no
# percentiles.
h2load_fields() {
  awk '
    /^finished in/ { rps = $4 }
    /^requests:/   { reqs = $6; failed = $10; err = $12 }
    END { printf "%s %s NA NA %s %s\n", rps + 0, reqs + 0, err + 0, failed - err }' "$1"
}

# probe_resumption: PROBES + 1 sequential connections with openssl s_client,
# each offering the session the one before got, each with one request.
# Prints "resumed PROBES protocol cipher key-exchange" (the last three from
# the first connection).
probe_resumption() {
  local dir=$RUN/probe i out resumed=0 first=""
  rm -rf "$dir"; mkdir -p "$dir"
  for i in $(seq 0 "$PROBES"); do
    local args=(-connect "$BALANCER_ADDR" -CAfile "$CERT" -ign_eof -sess_out "$dir/next.pem")
    [ -s "$dir/session.pem" ] && args+=(-sess_in "$dir/session.pem")
    out=$(printf 'GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' |
          timeout 5 openssl s_client "${args[@]}" 2>/dev/null)
    if [ "$i" = 0 ]; then
      first=$(awk '/^(New|Reused), / { gsub(/,/, ""); p = $2; c = $5 }
                   /^Server Temp Key:/ { sub(/^Server Temp Key: /, ""); sub(/,.*/, ""); k = $0 }
                   END { printf "%s %s %s", p ? p : "?", c ? c : "?", k ? k : "?" }' <<<"$out")
    elif grep -q '^Reused, ' <<<"$out"; then
      resumed=$((resumed + 1))
    fi
    mv -f "$dir/next.pem" "$dir/session.pem" 2>/dev/null
  done
  echo "$resumed $PROBES $first"
}

# ------------------------------------------------------------------ one run

# measure ROUND NAME TEST: start the balancer, check it, load it, stop it.
measure() {
  local round=$1 name=$2 test=$3 pid
  # The previous balancer has been stopped; the kernel may take a moment to
  # release its listening socket.
  wait_free "$BALANCER_ADDR"
  local log="$LOGS/$name.$test.round$round.log"
  start_balancer "$name" "$test" "$log"; pid=$STARTED_PID
  local verify=(--cacert "$CERT")
  # relay-acme's certificate is Pebble's: the first start waits for its order.
  [ "$name" = relay-acme ] && verify=(--insecure)
  wait_ready "$URL" "$pid" 20 "${verify[@]}" || die "$name did not answer on $URL within 20 s; its output ($log):
$(tail -n 20 "$log")"
  owned_by "$BALANCER_ADDR" "$pid" || die "$BALANCER_ADDR answers, but not from the $name this script started"

  local resumed=NA probes=NA detail=""
  case "$test" in
    h2)
      local v
      v=$(curl -s --http2 --max-time 2 "${verify[@]}" -o /dev/null -w '%{http_version}' "$URL")
      [ "$v" = 2 ] || die "$name answered HTTP/$v, not HTTP/2, to curl --http2 on $URL"
      detail="; curl --http2 got HTTP/2";;
    hs|hs-full)
      local proto cipher kex
      read -r resumed probes proto cipher kex < <(probe_resumption)
      detail="; $proto $cipher $kex; $resumed of $probes reconnections resumed";;
  esac
  if [ "$name" = relay-acme ]; then
    local issuer; issuer=$(served_issuer)
    [[ "$issuer" == *Pebble* ]] || die "relay-acme serves a certificate issued by '$issuer', not by Pebble"
    detail+="; certificate from $issuer"
  fi
  local procs; procs=$(group_pids "$pid" | wc -l)
  note "round $round: $name ready for $test (pgid $pid, $procs process$([ "$procs" = 1 ] || echo es))$detail"

  [ "$WARMUP_S" -gt 0 ] && run_load "$test" "$WARMUP_S" /dev/null
  local out="$WRK/round$round.$name.$test.txt" cpu0 cpu1 box0 box1 rss rc
  cpu0=$(cpu_ticks "$pid")
  box0=$(busy_jiffies)
  run_load "$test" "$DURATION_S" "$out"; rc=$?
  box1=$(busy_jiffies)
  cpu1=$(cpu_ticks "$pid")
  rss=$(awk -v k="$(group_status "$pid" VmHWM)" 'BEGIN { printf "%.1f", k / 1024 }')
  kill -0 "$pid" 2>/dev/null || note "  $name exited during the $test run (see $log)"
  [ "$rc" = 0 ] || note "  the $test load generator exited with status $rc (see $out)"
  if [ "$test" = h2 ] && ! grep -q '^Application protocol: h2$' "$out"; then
    note "  h2load did not report HTTP/2 (Application protocol: h2); see $out"
  fi

  local rps reqs p50 p99 se n2
  if [ "$test" = h2 ]; then
    read -r rps reqs p50 p99 se n2 < <(h2load_fields "$out")
  else
    read -r rps reqs p50 p99 se n2 < <(wrk_fields "$out")
  fi
  awk -v r="$round" -v n="$name" -v t="$test" -v rps="$rps" -v reqs="$reqs" -v p50="$p50" -v p99="$p99" \
      -v se="$se" -v n2="$n2" -v t0="$cpu0" -v t1="$cpu1" -v hz="$HZ" -v rss="$rss" \
      -v res="$resumed" -v pr="$probes" -v b0="$box0" -v b1="$box1" 'BEGIN {
    split(b0, x, " "); split(b1, y, " "); tot = y[1] - x[1]
    busy = tot > 0 ? sprintf("%.0f", 100 * (tot - (y[2] - x[2])) / tot) : "NA"
    us = reqs > 0 ? sprintf("%.1f", (t1 - t0) / hz * 1e6 / reqs) : "NA"
    printf "%s\t%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%.2f\t%s\t%s\t%s\t%s\t%s\n",
      r, n, t, rps, reqs, p50, p99, se, n2, (t1 - t0) / hz, us, rss, res, pr, busy }' >>"$RAW"
  note "  $(tail -n 1 "$RAW" | awk -F'\t' '{ printf "%-8s %-7s %9s req/s  errors %s+%s  cpu %s us/req  rss %s MB  resumed %s/%s  box %s%% busy", $2, $3, $4, $8, $9, $11, $12, $13, $14, $15 }')"

  stop "$pid"
  return 0
}

# ------------------------------------------------------------------ summary

# summarize reads raw.tsv and writes medians.tsv: for each balancer and test,
# the median over rounds of every figure and resumptions summed over rounds;
# the ratios to nginx and HAProxy are those of the medians (so they agree
# with the figures beside them), and the *_rounds columns give the range of
# the req/s ratio taken within each round (same round, same test).
summarize() {
  awk -F'\t' -v OFS='\t' "$AWK_ROUNDS"'
    NR == 1 { next }
    {
      k = $2 SUBSEP $3
      if (!(k in seen)) { seen[k] = 1; order[++n] = k }
      rps[$1, $2, $3] = $4; cpu[$1, $2, $3] = $11; rounds[$1] = 1
      keep("rps" SUBSEP k, $4); keep("p50" SUBSEP k, $6); keep("p99" SUBSEP k, $7)
      keep("cpu" SUBSEP k, $11); keep("rss" SUBSEP k, $12)
      errors[k] += $8 + $9; runs[k]++
      if ($14 != "NA") { resumed[k] += $13; probes[k] += $14 }
    }
    END {
      print "peer", "test", "rounds", "rps", "p50_ms", "p99_ms", "errors", "cpu_us_per_req", "rss_mb", "resumed_pct",
            "rps_vs_nginx", "rps_vs_haproxy", "cpu_vs_nginx", "cpu_vs_haproxy", "rps_vs_nginx_rounds", "rps_vs_haproxy_rounds"
      for (i = 1; i <= n; i++) {
        k = order[i]; mrps[k] = median(list["rps" SUBSEP k]); mcpu[k] = median(list["cpu" SUBSEP k])
      }
      for (i = 1; i <= n; i++) {
        k = order[i]; split(k, kt, SUBSEP); name = kt[1]; t = kt[2]
        ng = "nginx" SUBSEP t; hp = "haproxy" SUBSEP t
        for (r in rounds) {
          if (!((r, name, t) in rps)) continue
          if ((r, "nginx", t) in rps) keep("rn" SUBSEP k, ratio(rps[r, name, t], rps[r, "nginx", t]))
          if ((r, "haproxy", t) in rps) keep("rh" SUBSEP k, ratio(rps[r, name, t], rps[r, "haproxy", t]))
        }
        print name, t, runs[k], fmt(mrps[k], "%.0f"),
          fmt(median(list["p50" SUBSEP k]), "%.3f"), fmt(median(list["p99" SUBSEP k]), "%.3f"), errors[k],
          fmt(mcpu[k], "%.1f"), fmt(median(list["rss" SUBSEP k]), "%.1f"),
          (probes[k] > 0 ? sprintf("%.0f", 100 * resumed[k] / probes[k]) : "NA"),
          fmt(ratio(mrps[k], mrps[ng]), "%.2f"), fmt(ratio(mrps[k], mrps[hp]), "%.2f"),
          fmt(ratio(mcpu[k], mcpu[ng]), "%.2f"), fmt(ratio(mcpu[k], mcpu[hp]), "%.2f"),
          span(list["rn" SUBSEP k]), span(list["rh" SUBSEP k])
      }
    }' "$RAW" >"$MEDIANS"
}

# print_table renders medians.tsv for people: tests in the order run, and
# within a test nginx, HAProxy, relay.
print_table() {
  {
    printf '%-8s %-10s %9s %7s %6s %6s %6s %7s %7s %9s %6s %7s\n' \
      test balancer "req/s" "p99 ms" errors "us/req" "rss MB" resumed "x nginx" "x haproxy" "cpu/ng" "cpu/hap"
    awk -F'\t' -v tests="${TEST_LIST[*]}" '
      BEGIN { n = split(tests, tl, " "); for (i = 1; i <= n; i++) to[tl[i]] = i; po["nginx"] = 1; po["haproxy"] = 2; po["relay"] = 3; po["relay-acme"] = 4 }
      NR > 1 { printf "%d %d\t%s\n", to[$2], po[$1], $0 }' "$MEDIANS" | sort -k1,1n -k2,2n | cut -f2- |
      awk -F'\t' '{ printf "%-8s %-10s %9s %7s %6s %6s %6s %7s %7s %9s %6s %7s\n",
                    $2, $1, $4, $6, $7, $8, $9, ($10 == "NA" ? "-" : $10 "%"), $11, $12, $13, $14 }'
  } | tee "$TABLE"
}

# ------------------------------------------------------------------ main

for port in $BACKEND_PORTS; do need_free "127.0.0.1:$port"; done
need_free "$BALANCER_ADDR"

make_certificate
if [[ " ${BALANCERS[*]} " == *" relay"* ]]; then
  build_relay
  write_relay_conf "$RUN/relay.yml"
  "$OUT/relay" -check -config "$RUN/relay.yml" >&2 || die "relay rejects $RUN/relay.yml"
fi
if [[ " ${BALANCERS[*]} " == *" relay-acme "* ]]; then
  need_free "$PEBBLE_ADDR"; need_free "$PEBBLE_MGMT_ADDR"
  start_pebble
  write_relay_conf "$RUN/relay-acme.yml" acme
  "$OUT/relay" -check -config "$RUN/relay-acme.yml" >&2 || die "relay rejects $RUN/relay-acme.yml"
fi
# shellcheck disable=SC2086 # BACKEND_PORTS is a list
write_greeting_backends $BACKEND_PORTS
mkdir -p "$RUN/nginx-tmp"
for r in on off; do
  write_nginx_conf "$RUN/nginx-resumption-$r.conf" "$r"
  write_haproxy_conf "$RUN/haproxy-resumption-$r.cfg" "$r"
done
for p in "${BALANCERS[@]}"; do
  case "$p" in
    nginx) for r in on off; do
             nginx -t -q -p "$RUN" -c "$RUN/nginx-resumption-$r.conf" >"$LOGS/nginx-check.log" 2>&1 \
               || die "nginx rejects $RUN/nginx-resumption-$r.conf: $(cat "$LOGS/nginx-check.log")"
           done;;
    haproxy) for r in on off; do
               haproxy -c -q -f "$RUN/haproxy-resumption-$r.cfg" >"$LOGS/haproxy-check.log" 2>&1 \
                 || die "HAProxy rejects $RUN/haproxy-resumption-$r.cfg: $(cat "$LOGS/haproxy-check.log")"
             done;;
  esac
done

{
  echo "date:     $(date -Is)"
  echo "host:     $(uname -srm), $NCPU cores, $(awk '/^model name/ { sub(/^[^:]*: /, ""); print; exit }' /proc/cpuinfo)"
  echo "relay:    $(cd "$REPO" && git rev-parse --short HEAD 2>/dev/null || echo unknown)$(cd "$REPO" && git diff --quiet HEAD 2>/dev/null || echo ' (uncommitted changes)'), $(go version | awk '{ print $3 }'), processes=$PROCESSES (0 = one per core)"
  echo "nginx:    $(nginx -v 2>&1 | sed 's/^nginx version: //'), $NGINX_WORKERS workers"
  echo "haproxy:  $(haproxy -v 2>&1 | awk 'NR == 1 { print $3 }'), nbthread $HAPROXY_THREADS"
  echo "openssl:  $(openssl version)"
  echo "wrk:      $(wrk -v 2>&1 | awk 'NR == 1 { print $2 }')"
  echo "h2load:   $(h2load --version 2>&1 | awk 'NR == 1 { print $2 }')"
  echo "settings: rounds=$ROUNDS duration=${DURATION_S}s warmup=${WARMUP_S}s tests=[${TEST_LIST[*]}]"
  echo "load:     h1 wrk -t$WRK_THREADS -c$H1_CONNS; h2 h2load -t$H2_THREADS -c$H2_CLIENTS -m$H2_STREAMS; hs wrk -t$WRK_THREADS -c$HS_CONNS -H 'Connection: close'"
  echo "output:   $OUT"
} | tee "$OUT/env.txt" >&2

printf 'round\tpeer\ttest\trps\trequests\tp50_ms\tp99_ms\tsocket_errors\tnon2xx\tcpu_s\tcpu_us_per_req\trss_mb\tresumed\tprobes\tbox_busy_pct\n' >"$RAW"

# shellcheck disable=SC2086 # BACKEND_PORTS is a list
start_greeting_backends $BACKEND_PORTS

n=${#BALANCERS[@]}
for round in $(seq "$ROUNDS"); do
  order=()
  for ((i = 0; i < n; i++)); do order+=("${BALANCERS[$(( (i + round - 1) % n ))]}"); done
  note "round $round of $ROUNDS: ${order[*]}"
  for name in "${order[@]}"; do
    for test in "${TEST_LIST[@]}"; do
      kill -0 "$BACKENDS_PID" 2>/dev/null || die "the backends exited; see $LOGS/backends.log"
      [ -z "${PEBBLE_PID:-}" ] || kill -0 "$PEBBLE_PID" 2>/dev/null || die "Pebble exited; see $LOGS/pebble.log"
      measure "$round" "$name" "$test"
    done
  done
done

summarize
echo
print_table
cat <<EOF

Medians over $ROUNDS round(s) of ${DURATION_S}s runs on one $NCPU-core machine; everything shares its cores.
h1: wrk -c$H1_CONNS, HTTP/1.1 keep-alive. h2: h2load -c$H2_CLIENTS -m$H2_STREAMS. hs: wrk -c$HS_CONNS, one request per TLS
connection, so req/s is handshakes per second. hs-full: hs with nginx's and HAProxy's session resumption off;
relay has no such setting, so its hs-full row is a second hs run.
errors: socket errors, failed requests and non-2xx/3xx answers, summed over rounds.
us/req: the balancer's CPU time (user + system, whole process group) per completed request. rss MB: its peak RSS.
resumed: share of the probe's reconnections (openssl s_client, each offering the previous session) that resumed;
wrk reconnects the same way. nginx's workers, HAProxy's threads and relay's processes each share one set of
session-ticket keys, so a reconnection resumes whichever of them takes it.
x nginx, x haproxy: the median req/s divided by nginx's and HAProxy's median req/s; cpu/ng, cpu/hap: the same for
us/req. medians.tsv also gives the range of the req/s ratios taken within each round (*_rounds).
Raw rows: $RAW
Medians:  $MEDIANS
EOF

#!/usr/bin/env bash
# ratelimit.sh - does a client flooding relay's rate limit hurt the other
# clients?
#
# Three nginx backends answer on 127.0.0.1:8001-8003 and relay balances over
# them on 127.0.0.1:8080 with processes: 2, its access log off and
# log_level: warn. bench/neighbours.go runs --quiet clients, each on its
# own keep-alive connection with its own X-Client value, sending
# --quiet-rate requests a second each, far under their limit, and records
# every request's latency. Each round runs three phases, each with a fresh
# relay:
#   alone          the quiet clients only, relay with the rate limit
#   flood          the quiet clients and a flooder: --flood-conns
#                  connections sharing one X-Client value, paced to
#                  --flood-rate requests a second together, against
#                  rate_limit: {rate: --rate, burst: --burst, key: "header:X-Client"}
#   flood-nolimit  the same flooder, relay without a rate limit, so the
#                  flood reaches the backends (for contrast)
# The phases rotate from round to round. The table gives, per phase, the
# quiet clients' p50 and p99 (median over rounds and the range of the
# rounds), their errors, the flooder's answers and 429 share, and relay's
# and the backends' CPU. In the flood phase the flooder's 200s are printed
# beside what the bucket allows: burst + rate x the flood's length.
#
# Usage: bench/ratelimit.sh [options]
#   --rounds N          repetitions of the three phases (default 3)
#   --duration D        measured window of each phase, e.g. 10s (default 10s)
#   --warmup D          quiet requests before the window, not recorded (default 1s)
#   --processes N       relay's processes setting; 0 = one per core (default 2)
#   --quiet N           quiet clients (default 20)
#   --quiet-rate R      requests a second of each quiet client (default 25)
#   --flood-conns N     flooder connections (default 4)
#   --flood-rate R      requests a second of the flooder, all connections (default 5000)
#   --rate R            rate_limit.rate (default 50)
#   --burst B           rate_limit.burst (default 50)
#   --phases "P ..."    subset of "alone flood flood-nolimit" (default: all three)
#   --out DIR           where results go (default: a new directory under /tmp)
#   -h, --help          print this help
#
# nginx and curl are installed with apt-get when missing, which needs root;
# otherwise the apt-get command is printed. Go must be installed (relay and
# neighbours.go are built from this checkout). Every process the script
# starts runs in its own session and is stopped by its process group on exit.
set -u

PROG=ratelimit.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROUNDS=3
DURATION=10s
WARMUP=1s
PROCESSES=2
QUIET=20
QUIET_RATE=25
FLOOD_CONNS=4
FLOOD_RATE=5000
RATE=50
BURST=50
PHASES="alone flood flood-nolimit"
OUT=""

BALANCER_ADDR=127.0.0.1:8080
BACKEND_PORTS="8001 8002 8003"
CLIENT_HEADER=X-Client

while [ $# -gt 0 ]; do
  case "$1" in
    --rounds)      need_value "$@"; ROUNDS=$2; shift 2;;
    --duration)    need_value "$@"; DURATION=$2; shift 2;;
    --warmup)      need_value "$@"; WARMUP=$2; shift 2;;
    --processes)   need_value "$@"; PROCESSES=$2; shift 2;;
    --quiet)       need_value "$@"; QUIET=$2; shift 2;;
    --quiet-rate)  need_value "$@"; QUIET_RATE=$2; shift 2;;
    --flood-conns) need_value "$@"; FLOOD_CONNS=$2; shift 2;;
    --flood-rate)  need_value "$@"; FLOOD_RATE=$2; shift 2;;
    --rate)        need_value "$@"; RATE=$2; shift 2;;
    --burst)       need_value "$@"; BURST=$2; shift 2;;
    --phases)      need_value "$@"; PHASES=$2; shift 2;;
    --out)         need_value "$@"; OUT=$2; shift 2;;
    -h|--help)     help; exit 0;;
    *)             unknown_argument "$1";;
  esac
done

positive "$ROUNDS" || die "--rounds must be a positive number, not '$ROUNDS'"
positive "$QUIET" || die "--quiet must be a positive number, not '$QUIET'"
positive "$QUIET_RATE" || die "--quiet-rate must be a positive whole number, not '$QUIET_RATE'"
positive "$FLOOD_CONNS" || die "--flood-conns must be a positive number, not '$FLOOD_CONNS'"
positive "$FLOOD_RATE" || die "--flood-rate must be a positive whole number, not '$FLOOD_RATE'"
positive "$RATE" || die "--rate must be a positive whole number, not '$RATE'"
positive "$BURST" || die "--burst must be a positive whole number, not '$BURST'"
[[ "$PROCESSES" =~ ^[0-9]+$ ]] || die "--processes must be a number, not '$PROCESSES'"
DURATION_S=$(seconds "$DURATION") && [ "$DURATION_S" -gt 0 ] || die "--duration must look like 10s, 1m or 30, not '$DURATION'"
WARMUP_S=$(seconds "$WARMUP") || die "--warmup must look like 1s or 0, not '$WARMUP'"
for p in $PHASES; do
  case "$p" in alone|flood|flood-nolimit) ;; *) die "unknown phase '$p' in --phases (alone, flood, flood-nolimit)";; esac
done
[ -n "$PHASES" ] || die "--phases names no phase"

install_missing nginx:nginx curl:curl ss:iproute2
need_tools go nginx curl ss
# relay warns when the open-file limit is below what its max_connections
# needs; the soft limit goes up to the hard one, as in idle.sh.
ulimit -n "$(ulimit -Hn)" 2>/dev/null

make_out_dir relay-ratelimit
stop_all_on_exit
RAW=$OUT/raw.tsv
MEDIANS=$OUT/medians.tsv
NB=$OUT/neighbours-out
mkdir -p "$NB"

for port in $BACKEND_PORTS; do need_free "127.0.0.1:$port"; done
need_free "$BALANCER_ADDR"

build_relay
(cd "$REPO" && timeout 600 go build -o "$OUT/neighbours" bench/neighbours.go) || die "building bench/neighbours.go failed"

# relay_config [LIMIT]: relay over the three backends; with LIMIT, the rate
# limit at the top level (the default pool).
relay_config() {
  cat <<EOF
# relay as the balancer: round-robin over the three backends.
listen: "$BALANCER_ADDR"
admin_listen: ""
backends:
$(for port in $BACKEND_PORTS; do echo "  - http://127.0.0.1:$port"; done)
health_check_path: /health
processes: $PROCESSES
access_log: false
log_level: warn
EOF
  [ -n "${1:-}" ] && echo "rate_limit: {rate: $RATE, burst: $BURST, key: \"header:$CLIENT_HEADER\"}"
}
relay_config limit >"$RUN/relay-limit.yml"
relay_config >"$RUN/relay-nolimit.yml"
for f in relay-limit relay-nolimit; do
  "$OUT/relay" -check -config "$RUN/$f.yml" >&2 || die "relay rejects $RUN/$f.yml"
done
# shellcheck disable=SC2086 # BACKEND_PORTS is a list
write_greeting_backends $BACKEND_PORTS

{
  echo "date:     $(date -Is)"
  echo "host:     $(uname -srm), $NCPU cores, $(awk '/^model name/ { sub(/^[^:]*: /, ""); print; exit }' /proc/cpuinfo)"
  echo "relay:    $(cd "$REPO" && git rev-parse --short HEAD 2>/dev/null || echo unknown)$(cd "$REPO" && git diff --quiet HEAD 2>/dev/null || echo ' (uncommitted changes)'), $(go version | awk '{ print $3 }'), processes=$PROCESSES"
  echo "nginx:    $(nginx -v 2>&1 | sed 's/^nginx version: //')"
  echo "settings: rounds=$ROUNDS duration=${DURATION_S}s warmup=${WARMUP_S}s phases=\"$PHASES\""
  echo "quiet:    $QUIET clients x $QUIET_RATE req/s, one connection and one $CLIENT_HEADER value each"
  echo "flooder:  $FLOOD_CONNS connections, one $CLIENT_HEADER value, $FLOOD_RATE req/s together"
  echo "limit:    rate_limit: {rate: $RATE, burst: $BURST, key: \"header:$CLIENT_HEADER\"} (phases alone and flood)"
  echo "output:   $OUT"
} | tee "$OUT/env.txt" >&2

printf 'round\tphase\tquiet_sent\tquiet_errors\tquiet_non200\tquiet_unsent\tquiet_late\tquiet_dials\tp50_ms\tp90_ms\tp99_ms\tmax_ms\tflood_target\tflood_sent\tflood_200\tflood_429\tflood_other\tflood_errors\tflood_dropped\tflood_s\texpected_200\tshare_429\trelay_cpu_pct\tbackends_cpu_pct\tbox_busy_pct\trun_s\n' >"$RAW"

# shellcheck disable=SC2086 # BACKEND_PORTS is a list
start_greeting_backends $BACKEND_PORTS

# run_phase ROUND PHASE: one phase with a fresh relay; appends a row to RAW.
run_phase() {
  local round=$1 phase=$2 cfg=relay-limit flood=0 pid out rc t0 t1 b0 b1 box0 box1 s0 s1 line
  [ "$phase" = flood-nolimit ] && cfg=relay-nolimit
  [ "$phase" != alone ] && flood=$FLOOD_CONNS
  wait_free "$BALANCER_ADDR"
  start "$LOGS/relay-$round-$phase.log" "$OUT/relay" -config "$RUN/$cfg.yml"
  pid=$STARTED_PID
  wait_ready "http://$BALANCER_ADDR/" "$pid" 20 || die "relay did not answer within 20 s; see $LOGS/relay-$round-$phase.log"
  owned_by "$BALANCER_ADDR" "$pid" || die "$BALANCER_ADDR answers, but not from the relay this script started"
  note "round $round: $phase: relay ready (pgid $pid, $(group_pids "$pid" | wc -l) processes, $cfg.yml)"

  out=$NB/round$round.$phase.txt
  t0=$(cpu_ticks "$pid"); b0=$(cpu_ticks "$BACKENDS_PID"); box0=$(busy_jiffies); s0=$(date +%s.%N)
  run_bounded $(( WARMUP_S + DURATION_S + 10 )) "$out" "$OUT/neighbours" -addr "$BALANCER_ADDR" \
    -header "$CLIENT_HEADER" -quiet "$QUIET" -quiet-rate "$QUIET_RATE" -flood "$flood" -flood-rate "$FLOOD_RATE" \
    -duration "${DURATION_S}s" -warmup "${WARMUP_S}s"
  rc=$?
  t1=$(cpu_ticks "$pid"); b1=$(cpu_ticks "$BACKENDS_PID"); box1=$(busy_jiffies); s1=$(date +%s.%N)
  kill -0 "$pid" 2>/dev/null || note "  relay exited during the run (see $LOGS/relay-$round-$phase.log)"
  stop "$pid"
  [ "$rc" = 0 ] || note "  neighbours exited with status $rc (see $out)"

  line=$(grep -m1 '^quiet=' "$out")
  [ -n "$line" ] || { note "  no result line in $out"; line=""; }
  awk -v line="$line" -v r="$round" -v ph="$phase" -v hz="$HZ" -v t0="$t0" -v t1="$t1" -v b0="$b0" -v b1="$b1" \
      -v x0="$box0" -v x1="$box1" -v s0="$s0" -v s1="$s1" -v rate="$RATE" -v burst="$BURST" 'BEGIN {
    n = split(line, kv, " ")
    for (i = 1; i <= n; i++) { split(kv[i], p, "="); v[p[1]] = p[2] }
    split("quiet_sent quiet_errors quiet_non200 quiet_unsent quiet_late quiet_dials p50_ms p90_ms p99_ms max_ms flood_target flood_sent flood_200 flood_429 flood_other flood_errors flood_dropped flood_s", f, " ")
    row = r "\t" ph
    for (i = 1; i in f; i++) row = row "\t" ((f[i] in v) ? v[f[i]] : "NA")
    flooded = ph != "alone" && v["flood_sent"] > 0
    # The bucket starts full (a new key) and refills at rate for as long as
    # the flood lasts: burst + rate x (last request - first request).
    row = row "\t" (ph == "flood" && flooded ? sprintf("%.0f", burst + rate * v["flood_s"]) : "NA")
    row = row "\t" (flooded ? sprintf("%.4f", v["flood_429"] / v["flood_sent"]) : "NA")
    secs = s1 - s0
    row = row "\t" (secs > 0 ? sprintf("%.1f", 100 * (t1 - t0) / hz / secs) : "NA")
    row = row "\t" (secs > 0 ? sprintf("%.1f", 100 * (b1 - b0) / hz / secs) : "NA")
    split(x0, a, " "); split(x1, b, " "); tot = b[1] - a[1]
    row = row "\t" (tot > 0 ? sprintf("%.0f", 100 * (tot - (b[2] - a[2])) / tot) : "NA")
    row = row "\t" sprintf("%.1f", secs)
    print row
  }' >>"$RAW"
  note "  $(tail -n 1 "$RAW" | awk -F'\t' '{ printf "quiet p50 %s ms p99 %s ms max %s ms, errors %s non-200 %s; flooder sent %s, 200 %s (expected %s), 429 %s; relay CPU %s%%, backends %s%%", $9, $11, $12, $4, $5, $14, $15, $21, $16, $23, $24 }')"
}

set -f
read -r -a PHASE_LIST <<<"$PHASES"
set +f
for round in $(seq "$ROUNDS"); do
  # Each round starts one phase further down the list, so that no phase
  # always runs first or last.
  n=${#PHASE_LIST[@]}
  for i in $(seq 0 $(( n - 1 ))); do
    run_phase "$round" "${PHASE_LIST[$(( (i + round - 1) % n ))]}"
  done
done

# Medians over rounds per phase, and the range of the rounds.
awk -F'\t' "$AWK_ROUNDS"'
  NR == 1 { next }
  {
    ph = $2; if (!(ph in seen)) { seen[ph] = 1; order[++np] = ph }
    keep(ph SUBSEP "p50", $9); keep(ph SUBSEP "p90", $10); keep(ph SUBSEP "p99", $11); keep(ph SUBSEP "max", $12)
    keep(ph SUBSEP "sent", $14); keep(ph SUBSEP "ok", $15); keep(ph SUBSEP "exp", $21); keep(ph SUBSEP "share", $22)
    keep(ph SUBSEP "cpu", $23); keep(ph SUBSEP "bcpu", $24)
    if ($3 == "NA") lost[ph] = 1; else err[ph] += $4 + $5 + $6
  }
  END {
    print "phase\tp50_ms\tp50_rounds\tp90_ms\tp99_ms\tp99_rounds\tmax_ms\tquiet_failed\tflood_sent\tflood_200\texpected_200\tshare_429\trelay_cpu_pct\tbackends_cpu_pct"
    for (i = 1; i <= np; i++) {
      ph = order[i]
      printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ph,
        median(list[ph SUBSEP "p50"]), span(list[ph SUBSEP "p50"]), median(list[ph SUBSEP "p90"]),
        median(list[ph SUBSEP "p99"]), span(list[ph SUBSEP "p99"]), median(list[ph SUBSEP "max"]), (ph in lost) ? "NA" : err[ph] + 0,
        median(list[ph SUBSEP "sent"]), median(list[ph SUBSEP "ok"]), median(list[ph SUBSEP "exp"]),
        median(list[ph SUBSEP "share"]), median(list[ph SUBSEP "cpu"]), median(list[ph SUBSEP "bcpu"])
    }
  }' "$RAW" >"$MEDIANS"

# The quiet p99 of flood and of flood-nolimit over alone's, taken within
# each round (same background load), then the range over rounds.
p99_ratios() {
  awk -F'\t' -v ph="$1" "$AWK_ROUNDS"'
    NR > 1 && $2 == "alone" { a[$1] = $11 }
    NR > 1 && $2 == ph { f[$1] = $11 }
    END { for (r in f) if (r in a) keep("x", ratio(f[r], a[r])); print median(list["x"]), span(list["x"]) }' "$RAW"
}

echo
{
  printf '%-14s %8s %13s %8s %13s %8s %6s %8s %9s %8s %6s %8s %8s\n' phase "p50 ms" "p50 rounds" "p99 ms" "p99 rounds" "max ms" failed \
    "fl sent" "fl 200" expected "429 %" "relay %" "backs %"
  awk -F'\t' 'NR > 1 {
    share = $12 == "NA" ? "NA" : sprintf("%.1f", 100 * $12)
    printf "%-14s %8s %13s %8s %13s %8s %6s %8s %9s %8s %6s %8s %8s\n", $1, $2, $3, $5, $6, $7, $8, $9, $10, $11, share, $13, $14
  }' "$MEDIANS"
} | tee "$OUT/table.txt"

{
  for ph in flood flood-nolimit; do
    case " $PHASES " in *" $ph "*) ;; *) continue;; esac
    case " $PHASES " in *" alone "*) ;; *) continue;; esac
    read -r med rng < <(p99_ratios "$ph")
    echo "quiet p99, $ph / alone (within each round): median $med, rounds $rng"
  done
} | tee -a "$OUT/table.txt"

cat <<EOF

$QUIET quiet clients x $QUIET_RATE req/s (one connection and one $CLIENT_HEADER value each) for ${DURATION_S}s after ${WARMUP_S}s
unrecorded; flooder: $FLOOD_CONNS connections, one $CLIENT_HEADER value, $FLOOD_RATE req/s together; relay processes: $PROCESSES.
Medians over $ROUNDS round(s), each phase with a fresh relay; "rounds" is the lowest-highest of the rounds.
p50/p99/max ms: the quiet clients' latency, from writing a request to reading its whole answer.
failed: quiet requests that failed, answered other than 200 or could not be sent in time, summed over rounds (should be 0).
fl sent, fl 200: the flooder's requests and its answers with 200. expected: what the bucket allows,
burst + rate x the flood's length, with rate_limit {rate: $RATE, burst: $BURST} (flood phase only).
429 %: the flooder's share of answers with 429. relay %, backs %: CPU of relay's processes (all of them) and of the
nginx backends over the run, in percent of one core ($NCPU cores in all).
Raw rows: $RAW; each neighbours.go output: $NB/
EOF

#!/usr/bin/env bash
# compress.sh - relay's response compression beside Caddy's `encode` and
# nginx's gzip filter, on one machine, over loopback.
#
# The script writes two documents, the same bytes on every run: a 100 KB
# HTML page (articles of generated sentences over a vocabulary of a few
# hundred words, links, lists, tables) and a 200 KB JSON document (an
# array of user records with ids, UUIDs, names, e-mail addresses, dates,
# amounts, tags and a sentence each). One nginx serves both, uncompressed,
# as three backends on 127.0.0.1:18481-18483. Then one balancer at a time
# listens on 127.0.0.1:8480 and balances round-robin over them, started
# afresh for each coding:
#   relay   processes: 2, compress: {encodings: [CODING]} (gzip level 5,
#           br quality 4, zstd fastest: relay's defaults)
#   caddy   reverse_proxy over the three with encode { gzip 5 } or
#           encode { zstd fastest } (Caddy's own defaults are gzip 5 and
#           zstd default; fastest is relay's); no br row, since Caddy
#           encodes br only with a plugin
#   nginx   2 workers (reuseport), gzip on; gzip_proxied any;
#           gzip_comp_level 5; gzip_types text/html application/json
#           (gzip only)
# For each coding (gzip, zstd, br and identity: no Accept-Encoding, the
# cost of passing the large bodies with compression set up but not asked
# for) and each document the script first checks with curl that the
# answer carries the right Content-Encoding and decodes (gzip -d, zstd -d,
# brotli -d) to the document byte for byte, and records its size; then an
# unmeasured warm-up and
#   wrk -t2 -c50 -dDURATION --latency -H 'Accept-Encoding: CODING' URL
# with the balancer's CPU time (user + system of its process group, from
# /proc) read just before and after. The whole set repeats --rounds times,
# each round one place further round the list (and the documents in the
# other order), so no balancer always runs first. The table gives medians
# over rounds, and relay's req/s and CPU per request divided by Caddy's
# and nginx's taken within each round, as the median of those per-round
# ratios.
#
# Usage: bench/compress.sh [options]
#   --rounds N           rounds of the whole set (default 3)
#   --duration D         length of each measured wrk run, e.g. 10s (default 10s)
#   --warmup D           unmeasured wrk run before each measured one; 0 skips (default 2s)
#   --conns C            wrk connections (default 50)
#   --processes N        relay's processes setting; 0 = one per core (default 2)
#   --codings "C ..."    subset of "gzip zstd br identity" (default: all four)
#   --peers "P ..."      subset of "relay caddy nginx" (default: all three)
#   --docs "D ..."       subset of "html json" (default: both)
#   --out DIR            where results go (default: a new directory under /tmp)
#   -h, --help           print this help
#
# wrk, nginx, curl, gzip, zstd and brotli are installed with apt-get when
# missing, which needs root; otherwise the apt-get command is printed. Caddy
# must be installed already (caddy on PATH, or CADDY=/path/to/caddy); Go
# too (relay is built from this repository). Every process the script starts
# runs in its own session and is stopped by its process group on exit.
set -u

PROG=compress.sh
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROUNDS=3
DURATION=10s
WARMUP=2s
CONNS=50
PROCESSES=2
CODINGS="gzip zstd br identity"
PEERS="relay caddy nginx"
DOCS="html json"
OUT=""
WRK_THREADS=2
NGINX_WORKERS=2
CADDY=${CADDY:-caddy}

# The levels every balancer uses: relay's defaults, which Caddy and nginx
# are set to where they can be.
GZIP_LEVEL=5
ZSTD_LEVEL=fastest
BROTLI_LEVEL=4

# Away from the ports of the other scripts, so that they can share a machine.
BALANCER_ADDR=127.0.0.1:8480
BACKEND_PORTS="18481 18482 18483"

while [ $# -gt 0 ]; do
  case "$1" in
    --rounds)    need_value "$@"; ROUNDS=$2; shift 2;;
    --duration)  need_value "$@"; DURATION=$2; shift 2;;
    --warmup)    need_value "$@"; WARMUP=$2; shift 2;;
    --conns)     need_value "$@"; CONNS=$2; shift 2;;
    --processes) need_value "$@"; PROCESSES=$2; shift 2;;
    --codings)   need_value "$@"; CODINGS=$2; shift 2;;
    --peers)     need_value "$@"; PEERS=$2; shift 2;;
    --docs)      need_value "$@"; DOCS=$2; shift 2;;
    --out)       need_value "$@"; OUT=$2; shift 2;;
    -h|--help)   help; exit 0;;
    *)           unknown_argument "$1";;
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
if ! positive "$CONNS" || [ "$CONNS" -lt "$WRK_THREADS" ]; then
  die "--conns must be an integer of at least $WRK_THREADS, not '$CONNS'"
fi
for c in $CODINGS; do
  case "$c" in gzip|zstd|br|identity) ;; *) die "--codings: unknown coding '$c' (choose from: gzip zstd br identity)";; esac
done
for p in $PEERS; do
  case "$p" in relay|caddy|nginx) ;; *) die "--peers: unknown peer '$p' (choose from: relay caddy nginx)";; esac
done
for d in $DOCS; do
  case "$d" in html|json) ;; *) die "--docs: unknown document '$d' (choose from: html json)";; esac
done
DOC_LIST=()
for d in html json; do [[ " $DOCS " == *" $d "* ]] && DOC_LIST+=("$d"); done
[ ${#DOC_LIST[@]} -gt 0 ] || die "nothing to measure: --docs is empty"

# supports PEER CODING: does the balancer produce that coding?
supports() {
  case "$1:$2" in
    relay:*|caddy:gzip|caddy:zstd|caddy:identity|nginx:gzip|nginx:identity) return 0;;
  esac
  return 1
}

# The runs of one round, in the order of round 1: each coding, and within
# it each balancer that produces it.
RUNS=()
for c in gzip zstd br identity; do
  [[ " $CODINGS " == *" $c "* ]] || continue
  for p in relay caddy nginx; do
    [[ " $PEERS " == *" $p "* ]] && supports "$p" "$c" && RUNS+=("$p:$c")
  done
done
[ ${#RUNS[@]} -gt 0 ] || die "nothing to measure: no balancer in --peers produces a coding in --codings"

# ------------------------------------------------------------------ tools

install_missing wrk:wrk nginx:nginx curl:curl gzip:gzip zstd:zstd brotli:brotli ss:iproute2
need_tools go setsid timeout awk sort cmp
if [[ " $PEERS " == *" caddy "* ]]; then
  command -v "$CADDY" >/dev/null 2>&1 || die "caddy is not on PATH (install Caddy v2, or set CADDY=/path/to/caddy, or leave it out with --peers)"
fi

# relay warns when the open-file limit is below what its max_connections
# needs; the soft limit goes up to the hard one, as in idle.sh.
ulimit -n "$(ulimit -Hn)" 2>/dev/null

# ------------------------------------------------------------------ output directory

make_out_dir relay-compress
RAW=$OUT/raw.tsv
MEDIANS=$OUT/medians.tsv
TABLE=$OUT/table.txt
WWW=$OUT/www
CHECKS=$OUT/checks
mkdir -p "$WWW" "$CHECKS"
stop_all_on_exit

# ------------------------------------------------------------------ documents

# AWK_RAND: a Park-Miller generator (x = 16807x mod 2^31-1), exact in awk's
# doubles, so that every awk writes the same documents.
AWK_RAND='
  function rnd(n) { seed = (seed * 16807) % 2147483647; return int(seed / 2147483647 * n) }
  function pick(list, n) { return list[rnd(n) + 1] }
  function hex(k,   s) { s = ""; while (k-- > 0) s = s substr("0123456789abcdef", rnd(16) + 1, 1); return s }
  function sentence(   n, s, i, w) {
    n = 6 + rnd(14)
    for (i = 1; i <= n; i++) {
      w = pick(words, nw)
      if (i == 1) w = toupper(substr(w, 1, 1)) substr(w, 2)
      s = s (i > 1 ? (rnd(9) == 0 ? ", " : " ") : "") w
    }
    return s (rnd(6) == 0 ? "?" : ".")
  }
  function title(   n, s, i) { n = 2 + rnd(5); s = ""; for (i = 1; i <= n; i++) s = s (i > 1 ? " " : "") pick(words, nw); return toupper(substr(s, 1, 1)) substr(s, 2) }
  function person() { return pick(first, nf) " " pick(last, nl) }
  function date() { return sprintf("%04d-%02d-%02d", 2015 + rnd(10), 1 + rnd(12), 1 + rnd(28)) }
  BEGIN {
    nw = split("the of and to in is that for it as was with be by on not he this are or his from at which but " \
      "have an they you were her all she there would their we him been has when who will more no if out so said " \
      "what up its about into than them can only other new some could time these two may then do first any my now " \
      "such like our over man me even most made after also did many before must through back years where much your " \
      "way well down should because each just those people how too little state good very make world still own see " \
      "men work long get here between both life being under never day same another know while last might us great " \
      "old year off come since against go came right used take three system server request response network cache " \
      "latency throughput balancer proxy header body stream buffer socket kernel thread process memory queue token " \
      "client backend route pool upstream timeout retry health check metric signal window frame packet channel " \
      "river mountain garden village market harbour bridge forest meadow valley island castle library museum " \
      "theatre station airport highway street square tower lantern candle mirror window curtain carpet blanket " \
      "orange purple silver golden crimson amber violet scarlet emerald ivory copper bronze marble velvet linen " \
      "quickly slowly carefully quietly loudly gently suddenly rarely often always sometimes usually seldom " \
      "analysis approach benefit concept context contract create data define derive distribute economy " \
      "environment establish estimate evidence export factor feature final formula function identify income " \
      "indicate individual interpret involve issue labour legal legislate major method occur percent period " \
      "policy principle proceed process require research respond role section sector significant similar source " \
      "specific structure theory vary achieve acquire administrate affect appropriate aspect assist category " \
      "chapter commission community complex compute conclude conduct consequent construct consume credit culture " \
      "design distinct element equate evaluate feature focus impact injure institute invest item journal maintain " \
      "normal obtain participate perceive positive potential previous primary purchase range region regulate " \
      "relevant reside resource restrict secure seek select site strategy survey text tradition transfer", words, " ")
    nf = split("Ada Alan Barbara Carlos Dana Edsger Fatima Grace Hedy Ivan Jamal Katherine Linus Margaret Niklaus " \
      "Olga Priya Quentin Radia Sophie Tim Ursula Vint Wen Xavier Yukihiro Zainab Anders Bjarne Chen Dennis Emma " \
      "Frances Guido Hiroshi Ingrid Jean Ken Leslie Mei Nadia Oscar Paula Rasmus Satoshi Tove", first, " ")
    nl = split("Lovelace Turing Liskov Alvarez Scott Dijkstra Rahman Hopper Lamarr Sutherland Okafor Johnson " \
      "Torvalds Hamilton Wirth Petrova Raman Blanc Perlman Dubois Berners Franklin Cerf Zhang Leroy Matsumoto " \
      "Bello Hejlsberg Stroustrup Wei Ritchie Noether Allen Rossum Tanaka Larsen Sammet Thompson Lamport Lin " \
      "Haddad Nilsson Rand Lerdorf Nakamoto Jansson Moreau Kowalski Ferreira", last, " ")
    nc = split("Lisbon Oslo Kyoto Lagos Quito Tallinn Hobart Nairobi Porto Ghent Bergen Osaka Accra Cusco Tartu " \
      "Perth Mombasa Braga Leuven Tromso Sapporo Kumasi Arequipa Narva Darwin", city, " ")
    ncc = split("PT NO JP NG EC EE AU KE BE GH PE", country, " ")
    nt = split("admin beta billing design editor finance growth infra legal mobile ops platform research sales " \
      "security support trial web", tag, " ")
    nd = split("example.org example.com example.net mail.example test.example", domain, " ")
  }
'

# write_html FILE BYTES: a page of articles, at least BYTES long.
write_html() {
  awk -v target="$2" "$AWK_RAND"'
    BEGIN {
      seed = 20240601
      out = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>The relay journal</title>\n" \
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n" \
        "<link rel=\"stylesheet\" href=\"/static/site.css\">\n</head>\n<body>\n<header class=\"site\">\n<nav>\n<ul>\n"
      for (i = 1; i <= 12; i++) { w = pick(words, nw); out = out "<li><a href=\"/section/" w "\">" toupper(substr(w, 1, 1)) substr(w, 2) "</a></li>\n" }
      out = out "</ul>\n</nav>\n</header>\n<main>\n"
      printf "%s", out; size = length(out); id = 1000
      while (size < target) {
        id += 1 + rnd(50); day = date()
        a = "<article id=\"post-" id "\" class=\"post\">\n<h2><a href=\"/posts/" id "-" pick(words, nw) "-" pick(words, nw) "\">" title() "</a></h2>\n" \
            "<p class=\"meta\">By <a href=\"/authors/" tolower(pick(last, nl)) "\">" person() "</a> on <time datetime=\"" day "\">" day "</time></p>\n"
        np = 2 + rnd(4)
        for (p = 1; p <= np; p++) {
          ns = 2 + rnd(5); para = ""
          for (s = 1; s <= ns; s++) {
            x = sentence()
            if (rnd(5) == 0) x = x " See <a href=\"/notes/" hex(6) "\">" pick(words, nw) " " pick(words, nw) "</a>."
            if (rnd(7) == 0) x = "<em>" x "</em>"
            para = para (s > 1 ? " " : "") x
          }
          a = a "<p>" para "</p>\n"
        }
        if (rnd(3) == 0) {
          a = a "<ul class=\"points\">\n"; nli = 3 + rnd(4)
          for (l = 1; l <= nli; l++) a = a "<li>" sentence() "</li>\n"
          a = a "</ul>\n"
        }
        if (rnd(4) == 0) {
          a = a "<table class=\"figures\">\n<tr><th>Region</th><th>Requests</th><th>Share</th><th>Median ms</th></tr>\n"; nr = 3 + rnd(5)
          for (r = 1; r <= nr; r++) a = a sprintf("<tr><td>%s</td><td>%d</td><td>%.1f%%</td><td>%.2f</td></tr>\n", pick(city, nc), rnd(900000), rnd(1000) / 10, rnd(100000) / 1000)
          a = a "</table>\n"
        }
        a = a "<footer><a href=\"/posts/" id "#comments\">" rnd(200) " comments</a> <span class=\"tags\">" pick(tag, nt) ", " pick(tag, nt) "</span></footer>\n</article>\n"
        printf "%s", a; size += length(a)
      }
      printf "</main>\n<footer class=\"site\"><p>Generated for a benchmark; every word is made up.</p></footer>\n</body>\n</html>\n"
    }' >"$1"
}

# write_json FILE BYTES: an array of records, at least BYTES long.
write_json() {
  awk -v target="$2" "$AWK_RAND"'
    BEGIN {
      seed = 19700101
      printf "{\"page\":1,\"per_page\":1000,\"users\":["; size = 32; id = 50000
      while (size < target) {
        id += 1 + rnd(20); f = pick(first, nf); l = pick(last, nl)
        ntg = rnd(4); tags = ""
        for (t = 1; t <= ntg; t++) tags = tags (t > 1 ? "," : "") "\"" pick(tag, nt) "\""
        rec = sprintf("%s{\"id\":%d,\"uuid\":\"%s-%s-4%s-%s-%s\",\"name\":\"%s %s\",\"email\":\"%s.%s%d@%s\",\"age\":%d,\"active\":%s," \
          "\"balance\":\"%d.%02d\",\"score\":%.4f,\"registered\":\"%sT%02d:%02d:%02dZ\",\"address\":{\"city\":\"%s\",\"country\":\"%s\",\"postcode\":\"%05d\"}," \
          "\"tags\":[%s],\"logins\":%d,\"bio\":\"%s\"}",
          size > 32 ? "," : "", id, hex(8), hex(4), hex(3), hex(4), hex(12), f, l, tolower(f), tolower(l), rnd(100), pick(domain, nd),
          18 + rnd(60), rnd(3) ? "true" : "false", rnd(100000), rnd(100), rnd(10000) / 10000, date(), rnd(24), rnd(60), rnd(60),
          pick(city, nc), pick(country, ncc), rnd(100000), tags, rnd(5000), sentence())
        printf "%s", rec; size += length(rec)
      }
      printf "],\"total\":%d}\n", id
    }' >"$1"
}

# ------------------------------------------------------------------ configurations

# write_backends: one nginx, three servers, each serving the documents from
# WWW uncompressed, / with the greeting lib.sh waits for, /health with 200.
write_backends() {
  local port servers=""
  for port in $BACKEND_PORTS; do
    servers+="    server {
        listen 127.0.0.1:$port backlog=4096;
        root $WWW;
        location = / { return 200 \"Hello World from $port server\\n\"; }
        location = /health { return 200 \"ok\\n\"; }
    }
"
  done
  mkdir -p "$RUN/backends-tmp"
  cat >"$RUN/backends.conf" <<EOF
# The backends in one nginx: the same documents, uncompressed, from each port.
worker_processes auto;
pid $RUN/backends.pid;
error_log $RUN/backends.err warn;
worker_rlimit_nofile 65536;
events { worker_connections 8192; multi_accept on; }
http {
    access_log off;
    types { text/html html; application/json json; }
    default_type text/plain;
    sendfile on;
    gzip off;
    open_file_cache max=16 inactive=600s;
    open_file_cache_valid 600s;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
$(nginx_temp_paths "$RUN/backends-tmp")
$servers}
EOF
}

# write_relay_conf CODING: relay over the three backends producing CODING
# (identity runs use the gzip file and ask for nothing).
write_relay_conf() {
  local port
  cat >"$RUN/relay-$1.yml" <<EOF
# relay as the balancer: round-robin over the three backends, compressing
# with $1 at relay's default levels (gzip 5, br 4, zstd fastest).
listen: "$BALANCER_ADDR"
admin_listen: ""
algorithm: round-robin
backends:
$(for port in $BACKEND_PORTS; do echo "  - http://127.0.0.1:$port"; done)
health_check_path: /health
processes: $PROCESSES
access_log: false
log_level: warn
compress:
  encodings: [$1]
  gzip_level: $GZIP_LEVEL
  brotli_level: $BROTLI_LEVEL
  zstd_level: $ZSTD_LEVEL
EOF
}

# write_caddy_conf CODING: Caddy's reverse_proxy over the three backends
# with encode producing CODING; no admin endpoint, no automatic HTTPS, its
# state kept in RUN.
write_caddy_conf() {
  local port ups="" level
  for port in $BACKEND_PORTS; do ups+=" 127.0.0.1:$port"; done
  case "$1" in gzip) level=$GZIP_LEVEL;; zstd) level=$ZSTD_LEVEL;; esac
  mkdir -p "$RUN/caddy-home"
  cat >"$RUN/caddy-$1.Caddyfile" <<EOF
# Caddy as the balancer: round-robin over the three backends, encode $1 $level.
{
	admin off
	auto_https off
	persist_config off
	storage file_system $RUN/caddy-home/data
	log {
		output stderr
		level WARN
	}
}
http://$BALANCER_ADDR {
	bind ${BALANCER_ADDR%:*}
	encode {
		$1 $level
	}
	reverse_proxy$ups {
		lb_policy round_robin
	}
}
EOF
}

# write_nginx_conf: nginx as the balancer with its gzip filter at level 5.
# The proxy buffers (256 KB) hold the larger document, so nginx never
# spills a response to a temporary file.
write_nginx_conf() {
  local port upstreams=""
  for port in $BACKEND_PORTS; do upstreams+="        server 127.0.0.1:$port;
"; done
  mkdir -p "$RUN/nginx-tmp"
  cat >"$RUN/nginx-gzip.conf" <<EOF
# nginx as the balancer: round-robin, an upstream keep-alive pool, gzip $GZIP_LEVEL.
worker_processes $NGINX_WORKERS;
pid $RUN/nginx.pid;
error_log $RUN/nginx.err warn;
worker_rlimit_nofile 65536;
events { worker_connections 8192; multi_accept on; }
http {
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
$(nginx_temp_paths "$RUN/nginx-tmp")
    gzip on;
    gzip_proxied any;
    gzip_types text/html application/json;
    gzip_comp_level $GZIP_LEVEL;
    gzip_min_length 1024;
    gzip_vary on;
    upstream backends {
$upstreams        keepalive 64;
        keepalive_requests 1000000;
        keepalive_timeout 120s;
    }
    server {
        # reuseport: each worker its own listening socket, so that the
        # kernel shares the connections between them as it does between
        # relay's processes.
        listen $BALANCER_ADDR backlog=4096 reuseport;
        location / {
            proxy_pass http://backends;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffer_size 16k;
            proxy_buffers 16 16k;
            proxy_busy_buffers_size 32k;
        }
    }
}
EOF
}

# config_of PEER CODING: the configuration file a run uses (identity runs
# use the gzip one).
config_of() {
  local c=$2
  [ "$c" = identity ] && c=gzip
  case "$1" in
    relay) echo "$RUN/relay-$c.yml";;
    caddy) echo "$RUN/caddy-$c.Caddyfile";;
    nginx) echo "$RUN/nginx-gzip.conf";;
  esac
}

# start_balancer PEER CODING LOGFILE: starts it and sets STARTED_PID.
start_balancer() {
  local conf; conf=$(config_of "$1" "$2")
  case "$1" in
    relay) start "$3" "$OUT/relay" -config "$conf";;
    caddy) start "$3" env HOME="$RUN/caddy-home" XDG_CONFIG_HOME="$RUN/caddy-home/config" \
             XDG_DATA_HOME="$RUN/caddy-home/data" "$CADDY" run --adapter caddyfile --config "$conf";;
    nginx) start "$3" nginx -p "$RUN" -c "$conf" -g 'daemon off;';;
  esac
}

# ------------------------------------------------------------------ checks

# decoder CODING: the command that decodes CODING on standard input.
decoder() {
  case "$1" in
    gzip) echo "gzip -dc";;
    zstd) echo "zstd -dcq";;
    br) echo "brotli -dc";;
    identity) echo "cat";;
  esac
}

# check_answer PEER CODING DOC ROUND: one request with curl, as wrk sends it;
# the answer must be 200 with Content-Encoding CODING (none for identity)
# and decode to the document. Prints the size of the body as sent.
check_answer() {
  local peer=$1 coding=$2 doc=$3 round=$4 url="http://$BALANCER_ADDR/doc.$3" base ce
  base="$CHECKS/round$round.$peer.$coding.$doc"
  local hdr=()
  [ "$coding" != identity ] && hdr=(-H "Accept-Encoding: $coding")
  curl -s --max-time 5 "${hdr[@]}" -D "$base.head" -o "$base.body" "$url" || die "$peer ($coding): curl $url failed"
  grep -q '^HTTP/1.1 200' "$base.head" || die "$peer ($coding): $url answered $(head -n 1 "$base.head")"
  ce=$(awk -F': *' 'tolower($1) == "content-encoding" { sub(/\r$/, "", $2); print tolower($2) }' "$base.head")
  if [ "$coding" = identity ]; then
    [ -z "$ce" ] || die "$peer sent Content-Encoding: $ce to a request that accepts none (see $base.head)"
  else
    [ "$ce" = "$coding" ] || die "$peer ($coding): $url answered Content-Encoding '${ce:-none}', not $coding (see $base.head)"
  fi
  # shellcheck disable=SC2046 # decoder prints a command and its options
  $(decoder "$coding") <"$base.body" >"$base.decoded" 2>"$base.err" || die "$peer ($coding): $(decoder "$coding") could not decode $base.body: $(cat "$base.err")"
  cmp -s "$base.decoded" "$WWW/doc.$doc" || die "$peer ($coding): $url decodes to something other than $WWW/doc.$doc (see $base.decoded)"
  rm -f "$base.decoded" "$base.err"
  wc -c <"$base.body" | tr -d ' '
}

# ------------------------------------------------------------------ one run

# measure ROUND PEER CODING: start the balancer, check both documents, load
# it with each, stop it.
measure() {
  local round=$1 peer=$2 coding=$3 pid doc
  wait_free "$BALANCER_ADDR"
  local log="$LOGS/$peer.$coding.round$round.log"
  start_balancer "$peer" "$coding" "$log"; pid=$STARTED_PID
  wait_ready "http://$BALANCER_ADDR/" "$pid" 20 || die "$peer did not answer on $BALANCER_ADDR within 20 s; its output ($log):
$(tail -n 20 "$log")"
  owned_by "$BALANCER_ADDR" "$pid" || die "$BALANCER_ADDR answers, but not from the $peer this script started"
  local docs=("${DOC_LIST[@]}")
  if [ $((round % 2)) = 0 ] && [ ${#docs[@]} = 2 ]; then docs=("${docs[1]}" "${docs[0]}"); fi
  note "round $round: $peer ($coding) ready (pgid $pid, $(group_pids "$pid" | wc -l) processes)"

  local hdr=()
  [ "$coding" != identity ] && hdr=(-H "Accept-Encoding: $coding")
  for doc in "${docs[@]}"; do
    local url="http://$BALANCER_ADDR/doc.$doc" size orig
    size=$(check_answer "$peer" "$coding" "$doc" "$round") || exit 1
    orig=$(wc -c <"$WWW/doc.$doc" | tr -d ' ')
    note "  $doc: answer checked ($coding, decodes to the document), $size of $orig bytes"
    [ "$WARMUP_S" -gt 0 ] && run_wrk "$WARMUP_S" "$CONNS" "$url" /dev/null "${hdr[@]}"
    local wf="$WRK/round$round.$peer.$coding.$doc.txt" cpu0 cpu1 box0 box1 rc
    cpu0=$(cpu_ticks "$pid")
    box0=$(busy_jiffies)
    run_wrk "$DURATION_S" "$CONNS" "$url" "$wf" "${hdr[@]}"; rc=$?
    box1=$(busy_jiffies)
    cpu1=$(cpu_ticks "$pid")
    kill -0 "$pid" 2>/dev/null || note "  $peer exited during the $coding $doc run (see $log)"
    [ "$rc" = 0 ] || note "  wrk exited with status $rc (see $wf)"
    local rps reqs p50 p99 se n2
    read -r rps reqs p50 p99 se n2 < <(wrk_fields "$wf")
    awk -v r="$round" -v n="$peer" -v c="$coding" -v d="$doc" -v rps="$rps" -v reqs="$reqs" -v p50="$p50" -v p99="$p99" \
        -v se="$se" -v n2="$n2" -v t0="$cpu0" -v t1="$cpu1" -v hz="$HZ" -v size="$size" -v orig="$orig" \
        -v b0="$box0" -v b1="$box1" 'BEGIN {
      split(b0, x, " "); split(b1, y, " "); tot = y[1] - x[1]
      busy = tot > 0 ? sprintf("%.0f", 100 * (tot - (y[2] - x[2])) / tot) : "NA"
      us = reqs > 0 ? sprintf("%.1f", (t1 - t0) / hz * 1e6 / reqs) : "NA"
      printf "%s\t%s\t%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%.2f\t%s\t%s\t%s\t%s\n",
        r, n, c, d, rps, reqs, p50, p99, se, n2, (t1 - t0) / hz, us, size, orig, busy }' >>"$RAW"
    note "  $(tail -n 1 "$RAW" | awk -F'\t' '{ printf "%-5s %-8s %-4s %8s req/s  p50 %s ms  p99 %s ms  errors %s+%s  cpu %s us/req  %s of %s bytes  box %s%% busy", $2, $3, $4, $5, $7, $8, $9, $10, $12, $13, $14, $15 }')"
  done
  stop "$pid"
}

# ------------------------------------------------------------------ summary

# summarize reads raw.tsv and writes medians.tsv: for each document, coding
# and balancer the median over rounds of every figure, and relay's req/s
# and CPU per request divided by Caddy's and nginx's in the same round,
# as the median and range of those per-round ratios.
summarize() {
  awk -F'\t' -v OFS='\t' "$AWK_ROUNDS"'
    NR == 1 { next }
    {
      k = $4 SUBSEP $3 SUBSEP $2
      if (!(k in seen)) { seen[k] = 1; order[++n] = k }
      rps[$1, k] = $5; cpu[$1, k] = $12; rounds[$1] = 1
      keep("rps" SUBSEP k, $5); keep("p50" SUBSEP k, $7); keep("p99" SUBSEP k, $8)
      keep("cpu" SUBSEP k, $12); keep("size" SUBSEP k, $13); orig[k] = $14
      errors[k] += $9 + $10; runs[k]++
    }
    END {
      print "doc", "coding", "peer", "rounds", "rps", "p50_ms", "p99_ms", "errors", "cpu_us_per_req", "bytes", "orig_bytes", "size_pct",
            "rps_vs_caddy", "cpu_vs_caddy", "rps_vs_nginx", "cpu_vs_nginx", "rps_vs_caddy_rounds", "cpu_vs_caddy_rounds",
            "rps_vs_nginx_rounds", "cpu_vs_nginx_rounds"
      for (i = 1; i <= n; i++) {
        k = order[i]; split(k, kk, SUBSEP); doc = kk[1]; c = kk[2]; peer = kk[3]
        ca = doc SUBSEP c SUBSEP "caddy"; ng = doc SUBSEP c SUBSEP "nginx"
        for (r in rounds) {
          if (peer != "relay" || !((r, k) in rps)) continue
          if ((r, ca) in rps) { keep("rc" SUBSEP k, ratio(rps[r, k], rps[r, ca])); keep("cc" SUBSEP k, ratio(cpu[r, k], cpu[r, ca])) }
          if ((r, ng) in rps) { keep("rn" SUBSEP k, ratio(rps[r, k], rps[r, ng])); keep("cn" SUBSEP k, ratio(cpu[r, k], cpu[r, ng])) }
        }
        sz = median(list["size" SUBSEP k])
        print doc, c, peer, runs[k], fmt(median(list["rps" SUBSEP k]), "%.0f"),
          fmt(median(list["p50" SUBSEP k]), "%.3f"), fmt(median(list["p99" SUBSEP k]), "%.3f"), errors[k],
          fmt(median(list["cpu" SUBSEP k]), "%.1f"), fmt(sz, "%.0f"), orig[k],
          (sz != "NA" && orig[k] > 0 ? sprintf("%.1f", 100 * sz / orig[k]) : "NA"),
          fmt(median(list["rc" SUBSEP k]), "%.2f"), fmt(median(list["cc" SUBSEP k]), "%.2f"),
          fmt(median(list["rn" SUBSEP k]), "%.2f"), fmt(median(list["cn" SUBSEP k]), "%.2f"),
          span(list["rc" SUBSEP k]), span(list["cc" SUBSEP k]), span(list["rn" SUBSEP k]), span(list["cn" SUBSEP k])
      }
    }' "$RAW" >"$MEDIANS"
}

# print_table renders medians.tsv for people: documents, then codings, then
# relay, Caddy, nginx.
print_table() {
  {
    printf '%-4s %-8s %-5s %8s %7s %7s %6s %7s %7s %6s %8s %8s %8s %8s\n' \
      doc coding peer "req/s" "p50 ms" "p99 ms" errors "us/req" bytes "size%" "x caddy" "cpu/cad" "x nginx" "cpu/ng"
    awk -F'\t' 'BEGIN { o["html"] = 1; o["json"] = 2; o["gzip"] = 1; o["zstd"] = 2; o["br"] = 3; o["identity"] = 4
                        o["relay"] = 1; o["caddy"] = 2; o["nginx"] = 3 }
      NR > 1 { printf "%d %d %d\t%s\n", o[$1], o[$2], o[$3], $0 }' "$MEDIANS" | sort -k1,1n -k2,2n -k3,3n | cut -f2- |
      awk -F'\t' '{ dash = ($3 == "relay") ? "" : "-"
        printf "%-4s %-8s %-5s %8s %7s %7s %6s %7s %7s %6s %8s %8s %8s %8s\n",
          $1, $2, $3, $5, $6, $7, $8, $9, $10, $12,
          dash ? dash : $13, dash ? dash : $14, dash ? dash : $15, dash ? dash : $16 }'
  } | tee "$TABLE"
}

# ------------------------------------------------------------------ main

for port in $BACKEND_PORTS; do need_free "127.0.0.1:$port"; done
need_free "$BALANCER_ADDR"

write_html "$WWW/doc.html" 100000
write_json "$WWW/doc.json" 200000
chmod 755 "$WWW"; chmod 644 "$WWW"/doc.*
note "documents: doc.html $(wc -c <"$WWW/doc.html") bytes, doc.json $(wc -c <"$WWW/doc.json") bytes (gzip -5: $(gzip -5c "$WWW/doc.html" | wc -c) and $(gzip -5c "$WWW/doc.json" | wc -c))"
if command -v python3 >/dev/null 2>&1; then
  python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$WWW/doc.json" || die "$WWW/doc.json is not valid JSON"
fi

write_backends
for c in $CODINGS gzip; do
  [ "$c" = identity ] && continue
  write_relay_conf "$c"
  case "$c" in gzip|zstd) write_caddy_conf "$c";; esac
done
write_nginx_conf
if [[ " $PEERS " == *" relay "* ]]; then
  build_relay
  for f in "$RUN"/relay-*.yml; do "$OUT/relay" -check -config "$f" >&2 || die "relay rejects $f"; done
fi
if [[ " $PEERS " == *" caddy "* ]]; then
  for f in "$RUN"/caddy-*.Caddyfile; do
    HOME="$RUN/caddy-home" XDG_CONFIG_HOME="$RUN/caddy-home/config" XDG_DATA_HOME="$RUN/caddy-home/data" \
      timeout 60 "$CADDY" validate --adapter caddyfile --config "$f" >"$LOGS/caddy-check.log" 2>&1 \
      || die "Caddy rejects $f: $(tail -n 5 "$LOGS/caddy-check.log")"
  done
fi
nginx -t -q -p "$RUN" -c "$RUN/backends.conf" >"$LOGS/backends-check.log" 2>&1 \
  || die "nginx rejects $RUN/backends.conf: $(cat "$LOGS/backends-check.log")"
if [[ " $PEERS " == *" nginx "* ]]; then
  nginx -t -q -p "$RUN" -c "$RUN/nginx-gzip.conf" >"$LOGS/nginx-check.log" 2>&1 \
    || die "nginx rejects $RUN/nginx-gzip.conf: $(cat "$LOGS/nginx-check.log")"
fi

{
  echo "date:     $(date -Is)"
  echo "host:     $(uname -srm), $NCPU cores, $(awk '/^model name/ { sub(/^[^:]*: /, ""); print; exit }' /proc/cpuinfo)"
  echo "relay:    $(cd "$REPO" && git rev-parse --short HEAD 2>/dev/null || echo unknown)$(cd "$REPO" && git diff --quiet HEAD 2>/dev/null || echo ' (uncommitted changes)'), $(go version | awk '{ print $3 }'), processes=$PROCESSES"
  [[ " $PEERS " == *" caddy "* ]] && echo "caddy:    $("$CADDY" build-info 2>/dev/null | awk '$1 == "mod" && $2 ~ /caddyserver\/caddy/ { print $3 }') ($("$CADDY" build-info 2>/dev/null | awk '$1 == "go" { print $2 }'))"
  echo "nginx:    $(nginx -v 2>&1 | sed 's/^nginx version: //'), $NGINX_WORKERS workers"
  echo "wrk:      $(wrk -v 2>&1 | awk 'NR == 1 { print $2 }'), -t$WRK_THREADS -c$CONNS"
  echo "levels:   gzip $GZIP_LEVEL, zstd $ZSTD_LEVEL, br $BROTLI_LEVEL"
  echo "settings: rounds=$ROUNDS duration=${DURATION_S}s warmup=${WARMUP_S}s runs=[${RUNS[*]}] docs=[${DOC_LIST[*]}]"
  echo "output:   $OUT"
} | tee "$OUT/env.txt" >&2

printf 'round\tpeer\tcoding\tdoc\trps\trequests\tp50_ms\tp99_ms\tsocket_errors\tnon2xx\tcpu_s\tcpu_us_per_req\tbytes\torig_bytes\tbox_busy_pct\n' >"$RAW"

start "$LOGS/backends.log" nginx -p "$RUN" -c "$RUN/backends.conf" -g 'daemon off;'
BACKENDS_PID=$STARTED_PID
for port in $BACKEND_PORTS; do
  wait_ready "http://127.0.0.1:$port/" "$BACKENDS_PID" 20 || die "backend 127.0.0.1:$port did not answer within 20 s; its output:
$(tail -n 20 "$LOGS/backends.log" "$RUN/backends.err" 2>/dev/null)"
  owned_by "127.0.0.1:$port" "$BACKENDS_PID" || die "127.0.0.1:$port answers, but not from the backends this script started"
  for d in "${DOC_LIST[@]}"; do
    curl -s --max-time 5 -H 'Accept-Encoding: gzip, br, zstd' "http://127.0.0.1:$port/doc.$d" | cmp -s - "$WWW/doc.$d" \
      || die "backend 127.0.0.1:$port does not serve doc.$d as it is"
  done
done
note "backends ready on $BACKEND_PORTS (pgid $BACKENDS_PID)"

n=${#RUNS[@]}
for round in $(seq "$ROUNDS"); do
  order=()
  for ((i = 0; i < n; i++)); do order+=("${RUNS[$(( (i + round - 1) % n ))]}"); done
  note "round $round of $ROUNDS: ${order[*]}"
  for run in "${order[@]}"; do
    kill -0 "$BACKENDS_PID" 2>/dev/null || die "the backends exited; see $LOGS/backends.log"
    measure "$round" "${run%%:*}" "${run#*:}"
  done
done

summarize
echo
print_table
cat <<EOF

Medians over $ROUNDS round(s) of ${DURATION_S}s wrk runs (-t$WRK_THREADS -c$CONNS) on one $NCPU-core machine; everything shares its cores.
Documents: doc.html $(wc -c <"$WWW/doc.html") bytes, doc.json $(wc -c <"$WWW/doc.json") bytes. Levels: gzip $GZIP_LEVEL, zstd $ZSTD_LEVEL, br $BROTLI_LEVEL.
identity: no Accept-Encoding, with each balancer's gzip configuration (the cost of passing the bodies).
us/req: the balancer's CPU time (user + system, whole process group) per completed request.
bytes, size%: the body as sent to curl with the same Accept-Encoding, and its share of the document.
x caddy, cpu/cad, x nginx, cpu/ng (relay rows): relay's req/s and us/req divided by Caddy's and nginx's in the
same round and coding, the median of those per-round ratios (medians.tsv has their range, *_rounds); they
need not equal the ratio of the medians beside them.
Raw rows: $RAW
Medians:  $MEDIANS
EOF

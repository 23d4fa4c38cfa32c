#!/usr/bin/env bash
# h2spec.sh - relay's HTTP/2 front door under the h2spec conformance suite,
# beside Go's own HTTP/2 server with nothing in front (bench/h2ref).
#
# relay serves HTTP/2 with connections of its own (internal/h2) over x/net's
# frame reader and HPACK coder; it should fail no h2spec case that Go's own
# HTTP/2 server passes, the bar it is held to. The script builds h2spec (through
# the Go module proxy) and h2ref, makes a self-signed certificate, starts one
# nginx backend on 127.0.0.1:18001 for relay, runs h2spec over TLS and over
# h2c against both, and prints each one's failures and whether relay's list
# is the same as Go's. It exits 1 when relay fails a case Go's server passes.
#
# Usage: bench/h2spec.sh [--out DIR]
#   --out DIR    where results go (default: a new directory under /tmp)
#
# Needs Go, openssl and nginx (apt-get install -y nginx). Every process the
# script starts runs in its own session and is stopped by its process group.
set -u

PROG=h2spec.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --out) need_value "$@"; OUT=$2; shift 2;;
    -h|--help) help; exit 0;;
    *) unknown_argument "$1";;
  esac
done
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$(mktemp -d /tmp/relay-h2spec.XXXXXX)}
mkdir -p "$OUT"
command -v nginx >/dev/null || die "nginx is missing: apt-get install -y nginx"

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -- -"$p" 2>/dev/null; done; }
trap cleanup EXIT
start() { setsid "$@" >>"$OUT/servers.log" 2>&1 & PIDS+=($!); }

GOBIN="$OUT/bin" go install github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible || die "building h2spec failed"
(cd "$REPO" && go build -o "$OUT/bin/relay" ./cmd/relay && go build -o "$OUT/bin/h2ref" ./bench/h2ref) || die "build failed"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=localhost \
  -addext subjectAltName=IP:127.0.0.1 -keyout "$OUT/key.pem" -out "$OUT/cert.pem" 2>/dev/null || die "openssl failed"

cat >"$OUT/nginx.conf" <<NGINX
worker_processes 1; daemon off; pid $OUT/nginx.pid; error_log $OUT/nginx-error.log;
events { worker_connections 1024; }
http { access_log off; server { listen 127.0.0.1:18001; location / { return 200 "hello\n"; } } }
NGINX
cat >"$OUT/relay.yml" <<RELAY
listen: 127.0.0.1:18080
tls_listen: 127.0.0.1:18090
h2c: true
admin_listen: ""
access_log: false
tls_certificates:
  - cert_file: $OUT/cert.pem
    key_file: $OUT/key.pem
backends:
  - http://127.0.0.1:18001
RELAY
start nginx -c "$OUT/nginx.conf"
start "$OUT/bin/relay" -config "$OUT/relay.yml"
start env -C "$OUT" ./bin/h2ref # from $OUT, where its cert.pem and key.pem are
sleep 2

worse=0
for side in tls h2c; do
  if [ $side = tls ]; then ref="-p 18443 -t -k"; rel="-p 18090 -t -k"; else ref="-p 18444"; rel="-p 18080"; fi
  for who in go relay; do
    args=$ref; [ $who = relay ] && args=$rel
    # shellcheck disable=SC2086
    timeout 300 "$OUT/bin/h2spec" -h 127.0.0.1 $args -o 2 >"$OUT/h2spec-$who-$side.txt" 2>&1
    sed -n '/^Failures:/,$p' "$OUT/h2spec-$who-$side.txt" | grep -E '^ *× ' | sed 's/^ *//' | sort >"$OUT/failures-$who-$side.txt"
    echo "$who over $side: $(tail -1 "$OUT/h2spec-$who-$side.txt")"
  done
  extra=$(comm -13 "$OUT/failures-go-$side.txt" "$OUT/failures-relay-$side.txt")
  if [ -n "$extra" ]; then
    worse=1
    echo "relay over $side fails cases Go's server passes:"; echo "$extra"
  else
    echo "relay over $side fails no case Go's server passes"
  fi
done
echo "results: $OUT"
exit $worse

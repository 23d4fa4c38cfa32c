#!/usr/bin/env bash
# build.sh - build the OpenTelemetry Collector of builder-config.yaml (OTLP
# receiver; file and debug exporters; batch processor) into a directory.
#
# Usage: bench/otelcol/build.sh DIR [TIMEOUT]
#   DIR      where the binary (DIR/otelcol-relay) and the generated sources
#            go; created when missing, and never inside the repository.
#   TIMEOUT  longest the whole build may take, in seconds (default 1200; a
#            first build on 2 cores takes a few minutes, a second one,
#            with Go's caches warm, well under one).
#
# Needs Go and the Go module proxy; the builder is installed into DIR/bin.
# Run the result on loopback with:
#   DIR/otelcol-relay --config=bench/otelcol/config.yaml
set -euo pipefail

if [[ $# -lt 1 || $1 == -h || $1 == --help ]]; then
	sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
limit=${2:-1200}
case "$out/" in
"$repo"/*)
	echo "build.sh: $out is inside the repository; build outside it" >&2
	exit 2
	;;
esac

start=$(date +%s)
deadline=$((start + limit))
# run runs a command within what is left of the time limit.
run() {
	local left=$((deadline - $(date +%s)))
	if ((left <= 0)); then
		echo "build.sh: out of time (${limit} s)" >&2
		exit 1
	fi
	timeout "$left" "$@"
}

# The caller's GOFLAGS (such as relay's -buildvcs=false) are not the
# collector's; the generated module is built on its own terms.
export GOFLAGS=
builder_version=v0.165.0
GOBIN="$out/bin" run go install "go.opentelemetry.io/collector/cmd/builder@$builder_version"

# The manifest with the output path in it (the builder's --output-path flag
# is deprecated).
sed "s|^dist:|dist:\n  output_path: $out|" "$here/builder-config.yaml" >"$out/builder-config.yaml"

# The builder writes go.mod and the sources, tidies (see replaces in the
# manifest), checks the components' versions agree and compiles.
(cd "$out" && run "$out/bin/builder" --config="$out/builder-config.yaml")
echo "built $out/otelcol-relay in $(($(date +%s) - start)) s" >&2
"$out/otelcol-relay" --version

#!/usr/bin/env bash
# oneshot.sh measures a one-shot `weft run --local` against a local
# zero-latency OpenAI-compatible server (BENCHMARKS.md, figure 3): wall time
# (hyperfine when installed, else a timed loop) and peak RSS (GNU time's
# "Maximum resident set size"), for one text step and for one step with a
# shell tool call followed by the final text step.
#
# Usage: bench/oneshot.sh MOCKLLM [RUNS]
#
#   MOCKLLM  path to a mockllm binary (an OpenAI-compatible mock server with
#            --addr and --scenario text|tool flags)
#   RUNS     timed runs per case (default 30)
#
# It builds weft from this checkout, uses a fresh HOME, XDG dirs and store
# in a temp dir (so no config file or running host is picked up), and
# prints a summary table. Requires bash, go, /usr/bin/time (GNU time).
set -euo pipefail

mock=${1:?usage: bench/oneshot.sh MOCKLLM [RUNS]}
runs=${2:-30}
mock=$(cd "$(dirname "$mock")" && pwd)/$(basename "$mock")
repo=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

(cd "$repo" && CGO_ENABLED=0 go build -o "$tmp/weft" ./cmd/weft)
weft=$tmp/weft

"$mock" --addr 127.0.0.1:18481 --scenario text >"$tmp/mock-text.log" 2>&1 &
pids+=($!)
"$mock" --addr 127.0.0.1:18482 --scenario tool --tool-calls 1 >"$tmp/mock-tool.log" 2>&1 &
pids+=($!)
for port in 18481 18482; do
	for _ in $(seq 100); do
		curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
		sleep 0.05
	done
done

mkdir -p "$tmp/home" "$tmp/work"
cd "$tmp/work"
export HOME=$tmp/home XDG_CONFIG_HOME=$tmp/home/.config XDG_DATA_HOME=$tmp/home/.local/share \
	XDG_STATE_HOME=$tmp/home/.local/state XDG_RUNTIME_DIR=$tmp/home/run OPENAI_API_KEY=x
unset WEFT_TOKEN WEFT_STORE WEFT_MODEL || true

# cmd CASE prints the command line of a case.
cmd() {
	local port=18481
	[ "$1" = tool ] && port=18482
	echo "env OPENAI_BASE_URL=http://127.0.0.1:$port/v1 $weft --store $tmp/weft.db run --local -m openai-chat:mock-model -p 'list the files'"
}

# Check both cases work, and warm the store.
for c in text tool; do
	if ! eval "$(cmd $c)" >"$tmp/$c.out" 2>&1; then
		echo "case $c failed:" >&2
		cat "$tmp/$c.out" >&2
		exit 1
	fi
done
grep -q 'tok1' "$tmp/text.out" || { echo "text case printed no answer" >&2; cat "$tmp/text.out" >&2; exit 1; }

echo "# $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r), $(go version | cut -d' ' -f3)"
echo "# weft $(cd "$repo" && git rev-parse --short HEAD 2>/dev/null || echo '?'), $runs runs per case"
echo "# tool case output:"
sed 's/^/#   /' "$tmp/tool.out"

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
max() { sort -n | tail -1; }

printf '%-6s %14s %14s %14s %14s\n' case wall-p50-ms wall-mean-ms rss-p50-MiB rss-max-MiB
for c in text tool; do
	if command -v hyperfine >/dev/null; then
		hyperfine -N --warmup 3 --runs "$runs" --export-json "$tmp/$c.json" "$(cmd $c)" >/dev/null 2>&1 ||
			hyperfine --warmup 3 --runs "$runs" --export-json "$tmp/$c.json" "$(cmd $c)" >/dev/null
		wall_p50=$(python3 -c "import json,statistics;r=json.load(open('$tmp/$c.json'))['results'][0];print('%.1f'%(statistics.median(r['times'])*1e3))")
		wall_mean=$(python3 -c "import json;r=json.load(open('$tmp/$c.json'))['results'][0];print('%.1f'%(r['mean']*1e3))")
	else
		: >"$tmp/$c.wall"
		for _ in $(seq "$runs"); do
			t0=$(date +%s%N)
			eval "$(cmd $c)" >/dev/null 2>&1
			echo $((($(date +%s%N) - t0) / 1000)) >>"$tmp/$c.wall"
		done
		wall_p50=$(median <"$tmp/$c.wall" | awk '{printf "%.1f", $1/1000}')
		wall_mean=$(awk '{s+=$1} END {printf "%.1f", s/NR/1000}' "$tmp/$c.wall")
	fi
	: >"$tmp/$c.rss"
	for _ in $(seq "$runs"); do
		eval "/usr/bin/time -v $(cmd $c)" 2>&1 >/dev/null | awk -F: '/Maximum resident set size/ {print $2+0}' >>"$tmp/$c.rss"
	done
	rss_p50=$(median <"$tmp/$c.rss" | awk '{printf "%.1f", $1/1024}')
	rss_max=$(max <"$tmp/$c.rss" | awk '{printf "%.1f", $1/1024}')
	printf '%-6s %14s %14s %14s %14s\n' "$c" "$wall_p50" "$wall_mean" "$rss_p50" "$rss_max"
done

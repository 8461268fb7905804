#!/usr/bin/env bash
# serve.sh measures the host process of `weft serve` over warm text turns
# (BENCHMARKS.md, figure 9, host-only CPU and RSS): it starts `weft serve`
# against a local zero-latency OpenAI-compatible server, drives TURNS text
# turns on one session with `weft run -s SESSION` (each through the host),
# and reads the serve process's CPU time (/proc/PID/stat utime+stime) and
# memory (VmRSS, VmHWM in /proc/PID/status). The CLI's own start-up is not
# in these numbers: only the host process is measured.
#
# Usage: bench/serve.sh MOCKLLM [TURNS]
#
#   MOCKLLM  path to a mockllm binary (--addr and --scenario text flags)
#   TURNS    turns to drive (default 30)
set -euo pipefail

mock=${1:?usage: bench/serve.sh MOCKLLM [TURNS]}
turns=${2:-30}
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
mkdir -p "$tmp/home" "$tmp/work"
cd "$tmp/work"
export HOME=$tmp/home XDG_CONFIG_HOME=$tmp/home/.config XDG_DATA_HOME=$tmp/home/.local/share \
	XDG_STATE_HOME=$tmp/home/.local/state XDG_RUNTIME_DIR=$tmp/home/run \
	OPENAI_API_KEY=x OPENAI_BASE_URL=http://127.0.0.1:18491/v1 WEFT_TOKEN=bench-token \
	WEFT_STORE=$tmp/weft.db WEFT_HOST=127.0.0.1:18492

"$mock" --addr 127.0.0.1:18491 --scenario text >"$tmp/mock.log" 2>&1 &
pids+=($!)
"$weft" serve --listen 127.0.0.1:18492 >"$tmp/serve.log" 2>&1 &
serve=$!
pids+=($serve)
for port in 18491 18492; do
	for _ in $(seq 100); do
		curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
		curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
		sleep 0.05
	done
done

ticks=$(getconf CLK_TCK)
cpu() { awk -v t="$ticks" '{printf "%.0f", ($14+$15)*1000/t}' "/proc/$serve/stat"; }
kb() { awk -v f="$1:" '$1==f {print $2}' "/proc/$serve/status"; }

rss0=$(kb VmRSS)
"$weft" run --json -m openai-chat:mock-model -p 'Say hello.' >"$tmp/first.out" 2>&1 || { cat "$tmp/first.out" "$tmp/serve.log" >&2; exit 1; }
session=$(grep -o 'ses_[0-9a-z]*' "$tmp/first.out" | head -1)
[ -n "$session" ] || { echo "no session id in:" >&2; cat "$tmp/first.out" >&2; exit 1; }
cpu0=$(cpu)
t0=$(date +%s%N)
for _ in $(seq "$turns"); do
	"$weft" run -s "$session" -p 'Say hello.' >/dev/null 2>&1
done
t1=$(date +%s%N)
cpu1=$(cpu)

echo "# $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r), $(go version | cut -d' ' -f3)"
echo "# weft $(cd "$repo" && git rev-parse --short HEAD 2>/dev/null || echo '?'), $turns turns on session $session (after one warm-up turn)"
printf 'host-rss-idle-MiB %s\n' "$(awk -v k="$rss0" 'BEGIN {printf "%.1f", k/1024}')"
printf 'host-rss-MiB %s\n' "$(awk -v k="$(kb VmRSS)" 'BEGIN {printf "%.1f", k/1024}')"
printf 'host-rss-anon-MiB %s\n' "$(awk -v k="$(kb RssAnon)" 'BEGIN {printf "%.1f", k/1024}')"
printf 'host-rss-file-MiB %s\n' "$(awk -v k="$(kb RssFile)" 'BEGIN {printf "%.1f", k/1024}')"
printf 'host-hwm-MiB %s\n' "$(awk -v k="$(kb VmHWM)" 'BEGIN {printf "%.1f", k/1024}')"
printf 'host-cpu-ms/turn %s\n' "$(awk -v a="$cpu0" -v b="$cpu1" -v n="$turns" 'BEGIN {printf "%.2f", (b-a)/n}')"
printf 'cli-wall-ms/turn %s\n' "$(awk -v a="$t0" -v b="$t1" -v n="$turns" 'BEGIN {printf "%.1f", (b-a)/1e6/n}')"

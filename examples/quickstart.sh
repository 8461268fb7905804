#!/bin/sh
# The offline quick start: builds weft, runs the scripted model in a fresh
# directory (no network, no API key, an embedded SQLite store), shows the
# file the agent wrote through its mounted directory, and prints the
# session's stored events.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
CGO_ENABLED=0 go build -o "$tmp/weft" "$root/cmd/weft"
mkdir "$tmp/work"
cd "$tmp/work"
# A private HOME: no user config, no running host; the store is a file here.
export HOME="$tmp" WEFT_STORE="$tmp/weft.db"
unset XDG_CONFIG_HOME XDG_DATA_HOME XDG_STATE_HOME WEFT_HOST WEFT_TOKEN WEFT_MODEL

# --approve never-ask: the agent's write runs without asking, so the demo
# never waits for a person, on a terminal or not.
echo "\$ weft run --approve never-ask -m scripted:examples/quickstart.json -p 'remember the milk'"
"$tmp/weft" run --approve never-ask -m "scripted:$root/examples/quickstart.json" -p "remember the milk"

echo
echo "\$ cat notes/hello.txt    # written by the agent's write_file call"
cat notes/hello.txt

session=$("$tmp/weft" sessions --json | sed -n 's/^{"id":"\([^"]*\)".*/\1/p' | head -n 1)
echo
echo "\$ weft events $session    # the stored log: one line per event"
"$tmp/weft" events "$session"
echo
echo "Store: $tmp/weft.db  ·  continue with: HOME=$tmp WEFT_STORE=$tmp/weft.db $tmp/weft run -s $session --approve never-ask -m scripted:$root/examples/quickstart.json -p 'again'"

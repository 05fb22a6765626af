#!/usr/bin/env bash
# make serve-load [RUN=runs/multi30k] [SET=test_2016_flickr] [CLIENTS=16] [REQUESTS=200]: qkv serve under load and under
# hostile clients. Starts `qkv serve RUN` on a free loopback port; 16 clients x 200 requests
# of 1-8 sentences drawn from the set's German side; then `qkv translate` on the same
# sentences in one batch, for the throughput to compare with; then the hostile clients.
set -euo pipefail
cd "$(dirname "$0")/.."
QKV=${QKV:-build/qkv}
RUN=${RUN:-runs/multi30k}
SET=${SET:-test_2016_flickr}
CLIENTS=${CLIENTS:-16}
REQUESTS=${REQUESTS:-200}
src=data/multi30k/$SET.de
out=$(mktemp -d /tmp/qkv-serve-load.XXXXXX)
[[ -d $RUN || -f $RUN ]] || { echo "qkv: serve-load: no run at $RUN (make multi30k trains one)" >&2; exit 2; }
scripts/multi30k_data.sh data/multi30k
"$QKV" serve "$RUN" --port 0 2>"$out/server.log" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$out"' EXIT
for _ in $(seq 600); do grep -q 'serving .* on http' "$out/server.log" && break; sleep 0.1; done
port=$(grep -o '127.0.0.1:[0-9]*' "$out/server.log" | head -1 | cut -d: -f2)
head -1 "$out/server.log"
echo "== load: $CLIENTS clients x $REQUESTS requests of 1-8 sentences from $SET (beam 5)"
timeout 3600 /usr/bin/python3 scripts/serve_load.py load "$port" "$src" "$CLIENTS" "$REQUESTS" "$out/load.json"
echo "== qkv translate on the same number of sentences, one batch (beam 5)"
n=$(/usr/bin/python3 -c "import json; print(json.load(open('$out/load.json'))['sentences'])")
/usr/bin/python3 -c "
import random
lines = open('$src', encoding='utf-8').read().splitlines()
rng = random.Random(0)
print('\n'.join(lines[rng.randrange(len(lines))] for _ in range($n)))" >"$out/same.de"
start=$(date +%s.%N)
"$QKV" translate "$RUN" <"$out/same.de" >/dev/null 2>&1
end=$(date +%s.%N)
/usr/bin/python3 -c "print(f'qkv translate: $n sentences in {$end - $start:.1f} s = {$n / ($end - $start):.1f} sentences/s')"
echo "== hostile clients"
timeout 600 /usr/bin/python3 scripts/serve_load.py hostile "$port"

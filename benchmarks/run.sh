#!/usr/bin/env bash
# Runs the comparison benchmarks: ratelimit beside golang.org/x/time/rate,
# sethvargo/go-limiter, ulule/limiter, throttled and go-redis/redis_rate, in
# memory and on a Redis it starts on 127.0.0.1:16479 (stopped by PID on
# exit), then prints benchstat tables with the libraries side by side.
#
#   bash benchmarks/run.sh              # COUNT=6 runs of every benchmark
#   COUNT=10 BENCHTIME=2s bash benchmarks/run.sh
#
# Raw results are kept in benchmarks/results/ (memory.txt, redis.txt).
set -euo pipefail
cd "$(dirname "$0")"
count=${COUNT:-6}
benchtime=${BENCHTIME:-1s}
port=${PORT:-16479}

if ! command -v redis-server >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
fi
go install golang.org/x/perf/cmd/benchstat@latest
benchstat=$(go env GOPATH)/bin/benchstat

work=$(mktemp -d)
redis-server --bind 127.0.0.1 --port "$port" --dir "$work" --save '' --appendonly no >"$work/log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done

mkdir -p results
{
  echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(go version)"
  echo "# $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/ {print $2}') GiB"
  echo "# $(redis-server --version)"
} | tee results/machine.txt

go test -run='^$' -bench=Memory -benchmem -count="$count" -benchtime="$benchtime" . | tee results/memory.txt
RATELIMIT_REDIS_ADDR=127.0.0.1:$port \
  go test -run='^$' -bench=Redis -benchmem -count="$count" -benchtime="$benchtime" -timeout=60m . | tee results/redis.txt

for f in memory redis; do
  echo
  echo "== $f: time per decision"
  "$benchstat" -col /lib -filter '.unit:(sec/op)' results/$f.txt 2>/dev/null || "$benchstat" -col /lib results/$f.txt
  echo
  echo "== $f: decisions/s"
  "$benchstat" -col /lib -filter '.unit:(decisions/s)' results/$f.txt
  echo
  echo "== $f: allocations per decision"
  "$benchstat" -col /lib -filter '.unit:(allocs/op)' results/$f.txt
done
echo
echo "== redis: latency with 64 callers"
"$benchstat" -col /lib -filter '/mode:parallel .unit:(p50-µs OR p99-µs)' results/redis.txt

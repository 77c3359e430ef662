#!/usr/bin/env bash
# Runs the comparison benchmarks: ratelimit beside golang.org/x/time/rate,
# sethvargo/go-limiter, ulule/limiter, throttled and go-redis/redis_rate, in
# memory and on a Redis it starts on 127.0.0.1:16479 (stopped by PID on
# exit), then prints benchstat tables with the libraries side by side.
#
#   bash benchmarks/run.sh              # COUNT=6 runs of every benchmark
#   COUNT=10 BENCHTIME=2s bash benchmarks/run.sh
#   bash benchmarks/run.sh memory       # the in-process half only, no Redis
#
# Raw results are kept in benchmarks/results/ (memory.txt, redis.txt), each headed by
# the date, the Go version and the machine it ran on.
set -euo pipefail
cd "$(dirname "$0")"
count=${COUNT:-6}
benchtime=${BENCHTIME:-1s}
port=${PORT:-16479}
parts=(memory redis)
if [ "${1:-}" = memory ]; then parts=(memory); fi

go install golang.org/x/perf/cmd/benchstat@latest
benchstat=$(go env GOPATH)/bin/benchstat
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null && wait $pid 2>/dev/null; rm -rf "$work"' EXIT

if [ ${#parts[@]} = 2 ]; then
  if ! command -v redis-server >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
  fi
  redis-server --bind 127.0.0.1 --port "$port" --dir "$work" --save '' --appendonly no >"$work/log" 2>&1 &
  pid=$!
  for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
fi

mkdir -p results
machine() { # the lines that head each results file: when, on what (benchstat skips them)
  echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(go version)"
  echo "# $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/ {print $2}') GiB"
  if [ -n "$pid" ]; then echo "# $(redis-server --version)"; fi
}
machine

# One binary, run count times with -count=1: each round runs every library
# once, so a slow spell of this shared machine lands on all of them rather
# than on whichever library -count=N happened to be repeating.
go test -c -o "$work/benchmarks.test" .
rounds() { # rounds BENCH OUT
  machine >"$2"
  for i in $(seq "$count"); do
    "$work/benchmarks.test" -test.run='^$' -test.bench="$1" -test.benchmem -test.count=1 \
      -test.benchtime="$benchtime" -test.timeout=60m | tee -a "$2"
  done
}
rounds Memory results/memory.txt
if [ -n "$pid" ]; then
  RATELIMIT_REDIS_ADDR=127.0.0.1:$port rounds Redis results/redis.txt
fi

for f in "${parts[@]}"; do
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
if [ -n "$pid" ]; then
  echo
  echo "== redis: latency with 64 callers"
  "$benchstat" -col /lib -filter '/mode:parallel .unit:(p50-µs OR p99-µs)' results/redis.txt
fi

#!/usr/bin/env bash
# compare.sh: ratelimit-server beside envoyproxy/ratelimit, in one run, on
# one Redis, with one configuration, under loadgen. It prints, per case
# (admitting or denying; 1 or 2 descriptors a call) and server, the median
# over the rounds of calls/s, p99, and the CPU time per call of the
# server's process (/proc/PID/stat) and of Redis (INFO cpu), then the
# ratios ratelimit-server / envoyproxy/ratelimit, taken per pair of runs
# (the two servers back to back in each round, in alternating order) and
# their median: on a machine others share, CPU per call is the figure
# that holds; calls/s and p99 move with everyone's load.
#
#   bash cmd/ratelimit-server/loadgen/compare.sh
#   ROUNDS=5 DURATION=20s BASE_PORT=21150 bash cmd/ratelimit-server/loadgen/compare.sh
#   CLUSTER=1 BASE_PORT=21180 bash cmd/ratelimit-server/loadgen/compare.sh   # 3 masters
#
# Other knobs: WARMUP (2s), PRIME (10s: every value of the deny domain asked
# of each server before the rounds), CONCURRENCY (64), CONNS (4), KEYS
# (10000), CASES ("admit:1 admit:2 deny:1 deny:2"), ENVOY_RATELIMIT_VERSION,
# OUT (keep the raw results there), KEEP=1 (keep the work directory).
#
# envoyproxy/ratelimit is built from the Go module proxy (go mod download
# of ENVOY_RATELIMIT_VERSION into the module cache, copied out, go build
# ./src/service_cmd), nothing of it is kept in this repository. It is
# configured on loopback only: gRPC, HTTP and debug ports on 127.0.0.1,
# statsd off (its stats go to its log), no tracing, no xDS.
#
# Ports: Redis on BASE_PORT (a redis-server of the script's own),
# envoyproxy/ratelimit's gRPC, HTTP and debug on BASE_PORT+1..3, this
# server's gRPC on BASE_PORT+4. CLUSTER=1 makes the Redis a cluster of
# three masters, on BASE_PORT, BASE_PORT+5 and BASE_PORT+6 (both servers
# are given all three; Redis CPU is the three's sum). Every process is stopped by PID on exit.
# Raw results (one TSV line per run) are left in $OUT (default: a file in
# the work directory, printed at the end).
set -euo pipefail
loadgen_dir=$(cd "$(dirname "$0")" && pwd)
server_dir=$(dirname "$loadgen_dir")

rounds=${ROUNDS:-3}
duration=${DURATION:-10s}
warmup=${WARMUP:-2s}
base=${BASE_PORT:-16479}
concurrency=${CONCURRENCY:-64}
conns=${CONNS:-4}
keys=${KEYS:-10000}
cases=${CASES:-admit:1 admit:2 deny:1 deny:2}
envoy_version=${ENVOY_RATELIMIT_VERSION:-v1.4.1-0.20260122083618-3fb702589d36}

work=$(mktemp -d)
out=${OUT:-$work/results.tsv}
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ -z "${OUT:-}" ] && [ -z "${KEEP:-}" ]; then rm -rf "$work"; fi
}
trap cleanup EXIT
for tool in redis-server redis-cli jq go; do
  command -v "$tool" >/dev/null || { echo "compare: $tool is not installed"; exit 1; }
done

echo "== building envoyproxy/ratelimit $envoy_version (module proxy)"
src=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "github.com/envoyproxy/ratelimit@$envoy_version" | jq -r '.Dir // empty')
[ -n "$src" ] || { echo "compare: go mod download github.com/envoyproxy/ratelimit@$envoy_version failed"; exit 1; }
cp -r "$src" "$work/envoy-src"
chmod -R u+w "$work/envoy-src"
(cd "$work/envoy-src" && go build -o "$work/envoy-ratelimit" ./src/service_cmd)

echo "== building ratelimit-server and loadgen ($(git -C "$server_dir" describe --always --dirty 2>/dev/null || echo '?'))"
go build -C "$server_dir" -o "$work/ratelimit-server" .
go build -C "$server_dir" -o "$work/loadgen" ./loadgen

redis_ports=$base
[ -n "${CLUSTER:-}" ] && redis_ports="$base $((base + 5)) $((base + 6))"
redis_addrs=
for port in $redis_ports; do
  echo "== starting Redis on $port"
  mkdir "$work/redis-$port"
  cluster_flags=()
  [ -n "${CLUSTER:-}" ] && cluster_flags=(--cluster-enabled yes --cluster-config-file "$work/redis-$port/nodes.conf")
  redis-server --bind 127.0.0.1 --port "$port" --dir "$work/redis-$port" --save '' --appendonly no "${cluster_flags[@]}" >"$work/redis-$port/log" 2>&1 &
  pids+=($!)
  redis_pid=$!
  for _ in $(seq 100); do
    if redis-cli -p "$port" info server 2>/dev/null | tr -d '\r' | grep -qx "process_id:$redis_pid"; then break; fi
    kill -0 "$redis_pid" 2>/dev/null || { echo "compare: redis-server exited:"; cat "$work/redis-$port/log"; exit 1; }
    sleep 0.1
  done
  redis-cli -p "$port" info server | tr -d '\r' | grep -qx "process_id:$redis_pid" || { echo "compare: port $port is not our redis-server"; exit 1; }
  redis_addrs=${redis_addrs:+$redis_addrs,}127.0.0.1:$port
done
if [ -n "${CLUSTER:-}" ]; then
  # shellcheck disable=SC2086
  redis-cli --cluster create ${redis_addrs//,/ } --cluster-replicas 0 --cluster-yes >"$work/cluster.log" 2>&1 ||
    { echo "compare: redis-cli --cluster create failed:"; cat "$work/cluster.log"; exit 1; }
  for _ in $(seq 100); do
    redis-cli -p "$base" cluster info | tr -d '\r' | grep -qx 'cluster_state:ok' && break
    sleep 0.1
  done
fi
redis_type=SINGLE
[ -n "${CLUSTER:-}" ] && redis_type=CLUSTER

# One configuration, read by both: where envoyproxy/ratelimit reads it
# (RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config), and -config of this server.
# admit: far more than any value is asked; deny: 1 a day, so that once
# each value was asked (the priming below), every call is over the limit.
conf=$work/runtime/ratelimit/config
mkdir -p "$conf"
for c in admit:"unit: minute, requests_per_unit: 1000000" deny:"unit: day, requests_per_unit: 1"; do
  printf 'domain: %s\ndescriptors:\n  - key: user\n    rate_limit: {%s}\n  - key: user_1\n    rate_limit: {%s}\n' \
    "${c%%:*}" "${c#*:}" "${c#*:}" >"$conf/${c%%:*}.yaml"
done

echo "== starting the two servers"
REDIS_SOCKET_TYPE=tcp REDIS_TYPE=$redis_type REDIS_URL="$redis_addrs" USE_STATSD=false TRACING_ENABLED=false CONFIG_TYPE=FILE \
  RUNTIME_ROOT="$work/runtime" RUNTIME_SUBDIRECTORY=ratelimit RUNTIME_APPDIRECTORY=config RUNTIME_WATCH_ROOT=false \
  GRPC_HOST=127.0.0.1 GRPC_PORT=$((base + 1)) HOST=127.0.0.1 PORT=$((base + 2)) \
  DEBUG_HOST=127.0.0.1 DEBUG_PORT=$((base + 3)) LOG_LEVEL=warn \
  "$work/envoy-ratelimit" >"$work/envoy.log" 2>&1 &
pids+=($!)
envoy_pid=$!
"$work/ratelimit-server" -config "$conf" -store redis -redis "$redis_addrs" \
  -grpc-addr "127.0.0.1:$((base + 4))" 2>"$work/server.log" &
pids+=($!)
server_pid=$!
ready() { # ready PORT: a gRPC server answers there
  "$work/loadgen" -addr "127.0.0.1:$1" -domain admit -keys 1 -concurrency 1 -conns 1 -warmup 0 -duration 100ms >/dev/null 2>&1
}
for _ in $(seq 300); do
  if ready $((base + 1)) && ready $((base + 4)); then break; fi
  for p in "$envoy_pid" "$server_pid"; do
    kill -0 "$p" 2>/dev/null || { echo "compare: a server exited:"; cat "$work/envoy.log" "$work/server.log"; exit 1; }
  done
  sleep 0.1
done
ready $((base + 1)) && ready $((base + 4)) || { echo "compare: the servers did not answer"; exit 1; }

echo "== priming: each server asked for every value of the deny domain (${PRIME:-10s} each)"
for port in $((base + 1)) $((base + 4)); do
  printf '  %s: ' "$port"
  "$work/loadgen" -addr "127.0.0.1:$port" -domain deny -descriptors 2 -keys "$keys" -concurrency "$concurrency" \
    -conns "$conns" -warmup 0 -duration "${PRIME:-10s}"
done

# run ROUND CASE SERVER: one measurement, appended to $out.
run() {
  local round=$1 case=$2 name=$3 port pid domain=${2%%:*} descriptors=${2#*:}
  if [ "$name" = envoy ]; then port=$((base + 1)) pid=$envoy_pid; else port=$((base + 4)) pid=$server_pid; fi
  local line
  line=$("$work/loadgen" -addr "127.0.0.1:$port" -domain "$domain" -descriptors "$descriptors" -keys "$keys" \
    -concurrency "$concurrency" -conns "$conns" -warmup "$warmup" -duration "$duration" \
    -pid "$pid" -redis "$redis_addrs" -format tsv | tail -1)
  printf '%s\t%s\t%s\t%s\n' "$round" "$case" "$name" "$line" >>"$out"
  printf '  round %s %-8s %-16s %s\n' "$round" "$case" "$name" "$line"
}

printf 'round\tcase\tserver\tcalls_per_s\tp50_us\tp99_us\tok\tover\terrors\tserver_cpu_us_per_call\tredis_cpu_us_per_call\n' >"$out"
echo "== $rounds rounds of $cases, $duration each after $warmup of warm-up; $concurrency callers on $conns connections, $keys values"
echo "   load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$rounds"); do
  for c in $cases; do
    if [ $((round % 2)) = 1 ]; then order="envoy ours"; else order="ours envoy"; fi
    for name in $order; do run "$round" "$c" "$name"; done
  done
done
echo "   load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

echo
echo "== medians over $rounds rounds (ours: ratelimit-server; envoy: envoyproxy/ratelimit $envoy_version)"
awk -F'\t' '
function median(list,   n, a, i, j, t) {
  n = split(list, a, " ")
  for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
  return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
NR == 1 { next }
{
  k = $2 SUBSEP $3
  rate[k] = rate[k] " " $4; p99[k] = p99[k] " " $6; scpu[k] = scpu[k] " " $10; rcpu[k] = rcpu[k] " " $11
  errs[k] += $9; over[k] += $8; calls[k] += $7 + $8 + $9
  v[$1, $2, $3] = $4 "\t" $6 "\t" $10 "\t" $11
  if (!($2 in seen)) { seen[$2] = 1; order[++ncases] = $2 }
  if ($1 > rounds) rounds = $1
}
END {
  printf "%-8s %-6s %10s %9s %16s %15s %7s %6s\n", "case", "server", "calls/s", "p99 ms", "server µs/call", "Redis µs/call", "over%", "errors"
  for (i = 1; i <= ncases; i++) for (s = 1; s <= 2; s++) {
    name = s == 1 ? "envoy" : "ours"; k = order[i] SUBSEP name
    printf "%-8s %-6s %10.0f %9.1f %16.1f %15.1f %7.1f %6d\n", order[i], name, median(rate[k]), median(p99[k]) / 1000,
      median(scpu[k]), median(rcpu[k]), 100 * over[k] / calls[k], errs[k]
  }
  print ""
  print "ratios ours / envoy, per round, then their median (CPU: lower is better; calls/s: higher)"
  printf "%-8s %-22s %-22s %-22s %-22s\n", "case", "server CPU/call", "Redis CPU/call", "calls/s", "p99"
  for (i = 1; i <= ncases; i++) {
    c = order[i]; ls = ""; lr = ""; lc = ""; lp = ""; lower = 0; pairs = 0
    for (r = 1; r <= rounds; r++) {
      if (!((r, c, "ours") in v) || !((r, c, "envoy") in v)) continue
      split(v[r, c, "ours"], o, "\t"); split(v[r, c, "envoy"], e, "\t")
      ls = ls " " sprintf("%.2f", o[3] / e[3]); lr = lr " " sprintf("%.2f", o[4] / e[4])
      lc = lc " " sprintf("%.2f", o[1] / e[1]); lp = lp " " sprintf("%.2f", o[2] / e[2])
      pairs++; if (o[2] + 0 < e[2] + 0) lower++
    }
    printf "%-8s %-22s %-22s %-22s %-22s\n", c, sprintf("%.2f (%s)", median(ls), substr(ls, 2)), sprintf("%.2f (%s)", median(lr), substr(lr, 2)),
      sprintf("%.2f (%s)", median(lc), substr(lc, 2)), sprintf("%.2f, lower in %d/%d", median(lp), lower, pairs)
  }
}' "$out"
echo
echo "raw results: $out"

#!/usr/bin/env bash
# An emulated two-host cluster on one machine: two network namespaces ("hosts") joined by
# a veth pair that tc limits (default 1 Gbit/s and 100 us each way), two ranks per host.
# It calibrates the transports (railyard calibrate -> a topology file), then runs flat-ring
# and hierarchical all-reduce for real (railyard perf) and prints measured against the
# model's prediction (railyard plan on the calibrated topology) and the simulator's
# (railyard sim on the same topology, rank order).
#
#   sudo scripts/emulated-cluster.sh                 # needs root and `ip netns`
#   SIZE=16MiB RATE=2gbit DELAY=50us scripts/emulated-cluster.sh
#
# Only addresses inside the namespaces this script creates (10.77.0.0/24) are used.
set -euo pipefail
cd "$(dirname "$0")/.."
RY=${RAILYARD:-target/release/railyard}
SIZE=${SIZE:-4MiB}
RATE=${RATE:-1gbit}
DELAY=${DELAY:-100us}
ITERS=${ITERS:-5}
OUT=${OUT:-target/emulated-cluster}
NS=(ryhost0 ryhost1)
IP=(10.77.0.1 10.77.0.2)

if ! ip netns add ry-probe 2>/dev/null; then
  echo "SKIP: cannot create network namespaces here (needs root and iproute2)"
  exit 0
fi
ip netns del ry-probe
[ -x "$RY" ] || cargo build --release -q
mkdir -p "$OUT"

cleanup() { for n in "${NS[@]}"; do ip netns del "$n" 2>/dev/null || true; done; }
trap cleanup EXIT
cleanup
for n in "${NS[@]}"; do ip netns add "$n"; done
ip link add ry0 type veth peer name ry1
for i in 0 1; do
  ip link set "ry$i" netns "${NS[$i]}"
  ip netns exec "${NS[$i]}" ip addr add "${IP[$i]}/24" dev "ry$i"
  ip netns exec "${NS[$i]}" ip link set "ry$i" up
  ip netns exec "${NS[$i]}" ip link set lo up
  # netem gives rate and delay; kernels without it (sch_netem) get tbf: rate only.
  if ! ip netns exec "${NS[$i]}" tc qdisc add dev "ry$i" root netem delay "$DELAY" rate "$RATE" 2>/dev/null; then
    ip netns exec "${NS[$i]}" tc qdisc add dev "ry$i" root tbf rate "$RATE" burst 256kb latency 100ms
    DELAY="0 (no netem in this kernel; tbf limits the rate only)"
  fi
done

# Run one railyard command as 4 ranks, ranks 0-1 on host 0 and 2-3 on host 1; print rank 0's output.
job() {
  local port=$((20000 + RANDOM % 20000))
  local secret
  secret=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  local pids=() r host out
  for r in 0 1 2 3; do
    host=$((r / 2))
    out=/dev/null
    [ "$r" = 0 ] && out="$OUT/rank0.out"
    ip netns exec "${NS[$host]}" env RAILYARD_ID="${IP[0]}:$port#$secret" RAILYARD_RANK=$r RAILYARD_WORLD_SIZE=4 \
      RAILYARD_TIMEOUT_SECS=60 "$@" > "$out" &
    pids+=($!)
  done
  local failed=0
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
  cat "$OUT/rank0.out"
  return $failed
}

echo "## Emulated cluster: 2 hosts x 2 ranks, veth $RATE, $DELAY each way"
echo
job "$RY" calibrate -o "$OUT/emulated.toml"
echo
declare -A measured
for algo in ring hierarchical; do
  json=$(RAILYARD_ALGO=$algo job "$RY" perf all_reduce -b "$SIZE" -e "$SIZE" -n "$ITERS" -w 1 -c 1 --format json)
  measured[$algo]=$(python3 -c 'import json,sys; r=json.loads(sys.argv[1])[0]; assert r["out_of_place"]["wrong"]==0; print(r["out_of_place"]["time_us"]/1e6)' "$json")
done
plan=$("$RY" plan --topo "$OUT/emulated.toml" --algo ring,hierarchical --size "$SIZE" --format json)
sim=$("$RY" sim --topo "$OUT/emulated.toml" --algo ring,hierarchical --size "$SIZE" --no-compare --format json)
python3 - "$plan" "$sim" "${measured[ring]}" "${measured[hierarchical]}" "$SIZE" <<'PY'
import json, sys
plan = json.loads(sys.argv[1])
sim = json.loads(sys.argv[2])
measured = {"ring": float(sys.argv[3]), "hierarchical": float(sys.argv[4])}
predicted = {a["name"]: a["total_secs"] for a in plan["algorithms"]}
simulated = {r["algorithm"]: r["report"]["jobs"][0]["secs"] for r in sim["runs"]}
print(f"all-reduce of {sys.argv[5]}:\n")
print("| algorithm | predicted | simulated | measured | model error | simulator error |")
print("|---|---|---|---|---|---|")
for name in ("ring", "hierarchical"):
    p, s, m = predicted[name], simulated[name], measured[name]
    print(f"| {name} | {p*1e3:.2f} ms | {s*1e3:.2f} ms | {m*1e3:.2f} ms | {(p-m)/m*100:+.1f}% | {(s-m)/m*100:+.1f}% |")
fast_p = min(predicted, key=predicted.get)
fast_s = min(simulated, key=simulated.get)
fast_m = min(measured, key=measured.get)
print(f"\nThe model predicts {fast_p} is faster; measured, {fast_m} is faster"
      f" ({'agrees' if fast_p == fast_m else 'DISAGREES'}).")
print(f"The simulator predicts {fast_s} is faster"
      f" ({'agrees' if fast_s == fast_m else 'DISAGREES'}).")
PY

#!/bin/bash
# A black-box burst (docs/measuring.md, "A black-box run"): a dev cluster with sandgate's
# webhooks (make dev-cluster's sandgate-dev --webhooks), its CRDs serving v1beta1 only as the
# bench's burst scenarios run them, the operator started as the dev cluster's usage says, a
# pool of POOL members, then CLAIMS claims at QPS a second from claims.py, which times each
# from its create call to a watch showing it Ready. Nothing of the bench's code takes part.
#
#   test/performance/blackbox/burst.sh [out-dir]      (from the repository root; bin/ built)
#
# Environment: OPERATOR (a cmd/sandgate binary; default: go build), CLAIMS (100), QPS (100),
# POOL (150), SETTLE (seconds between the pool's last Ready and the first claim, 30).
# Everything it started is stopped at the end.
set -euo pipefail
out=${1:-$(mktemp -d /tmp/sandgate-blackbox-XXXXXX)}
claims=${CLAIMS:-100} qps=${QPS:-100} pool=${POOL:-150}
mkdir -p "$out"
kubectl=$(ls -d bin/k8s/*/kubectl | tail -1)
operator=${OPERATOR:-}
if [ -z "$operator" ]; then
  operator=$out/sandgate
  go build -o "$operator" ./cmd/sandgate
fi
pids=()
cleanup() { for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null || true; wait "${pids[i]}" 2>/dev/null || true; done; }
trap cleanup EXIT
k() { "$kubectl" --kubeconfig "$out/admin.kubeconfig" "$@"; }

bin/sandgate-dev --webhooks --kubeconfig "$out/admin.kubeconfig" >"$out/dev.log" 2>&1 &
pids+=($!)
until grep -q "control plane ready" "$out/dev.log"; do sleep 1; done
usage=$(grep -A1 "go run ./cmd/sandgate" "$out/dev.log" | tail -1)
read -r host port certs < <(echo "$usage" | sed -E 's/.*--webhook-host ([^ ]+) --webhook-port ([0-9]+) --webhook-cert-dir ([^ ]+).*/\1 \2 \3/')

# v1beta1 only where a CRD has it (config/v1beta1-only), before the operator watches anything.
k get crd -o json | python3 -c '
import json, sys
crds = json.load(sys.stdin)
for c in crds["items"]:
    if any(v["name"] == "v1beta1" for v in c["spec"]["versions"]):
        for v in c["spec"]["versions"]:
            if v["name"] == "v1alpha1":
                v["served"] = False
print(json.dumps(crds))' | k replace -f - >/dev/null
sleep 3

probe=$((20000 + RANDOM % 10000))
"$operator" --kubeconfig "$out/sandgate-dev-operator.kubeconfig" --extensions --leader-elect=false \
  --webhook-host "$host" --webhook-port "$port" --webhook-cert-dir "$certs" \
  --metrics-bind-address=0 --health-probe-bind-address=127.0.0.1:$probe >"$out/operator.log" 2>&1 &
pids+=($!)
until curl -sf "http://127.0.0.1:$probe/readyz" >/dev/null; do
  kill -0 "${pids[1]}" || { tail -3 "$out/operator.log"; exit 1; }
  sleep 0.5
done

k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Namespace
metadata: {name: blackbox}
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata: {name: bench-template, namespace: blackbox}
spec:
  podTemplate:
    spec:
      containers: [{name: agent, image: registry.example/agent:1}]
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata: {name: bench-pool, namespace: blackbox}
spec: {replicas: $pool, sandboxTemplateRef: {name: bench-template}}
YAML
until [ "$(k -n blackbox get sandboxwarmpool bench-pool -o jsonpath='{.status.readyReplicas}')" = "$pool" ]; do sleep 1; done
sleep "${SETTLE:-30}" # the CRDs' old storage goes, the pool's last events settle
busy() { head -1 /proc/stat | awk '{print ($2+$3+$4+$7+$8+$9) / 100}'; } # USER_HZ ticks
echo "burst at $(date -u +%T): $(uptime)"
b0=$(busy) t0=$(date +%s.%N)
python3 test/performance/blackbox/claims.py --kubeconfig "$out/admin.kubeconfig" --kubectl "$kubectl" \
  --namespace blackbox --pool bench-pool --claims "$claims" --qps "$qps" | tee "$out/result.json"
# The whole machine's busy CPU over the client's run (cluster, operator, client and anything
# else): with the bench's figures of the same burst, it tells a machine busy elsewhere.
echo "machine busy: $(awk -v a="$b0" -v b="$(busy)" -v t="$t0" -v u="$(date +%s.%N)" 'BEGIN {printf "%.2f s CPU in %.2f s", b-a, u-t}')"
echo "done at $(date -u +%T): $(uptime)"

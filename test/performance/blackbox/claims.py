#!/usr/bin/env python3
"""Black-box claim latency: N SandboxClaims created at a fixed rate against any cluster, each
timed from the start of its create call to a watch showing it Ready=True.

It uses nothing of sandgate's code, only the API (Python's standard library and a kubeconfig
with a client certificate, as `kubectl config view --raw` prints it), so it can check what the
bench measures from outside (docs/measuring.md, "A black-box run"):

    test/performance/blackbox/claims.py --kubeconfig K --namespace NS --pool POOL --claims 100 --qps 100

Connections are opened before the first claim (one per claim, HTTP/1.1 keep-alive), as a
client that is already running has them.
"""

import argparse
import base64
import json
import resource
import ssl
import statistics
import subprocess
import tempfile
import threading
import time
import http.client
import urllib.parse


def load_kubeconfig(path, kubectl):
    raw = subprocess.run([kubectl, "--kubeconfig", path, "config", "view", "--raw", "--minify", "-o", "json"],
                         check=True, capture_output=True, text=True).stdout
    cfg = json.loads(raw)
    cluster = cfg["clusters"][0]["cluster"]
    user = cfg["users"][0]["user"]
    tmp = tempfile.mkdtemp(prefix="blackbox-")

    def write(name, b64):
        p = f"{tmp}/{name}"
        with open(p, "wb") as f:
            f.write(base64.b64decode(b64))
        return p

    ctx = ssl.create_default_context(cafile=write("ca.crt", cluster["certificate-authority-data"]))
    ctx.load_cert_chain(write("tls.crt", user["client-certificate-data"]), write("tls.key", user["client-key-data"]))
    u = urllib.parse.urlparse(cluster["server"])
    return u.hostname, u.port or 443, ctx


def percentile(values, q):
    s = sorted(values)
    if not s:
        return float("nan")
    k = (len(s) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--kubectl", default="kubectl")
    ap.add_argument("--namespace", required=True)
    ap.add_argument("--pool", required=True)
    ap.add_argument("--claims", type=int, default=100)
    ap.add_argument("--qps", type=float, default=100)
    ap.add_argument("--prefix", default="bb")
    ap.add_argument("--timeout", type=float, default=120)
    a = ap.parse_args()

    host, port, ctx = load_kubeconfig(a.kubeconfig, a.kubectl)
    base = f"/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/{a.namespace}/sandboxclaims"

    # The watch, from the list's resourceVersion: every claim's Ready as it arrives.
    lc = http.client.HTTPSConnection(host, port, context=ctx)
    lc.request("GET", base)
    rv = json.loads(lc.getresponse().read())["metadata"]["resourceVersion"]
    wc = http.client.HTTPSConnection(host, port, context=ctx, timeout=a.timeout + 30)
    wc.request("GET", f"{base}?watch=1&allowWatchBookmarks=false&resourceVersion={rv}")
    wresp = wc.getresponse()
    ready = {}
    done = threading.Event()
    names = {f"{a.prefix}-{i:04d}" for i in range(a.claims)}

    def watch():
        while not done.is_set():
            line = wresp.readline()
            if not line:
                return
            at = time.monotonic()
            ev = json.loads(line)
            obj = ev.get("object", {})
            name = obj.get("metadata", {}).get("name")
            if name in names and name not in ready:
                for c in obj.get("status", {}).get("conditions", []) or []:
                    if c.get("type") == "Ready" and c.get("status") == "True":
                        ready[name] = at
                if len(ready) == len(names):
                    done.set()

    threading.Thread(target=watch, daemon=True).start()

    conns = []
    for _ in range(a.claims):
        c = http.client.HTTPSConnection(host, port, context=ctx, timeout=a.timeout)
        c.request("GET", "/version")
        c.getresponse().read()
        conns.append(c)

    started, took, errors = {}, {}, []

    def create(i, conn):
        name = f"{a.prefix}-{i:04d}"
        body = json.dumps({
            "apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxClaim",
            "metadata": {"name": name, "namespace": a.namespace},
            "spec": {"warmPoolRef": {"name": a.pool}},
        })
        t0 = time.monotonic()
        started[name] = t0
        conn.request("POST", base, body=body, headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        data = r.read()
        took[name] = time.monotonic() - t0
        if r.status != 201:
            errors.append(f"{name}: HTTP {r.status} {data[:200]!r}")

    threads = []
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    first = time.monotonic()
    for i in range(a.claims):
        wait = first + i / a.qps - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        t = threading.Thread(target=create, args=(i, conns[i]))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    done.wait(a.timeout)

    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    lat = [(ready[n] - started[n]) * 1000 for n in ready if n in started]
    calls = [v * 1000 for v in took.values()]
    print(json.dumps({
        "claims": a.claims, "qps": a.qps, "ready": len(lat), "createErrors": len(errors), "errors": errors[:5],
        "readyMs": {"p50": round(percentile(lat, 0.5), 1), "p90": round(percentile(lat, 0.9), 1),
                    "p99": round(percentile(lat, 0.99), 1), "max": round(max(lat), 1) if lat else None,
                    "mean": round(statistics.mean(lat), 1) if lat else None},
        "createCallMs": {"p50": round(percentile(calls, 0.5), 1), "p99": round(percentile(calls, 0.99), 1)},
        # This client's own CPU from the first create to the last Ready: it shares the machine.
        "clientCPUSeconds": round(cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime, 2),
    }, indent=1))


if __name__ == "__main__":
    main()

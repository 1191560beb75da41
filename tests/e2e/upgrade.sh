# shellcheck shell=bash
# Upgrading our provider on the node (sourced by run after node.sh). See docs/e2e.md, "Upgrading the
# provider".
#
# E2E_NODE_UPGRADE=DIR (a `run images` directory; implies E2E_NODE_CLUSTERCTL=DIR): `clusterctl init`
# installs our provider v0.1.0 from a copy of deploy/clusterctl in the run dir; then a second version,
# v0.1.1, is added to that copy (v0.1.0's directory with the image's default tag v0.1.1) together
# with an image capmox-apiserver:v0.1.1, which is deploy/image of the same binary under another tag:
# what is tested is clusterctl's upgrade mechanics, not a change of behaviour. While
# tests/e2e/upgrade_client.py creates, patches, lists and watches ProxmoxMachines through
# kube-apiserver, `clusterctl upgrade apply --infrastructure proxmox:v0.1.1` runs; once the new pod is
# Ready and the APIServices Available the client runs 15 s more and reports. A sampler logs the pod,
# the Service's endpoints and the APIServices' condition every second (upgrade-timeline.log).
# Meanwhile a workload cluster is being provisioned on the simulator (workload.sh), a clone task
# running when the old pod goes: each pod's log says once that it took the controller's leadership,
# and every VM is cloned once, none is left over.
#
# E2E_NODE_CLUSTERCTL_HA=1: the same with the HA components file (three replicas, three etcd
# members): every replica is replaced, leadership is taken once among the old and once among the
# new replicas, and the sampler logs etcd's pods and the StatefulSets and Services too.
#
# E2E_NODE_ROLLING=1 (default node mode): the same client while the HA overlay is applied again with
# the tag v0.1.1, the StatefulSet's rolling update (node_rolling_upgrade, after the HA install).

UPGRADE_VERSION=v0.1.1
UPGRADE_NAMESPACE=e2e-upgrade

# The run-dir copy of deploy/clusterctl that `clusterctl init` installs from (only v0.1.0 in it).
node_upgrade_repository() {
  node_clusterctl_repo=$run/clusterctl-repository
  mkdir -p "$node_clusterctl_repo/infrastructure-proxmox"
  cp -r "$repo/deploy/clusterctl/infrastructure-proxmox/$capmox_version" "$node_clusterctl_repo/infrastructure-proxmox/"
}

# The second version: its directory in the repository copy (both components files with the new
# default tag: clusterctl reads the one its URL names) and its image in containerd.
node_upgrade_add_version() {
  local dir=$node_clusterctl_repo/infrastructure-proxmox
  cp -r "$dir/$capmox_version" "$dir/$UPGRADE_VERSION"
  sed -i "s|\${CAPMOX_IMAGE:=capmox-apiserver:$capmox_version}|\${CAPMOX_IMAGE:=capmox-apiserver:$UPGRADE_VERSION}|" \
    "$dir/$UPGRADE_VERSION"/infrastructure-components*.yaml
  grep -q "capmox-apiserver:$UPGRADE_VERSION}" "$dir/$UPGRADE_VERSION/$node_components_file" ||
    die "the image's default tag not found in $node_components_file"
  grep -q 'minor: 1$' "$dir/$UPGRADE_VERSION/metadata.yaml" || die "metadata.yaml has no 0.1 series"
  node_upgrade_image
}

# capmox-apiserver:v0.1.1: deploy/image of the same binary with another tag, imported.
node_upgrade_image() {
  local out=$run/images/capmox-$UPGRADE_VERSION
  "$repo/deploy/image" --binary "$capmox_bin" --output "$out" --tag "$UPGRADE_VERSION" >"$out.log" 2>&1 ||
    die "deploy/image --tag $UPGRADE_VERSION failed: $(tail -n 5 "$out.log")"
  ctr -a "$node_containerd_sock" -n k8s.io images import "$out/capmox-apiserver-$UPGRADE_VERSION.docker.tar" >/dev/null ||
    die "importing capmox-apiserver:$UPGRADE_VERSION failed"
}

# One line a second: time, our pods and etcd's (name uid ready image), the StatefulSets and
# Services (kind/name uid, deletion), the Service's ready endpoints, the APIServices' Available
# status and reason.
node_upgrade_sampler() {
  local t0=$1 ns=$CAPMOX_NAMESPACE
  while :; do
    printf '%s pod=[%s] objects=[%s] endpoints=[%s] apiservices=[%s]\n' "$(($(date +%s%N) / 1000000 - t0))" \
      "$(kc -n "$ns" get pods -l "app.kubernetes.io/name in ($CAPMOX_SERVICE,capmox-etcd)" --request-timeout 2s \
        -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.uid} del={.metadata.deletionTimestamp} ready={.status.conditions[?(@.type=="Ready")].status} {.spec.containers[0].image};{end}' 2>&1 | tr '\n' ' ' | head -c 1400)" \
      "$(kc -n "$ns" get statefulsets,services --request-timeout 2s \
        -o jsonpath='{range .items[*]}{.kind}/{.metadata.name} {.metadata.uid} del={.metadata.deletionTimestamp};{end}' 2>&1 | tr '\n' ' ' | head -c 600)" \
      "$(kc -n "$ns" get endpointslices -l "kubernetes.io/service-name=$CAPMOX_SERVICE" --request-timeout 2s \
        -o jsonpath='{range .items[*].endpoints[*]}{.addresses[0]} ready={.conditions.ready} term={.conditions.terminating};{end}' 2>&1 | tr '\n' ' ' | head -c 600)" \
      "$(kc get apiservice "v1alpha1.$INFRA_GROUP" "v1alpha2.$INFRA_GROUP" --request-timeout 2s \
        -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.uid} {.status.conditions[0].status} {.status.conditions[0].reason};{end}' 2>&1 | tr '\n' ' ' | head -c 400)"
    sleep 1
  done
}

# WHEN: the controller's leadership taken once among our replicas (one "leading: the controller
# starts" line in all their logs: the others wait), waited for up to 60 s: with etcd restarted
# too, the new pods find the old leader's lease and wait for it to expire (etcd renews every
# lease's TTL when it starts). Sets node_upgrade_led: when, in seconds from node_upgrade_started if
# set. Otherwise noted in node_upgrade_failures, reported at the end, so that the measurement
# goes on.
node_upgrade_leading() {
  local i pod out count total leader at leads deadline=$((SECONDS + 60))
  while :; do
    total=0 leader='' at='' leads=()
    for ((i = 0; i < node_replicas; i++)); do
      pod=$CAPMOX_SERVICE-$i
      out=$(kc -n "$CAPMOX_NAMESPACE" logs "$pod")
      count=$(grep -c 'leading: the controller starts' <<<"$out") || true
      total=$((total + count))
      leads+=("$pod=$count")
      ((count)) || continue
      leader=$pod
      at=$(grep 'leading: the controller starts' <<<"$out" | tail -n 1 | sed -n 's/.*"timestamp":"\([^"]*\)".*/\1/p')
    done
    ((total == 0 && SECONDS < deadline)) || break
    sleep 1
  done
  node_upgrade_led=$at
  [[ -z $at || -z ${node_upgrade_started:-} ]] ||
    node_upgrade_led=$(python3 -c 'import datetime, sys
t = datetime.datetime.fromisoformat(sys.argv[1].replace("Z", "+00:00")).timestamp()
print(f"{t - float(sys.argv[2]):+.1f}")' "$at" "$node_upgrade_started")
  if ((total != 1)); then
    node_upgrade_failures+=("leadership taken $total times ($1): ${leads[*]}")
    log "FAILED: the controller's leadership taken $total times ($1): ${leads[*]}"
    return 0
  fi
  log "$leader ($1) took the controller's leadership once (at $node_upgrade_led)"
}

# OLD_UIDS: every replica a new pod (none of OLD_UIDS) of the new image, Ready.
node_upgrade_new_pods_ready() {
  local uid image ready count=0
  while read -r uid image ready; do
    [[ -n $uid && $1 != *"$uid"* && $image == "capmox-apiserver:$UPGRADE_VERSION" && $ready == True ]] &&
      count=$((count + 1))
  done < <(kc -n "$CAPMOX_NAMESPACE" get pods -l "app.kubernetes.io/name=$CAPMOX_SERVICE" \
    -o jsonpath='{range .items[*]}{.metadata.uid} {.spec.containers[0].image} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' 2>/dev/null)
  ((count == node_replicas))
}

# MS: the sampler's timeline as events, in seconds from MS (of the client's run; the start of
# clusterctl upgrade apply): when each pod, StatefulSet, Service and APIService of the first
# sample was marked for deletion and gone, when new ones appeared (pods: and were Ready), when
# the Service's ready endpoints and the APIServices' availability changed. Sampled once a
# second, so each time is the first sample that saw it.
node_upgrade_timeline_events() {
  python3 - "$run/upgrade-timeline.log" "$1" <<'PY'
import re, sys
line_re = re.compile(r"^(\d+) pod=\[(.*)\] objects=\[(.*)\] endpoints=\[(.*)\] apiservices=\[(.*)\]$")
pod_re = re.compile(r"^\s*(\S+) (\S+) del=(\S*) ready=(\S*)")
object_re = re.compile(r"^\s*((?:StatefulSet|Service)/\S+) (\S+) del=(\S*)")
# Not a quoted name (kubectl's NotFound error for an APIService that is gone).
apiservice_re = re.compile(r"(?<!\")(v1alpha\d)\.infrastructure\.cluster\.x-k8s\.io (\S+) (True|False|Unknown)")
start = int(sys.argv[2])
seen, deleting, ready, events = {}, set(), set(), []
last_endpoints = last_available = None
first = True
for line in open(sys.argv[1]):
    m = line_re.match(line.strip())
    # A list that failed (a timeout) would look like everything gone: that sample is skipped.
    if not m or any("rror" in f or "Unable" in f for f in (m[2], m[3], m[4])):
        continue
    t = (int(m[1]) - start) / 1000
    now = {}
    # Entries end with ";" (the fields themselves have none).
    for name, uid, deleted, is_ready in (e.groups() for e in map(pod_re.match, m[2].split(";")) if e):
        now[name] = (uid, deleted != "", is_ready == "True")
    for name, uid, deleted in (e.groups() for e in map(object_re.match, m[3].split(";")) if e):
        now[name] = (uid, deleted != "", False)
    apiservices = apiservice_re.findall(m[5])
    for version, uid, status in apiservices:
        now["APIService/" + version] = (uid, False, False)
    if first:
        seen = {k: v[0] for k, v in now.items()}
        ready = {v[0] for v in now.values() if v[2]}
        first = False
    for key, uid in list(seen.items()):
        if now.get(key, (None,))[0] != uid:
            events.append((t, f"{key} gone"))
            del seen[key]
        elif now[key][1] and uid not in deleting:
            deleting.add(uid)
            events.append((t, f"{key} deleting"))
    for key, (uid, _, is_ready) in now.items():
        if key not in seen:
            seen[key] = uid
            events.append((t, f"{key} created"))
        if is_ready and uid not in ready:
            ready.add(uid)
            events.append((t, f"{key} Ready"))
    endpoints = m[4].count("ready=true")
    available = " ".join(f"{v}={s}" for v, _, s in apiservices) or "-"
    if endpoints != last_endpoints:
        events.append((t, f"{endpoints} ready endpoint(s)"))
        last_endpoints = endpoints
    if available != last_available:
        events.append((t, f"APIServices Available: {available}"))
        last_available = available
for t, what in events:
    if t >= -2:
        print(f"{t:+.1f}s {what}")
PY
}

# What node_upgrade_leading noted, as the run's verdict (after the workload's checks).
node_upgrade_failures=()
node_upgrade_verdict() {
  ((${#node_upgrade_failures[@]} == 0)) || die "upgrade: ${node_upgrade_failures[*]}"
}

# The client (upgrade_client.py) and the sampler started, then a 10 s baseline. Sets node_upgrade_t0
# (ms) and node_upgrade_client.
node_upgrade_client_start() {
  kc create namespace "$UPGRADE_NAMESPACE" >/dev/null || die "creating namespace $UPGRADE_NAMESPACE failed"
  node_upgrade_t0=$(($(date +%s%N) / 1000000))
  rm -f "$run/upgrade.stop"
  start_process upgrade-client python3 "$here/upgrade_client.py" "https://127.0.0.1:$kas_port" "$pki/ca.crt" \
    "$pki/admin.crt" "$pki/admin.key" "$UPGRADE_NAMESPACE" "$run/upgrade-report.json" "$run/upgrade.stop"
  node_upgrade_client=${pids[-1]}
  # A function: not through start_process (setpriv runs commands only); stopped with the rest.
  node_upgrade_sampler "$node_upgrade_t0" >"$run/upgrade-timeline.log" 2>&1 &
  pids+=("$!")
  sleep 10
  kill -0 "$node_upgrade_client" 2>/dev/null || die "the upgrade client exited: $(tail -n 5 "$run/upgrade-client.log")"
}

# 15 s more, then the client stopped and its report summarized.
node_upgrade_client_report() {
  local report=$run/upgrade-report.json i
  sleep 15
  touch "$run/upgrade.stop"
  for ((i = 0; i < 300; i++)); do
    kill -0 "$node_upgrade_client" 2>/dev/null || break
    sleep 0.1
  done
  [[ -s $report ]] || die "the upgrade client wrote no report: $(tail -n 5 "$run/upgrade-client.log")"
  python3 - "$report" <<'EOF' >&2
import json, sys
r = json.load(open(sys.argv[1]))
w = r["watch"]
print(f"==> upgrade client: {r['requests']} requests in {r['seconds']:.0f} s, {r['failed']} failed; by status: {r['by_status']}")
print(f"==> retries (429/503 with Retry-After): {r['retries']}; unavailable (longest run of failures): {r['unavailable_seconds']} s, failures from {r['first_failure']} to {r['last_failure']} s")
print(f"==> watch: {w['events']} events, {len(w['breaks'])} breaks, {w['resumes']} resumes, {w['gone']} 410 Gone, {w['added_seen']} of {r['created']} created seen ADDED, gaps {w['gaps']} {w['missing_added']}")
for f in r["failures"][:12]:
    print(f"    failure at {f[0]} s: {f[1]} {f[2]} {f[3][:160]}")
for b in w["breaks"][:8]:
    print(f"    watch break at {b[0]} s: {b[1]}")
for e in w["errors"][:5]:
    print(f"    watch ERROR event at {e[0]} s: {e[1]} {e[2][:120]}")
EOF
}

node_clusterctl_upgrade() {
  local start t0 old_uids up_done out i upgrade_ms
  node_upgrade_add_version
  old_uids=$(kc -n "$CAPMOX_NAMESPACE" get pods -l "app.kubernetes.io/name=$CAPMOX_SERVICE" -o jsonpath='{.items[*].metadata.uid}')
  node_upgrade_leading "before the upgrade"
  node_upgrade_client_start
  t0=$node_upgrade_t0
  start=$SECONDS
  node_upgrade_started=$(date +%s.%N)
  upgrade_ms=$(($(date +%s%N) / 1000000 - t0))
  log "clusterctl upgrade apply --infrastructure proxmox:$UPGRADE_VERSION at $upgrade_ms ms of the client's run"
  CLUSTERCTL_DISABLE_VERSIONCHECK=true "$bin/clusterctl" upgrade apply --config "$run/clusterctl-init.yaml" \
    --kubeconfig "$kubeconfig" --infrastructure "proxmox:$UPGRADE_VERSION" \
    --wait-providers --wait-provider-timeout 300 -v 5 >"$run/clusterctl-upgrade.log" 2>&1 ||
    die "clusterctl upgrade apply failed: $(tail -n 5 "$run/clusterctl-upgrade.log")"
  up_done=$((SECONDS - start))
  log "clusterctl upgrade apply done after $up_done s (ended at $(($(date +%s%N) / 1000000 - t0)) ms)"
  # The new version's file of the name the provider URL gave at init (clusterctl keeps it).
  grep -q "^Fetching file=\"$node_components_file\" provider=\"proxmox\".*version=\"$UPGRADE_VERSION\"" "$run/clusterctl-upgrade.log" ||
    die "clusterctl upgrade did not read $UPGRADE_VERSION's $node_components_file: $(grep Fetching "$run/clusterctl-upgrade.log" | head -n 5)"
  for ((i = 0; i < 240; i++)); do
    node_upgrade_new_pods_ready "$old_uids" && break
    sleep 1
  done
  ((i < 240)) || die "not $node_replicas Ready pods of capmox-apiserver:$UPGRADE_VERSION 240 s after the upgrade: $(kc -n "$CAPMOX_NAMESPACE" get pods -o wide 2>&1)"
  ((node_replicas == 1)) || node_wait_ready capmox-etcd 3 120
  node_apiservices_available
  log "after the upgrade: $node_replicas replica(s) of capmox-apiserver:$UPGRADE_VERSION Ready, APIServices Available $((SECONDS - start)) s after clusterctl started; restarts: $(node_restarts)"
  out=$(kc get providers -A -o jsonpath='{range .items[*]}{.metadata.name}={.version} {end}')
  [[ $out == *"infrastructure-proxmox=$UPGRADE_VERSION"* ]] || die "clusterctl's inventory after the upgrade: $out"
  node_upgrade_leading "the new pods"
  [[ -z ${node_workload_start:-} ]] || log "ProxmoxMachines right after the upgrade: $(node_workload_machines | tr '\n' ' ')"
  grep -E 'Deleting|Creating|Scaling' "$run/clusterctl-upgrade.log" | sed 's/^/    /' | cut -c1-200 >&2 || true
  node_upgrade_client_report
  log "the timeline, from the start of clusterctl upgrade apply:"
  node_upgrade_timeline_events "$upgrade_ms" | sed 's/^/    /' >&2 || log "reading the timeline failed"
  log "upgrade: clusterctl upgrade apply $up_done s; report in $run/upgrade-report.json, timeline in $run/upgrade-timeline.log"
}

# E2E_NODE_ROLLING=1 (the default node mode, after the HA install): the same client while
# deploy/overlays/ha-manual-certs is applied again with the image's tag v0.1.1: the StatefulSet's
# rolling update (one replica at a time, highest ordinal first, each Ready before the next).
node_rolling_upgrade() {
  local start
  [[ -n ${E2E_NODE_ROLLING:-} ]] || return 0
  node_upgrade_image
  node_upgrade_client_start
  start=$SECONDS
  log "kubectl apply of ha-manual-certs with tag $UPGRADE_VERSION at $(($(date +%s%N) / 1000000 - node_upgrade_t0)) ms of the client's run"
  capmox_version=$UPGRADE_VERSION node_apply_overlay deploy-ha-$UPGRADE_VERSION ha-manual-certs
  kc -n "$CAPMOX_NAMESPACE" rollout status "statefulset/$CAPMOX_SERVICE" --timeout 300s >/dev/null ||
    die "the rolling update did not finish: $(kc -n "$CAPMOX_NAMESPACE" get pods -o wide 2>&1)"
  node_apiservices_available
  log "rolling update: 3 replicas of capmox-apiserver:$UPGRADE_VERSION Ready $((SECONDS - start)) s after kubectl apply (ended at $(($(date +%s%N) / 1000000 - node_upgrade_t0)) ms)"
  node_upgrade_client_report
}

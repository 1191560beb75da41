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

# The second version: its directory in the repository copy and its image in containerd.
node_upgrade_add_version() {
  local dir=$node_clusterctl_repo/infrastructure-proxmox
  cp -r "$dir/$capmox_version" "$dir/$UPGRADE_VERSION"
  sed -i "s|\${CAPMOX_IMAGE:=capmox-apiserver:$capmox_version}|\${CAPMOX_IMAGE:=capmox-apiserver:$UPGRADE_VERSION}|" \
    "$dir/$UPGRADE_VERSION/infrastructure-components.yaml"
  grep -q "capmox-apiserver:$UPGRADE_VERSION}" "$dir/$UPGRADE_VERSION/infrastructure-components.yaml" ||
    die "the image's default tag not found in infrastructure-components.yaml"
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

# One line a second: time, our pod (name uid ready image), the Service's ready endpoints, the
# APIServices' Available status and reason.
node_upgrade_sampler() {
  local t0=$1 ns=$CAPMOX_NAMESPACE
  while :; do
    printf '%s pod=[%s] endpoints=[%s] apiservices=[%s]\n' "$(($(date +%s%N) / 1000000 - t0))" \
      "$(kc -n "$ns" get pods -l "app.kubernetes.io/name=$CAPMOX_SERVICE" --request-timeout 2s \
        -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.uid} del={.metadata.deletionTimestamp} ready={.status.conditions[?(@.type=="Ready")].status} {.spec.containers[0].image};{end}' 2>&1 | head -c 400)" \
      "$(kc -n "$ns" get endpointslices -l "kubernetes.io/service-name=$CAPMOX_SERVICE" --request-timeout 2s \
        -o jsonpath='{range .items[*].endpoints[*]}{.addresses[0]} ready={.conditions.ready} term={.conditions.terminating};{end}' 2>&1 | head -c 300)" \
      "$(kc get apiservice "v1alpha1.$INFRA_GROUP" "v1alpha2.$INFRA_GROUP" --request-timeout 2s \
        -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.uid} {.status.conditions[0].status} {.status.conditions[0].reason};{end}' 2>&1 | head -c 400)"
    sleep 1
  done
}

# POD COUNT WHEN: the controller's leadership taken COUNT times in POD's log (its one
# "leading: the controller starts" line, or none when another replica leads). Sets
# node_upgrade_led: when (the last time), in seconds from node_upgrade_started if set.
node_upgrade_leading() {
  local out count at
  out=$(kc -n "$CAPMOX_NAMESPACE" logs "$1")
  count=$(grep -c 'leading: the controller starts' <<<"$out") || true
  ((count == $2)) || die "$1 ($3) took the controller's leadership $count times, not $2: $(grep -i 'lead' <<<"$out" | tail -n 3)"
  at=$(grep 'leading: the controller starts' <<<"$out" | tail -n 1 | sed -n 's/.*"timestamp":"\([^"]*\)".*/\1/p')
  node_upgrade_led=$at
  [[ -z $at || -z ${node_upgrade_started:-} ]] ||
    node_upgrade_led=$(python3 -c 'import datetime, sys
t = datetime.datetime.fromisoformat(sys.argv[1].replace("Z", "+00:00")).timestamp()
print(f"{t - float(sys.argv[2]):+.1f}")' "$at" "$node_upgrade_started")
  log "$1 ($3) took the controller's leadership once (at $node_upgrade_led)"
}

# The new pod (another uid, the new image) Ready.
node_upgrade_new_pod_ready() {
  [[ $(kc -n "$CAPMOX_NAMESPACE" get pod "$CAPMOX_SERVICE-0" \
    -o jsonpath='{.metadata.uid} {.spec.containers[0].image} {.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == \
    "$1" ]]
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
  local start t0 old_uid up_done new_uid out i
  node_upgrade_add_version
  old_uid=$(kc -n "$CAPMOX_NAMESPACE" get pod "$CAPMOX_SERVICE-0" -o jsonpath='{.metadata.uid}')
  node_upgrade_leading "$CAPMOX_SERVICE-0" 1 "before the upgrade"
  node_upgrade_client_start
  t0=$node_upgrade_t0
  start=$SECONDS
  node_upgrade_started=$(date +%s.%N)
  log "clusterctl upgrade apply --infrastructure proxmox:$UPGRADE_VERSION at $(($(date +%s%N) / 1000000 - t0)) ms of the client's run"
  CLUSTERCTL_DISABLE_VERSIONCHECK=true "$bin/clusterctl" upgrade apply --config "$run/clusterctl-init.yaml" \
    --kubeconfig "$kubeconfig" --infrastructure "proxmox:$UPGRADE_VERSION" \
    --wait-providers --wait-provider-timeout 300 -v 5 >"$run/clusterctl-upgrade.log" 2>&1 ||
    die "clusterctl upgrade apply failed: $(tail -n 5 "$run/clusterctl-upgrade.log")"
  up_done=$((SECONDS - start))
  log "clusterctl upgrade apply done after $up_done s (ended at $(($(date +%s%N) / 1000000 - t0)) ms)"
  for ((i = 0; i < 180; i++)); do
    new_uid=$(kc -n "$CAPMOX_NAMESPACE" get pod "$CAPMOX_SERVICE-0" -o jsonpath='{.metadata.uid}' 2>/dev/null) || true
    [[ -n $new_uid && $new_uid != "$old_uid" ]] &&
      node_upgrade_new_pod_ready "$new_uid capmox-apiserver:$UPGRADE_VERSION True" && break
    sleep 1
  done
  ((i < 180)) || die "no Ready pod of capmox-apiserver:$UPGRADE_VERSION 180 s after the upgrade"
  node_apiservices_available
  log "after the upgrade: $CAPMOX_SERVICE-0 of capmox-apiserver:$UPGRADE_VERSION Ready, APIServices Available $((SECONDS - start)) s after clusterctl started"
  out=$(kc get providers -A -o jsonpath='{range .items[*]}{.metadata.name}={.version} {end}')
  [[ $out == *"infrastructure-proxmox=$UPGRADE_VERSION"* ]] || die "clusterctl's inventory after the upgrade: $out"
  node_upgrade_leading "$CAPMOX_SERVICE-0" 1 "the new pod"
  [[ -z ${node_workload_start:-} ]] || log "ProxmoxMachines right after the upgrade: $(node_workload_machines | tr '\n' ' ')"
  grep -E 'Deleting|Creating|Scaling' "$run/clusterctl-upgrade.log" | sed 's/^/    /' | cut -c1-200 >&2 || true
  node_upgrade_client_report
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

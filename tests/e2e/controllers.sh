# shellcheck shell=bash
# Upstream CAPMOX's controller and ours provisioning the same cluster on the Proxmox VE
# simulator (sourced by run after scenario.sh and peer.sh; uses their helpers). See
# docs/e2e.md, "The controllers side by side"; the figures are in docs/controller.md.
#
# One side after the other, so that their timings do not share the cores, each with its own
# management cluster (etcd + kube-apiserver, Cluster API core, kubeadm bootstrap and control
# plane, the in-cluster IPAM provider, the garbage collector), a fresh simulator whose
# request log records every Proxmox call, and a workload stand-in at its static
# control-plane endpoint (all upstream supports):
#
# - ours: capmox-apiserver `serve` with its controller; the cluster from deploy/clusterctl.
# - upstream: CAPMOX v0.9.0's CRDs, webhooks and manager from its module; the cluster from
#   its own templates/cluster-template.yaml.
#
# Each side: every Machine InfrastructureReady with a proxmox:// providerID and one VM on
# the simulator, then the Cluster deleted and every VM gone. tests/e2e/pve_calls.py then
# prints the Proxmox calls per machine by method and path class, and the time per machine,
# side by side (and fails if a side cloned a machine twice or called one ready whose VM was
# not running); tests/pve-schema/check.py checks both sides' traffic against PVE's schema.
#
# With CONTROLLERS_MIGRATE=1 (the default), upstream's side is not deleted by upstream: once
# provisioned it moves to capmox-apiserver in place (deploy/migrate-from-upstream), ours adopts
# it, adds a worker and deletes it (controllers_migrate); upstream's calls are counted up to the
# switch, and its deletion is not measured. CONTROLLERS_MIGRATE=0 measures upstream's deletion.
#
# The cluster: CONTROLLERS_CONTROL_PLANE (default 3) control-plane machines on an external etcd
# (external_etcd) and CONTROLLERS_WORKERS (default 2) workers. CONTROLLERS_PROFILE: the
# simulator's profile (default fast).

CONTROLLERS_PROFILE=${CONTROLLERS_PROFILE:-fast}
CONTROLLERS_WORKERS=${CONTROLLERS_WORKERS:-2}
CONTROLLERS_CONTROL_PLANE=${CONTROLLERS_CONTROL_PLANE:-3}
CONTROLLERS_MIGRATE=${CONTROLLERS_MIGRATE:-1}

# SIDE CLUSTER_YAML: apply the cluster and wait for every machine; leaves the side's machines,
# the simulator's state and the time it took in the run dir.
controllers_provision() {
  local side=$1 machines=$((cluster_control_plane + cluster_workers)) start
  workload_kubeconfig=
  standin_infrastructure=0
  kc create namespace "$CLUSTER_NAMESPACE" >/dev/null
  external_etcd "$2"
  start=$SECONDS
  kc -n "$CLUSTER_NAMESPACE" apply -f "$2" >/dev/null || die "$side: applying the cluster failed"
  standins_active=1
  poll 900 "$side: $machines Machines InfrastructureReady with proxmox:// providerIDs, one VM each" \
    machines_on_proxmox "$machines"
  provisioned_seconds=$((SECONDS - start))
  kc -n "$CLUSTER_NAMESPACE" get machines,proxmoxmachines -o json >"$run/machines-$side.json"
  curl -fsS --cacert "$pve_ca" "$pve_url/_sim/state" >"$run/pve-state-$side.json"
}

# CLUSTER_YAML: the control plane on an external etcd, and its certificates as the user
# provides them. KCP checks a managed etcd's members through the etcd pods (a port-forward
# the kubelet serves) before it adds a control-plane machine; the workload stand-in has no
# kubelet, but it does publish the control-plane pods KCP checks otherwise.
external_etcd() {
  python3 - "$1" <<'EOF2' || die "patching the control plane of $1 failed"
import sys, yaml
path = sys.argv[1]
docs = [d for d in yaml.safe_load_all(open(path)) if d]
pki = "/etc/kubernetes/pki"
for doc in docs:
    spec = {"KubeadmControlPlane": lambda: doc["spec"],
            "KubeadmControlPlaneTemplate": lambda: doc["spec"]["template"]["spec"]}.get(doc["kind"])
    if spec:
        cluster = spec()["kubeadmConfigSpec"].setdefault("clusterConfiguration", {})
        cluster["etcd"] = {"external": {"endpoints": ["https://127.0.0.1:2379"],
            "caFile": f"{pki}/etcd/ca.crt", "certFile": f"{pki}/apiserver-etcd-client.crt",
            "keyFile": f"{pki}/apiserver-etcd-client.key"}}
yaml.safe_dump_all(docs, open(path, "w"), sort_keys=False)
EOF2
  [[ -f $pki/etcd-client.crt ]] || new_cert etcd-client ca client /CN=kube-apiserver-etcd-client
  kc -n "$CLUSTER_NAMESPACE" create secret generic "$CLUSTER_NAME-etcd" --from-file tls.crt="$pki/ca.crt" >/dev/null
  kc -n "$CLUSTER_NAMESPACE" create secret generic "$CLUSTER_NAME-apiserver-etcd-client" \
    --from-file tls.crt="$pki/etcd-client.crt" --from-file tls.key="$pki/etcd-client.key" >/dev/null
}

# SIDE: delete the Cluster, wait until every object and VM is gone; the timings in the run dir
# (deleted_seconds null when this side's controller did not delete it).
controllers_delete() {
  local side=$1 start=$SECONDS deleted=null
  kc -n "$CLUSTER_NAMESPACE" delete cluster "$CLUSTER_NAME" --wait=false >/dev/null
  poll 600 "$side: the Cluster deleted, every Proxmox, CAPI and IPAM object gone" cluster_gone
  poll 300 "$side: every VM gone from the simulator" no_vms_left
  standins_active=0
  if ((${2:-1})); then deleted=$((SECONDS - start)); fi
  printf '{"provisioned_seconds": %d, "deleted_seconds": %s}\n' "$provisioned_seconds" "$deleted" \
    >"$run/timings-$side.json"
}

controllers_ours() {
  tag=-ours vip=127.0.0.2
  start_pve_sim "$CONTROLLERS_PROFILE" ours
  serve_uses_pve_sim
  start_management_cluster -ours
  a_etcd_port=$etcd_port
  generate_cluster
  controllers_provision ours "$run/cluster.yaml"
  controllers_delete ours
}

controllers_upstream() {
  local src=$cache/src/capmox-$CAPMOX_VERSION
  tag=-upstream vip=127.0.0.3
  start_pve_sim "$CONTROLLERS_PROFILE" upstream
  start_etcd
  start_kube_apiserver
  write_kubeconfig
  # Its namespace (upstream's config/default brings it too) holds the inventory's entry.
  kc create namespace "$CAPMOX_NAMESPACE" >/dev/null
  start_providers
  # Upstream's global client, TLS verified against the simulator's CA as ours is.
  upstream_flags=(--proxmox-root-cert-file "$pve_ca")
  start_upstream_capmox "${pve_credentials[@]}"
  a_etcd_port=$etcd_port
  log "management cluster with upstream CAPMOX $CAPMOX_VERSION ready: $kubeconfig"
  with_cluster_variables clusterctl_ generate yaml --from "$src/templates/cluster-template.yaml" \
    >"$run/cluster-upstream.yaml" || die "clusterctl generate yaml from upstream's template failed"
  controllers_provision upstream "$run/cluster-upstream.yaml"
  if ((CONTROLLERS_MIGRATE)); then
    controllers_migrate
  else
    controllers_delete upstream
  fi
}

# The IP claims of the cluster's namespace: name=uid=address, sorted.
ip_claims() {
  kc -n "$CLUSTER_NAMESPACE" get "ipaddressclaims.$IPAM" -o \
    jsonpath='{range .items[*]}{.metadata.name}={.metadata.uid}={.status.addressRef.name}{"\n"}{end}' | sort
}

# SIDE FROM_LINE: the clones the simulator performed after the request log's line FROM_LINE.
clones_since() {
  tail -n +"$(($2 + 1))" "$run/pve-requests-$1.jsonl" | python3 -c '
import json, sys
print(sum(1 for line in sys.stdin for e in [json.loads(line)]
          if e["method"] == "POST" and e["path"].endswith("/clone") and e["status"] == 200))'
}

# Our controller has reconciled every ProxmoxMachine: it keeps a Paused condition (False once
# the Cluster is unpaused), which upstream's v0.9.0 does not write on machines.
machines_reconciled() {
  local out
  out=$(kc -n "$CLUSTER_NAMESPACE" get proxmoxmachines -o \
    jsonpath='{range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Paused")].status}{"\n"}{end}')
  [[ -n $out ]] && ! grep -qv '=False$' <<<"$out" || { echo "Paused conditions: $out"; return 1; }
}

# Another provider in our group-versions beside upstream (CAPK's CRDs, a KubevirtCluster and a
# KubevirtMachineTemplate held by kube-apiserver), so that the migration moves its objects too;
# prints them (cotenant_objects). Nothing when the module proxy did not give CAPK's CRDs.
cotenants_before_migration() {
  local dir
  dir=$(grep -o '[^ ]*cluster-api-provider-kubevirt[^ ]*' <<<"${COTENANT_CRDS:-}") || {
    log "migration without another provider's objects: no CAPK CRDs (named above)"
    return 0
  }
  kc apply --server-side --field-manager capmox-e2e -f "$dir" >/dev/null
  kc wait --for condition=Established --timeout 60s crd/kubevirtclusters.$INFRA_GROUP \
    crd/kubevirtmachinetemplates.$INFRA_GROUP >/dev/null
  printf '%s\n' "apiVersion: $INFRA_GROUP/v1alpha1" "kind: KubevirtCluster" \
    "metadata: {name: kv, namespace: default, finalizers: [e2e.capmox.dev/kept]}" \
    "spec: {controlPlaneEndpoint: {host: 10.0.0.9, port: 6443}}" "---" \
    "apiVersion: $INFRA_GROUP/v1alpha1" "kind: KubevirtMachineTemplate" \
    "metadata: {name: kv-workers, namespace: default}" \
    "spec: {template: {spec: {virtualMachineBootstrapCheck: {checkStrategy: ssh}}}}" |
    kc create -f - >/dev/null
  cotenant_objects
}

# kind namespace/name uid spec of every KubevirtCluster and KubevirtMachineTemplate, sorted.
cotenant_objects() {
  kc get "kubevirtclusters.$INFRA_GROUP,kubevirtmachinetemplates.$INFRA_GROUP" -A --ignore-not-found \
    -o jsonpath='{range .items[*]}{.kind} {.metadata.namespace}/{.metadata.name} {.metadata.uid} {.metadata.finalizers} {.spec}{"\n"}{end}' | sort
}

# Upstream's provisioned cluster moves to capmox-apiserver in place (deploy/migrate-from-upstream,
# docs/migration.md); then our controller adopts it (no clone, the same providerIDs and IP
# claims), grows it by one worker (exactly one clone) and deletes it (every VM and claim gone).
controllers_migrate() {
  local machines=$((cluster_control_plane + cluster_workers)) ids claims mark manager start
  local deployment replicas cotenants
  cotenants=$(cotenants_before_migration)
  ids=$(provider_ids "$kubeconfig") claims=$(ip_claims)
  mark=$(wc -l <"$run/pve-requests-upstream.jsonl")
  echo "$mark" >"$run/pve-requests-upstream.switch"
  manager=$(pid_of "capmox-manager$tag")
  capmox_port=$(free_port)
  render_capmox_deploy "$capmox_port" >"$run/deploy$tag.yaml" || die "kustomize of deploy/ failed"
  serve_uses_pve_sim
  start=$SECONDS
  # Upstream's manager is a process here, not config/default's Deployment.
  migrate_and_serve "$run/migration.log" \
    --stop-upstream "kill $manager; while kill -0 $manager 2>/dev/null; do sleep 0.2; done"
  log "switched to capmox-apiserver in $((SECONDS - start)) s (log: $run/migration.log)"
  [[ $(cotenant_objects) == "$cotenants" ]] ||
    die "migrated: other providers' objects changed: $cotenants → $(cotenant_objects)"
  [[ -z $cotenants ]] ||
    log "migrated: $(wc -l <<<"$cotenants") objects of CAPK's kinds moved in, served by ours with their uids and specs"
  poll 120 "migrated: the Cluster unpaused, every Machine still ready" \
    eval 'cluster_unpaused && machines_on_proxmox '"$machines"
  poll 120 "migrated: our controller has reconciled every adopted machine" machines_reconciled
  [[ $(clones_since upstream "$mark") == 0 ]] || die "migrated: our controller cloned a VM for an adopted machine"
  [[ $(provider_ids "$kubeconfig") == "$ids" ]] || die "migrated: providerIDs changed: $ids → $(provider_ids "$kubeconfig")"
  [[ $(ip_claims) == "$claims" ]] || die "migrated: the IP claims changed: $claims → $(ip_claims)"
  machines_on_proxmox "$machines" >/dev/null || die "migrated: a machine is no longer ready"
  log "migrated: 0 clones, the same providerIDs and IP claims ($(wc -l <<<"$claims") claims)"
  deployment=$(kc -n "$CLUSTER_NAMESPACE" get machinedeployments -o name)
  replicas=$(kc -n "$CLUSTER_NAMESPACE" get "$deployment" -o jsonpath='{.spec.replicas}')
  kc -n "$CLUSTER_NAMESPACE" scale "$deployment" --replicas $((replicas + 1)) >/dev/null
  poll 600 "migrated: one worker more, $((machines + 1)) Machines ready" machines_on_proxmox $((machines + 1))
  [[ $(clones_since upstream "$mark") == 1 ]] || die "migrated: $(clones_since upstream "$mark") clones for one new worker"
  log "migrated: the new worker took exactly one clone"
  controllers_delete upstream 0
}

controllers_inside() {
  local start=$SECONDS schema_python=${CAPMOX_TEST_PYTHON:-$repo/target/venv/bin/python}
  [[ -x $schema_python ]] ||
    die "no Python venv at $schema_python for the PVE schema check: run bash tests/run once (it makes it), or set CAPMOX_TEST_PYTHON"
  need_python_yaml
  capmox_version=v$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml" | head -n1)
  [[ -x $bin/capi-ipam-in-cluster-manager ]] || die "the in-cluster IPAM provider was not built (both controllers need it)"
  open_run
  static_endpoint=1 cluster_control_plane=$CONTROLLERS_CONTROL_PLANE cluster_workers=$CONTROLLERS_WORKERS
  standin_static_pods=1 boot_volume_gb=40
  new_cert capmox-serving ca server "/CN=$CAPMOX_SERVICE.$CAPMOX_NAMESPACE.svc" \
    "DNS:$CAPMOX_SERVICE.$CAPMOX_NAMESPACE.svc, IP:127.0.0.1"
  mkdir -p "$pki/webhook"
  new_cert webhook/tls ca server /CN=capi-webhooks "IP:127.0.0.1, DNS:localhost"
  controllers_ours
  controllers_upstream
  python3 "$here/pve_calls.py" --profile "$CONTROLLERS_PROFILE" "$run" ours upstream | tee "$run/pve-calls.txt" >&2 ||
    die "the Proxmox calls of the two controllers: see above"
  # Both controllers' traffic against PVE's published schema (tests/pve-schema): our calls,
  # go-proxmox's, and the simulator's answers to either.
  "$schema_python" "$repo/tests/pve-schema/check.py" \
    "$run/pve-requests-ours.jsonl" "$run/pve-requests-upstream.jsonl" >"$run/pve-schema.txt" 2>&1 ||
    die "the controllers' Proxmox traffic does not match PVE's schema: $(grep -v '^  ' "$run/pve-schema.txt" | tail -n 20)"
  log "both controllers' Proxmox requests and the simulator's answers match PVE's published schema"
  log "controllers side by side passed in $((SECONDS - start)) s"
}

controllers() {
  build_all
  build_peer
  ((${#failed_builds[@]} == 0)) || die "builds failed: ${failed_builds[*]}"
  skip_unless_built "the controllers run" kube-apiserver etcd kube-controller-manager clusterctl capi-manager \
    capi-kubeadm-bootstrap-manager capi-kubeadm-control-plane-manager capi-ipam-in-cluster-manager capmox-manager
  capmox_build
  COTENANT_CRDS=$(cotenant_crd_dirs)
  export COTENANT_CRDS
  reexec_in_private_network controllers-inside
  port_free "$PEER_WEBHOOK_PORT" ||
    die "port $PEER_WEBHOOK_PORT (upstream CAPMOX's fixed webhook port) is taken in the host's network namespace"
  controllers_inside
}

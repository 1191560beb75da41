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
# CONTROLLERS_PROFILE (simulator profile, default fast), CONTROLLERS_WORKERS (default 2).

CONTROLLERS_PROFILE=${CONTROLLERS_PROFILE:-fast}
CONTROLLERS_WORKERS=${CONTROLLERS_WORKERS:-2}

# SIDE CLUSTER_YAML: apply the cluster, wait for every machine, delete it, wait until every
# object and VM is gone; leaves the side's machines and timings in the run dir.
controllers_provision() {
  local side=$1 machines=$((cluster_control_plane + cluster_workers)) start
  workload_kubeconfig=
  standin_infrastructure=0
  kc create namespace "$CLUSTER_NAMESPACE" >/dev/null
  start=$SECONDS
  kc -n "$CLUSTER_NAMESPACE" apply -f "$2" >/dev/null || die "$side: applying the cluster failed"
  standins_active=1
  poll 900 "$side: $machines Machines InfrastructureReady with proxmox:// providerIDs, one VM each" \
    machines_on_proxmox "$machines"
  local provisioned=$((SECONDS - start))
  kc -n "$CLUSTER_NAMESPACE" get machines,proxmoxmachines -o json >"$run/machines-$side.json"
  curl -fsS --cacert "$pve_ca" "$pve_url/_sim/state" >"$run/pve-state-$side.json"
  start=$SECONDS
  kc -n "$CLUSTER_NAMESPACE" delete cluster "$CLUSTER_NAME" --wait=false >/dev/null
  poll 600 "$side: the Cluster deleted, every Proxmox, CAPI and IPAM object gone" cluster_gone
  poll 300 "$side: every VM gone from the simulator" no_vms_left
  standins_active=0
  printf '{"provisioned_seconds": %d, "deleted_seconds": %d}\n' "$provisioned" "$((SECONDS - start))" \
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
}

controllers_inside() {
  local start=$SECONDS
  need_python_yaml
  capmox_version=v$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml" | head -n1)
  [[ -x $bin/capi-ipam-in-cluster-manager ]] || die "the in-cluster IPAM provider was not built (both controllers need it)"
  open_run
  static_endpoint=1 cluster_control_plane=1 cluster_workers=$CONTROLLERS_WORKERS
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
  "${CAPMOX_TEST_PYTHON:-$repo/target/venv/bin/python}" "$repo/tests/pve-schema/check.py" \
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
  reexec_in_private_network controllers-inside
  port_free "$PEER_WEBHOOK_PORT" ||
    die "port $PEER_WEBHOOK_PORT (upstream CAPMOX's fixed webhook port) is taken in the host's network namespace"
  controllers_inside
}

# shellcheck shell=bash
# The live peer (sourced by run after scenario.sh; uses their process, PKI, control-plane and
# registration helpers). See docs/e2e.md, "The peer".
#
# `pair` brings up two control planes side by side, each an etcd + kube-apiserver with the
# Cluster API CRDs, in one private network namespace:
#
# - ours: capmox-apiserver registered through deploy/ as the scenario registers it, serving
#   the infrastructure group through the aggregator (its controller off: the requests compared
#   are the API's, not a controller's).
# - peer: upstream CAPMOX v0.9.0's four CRDs and webhook configurations from its
#   config/default, and its manager as a process serving conversion, defaulting and
#   validation on loopback with a certificate of the harness CA. Its controllers run too, as in
#   a real install; without an owning Cluster they leave the objects alone.
#
# pair.env in the run dir describes both (kubeconfigs, URLs, PKI, PIDs) for the differential
# run and the peer benchmark, which `pair` runs when asked to.

# The manager's webhook server port: fixed in upstream's main.go, not a flag. The private
# network namespace keeps it from colliding with anything else on the machine.
PEER_WEBHOOK_PORT=9443

# Both kube-apiservers serve the beta MutatingAdmissionPolicy API (kube 1.34), so that
# tests/it/peer/admission.rs can compare the policies' mutations: kube-apiserver's own on the
# peer's CRDs, our server's on ours.
map_flags=(--feature-gates=MutatingAdmissionPolicy=true
  --runtime-config=admissionregistration.k8s.io/v1beta1=true)

start_ours() {
  tag=
  start_etcd
  kas_extra_flags=("${map_flags[@]}")
  start_kube_apiserver
  kas_extra_flags=()
  write_kubeconfig
  install_crds
  controller_flags=(--controller=false)
  start_capmox
  ours_kubeconfig=$kubeconfig ours_kas_port=$kas_port
  ours_pids="etcd=$(pid_of etcd) kube-apiserver=$(pid_of kube-apiserver) capmox-apiserver=$(pid_of capmox-apiserver)"
}

# start_upstream_capmox [ENV...]: upstream CAPMOX's config/default (CRDs, webhook
# configurations pointed at loopback) on the current control plane, and its manager as the
# process capmox-manager$tag with ENV and upstream_flags (Proxmox credentials and CA, when
# its controllers should act).
upstream_flags=()
start_upstream_capmox() {
  local src=$cache/src/capmox-$CAPMOX_VERSION health certs=$run/upstream-tmp$tag/k8s-webhook-server/serving-certs
  kc kustomize "$src/config/default" 2>>"$run/kustomize.log" |
    python3 "$here/components.py" infrastructure-proxmox "$PEER_WEBHOOK_PORT" "$pki/ca.crt" \
      >"$run/capmox$tag.json" || die "rendering upstream CAPMOX's config/default failed"
  kc apply --server-side --field-manager clusterctl -f "$run/capmox$tag.json" >/dev/null ||
    die "applying upstream CAPMOX's components failed"
  # controller-runtime's default certificate directory lives under TMPDIR.
  mkdir -p "$certs"
  cp "$pki/webhook/tls.crt" "$pki/webhook/tls.key" "$certs/"
  health=$(free_port)
  # The admin kubeconfig, as for the Cluster API managers (start_providers).
  start_process "capmox-manager$tag" env TMPDIR="$run/upstream-tmp$tag" "$@" "$bin/capmox-manager" \
    --kubeconfig "$kubeconfig" --leader-elect=false \
    --health-probe-bind-address "127.0.0.1:$health" \
    --diagnostics-address "127.0.0.1:$(free_port)" --insecure-diagnostics "${upstream_flags[@]}"
  wait_until 90 "${pids[-1]}" "capmox-manager$tag" curl -fsS "http://127.0.0.1:$health/readyz"
  # The webhook server is not part of readyz: wait until it answers TLS.
  wait_until 60 "${pids[-1]}" "capmox-manager's webhook server" curl -sS -o /dev/null --cacert "$pki/ca.crt" \
    "https://127.0.0.1:$PEER_WEBHOOK_PORT/convert"
  kc wait --for condition=Established --timeout 60s crd --all >/dev/null
}

start_peer() {
  tag=-peer
  start_etcd
  kas_extra_flags=("${map_flags[@]}")
  start_kube_apiserver
  kas_extra_flags=()
  write_kubeconfig
  install_crds
  start_upstream_capmox
  peer_kubeconfig=$kubeconfig peer_kas_port=$kas_port
  peer_pids="etcd=$(pid_of etcd-peer) kube-apiserver=$(pid_of kube-apiserver-peer) capmox-manager=$(pid_of capmox-manager-peer)"
  log "peer ready: upstream CAPMOX $CAPMOX_VERSION's CRDs and webhooks on kube-apiserver port $kas_port"
}

# Whether a TCP port can be bound on 127.0.0.1 right now.
port_free() {
  python3 -c 'import socket, sys; socket.socket().bind(("127.0.0.1", int(sys.argv[1])))' "$1" 2>/dev/null
}

# The PID of a process start_process started under NAME.
pid_of() {
  local i
  for i in "${!process_names[@]}"; do
    [[ ${process_names[i]} == "$1" ]] && printf '%s' "${process_pids[i]}" && return
  done
  die "no process named $1"
}

write_pair_env() {
  cat >"$run/pair.env" <<EOF
# Written by tests/e2e/run pair: two control planes, "ours" and "peer" (docs/e2e.md).
export PAIR_OURS_KUBECONFIG=$ours_kubeconfig
export PAIR_PEER_KUBECONFIG=$peer_kubeconfig
export PAIR_OURS_URL=https://127.0.0.1:$ours_kas_port
export PAIR_PEER_URL=https://127.0.0.1:$peer_kas_port
# capmox-apiserver itself, without the aggregator (TLS name $CAPMOX_SERVICE.$CAPMOX_NAMESPACE.svc).
export PAIR_OURS_DIRECT_URL=https://127.0.0.1:$capmox_port
export PAIR_OURS_LOG=$run/capmox-apiserver.log
export PAIR_CA=$pki/ca.crt
export PAIR_CLIENT_CERT=$pki/admin.crt
export PAIR_CLIENT_KEY=$pki/admin.key
# name=pid of every process of each side, for CPU accounting.
export PAIR_OURS_PIDS="$ours_pids"
export PAIR_PEER_PIDS="$peer_pids"
EOF
}

pair_inside() {
  local action=${PAIR_ACTION:-wait}
  need_python_yaml
  open_run
  new_cert capmox-serving ca server "/CN=$CAPMOX_SERVICE.$CAPMOX_NAMESPACE.svc" \
    "DNS:$CAPMOX_SERVICE.$CAPMOX_NAMESPACE.svc, IP:127.0.0.1"
  mkdir -p "$pki/webhook"
  new_cert webhook/tls ca server /CN=capmox-peer-webhooks "IP:127.0.0.1, DNS:localhost"
  start_ours
  start_peer
  write_pair_env
  log "pair ready: source $run/pair.env"
  case $action in
  wait)
    log "running; Ctrl-C stops everything${PAIR_SECONDS:+ (or after $PAIR_SECONDS s)}"
    spawn sleep "${PAIR_SECONDS:-infinity}"
    wait "${pids[-1]}" || true
    ;;
  *)
    # shellcheck disable=SC1091
    source "$run/pair.env"
    "$action"
    ;;
  esac
}

# Co-tenants (docs/deploy.md, "Other providers in our group-versions"): the CRDs of real
# providers with kinds in our group-versions, from their Go modules: CAPK's four kinds
# (v1alpha1) and CAPO's OpenStackServer and OpenStackFloatingIPPool (v1alpha1, beside its
# v1beta1 kinds), served from our store; and CAPZ's six ASO kinds (v1alpha1 beside the v1beta1
# kube-apiserver stores), served through kube-apiserver (only those of CAPZ's many CRDs).
COTENANT_MODULES=(sigs.k8s.io/cluster-api-provider-kubevirt@v0.1.10 sigs.k8s.io/cluster-api-provider-openstack@v0.13.0)
COTENANT_KEPT_BY_KUBE=sigs.k8s.io/cluster-api-provider-azure@v1.21.0

# The co-tenants' CRD directories, space-separated (downloaded before the private network
# namespace); empty, with the reason logged, when the proxy refuses a module.
cotenant_crd_dirs() {
  local module dir dirs=()
  for module in "${COTENANT_MODULES[@]}"; do
    dir=$(module_info "$module" '{{.Dir}}') || {
      log "co-tenant CRDs unavailable: the module proxy refused $module"
      return 0
    }
    dirs+=("$dir/config/crd/bases")
  done
  dir=$(module_info "$COTENANT_KEPT_BY_KUBE" '{{.Dir}}') || {
    log "co-tenant CRDs unavailable: the module proxy refused $COTENANT_KEPT_BY_KUBE"
    return 0
  }
  local aso=$cache/cotenant-crds/aso
  rm -rf "$aso" && mkdir -p "$aso" && cp "$dir"/config/crd/bases/*_azureaso*.yaml "$aso/"
  dirs+=("$aso")
  # A kind with the scale subresource, which none of theirs has.
  dirs+=("$repo/tests/e2e/cotenant-crds")
  printf '%s' "${dirs[*]}"
}

# On the peer, where kube-apiserver's CRD handler serves the co-tenants, deploy/preflight
# lists them with their objects and refuses to go on; on ours, where our APIServices hold the
# group-versions, the same CRDs make the kinds known within seconds: a 503 with the kind and
# the reason through the real aggregator, then through kubectl's discovery (`kubectl get
# kubevirtclusters`), and deploy/preflight tells that ours serves the group-versions. Then the
# co-tenant differential; the CRDs are removed again afterwards.
cotenants_check() {
  local dir out start group=infrastructure.cluster.x-k8s.io
  local peer=("$KUBECTL" --kubeconfig "$PAIR_PEER_KUBECONFIG" --request-timeout 60s)
  local ours=("$KUBECTL" --kubeconfig "$PAIR_OURS_KUBECONFIG" --request-timeout 60s)
  local path=/apis/$group/v1alpha1/namespaces/default/kubevirtclusters
  if [[ -z ${COTENANT_CRDS:-} ]]; then
    log "co-tenant check skipped: no co-tenant CRDs (named above)"
    return
  fi
  for dir in $COTENANT_CRDS; do
    "${peer[@]}" apply --server-side --field-manager capmox-e2e -f "$dir" >/dev/null
  done
  "${peer[@]}" wait --for condition=Established --timeout 60s "crd/kubevirtclusters.$group" >/dev/null
  printf '%s\n' "apiVersion: $group/v1alpha1" "kind: KubevirtCluster" \
    "metadata: {name: cotenant, namespace: default}" "spec: {}" | "${peer[@]}" create -f - >/dev/null
  if out=$(KUBECTL=$KUBECTL "$repo/deploy/preflight" --kubeconfig "$PAIR_PEER_KUBECONFIG" 2>&1); then
    die "deploy/preflight passed where other providers' kinds hold objects: $out"
  fi
  grep -Eq "^kubevirtclusters\.$group +KubevirtCluster +v1alpha1 +1 +served by capmox-apiserver; its 1 object\(s\) stay" <<<"$out" &&
    grep -Eq "^openstackservers\.$group +OpenStackServer +v1alpha1 +0 +served by capmox-apiserver\$" <<<"$out" &&
    grep -q "^$group/v1alpha1: served from CRDs by kube-apiserver" <<<"$out" &&
    ! grep -q '^proxmox' <<<"$out" ||
    die "deploy/preflight on the peer did not list the co-tenants as expected: $out"
  KUBECTL=$KUBECTL "$repo/deploy/preflight" --kubeconfig "$PAIR_PEER_KUBECONFIG" --allow-unserved >/dev/null ||
    die "deploy/preflight --allow-unserved failed"
  log "co-tenants on the peer: deploy/preflight lists $(grep -c "\.$group " <<<"$out") kinds with their objects and refuses"

  for dir in $COTENANT_CRDS; do
    "${ours[@]}" apply --server-side --field-manager capmox-e2e -f "$dir" >/dev/null
  done
  start=$SECONDS
  until out=$("${ours[@]}" get --raw "$path" 2>&1); do
    ((SECONDS - start < 30)) || die "KubevirtCluster not served by ours 30 s after its CRD: $out"
    sleep 0.5
  done
  log "co-tenants on ours: KubevirtCluster served from its CRD $((SECONDS - start)) s after it"
  # kubectl maps the name once kube-aggregator has refetched our discovery (once a minute).
  start=$SECONDS
  until out=$("${ours[@]}" get kubevirtclusters -A 2>&1); do
    [[ $out == *"the server doesn't have a resource type"* ]] || die "kubectl get kubevirtclusters on ours: $out"
    ((SECONDS - start < 150)) || die "kubectl does not map kubevirtclusters 150 s after its CRD: $out"
    sleep 2
  done
  log "co-tenants on ours: kubectl maps kubevirtclusters $((SECONDS - start)) s after the CRDs"
  # The same object on both sides reads back the same (pruned and defaulted by the CRD).
  printf '%s\n' "apiVersion: $group/v1alpha1" "kind: KubevirtCluster" \
    "metadata: {name: cotenant, namespace: default}" \
    "spec: {controlPlaneEndpoint: {host: 10.0.0.1, port: 6443}, unknownField: 1}" >"$run/cotenant.yaml"
  "${peer[@]}" delete -f "$run/cotenant.yaml" >/dev/null
  local side read=()
  for side in peer ours; do
    local client=("$KUBECTL" --kubeconfig "$([[ $side == peer ]] && echo "$PAIR_PEER_KUBECONFIG" || echo "$PAIR_OURS_KUBECONFIG")" --request-timeout 60s)
    "${client[@]}" create --validate=false -f "$run/cotenant.yaml" >/dev/null ||
      die "creating a KubevirtCluster on $side failed"
    read+=("$("${client[@]}" get -f "$run/cotenant.yaml" -o jsonpath='{.spec}{" "}{.status}{" "}{.metadata.generation}')")
  done
  [[ ${read[0]} == "${read[1]}" ]] || die "a KubevirtCluster reads back differently: kube ${read[0]}, ours ${read[1]}"
  log "co-tenants: a KubevirtCluster reads back alike from kube and ours: ${read[1]}"
  out=$("${ours[@]}" get kubevirtclusters -A 2>&1) && [[ $out == *cotenant* ]] ||
    die "kubectl get kubevirtclusters on ours does not list the object: $out"
  start=$SECONDS
  out=$(KUBECTL=$KUBECTL "$repo/deploy/preflight" --kubeconfig "$PAIR_OURS_KUBECONFIG" 2>&1) ||
    die "deploy/preflight on ours: $out"
  grep -q "^$group/v1alpha1: served by the aggregated server $CAPMOX_NAMESPACE/$CAPMOX_SERVICE" <<<"$out" &&
    grep -Eq "^kubevirtclusters\.$group +KubevirtCluster +v1alpha1 +1 +served by capmox-apiserver\$" <<<"$out" ||
    die "deploy/preflight on ours: $out"
  log "co-tenants on ours: deploy/preflight reports our server serving them ($((SECONDS - start)) s)"
  # kube-apiserver still publishes the CRDs' schemas, and merges them with ours into Swagger
  # 2.0; its v3 document of a group-version both publish is either's (docs/api.md).
  out=$("${ours[@]}" explain kubevirtclusters.spec.controlPlaneEndpoint --output plaintext-openapiv2 2>&1) &&
    [[ $out == *host* ]] || die "kubectl explain kubevirtclusters (Swagger 2.0) on ours: $out"
  out=$("${ours[@]}" explain proxmoxclusters.spec --api-version "$group/v1alpha1" \
    --output plaintext-openapiv2 2>&1) && [[ $out == *controlPlaneEndpoint* ]] ||
    die "kubectl explain proxmoxclusters (v1alpha1, Swagger 2.0) beside co-tenants: $out"
  log "co-tenants on ours: kubectl explain (Swagger 2.0) reads their schemas and ours in v1alpha1"
  # OpenAPI v3: kube-aggregator answers v1alpha1's document from the CRDs or from ours, at
  # random per request; ours carries the co-tenants' schemas too, so either way their kinds
  # explain. A fresh cache each time, so that every try asks the server.
  local try
  for try in 1 2 3 4; do
    out=$("${ours[@]}" --cache-dir "$run/explain-cache-$try" \
      explain kubevirtclusters.spec.controlPlaneEndpoint 2>&1) && [[ $out == *host* ]] ||
      die "kubectl explain kubevirtclusters (OpenAPI v3, try $try) on ours: $out"
  done
  log "co-tenants on ours: kubectl explain (OpenAPI v3) reads their schemas, 4 of 4 tries"

  # Kinds kube-apiserver keeps (CAPZ's ASO kinds, and one converted by a webhook), served by
  # ours through it: one object on both paths (docs/api.md, "Kinds kube-apiserver keeps").
  (cd "$repo" && cargo test --quiet --offline --test it -- --ignored --exact \
    peer::cotenants::kept_by_kube::a_kind_kube_keeps_is_one_object_on_both_paths \
    peer::cotenants::kept_by_kube::a_kind_kube_keeps_converts_through_its_webhook) ||
    die "kinds kube-apiserver keeps are not served alike on both paths"
  log "co-tenants on ours: kinds kube-apiserver keeps are one object on both paths"

  # The same requests on the co-tenants' kinds to kube's CRD handler and to ours, compared
  # (tests/it/peer/cotenants, docs/api.md "Differences from kube-apiserver's CRD handler").
  start=$SECONDS
  (cd "$repo" && cargo test --quiet --offline --test it -- --ignored --exact \
    peer::cotenants::differential --nocapture) || die "the co-tenant differential failed"
  log "co-tenant differential: $((SECONDS - start)) s"

  # Removed without waiting for their finalization: the differential does not depend on it.
  start=$SECONDS
  for dir in $COTENANT_CRDS; do
    "${peer[@]}" delete --wait=false -f "$dir" >/dev/null
    "${ours[@]}" delete --wait=false -f "$dir" >/dev/null
  done
  log "co-tenant CRDs deleted on both sides ($((SECONDS - start)) s)"
}

# The differential run (tests/it/peer): a ValidatingAdmissionPolicy with params, and
# upstream's webhook configurations, registered on ours, which our server must apply (removed
# again), then the same requests to both sides, compared; then refused writes through ours'
# kube-apiserver beside reads, which must all succeed, and the headers kube-apiserver returns of
# our answers, each once.
# One test at a time: the differential must not see the webhooks.
differential() {
  cotenants_check
  (cd "$repo" && cargo test --quiet --offline --test it -- --ignored --test-threads 1 --exact \
    peer::admission::admission_policy_with_params_caps_cores \
    peer::admission::mutating_policies_mutate_as_kube_mutates_crds \
    peer::admission::upstream_webhooks_admit_our_kinds peer::differential \
    peer::refusals::refused_writes_cost_requests_beside_them_nothing \
    peer::headers::each_header_comes_back_once_as_from_kubes_crd_handler --nocapture)
}

# pair ACTION: build everything both sides need, enter the private network namespace, bring
# both up, then run ACTION (wait, differential, peer_bench).
pair() {
  PAIR_ACTION=$1
  export PAIR_ACTION
  build_all
  build_peer
  ((${#failed_builds[@]} == 0)) || die "builds failed: ${failed_builds[*]}"
  skip_unless_built "the pair" kube-apiserver etcd capmox-manager
  capmox_build
  COTENANT_CRDS=$(cotenant_crd_dirs)
  export COTENANT_CRDS
  reexec_in_private_network pair-inside
  port_free "$PEER_WEBHOOK_PORT" ||
    die "port $PEER_WEBHOOK_PORT (upstream CAPMOX's fixed webhook port) is taken in the host's network namespace"
  pair_inside
}

# The peer benchmark (benches/peer.rs, docs/benchmarks.md), with pair.env exported. Built, with
# ours as a release binary, by run's peer-bench before the private network namespace. With
# PEER_BENCH_PROFILE=DIR it records perf profiles instead and reports them (profile_report.py).
peer_bench() {
  install_kubevirt_crds
  (cd "$repo" && cargo bench --quiet --offline --bench peer) || die "the peer benchmark failed"
  if [[ -n ${PEER_BENCH_PROFILE:-} ]]; then
    python3 "$here/profile_report.py" "$PEER_BENCH_PROFILE" "$bin/kube-apiserver-symbols" |
      tee "$PEER_BENCH_PROFILE/report.md" || die "profile_report.py failed"
  fi
}

# CAPK's CRDs on both sides, for the benchmark's co-tenant rows: kube's CRD handler serves
# KubevirtMachine on the peer, this server on ours.
install_kubevirt_crds() {
  local dir path=/apis/infrastructure.cluster.x-k8s.io/v1alpha1/kubevirtmachines
  dir=$(grep -o '[^ ]*cluster-api-provider-kubevirt[^ ]*' <<<"${COTENANT_CRDS:-}") ||
    die "the co-tenant rows need CAPK's CRDs, which the module proxy did not give (see above)"
  local side
  for side in "$PAIR_PEER_KUBECONFIG" "$PAIR_OURS_KUBECONFIG"; do
    "$KUBECTL" --kubeconfig "$side" apply --server-side --field-manager capmox-e2e -f "$dir" >/dev/null
  done
  "$KUBECTL" --kubeconfig "$PAIR_PEER_KUBECONFIG" wait --for condition=Established --timeout 60s \
    crd/kubevirtmachines.infrastructure.cluster.x-k8s.io >/dev/null
  wait_until 30 "$(pid_of capmox-apiserver)" "KubevirtMachine served by ours" \
    "$KUBECTL" --kubeconfig "$PAIR_OURS_KUBECONFIG" get --raw "$path"
}

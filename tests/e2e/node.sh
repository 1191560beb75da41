# shellcheck shell=bash
# A real node (sourced by run after scenario.sh; uses its process, PKI and control-plane
# helpers). See docs/e2e.md, "A real node".
#
# `node` runs, in private network, mount and PID namespaces, etcd + kube-apiserver (bound to
# the node's address as well as loopback), kube-controller-manager, kube-scheduler and CoreDNS
# (the cluster DNS, behind the kube-dns Service) as host processes, then a node: containerd
# (Debian's, its own config, root, state and socket in the run dir), kubelet and kube-proxy
# (iptables mode), pods on a CNI bridge. Images come without a registry: a pause image compiled
# from k8s.io/kubernetes' build/pause/linux/pause.c, a lookup tool (resolve.c) built the same
# way, our server's image from deploy/image and etcd's from images.sh (build_etcd_image), all
# imported into containerd. Checks: the node registers and is Ready; a pod of our image runs
# `--version` to completion and `kubectl logs` reads it; a pod resolves the kubernetes Service's
# names; deploy/overlays/manual-certs with `deploy/manual-certs --apply` runs our server as a pod
# that reaches the `kubernetes` Service with its service account, its APIServices become
# Available through kube-apiserver -> Service -> pod, `kubectl exec` runs in it; that install is
# removed, and deploy/overlays/ha-manual-certs with `deploy/manual-certs --etcd --apply` runs
# three etcd members over mutual TLS and three replicas: all Ready, the APIServices Available,
# the members' names resolved from a pod, etcd refusing clients without its CA's certificate,
# a ProxmoxCluster through the aggregator and in etcd, GETs while a member and a replica are
# deleted.
#
# Namespaces: the network one has only lo, the node's address NODE_IP on it, and cni0; the
# mount one hides the paths containerd and kubelet cannot be told to avoid (/run/containerd
# for shim sockets, /var/lib/cni for CNI results, /var/log/containers) under tmpfs, and the
# kernel settings kubelet wants to change under files of the values it expects; the PID one
# ends every container, shim and daemon with the run. Needs root.

NODE_NAME=capmox-e2e-node
# The node's address: on lo, so that pods (through cni0) and kube-apiserver reach kubelet and
# kube-apiserver at one address. Never loopback: kubelet refuses a loopback node IP.
NODE_IP=10.0.0.1
NODE_POD_CIDR=10.244.0.0/24
NODE_SERVICE_CIDR=10.96.0.0/16
NODE_KUBERNETES_SERVICE=10.96.0.1
# The cluster DNS: the kube-dns Service's ClusterIP (kubelet's clusterDNS), whose one endpoint is
# CoreDNS at the node's address.
NODE_DNS_SERVICE=10.96.0.10
# The sandbox image: built here, never pulled.
NODE_PAUSE_IMAGE=capmox-e2e/pause:3.10
# Name lookups from a pod (tests/e2e/resolve.c), built here too.
NODE_RESOLVE_IMAGE=capmox-e2e/resolve:v1
NODE_KUBELET_PORT=10250

# CoreDNS, the cluster DNS (its main package, in its own module with its own go.mod and go.sum).
COREDNS_MODULE=github.com/coredns/coredns
COREDNS_VERSION=v1.12.4

# kubelet and kube-proxy from the k8s.io/kubernetes module kube-apiserver comes from, and CoreDNS
# from its own module; only the node action builds them (the other actions never run a node).
build_node() {
  local kube date ld output
  output=$(mktemp)
  if kube=$(module_info k8s.io/kubernetes '{{.Version}}' 2>"$output") &&
    date=$(module_info k8s.io/kubernetes "$time_format" 2>"$output"); then
    ld=$(version_ldflags "$kube" "$date" k8s.io/component-base/version k8s.io/client-go/pkg/version)
    build_binary kubelet "$kube" "$here" k8s.io/kubernetes/cmd/kubelet "$ld"
    build_binary kube-proxy "$kube" "$here" k8s.io/kubernetes/cmd/kube-proxy "$ld"
    build_binary kube-scheduler "$kube" "$here" k8s.io/kubernetes/cmd/kube-scheduler "$ld"
  else
    record_build_failure "kubelet, kube-proxy, kube-scheduler (k8s.io/kubernetes)" "$output" kubelet kube-proxy kube-scheduler
  fi
  rm -f "$output"
  build_from_module "$COREDNS_MODULE" "$COREDNS_VERSION" coredns="$COREDNS_MODULE"
  # etcd's image (images.sh) for the HA install, from the same binary `run images` puts in it.
  build_etcd_static
}

# The Debian packages of the runtime, installed when missing.
need_node_packages() {
  local missing=() tool
  for tool in containerd runc ctr umoci skopeo gcc iptables; do
    command -v "$tool" >/dev/null || missing+=("$tool")
  done
  [[ -x /usr/lib/cni/bridge ]] || missing+=(cni)
  ((${#missing[@]})) || return 0
  log "installing containerd runc containernetworking-plugins umoci skopeo gcc iptables (missing: ${missing[*]})"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq containerd runc containernetworking-plugins \
    umoci skopeo gcc libc6-dev iptables >/dev/null ||
    die "installing the node's packages failed"
}

node_action() {
  [[ $(id -u) == 0 ]] || die "the node action needs root (containerd, kubelet, namespaces)"
  [[ -z ${E2E_NODE_CLUSTERCTL_HA:-} || -n ${E2E_NODE_CLUSTERCTL:-}${E2E_NODE_UPGRADE:-} ]] ||
    die "E2E_NODE_CLUSTERCTL_HA=1 goes with E2E_NODE_CLUSTERCTL=DIR or E2E_NODE_UPGRADE=DIR"
  need_node_packages
  build_all
  build_node
  ((${#failed_builds[@]} == 0)) || die "builds failed: ${failed_builds[*]}"
  skip_unless_built "the node" kube-apiserver etcd kube-controller-manager kube-scheduler kubelet kube-proxy \
    coredns etcd-static
  capmox_build
  # Never the host's network namespace: containerd, kubelet and kube-proxy change it.
  unshare -n -m -p -f --mount-proc true 2>/dev/null ||
    die "the node action needs private network, mount and PID namespaces (unshare -n -m -p -f)"
  log "entering private network, mount and PID namespaces"
  # shellcheck disable=SC2016 # $0 is expanded by the inner bash
  E2E_NETNS=private capmox_bin=$capmox_bin exec unshare -n -m -p -f --mount-proc --propagation private -- \
    bash -c 'ip link set lo up && exec "$0" "$1"' "$here/run" node-inside
}

node_inside() {
  local start=$SECONDS
  [[ ${E2E_NETNS:-} == private ]] || die "node-inside runs only inside the node action's namespaces"
  capmox_version=v$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml" | head -n1)
  open_run
  # Our teardown first (pods, containerd's and kubelet's mounts, cgroups), then run's, which
  # reads the run's exit status from $?; neither may stop half-way (set +e).
  trap 'node_status=$?; set +e; node_teardown; (exit $node_status); cleanup' EXIT
  node_host_setup
  node_pki
  node_images
  start_etcd
  # Reachable from pods at NODE_IP (the kubernetes Service's endpoint); kubelet's serving
  # certificate checked against the cluster CA; the Node authorizer and NodeRestriction for
  # kubelet's credentials. The endpoint reconciler keeps the kubernetes Service's endpoint.
  kas_extra_flags=(--bind-address 0.0.0.0 --advertise-address "$NODE_IP"
    --endpoint-reconciler-type lease
    --enable-admission-plugins NodeRestriction
    --kubelet-certificate-authority "$pki/ca.crt"
    --kubelet-client-certificate "$pki/apiserver-kubelet-client.crt"
    --kubelet-client-key "$pki/apiserver-kubelet-client.key"
    --kubelet-preferred-address-types InternalIP)
  kas_authorization_mode=Node,RBAC
  start_kube_apiserver
  write_kubeconfig
  node_start_controllers
  node_start_coredns
  node_start_containerd
  node_start_kubelet
  node_start_kube_proxy
  node_checks
  node_dns_checks
  # What clusterctl installs: the default components file (one replica on the embedded store)
  # or, with E2E_NODE_CLUSTERCTL_HA=1, the HA one (three replicas on three etcd members).
  node_components_file=infrastructure-components.yaml node_replicas=1
  [[ -z ${E2E_NODE_CLUSTERCTL_HA:-} ]] || node_components_file=infrastructure-components-ha.yaml node_replicas=3
  if [[ -n ${E2E_NODE_UPGRADE:-} ]]; then
    E2E_NODE_CLUSTERCTL=${E2E_NODE_CLUSTERCTL:-$E2E_NODE_UPGRADE}
    node_upgrade_repository
    node_clusterctl_init
    node_clusterctl_etcd_checks
    # A workload cluster being provisioned while clusterctl replaces our pod (workload.sh).
    # Clones take 40 s more, so that one runs across the pod's replacement; the rest at speed.
    node_workload_apply '{"task_delays": {"qmclone": 40}}'
    node_workload_in_flight
    node_clusterctl_upgrade
    node_pve_faults '{}'
    node_workload_wait
    # Still once: no replica lost the leadership and took it again while provisioning.
    node_upgrade_leading "the new pods, after the workload cluster"
    node_workload_delete
    node_upgrade_verdict
  elif [[ -n ${E2E_NODE_OPERATOR:-} ]]; then
    node_operator
  elif [[ -n ${E2E_NODE_CLUSTERCTL_HA:-} ]]; then
    node_clusterctl_init
    node_clusterctl_etcd_checks
    # Not the reinstall, backup and namespace steps: they check the embedded store's claim
    # and file, which the HA components do not have.
    node_workload_cluster
  elif [[ -n ${E2E_NODE_CLUSTERCTL:-} ]]; then
    node_clusterctl_init
    node_clusterctl_reinstall
    node_backup_restore
    node_workload_cluster
    node_clusterctl_delete_namespace
  else
    node_deploy_capmox
    node_remove_capmox
    node_deploy_ha
    node_rolling_upgrade
    node_cert_manager
    node_deploy_ha_cert_manager
    node_deploy_default_cert_manager
  fi
  log "node passed in $((SECONDS - start)) s"
}

# ---------------------------------------------------------------------------
# Namespaces and host paths

node_shadowed=()
node_created_dirs=()
node_cgroup_dirs=()

# DIR: a tmpfs over DIR in this mount namespace (DIR made first, and removed at the end, if the
# host has none).
node_shadow() {
  if [[ ! -d $1 ]]; then
    mkdir -p "$1"
    node_created_dirs+=("$1")
  fi
  mount -t tmpfs -o mode=0755 capmox-e2e "$1" || die "mounting a tmpfs over $1 failed"
  node_shadowed+=("$1")
}

node_host_setup() {
  local name value
  # A private mount namespace whose mounts do not propagate back (unshare --propagation private).
  [[ $(findmnt -no PROPAGATION /) == private ]] || die "/ is not private in the node's mount namespace"
  node_shadow /run/containerd
  node_shadow /var/lib/cni
  node_shadow /var/log/containers
  # kubelet sets six kernel settings (protectKernelDefaults: false) or fails when they differ
  # (true). They are the host's: each is read from a file of the value kubelet expects.
  mkdir -p "$run/sysctl"
  while read -r name value; do
    printf '%s\n' "$value" >"$run/sysctl/${name//\//.}"
    mount --bind -o ro "$run/sysctl/${name//\//.}" "/proc/sys/$name" ||
      die "hiding /proc/sys/$name failed"
    node_shadowed+=("/proc/sys/$name")
  done <<'EOF'
vm/overcommit_memory 1
vm/panic_on_oom 0
kernel/panic 10
kernel/panic_on_oops 1
kernel/keys/root_maxkeys 1000000
kernel/keys/root_maxbytes 25000000
EOF
  # The node's address; forwarding and bridge netfilter are this namespace's own settings.
  ip addr add "$NODE_IP/32" dev lo
  # A route for ClusterIPs, as a node's default route would be: without one, connecting from
  # the node (kube-apiserver to an APIService's Service) fails before kube-proxy's DNAT.
  ip route add "$NODE_SERVICE_CIDR" dev lo src "$NODE_IP"
  echo 1 >/proc/sys/net/ipv4/ip_forward
  if [[ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]]; then
    echo 1 >/proc/sys/net/bridge/bridge-nf-call-iptables
  fi
}

# kubelet's cgroup root: a child of this process's memory cgroup (so that pods count where the
# run does), made in every v1 hierarchy kubelet checks, removed at the end.
node_cgroup_root() {
  local base hierarchy dir path parent
  base=$(awk -F: '$2 == "memory" { print $3 }' /proc/self/cgroup)
  node_cgroup=${base%/}/capmox-e2e-${run##*.}
  for dir in /sys/fs/cgroup/*; do
    # Every hierarchy, v1 and the hybrid unified one: kubelet and runc make a pod's cgroup in each.
    [[ $(stat -f -c %T "$dir") == cgroup*fs ]] || continue
    hierarchy=${dir##*/}
    path=
    for part in ${node_cgroup//\// }; do
      parent=$dir$path
      path+=/$part
      [[ -d $dir$path ]] && continue
      mkdir "$dir$path" || die "creating cgroup $dir$path failed"
      node_cgroup_dirs+=("$dir$path")
      if [[ $hierarchy == cpuset ]]; then
        cat "$parent/cpuset.cpus" >"$dir$path/cpuset.cpus"
        cat "$parent/cpuset.mems" >"$dir$path/cpuset.mems"
      fi
    done
  done
}

# Everything the node left: its pods' processes, then mounts under the run dir and the shadows,
# then cgroups. The PID namespace ends whatever is left when the run's shell exits.
node_teardown() {
  local i task mountpoint dir
  if [[ -n ${node_containerd_sock:-} && -S $node_containerd_sock ]] && [[ -n ${node_kubelet_pid:-} ]]; then
    # kubelet first, so that it restarts nothing; then every container and sandbox.
    kill -TERM "$node_kubelet_pid" 2>/dev/null
    for ((i = 0; i < 100; i++)); do
      kill -0 "$node_kubelet_pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$node_kubelet_pid" 2>/dev/null
    for task in $(ctr -a "$node_containerd_sock" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr -a "$node_containerd_sock" -n k8s.io tasks kill -a -s SIGKILL "$task" >/dev/null 2>&1 || true
    done
    for ((i = 0; i < 50; i++)); do
      ctr -a "$node_containerd_sock" -n k8s.io tasks ls 2>/dev/null | grep -q RUNNING || break
      sleep 0.2
    done
    for task in $(ctr -a "$node_containerd_sock" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr -a "$node_containerd_sock" -n k8s.io tasks delete -f "$task" >/dev/null 2>&1 || true
    done
  fi
  stop_processes
  if [[ -n $run ]]; then
    # Deepest first: kubelet's volumes, containerd's rootfs and shm, the sandboxes' netns.
    while read -r mountpoint; do
      umount -l "$mountpoint" 2>/dev/null || log "could not unmount $mountpoint"
    done < <(awk -v run="$run/" 'index($5, run) == 1 { print $5 }' /proc/self/mountinfo | sort -r)
  fi
  for ((i = ${#node_shadowed[@]} - 1; i >= 0; i--)); do
    umount -l "${node_shadowed[i]}" 2>/dev/null || true
  done
  for ((i = ${#node_created_dirs[@]} - 1; i >= 0; i--)); do
    rmdir "${node_created_dirs[i]}" 2>/dev/null || true
  done
  if [[ -n ${node_cgroup:-} ]]; then
    for dir in /sys/fs/cgroup/*/"${node_cgroup#/}"; do
      [[ -d $dir ]] && find "$dir" -depth -type d -exec rmdir {} + 2>/dev/null
    done
    for ((i = ${#node_cgroup_dirs[@]} - 1; i >= 0; i--)); do
      rmdir "${node_cgroup_dirs[i]}" 2>/dev/null || true
    done
  fi
}

# ---------------------------------------------------------------------------
# Certificates

node_pki() {
  # kube-apiserver's again, with the node's address and the kubernetes Service's.
  new_cert apiserver ca server /CN=kube-apiserver \
    "IP:127.0.0.1, IP:$NODE_IP, DNS:localhost, IP:$NODE_KUBERNETES_SERVICE, DNS:kubernetes, DNS:kubernetes.default, DNS:kubernetes.default.svc, DNS:kubernetes.default.svc.cluster.local"
  new_cert apiserver-kubelet-client ca client /O=system:masters/CN=kube-apiserver-kubelet-client
  new_cert kubelet ca client "/O=system:nodes/CN=system:node:$NODE_NAME"
  new_cert kubelet-serving ca server "/CN=$NODE_NAME" "IP:$NODE_IP, DNS:$NODE_NAME"
  new_cert kube-proxy ca client /CN=system:kube-proxy
  new_cert controller-manager ca client /CN=system:kube-controller-manager
  new_cert scheduler ca client /CN=system:kube-scheduler
  # CoreDNS's identity, bound to the built-in ClusterRole view (node_start_coredns).
  new_cert coredns ca client /CN=system:coredns
}

# NAME CERT: a kubeconfig for a component, with its client certificate.
node_kubeconfig() {
  local config=$run/$1.kubeconfig
  "$KUBECTL" --kubeconfig "$config" config set-cluster e2e --server "https://127.0.0.1:$kas_port" \
    --certificate-authority "$pki/ca.crt" --embed-certs >/dev/null
  "$KUBECTL" --kubeconfig "$config" config set-credentials "$1" --client-certificate "$pki/$2.crt" \
    --client-key "$pki/$2.key" --embed-certs >/dev/null
  "$KUBECTL" --kubeconfig "$config" config set-context e2e --cluster e2e --user "$1" >/dev/null
  "$KUBECTL" --kubeconfig "$config" config use-context e2e >/dev/null
  printf '%s' "$config"
}

# ---------------------------------------------------------------------------
# Images, without a registry

# NAME SRC REF USER [GCC_ARGS...]: SRC compiled statically as /NAME, one layer, user USER, as the
# docker-archive $run/images/NAME/NAME.tar tagged REF.
node_c_image() {
  local name=$1 src=$2 ref=$3 user=$4 dir=$run/images/$1
  shift 4
  mkdir -p "$dir/rootfs"
  gcc -Os -static -o "$dir/rootfs/$name" "$src" "$@" || die "compiling $name failed"
  strip "$dir/rootfs/$name"
  tar -C "$dir/rootfs" --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$dir/layer.tar" "$name"
  {
    umoci init --layout "$dir/oci" &&
      umoci new --image "$dir/oci:$name" &&
      umoci raw add-layer --image "$dir/oci:$name" "$dir/layer.tar" &&
      umoci config --image "$dir/oci:$name" --architecture "$(go env GOARCH)" --os linux \
        --config.entrypoint "/$name" --config.user "$user:$user" &&
      umoci gc --layout "$dir/oci" &&
      skopeo --insecure-policy copy --quiet "oci:$dir/oci:$name" "docker-archive:$dir/$name.tar:$ref"
  } >"$dir/build.log" 2>&1 || die "building the $name image failed: $(tail -n 5 "$dir/build.log")"
}

node_images() {
  local start=$SECONDS src
  # The pause image: k8s.io/kubernetes' pause.c.
  src=$(module_info k8s.io/kubernetes '{{.Dir}}')/build/pause/linux/pause.c
  [[ -f $src ]] || die "pause.c not found in the k8s.io/kubernetes module"
  node_c_image pause "$src" "$NODE_PAUSE_IMAGE" 65535 -DVERSION=capmox-e2e
  node_c_image resolve "$here/resolve.c" "$NODE_RESOLVE_IMAGE" 65532 -lresolv
  "$repo/deploy/image" --binary "$capmox_bin" --output "$run/images/capmox" >"$run/images/capmox.log" 2>&1 ||
    die "deploy/image failed: $(tail -n 5 "$run/images/capmox.log")"
  # etcd's as `run images` builds it (the same cached archive when it built one), linked here.
  built_images=()
  IMAGES_DIR=$run/images build_etcd_image
  ((${#failed_builds[@]} == 0)) || die "building etcd's image failed: ${failed_builds[*]}"
  node_etcd_image=${built_images[-1]}
  log "images built in $((SECONDS - start)) s (pause, resolve, capmox-apiserver:$capmox_version, ${node_etcd_image%% *})"
}

# ---------------------------------------------------------------------------
# Control plane and node processes

node_start_controllers() {
  local port config
  need kube-controller-manager kube-scheduler
  port=$(free_port)
  config=$(node_kubeconfig kube-controller-manager controller-manager)
  # Its service-account, root CA, endpoint slice, workload and volume controllers (and the rest
  # of the defaults); its own client certificate, one identity for all of them.
  start_process kube-controller-manager "$bin/kube-controller-manager" \
    --kubeconfig "$config" --authentication-kubeconfig "$config" --authorization-kubeconfig "$config" \
    --leader-elect=false --bind-address 127.0.0.1 --secure-port "$port" \
    --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
    --use-service-account-credentials --cluster-name capmox-e2e \
    --service-cluster-ip-range "$NODE_SERVICE_CIDR"
  wait_until 60 "${pids[-1]}" kube-controller-manager curl -fsS -k "https://127.0.0.1:$port/healthz"
  port=$(free_port)
  config=$(node_kubeconfig kube-scheduler scheduler)
  start_process kube-scheduler "$bin/kube-scheduler" \
    --kubeconfig "$config" --authentication-kubeconfig "$config" --authorization-kubeconfig "$config" \
    --leader-elect=false --bind-address 127.0.0.1 --secure-port "$port"
  wait_until 60 "${pids[-1]}" kube-scheduler curl -fsS -k "https://127.0.0.1:$port/healthz"
}

# CoreDNS as a host process in the node's network namespace, like the control plane: it answers on
# the node's address, the kube-dns Service (ClusterIP NODE_DNS_SERVICE, selectorless) has that
# address as its one endpoint, so pods reach it through kube-proxy's rules as they would a CoreDNS
# Deployment's pods. Zones cluster.local and in-addr.arpa (PTR of Services and endpoints) from the
# kubernetes plugin; nothing is forwarded (no upstream DNS here): other zones are refused.
node_coredns_can_read() {
  local what
  for what in services endpointslices.discovery.k8s.io namespaces; do
    kc auth can-i watch "$what" --all-namespaces --as system:coredns >/dev/null || return 1
  done
}

node_start_coredns() {
  local config ready
  need coredns
  config=$(node_kubeconfig coredns coredns)
  # What the kubernetes plugin lists and watches (Services, EndpointSlices, Namespaces) is
  # readable with the built-in view role.
  kc create clusterrolebinding capmox-e2e-coredns --clusterrole view --user system:coredns >/dev/null ||
    die "binding CoreDNS's identity to the view role failed"
  wait_until 30 "$(pid_of kube-apiserver)" "CoreDNS's permissions" node_coredns_can_read
  ready=$(free_port)
  cat >"$run/Corefile" <<EOF
cluster.local:53 in-addr.arpa:53 {
  bind $NODE_IP
  errors
  ready 127.0.0.1:$ready
  kubernetes cluster.local in-addr.arpa {
    kubeconfig $config e2e
  }
  cache 30
  loadbalance
}
EOF
  start_process coredns "$bin/coredns" -conf "$run/Corefile"
  # Ready once the kubernetes plugin has synced (so its identity can list what it needs).
  wait_until 60 "${pids[-1]}" coredns curl -fsS "http://127.0.0.1:$ready/ready"
  kc apply -f - >/dev/null <<EOF || die "creating the kube-dns Service failed"
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels: {k8s-app: kube-dns, kubernetes.io/name: CoreDNS}
spec:
  clusterIP: $NODE_DNS_SERVICE
  ports:
  - {name: dns, port: 53, protocol: UDP, targetPort: 53}
  - {name: dns-tcp, port: 53, protocol: TCP, targetPort: 53}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kube-dns-node
  namespace: kube-system
  labels: {kubernetes.io/service-name: kube-dns, endpointslice.kubernetes.io/managed-by: capmox-e2e}
addressType: IPv4
endpoints:
- addresses: [$NODE_IP]
  conditions: {ready: true}
ports:
- {name: dns, port: 53, protocol: UDP}
- {name: dns-tcp, port: 53, protocol: TCP}
EOF
}

node_start_containerd() {
  local dir=$run/containerd
  node_containerd_sock=$dir/containerd.sock
  mkdir -p "$dir" "$run/cni/net.d" "$run/cni/ipam"
  node_restrict_oom=false
  # CAP_SYS_RESOURCE is capability 24.
  (((0x$(awk '/^CapEff/ { print $2 }' /proc/self/status) >> 24) & 1)) || node_restrict_oom=true
  # Debian's containerd 1.6: CRI v1, which kubelet 1.34 speaks. The sandboxes' network
  # namespaces under its state dir, CNI config and plugins where we say.
  cat >"$dir/config.toml" <<EOF
version = 2
root = "$dir/root"
state = "$dir/state"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$node_containerd_sock"
[ttrpc]
  address = "$node_containerd_sock.ttrpc"
[debug]
  level = "${E2E_NODE_CONTAINERD_LOG:-info}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$NODE_PAUSE_IMAGE"
  netns_mounts_under_state_dir = true
  # Sandboxes ask for oom_score_adj -998, which takes CAP_SYS_RESOURCE; where the run lacks it
  # runc fails ("can't get final child's PID from pipe"). Restricted: never below containerd's.
  restrict_oom_score_adj = $node_restrict_oom
  stream_server_address = "127.0.0.1"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$run/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
EOF
  cat >"$run/cni/net.d/10-capmox-e2e.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "capmox-e2e",
  "plugins": [
    {
      "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {"type": "host-local", "dataDir": "$run/cni/ipam",
               "ranges": [[{"subnet": "$NODE_POD_CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}]}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  start_process containerd containerd --config "$dir/config.toml"
  wait_until 30 "${pids[-1]}" containerd ctr -a "$node_containerd_sock" version
  ctr -a "$node_containerd_sock" -n k8s.io images import "$run/images/pause/pause.tar" >/dev/null ||
    die "importing the pause image failed"
  ctr -a "$node_containerd_sock" -n k8s.io images import "$run/images/capmox/capmox-apiserver-$capmox_version.docker.tar" \
    >/dev/null || die "importing capmox-apiserver:$capmox_version failed"
  ctr -a "$node_containerd_sock" -n k8s.io images import "$run/images/resolve/resolve.tar" >/dev/null ||
    die "importing the resolve image failed"
  ctr -a "$node_containerd_sock" -n k8s.io images import "${node_etcd_image#* }" >/dev/null ||
    die "importing ${node_etcd_image%% *} failed"
  log "images in containerd: $(ctr -a "$node_containerd_sock" -n k8s.io images ls -q | grep -v '^sha256:' | tr '\n' ' ')"
}

node_start_kubelet() {
  local config
  need kubelet
  node_cgroup_root
  config=$(node_kubeconfig kubelet kubelet)
  mkdir -p "$run/kubelet" "$run/pod-logs"
  cat >"$run/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: $NODE_KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: $pki/kubelet-serving.crt
tlsPrivateKeyFile: $pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://$node_containerd_sock
imageServiceEndpoint: unix://$node_containerd_sock
cgroupDriver: cgroupfs
cgroupRoot: $node_cgroup
cgroupsPerQOS: true
failCgroupV1: false
failSwapOn: false
protectKernelDefaults: true
podLogsDir: $run/pod-logs
volumePluginDir: $run/kubelet/volume-plugins
resolvConf: ""
clusterDNS: [$NODE_DNS_SERVICE]
clusterDomain: cluster.local
registerNode: true
maxPods: 20
evictionHard: {memory.available: 100Mi, nodefs.available: 2%, imagefs.available: 2%, nodefs.inodesFree: 2%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
EOF
  start_process kubelet "$bin/kubelet" --config "$run/kubelet.yaml" --kubeconfig "$config" \
    --root-dir "$run/kubelet" --hostname-override "$NODE_NAME" --node-ip "$NODE_IP"
  node_kubelet_pid=${pids[-1]}
  wait_until 60 "$node_kubelet_pid" kubelet curl -fsS http://127.0.0.1:10248/healthz
}

node_start_kube_proxy() {
  local config
  need kube-proxy
  config=$(node_kubeconfig kube-proxy kube-proxy)
  # No conntrack sysctls (maxPerCore, timeouts 0): the table size is the host's.
  cat >"$run/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: $config}
hostnameOverride: $NODE_NAME
clusterCIDR: $NODE_POD_CIDR
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false}
nodePortAddresses: [primary]
EOF
  start_process kube-proxy "$bin/kube-proxy" --config "$run/kube-proxy.yaml"
  wait_until 60 "${pids[-1]}" kube-proxy curl -fsS http://127.0.0.1:10256/healthz
}

# ---------------------------------------------------------------------------
# Checks

node_checks() {
  local start=$SECONDS out
  kc wait --for condition=Ready --timeout 120s "node/$NODE_NAME" >/dev/null ||
    die "node $NODE_NAME not Ready: $(kc get node "$NODE_NAME" -o jsonpath='{.status.conditions}' 2>&1)"
  log "node $NODE_NAME Ready after $((SECONDS - start)) s ($(kc get node "$NODE_NAME" -o jsonpath='{.status.nodeInfo.containerRuntimeVersion} {.status.nodeInfo.kubeletVersion}'))"
  # Pods wait for their namespace's service account, which kube-controller-manager makes.
  wait_until 60 "$node_kubelet_pid" "service account default/default" kc get serviceaccount default

  start=$SECONDS
  kc apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: version, namespace: default}
spec:
  restartPolicy: Never
  containers:
  - name: capmox-apiserver
    image: capmox-apiserver:$capmox_version
    imagePullPolicy: Never
    args: [--version]
EOF
  kc wait --for jsonpath='{.status.phase}'=Succeeded --timeout 120s pod/version >/dev/null ||
    die "pod version did not succeed: $(kc get pod version -o jsonpath='{.status}' 2>&1)"
  out=$(kc logs version) || die "kubectl logs failed: $out"
  [[ $out == "capmox-apiserver ${capmox_version#v}" ]] || die "unexpected pod log: $out"
  log "pod of capmox-apiserver:$capmox_version Succeeded after $((SECONDS - start)) s; kubectl logs: $out"
}

# NAMESPACE NAME...: a pod of the resolve image looks the NAMEs up with its resolv.conf (kubelet's:
# the cluster DNS, the namespace's search list, ndots 5); its log, one line per name.
node_resolve_count=0
node_resolve() {
  local ns=$1 pod phase out i
  shift
  pod=resolve-$((++node_resolve_count))
  kc apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $pod, namespace: $ns}
spec:
  restartPolicy: Never
  containers:
  - name: resolve
    image: $NODE_RESOLVE_IMAGE
    imagePullPolicy: Never
    args: [$(IFS=,; printf '%s' "$*")]
EOF
  for ((i = 0; i < 120; i++)); do
    phase=$(kc -n "$ns" get pod "$pod" -o jsonpath='{.status.phase}')
    [[ $phase == Succeeded || $phase == Failed ]] && break
    sleep 0.5
  done
  out=$(kc -n "$ns" logs "$pod" 2>&1)
  kc -n "$ns" delete pod "$pod" --wait=false >/dev/null
  [[ $phase == Succeeded ]] || die "lookups from pod $ns/$pod: $phase: $out"
  printf '%s\n' "$out"
}

# EXPECTED ACTUAL: a lookup's line as expected.
node_expect_lookup() {
  [[ $2 == "$1" ]] || die "lookup from a pod: expected '$1', got '$2'"
}

node_dns_checks() {
  local start=$SECONDS out
  out=$(node_resolve default kubernetes.default.svc.cluster.local kubernetes.default "$NODE_KUBERNETES_SERVICE")
  node_expect_lookup "kubernetes.default.svc.cluster.local $NODE_KUBERNETES_SERVICE" "$(sed -n 1p <<<"$out")"
  node_expect_lookup "kubernetes.default $NODE_KUBERNETES_SERVICE" "$(sed -n 2p <<<"$out")"
  node_expect_lookup "$NODE_KUBERNETES_SERVICE kubernetes.default.svc.cluster.local" "$(sed -n 3p <<<"$out")"
  log "a pod resolved through kube-dns ($NODE_DNS_SERVICE -> CoreDNS at $NODE_IP) in $((SECONDS - start)) s: $(tr '\n' ';' <<<"$out")"
}

# NAME OVERLAY: deploy/overlays/OVERLAY with our image's tag (kustomization in $run/NAME),
# rendered to $run/NAME.yaml and applied.
node_apply_overlay() {
  local dir=$run/$1
  mkdir -p "$dir"
  cat >"$dir/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- $(relative_to "$dir" "$repo/deploy/overlays/$2")
images:
- name: capmox-apiserver
  newTag: $capmox_version
EOF
  kc kustomize "$dir" >"$run/$1.yaml" || die "kustomize of deploy/overlays/$2 failed"
  kc apply --server-side --field-manager capmox-e2e -f "$run/$1.yaml" >/dev/null ||
    die "applying deploy/overlays/$2 failed"
}

# [--etcd]: deploy/manual-certs --apply as docs/deploy.md runs it, into $run/certs (the CAs made
# by the first run are kept by the next).
node_manual_certs() {
  KUBECTL=$KUBECTL "$repo/deploy/manual-certs" "$@" --apply --dir "$run/certs" --kubeconfig "$kubeconfig" \
    >"$run/manual-certs.log" 2>&1 || die "deploy/manual-certs $* --apply failed: $(cat "$run/manual-certs.log")"
}

# NAME DIR SIZE CLAIM: a hostPath PersistentVolume of DIR (made, owned by the images' user) bound
# ahead to CLAIM in our namespace (there is no provisioner).
node_volume() {
  mkdir -p "$2"
  chown 65532:65532 "$2"
  kc apply -f - >/dev/null <<EOF || die "creating PersistentVolume $1 failed"
apiVersion: v1
kind: PersistentVolume
metadata: {name: $1}
spec:
  capacity: {storage: $3}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  hostPath: {path: $2, type: Directory}
  claimRef: {namespace: $CAPMOX_NAMESPACE, name: $4}
EOF
}

# NAME: hostPath PersistentVolumes capmox-e2e-NAME-0..2 (directories NAME-0..2) bound ahead to
# the etcd members' claims data-capmox-etcd-0..2.
node_etcd_volumes() {
  local i
  for i in 0 1 2; do
    node_volume "capmox-e2e-$1-$i" "$run/volumes/$1-$i" 4Gi "data-capmox-etcd-$i"
  done
}

# STATEFULSET REPLICAS SECONDS: wait until REPLICAS of its pods are Ready (polled: every request
# of kc is bounded).
node_wait_ready() {
  local deadline=$((SECONDS + $3)) ready
  while :; do
    ready=$(kc -n "$CAPMOX_NAMESPACE" get statefulset "$1" -o jsonpath='{.status.readyReplicas}' 2>/dev/null) || true
    [[ ${ready:-0} == "$2" ]] && return 0
    ((SECONDS < deadline)) ||
      die "StatefulSet $1: ${ready:-0} of $2 pods Ready after $3 s: $(kc -n "$CAPMOX_NAMESPACE" get pods -o wide 2>&1)"
    sleep 1
  done
}

# Both APIServices Available, then our kinds in kube-apiserver's discovery: the aggregator fetches
# the group's discovery from the server after the APIService turns Available, and kubectl finds
# the kinds only then (seconds later when the first fetches met no endpoint). node_discovery_lag:
# how long that took.
node_apiservices_available() {
  local start out deadline
  kc wait --for condition=Available --timeout 60s \
    "apiservice/v1alpha1.$INFRA_GROUP" "apiservice/v1alpha2.$INFRA_GROUP" >/dev/null ||
    die "APIServices not Available: $(kc get apiservice "v1alpha2.$INFRA_GROUP" -o jsonpath='{.status.conditions}')"
  start=$SECONDS deadline=$((SECONDS + 60))
  until out=$(kc api-resources --api-group "$INFRA_GROUP" -o name 2>&1) && [[ $out == *"proxmoxclusters.$INFRA_GROUP"* ]]; do
    ((SECONDS < deadline)) || die "APIServices Available, but no ProxmoxClusters in discovery after 60 s: $out"
    sleep 1
  done
  node_discovery_lag=$((SECONDS - start))
}

# deploy/overlays/manual-certs as docs/deploy.md installs it: `kubectl apply -k`, then
# `deploy/manual-certs --apply` (the serving certificate's Secret and the APIServices' caBundle);
# its StatefulSet's pod on the node, with a hostPath volume for its claim (no provisioner). The
# pod reaches kube-apiserver through the kubernetes Service with its service account;
# kube-apiserver reaches the pod through its Service.
node_deploy_capmox() {
  local start=$SECONDS out
  install_crds
  node_volume capmox-e2e-data "$run/volumes/capmox-data" 1Gi "data-$CAPMOX_SERVICE-0"
  node_apply_overlay deploy manual-certs
  node_manual_certs
  node_wait_ready "$CAPMOX_SERVICE" 1 180
  log "pod $CAPMOX_SERVICE-0 Ready after $((SECONDS - start)) s ($(kc -n "$CAPMOX_NAMESPACE" get pod "$CAPMOX_SERVICE-0" -o jsonpath='{.status.podIP}'))"
  # In-cluster configuration: KUBERNETES_SERVICE_HOST is the kubernetes Service's ClusterIP,
  # whose one endpoint is kube-apiserver at the node's address.
  out=$(kc get endpointslices -n default -l kubernetes.io/service-name=kubernetes -o jsonpath='{.items[*].endpoints[*].addresses[*]}')
  [[ $out == "$NODE_IP" ]] || die "the kubernetes Service's endpoints are '$out', not $NODE_IP"
  # The log read whole first: `grep -q` stops reading at its match, and under pipefail the
  # writer's SIGPIPE would fail the check.
  out=$(kc -n "$CAPMOX_NAMESPACE" logs "$CAPMOX_SERVICE-0")
  [[ $out == *'loaded kube-system/extension-apiserver-authentication'* ]] ||
    die "$CAPMOX_SERVICE-0 did not read extension-apiserver-authentication through the kubernetes Service"
  log "$CAPMOX_SERVICE-0 read extension-apiserver-authentication through the kubernetes Service ($NODE_KUBERNETES_SERVICE -> $NODE_IP)"
  node_apiservices_available
  out=$(kc get "proxmoxclusters.$INFRA_GROUP" -A 2>&1) || die "listing ProxmoxClusters through the aggregator failed: $out"
  log "APIServices v1alpha1/v1alpha2 Available through Service -> pod after $((SECONDS - start)) s (our kinds in discovery ${node_discovery_lag} s after Available); ProxmoxClusters listed"
  out=$(kc -n "$CAPMOX_NAMESPACE" exec "$CAPMOX_SERVICE-0" -- /usr/local/bin/capmox-apiserver --version 2>&1) ||
    die "kubectl exec failed: $out"
  log "kubectl exec: $out"
}

# The single-replica install removed: everything its rendered manifests made (the namespace with
# its Secrets and claim), waited for until the namespace is gone; then its volume.
node_remove_capmox() {
  local start=$SECONDS
  node_uninstall "$run/deploy.yaml" deploy/overlays/manual-certs capmox-e2e-data
  log "deploy/overlays/manual-certs removed in $((SECONDS - start)) s (namespace $CAPMOX_NAMESPACE gone)"
}

# node_uninstall MANIFEST WHAT VOLUME...: every object of MANIFEST (the rendering of WHAT) deleted,
# the namespace gone (180 s at most), then the PersistentVolumes its claims were bound to.
node_uninstall() {
  local manifest=$1 what=$2 deadline=$((SECONDS + 180)) volume
  shift 2
  kc delete -f "$manifest" --wait=false >/dev/null || die "deleting $what failed"
  until [[ -z $(kc get namespace "$CAPMOX_NAMESPACE" --ignore-not-found -o name 2>&1) ]]; do
    ((SECONDS < deadline)) ||
      die "namespace $CAPMOX_NAMESPACE not gone after 180 s: $(kc get namespace "$CAPMOX_NAMESPACE" -o jsonpath='{.status}' 2>&1)"
    sleep 1
  done
  for volume; do
    kc delete persistentvolume "$volume" >/dev/null || die "deleting PersistentVolume $volume failed"
  done
}

# deploy/overlays/ha-manual-certs as docs/deploy.md installs it: three etcd members over mutual
# TLS (etcd's image imported, hostPath volumes for their claims) and three replicas using them by
# their DNS names; certificates from `deploy/manual-certs --etcd --apply`.
node_deploy_ha() {
  local start=$SECONDS i out ips=() names=() ns=$CAPMOX_NAMESPACE
  node_etcd_volumes etcd
  node_apply_overlay deploy-ha ha-manual-certs
  node_manual_certs --etcd
  node_wait_ready capmox-etcd 3 240
  log "etcd members capmox-etcd-0..2 Ready after $((SECONDS - start)) s"
  node_wait_ready "$CAPMOX_SERVICE" 3 240
  # A replica that finds no etcd member by name yet exits and is restarted (with back-off).
  log "replicas $CAPMOX_SERVICE-0..2 Ready after $((SECONDS - start)) s (restarts: $(kc -n "$ns" get pods \
    -l "app.kubernetes.io/name=$CAPMOX_SERVICE" -o jsonpath='{.items[*].status.containerStatuses[0].restartCount}'))"
  node_apiservices_available
  log "HA install: APIServices Available through Service -> pods $((SECONDS - start)) s after kubectl apply (our kinds in discovery ${node_discovery_lag} s after Available)"

  # The members' names as the headless Service publishes them, from a pod of our namespace: short
  # (search list) and fully qualified; a member's address back to its name.
  for i in 0 1 2; do
    ips+=("$(kc -n "$ns" get pod "capmox-etcd-$i" -o jsonpath='{.status.podIP}')")
  done
  names=(capmox-etcd-0.capmox-etcd "capmox-etcd-1.capmox-etcd.$ns.svc" "capmox-etcd-2.capmox-etcd.$ns.svc.cluster.local")
  out=$(node_resolve "$ns" "${names[@]}" "${ips[0]}")
  for i in 0 1 2; do
    node_expect_lookup "${names[i]} ${ips[i]}" "$(sed -n "$((i + 1))p" <<<"$out")"
  done
  node_expect_lookup "${ips[0]} capmox-etcd-0.capmox-etcd.$ns.svc.cluster.local" "$(sed -n 4p <<<"$out")"
  log "a pod resolved the StatefulSet's members by name: $(tr '\n' ';' <<<"$out")"

  node_etcd_mtls "${ips[0]}"
  node_ha_object
  node_ha_failover
}

# IP [CERTS]: etcd speaks mutual TLS only, checked from the node's namespace with curl to a
# member's pod IP (with its name, for the server certificate's check): without a client
# certificate, with one of another CA and in plain HTTP curl gets no answer, and etcd's log says
# why it refused each; the client certificate in CERTS (etcd-ca.crt, etcd-client.crt and .key;
# default deploy/manual-certs --etcd's directory), with etcd's CA, gets /health.
node_etcd_mtls() {
  local name=capmox-etcd-0.capmox-etcd.$CAPMOX_NAMESPACE.svc certs=${2:-$run/certs} out reason
  local -a tls=(-sS --max-time 10 --resolve "$name:2379:$1" --cacert "$certs/etcd-ca.crt")
  # With TLS 1.3 the server's refusal arrives after the client's Finished: as an alert (56) or,
  # when etcd has closed first, as a reset (55).
  if out=$(curl "${tls[@]}" "https://$name:2379/health" 2>&1); then
    die "etcd answered without a client certificate: $out"
  fi
  log "etcd without a client certificate: $out"
  if out=$(curl "${tls[@]}" --cert "$pki/admin.crt" --key "$pki/admin.key" "https://$name:2379/health" 2>&1); then
    die "etcd answered a client certificate of another CA: $out"
  fi
  log "etcd with a client certificate of the cluster CA: $out"
  if out=$(curl -sS --max-time 10 "http://$1:2379/health" 2>&1) && [[ $out == *'"health"'* ]]; then
    die "etcd answered plain HTTP on 2379: $out"
  fi
  log "etcd in plain HTTP: ${out:-no answer}"
  out=$(kc -n "$CAPMOX_NAMESPACE" logs capmox-etcd-0 | grep '"rejected connection on client endpoint"')
  for reason in "client didn't provide a certificate" "certificate signed by unknown authority" \
    "first record does not look like a TLS handshake"; do
    [[ $out == *"$reason"* ]] || die "capmox-etcd-0 logged no refusal '$reason': $out"
  done
  log "capmox-etcd-0 logged the three refusals (no certificate, unknown authority, not TLS)"
  out=$(curl "${tls[@]}" --cert "$certs/etcd-client.crt" --key "$certs/etcd-client.key" "https://$name:2379/health" 2>&1) ||
    die "etcd refused our client certificate: $out"
  [[ $out == *'"health":"true"'* ]] || die "etcd's /health with our client certificate: $out"
  log "etcd with the client certificate of $certs: $out"
}

# A ProxmoxCluster created and read back through the aggregator, and its key in etcd.
node_ha_object() {
  local out name=capmox-etcd-2.capmox-etcd.$CAPMOX_NAMESPACE.svc certs=$run/certs ip
  kc create namespace e2e-ha >/dev/null
  api_check 6443 | kc -n e2e-ha apply -f - >/dev/null || die "creating a ProxmoxCluster through the aggregator failed"
  out=$(kc -n e2e-ha get "proxmoxclusters.$INFRA_GROUP" api-check \
    -o jsonpath='{.spec.controlPlaneEndpoint.host}:{.spec.controlPlaneEndpoint.port} {.metadata.uid}' 2>&1) ||
    die "reading the ProxmoxCluster back failed: $out"
  [[ $out == "10.0.0.10:6443 "?* ]] || die "the ProxmoxCluster read back: $out"
  log "ProxmoxCluster e2e-ha/api-check created and read back through the aggregator ($out)"
  ip=$(kc -n "$CAPMOX_NAMESPACE" get pod capmox-etcd-2 -o jsonpath='{.status.podIP}')
  # Every key (from "\0" to the end), names only.
  out=$(curl -sS --max-time 10 --resolve "$name:2379:$ip" --cacert "$certs/etcd-ca.crt" \
    --cert "$certs/etcd-client.crt" --key "$certs/etcd-client.key" "https://$name:2379/v3/kv/range" \
    -d '{"key": "AA==", "range_end": "AA==", "keys_only": true}' 2>&1 |
    python3 -c 'import base64, json, sys
keys = [base64.b64decode(kv["key"]) for kv in json.load(sys.stdin).get("kvs", [])]
print(*[k.decode(errors="replace") for k in keys if b"api-check" in k])') ||
    die "reading etcd's keys failed: $out"
  [[ -n $out ]] || die "no key of the ProxmoxCluster in etcd"
  log "its key in etcd (read from capmox-etcd-2): $out"
}

# One etcd member and one replica deleted while GETs of the ProxmoxCluster go through the
# aggregator every 0.2 s, until the new pods of both are Ready (and at least 30 s): when each was
# back, how many GETs failed.
node_ha_failover() {
  local url total=0 failed=0 start=$SECONDS check=0 old pod uid status entry back=() ns=$CAPMOX_NAMESPACE
  local -a pods=(capmox-etcd-1 "$CAPMOX_SERVICE-1")
  url=https://127.0.0.1:$kas_port/apis/$INFRA_GROUP/v1alpha2/namespaces/e2e-ha/proxmoxclusters/api-check
  old=$(kc -n "$ns" get pods "${pods[@]}" -o jsonpath='{.items[*].metadata.uid}')
  kc -n "$ns" delete pod "${pods[@]}" --wait=false >/dev/null || die "deleting ${pods[*]} failed"
  while ((SECONDS - start < 240)); do
    total=$((total + 1))
    if ! curl -fsS --max-time 5 --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
      "$url" -o /dev/null 2>>"$run/failover.log"; then
      failed=$((failed + 1))
      printf '(at %s s)\n' "$((SECONDS - start))" >>"$run/failover.log"
    fi
    if ((SECONDS >= check)); then
      check=$((SECONDS + 1))
      for entry in $(kc -n "$ns" get pods "${pods[@]}" --ignore-not-found \
        -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.uid}={.status.conditions[?(@.type=="Ready")].status}{" "}{end}' 2>/dev/null); do
        IFS== read -r pod uid status <<<"$entry"
        [[ $old != *"$uid"* && $status == True && " ${back[*]} " != *" $pod="* ]] || continue
        back+=("$pod=$((SECONDS - start))s")
      done
      ((${#back[@]} < 2 || SECONDS - start < 30)) || break
    fi
    sleep 0.2
  done
  ((${#back[@]} == 2)) || die "${pods[*]} not replaced by Ready pods after 240 s (back: ${back[*]})"
  log "failover: ${pods[*]} deleted; new pods Ready (${back[*]}); $failed of $total GETs through the aggregator failed in $((SECONDS - start)) s"
  ((failed == 0)) || log "failed GETs: $(tr '\n' ' ' <"$run/failover.log" | cut -c1-600)"
}

# E2E_NODE_CERT_MANAGER=DIR (a `run images` directory): cert-manager as `clusterctl init` installs
# it, its images imported from DIR and its rendered manifest applied; then its Deployments
# become Available, cainjector puts the webhook's CA into the webhook configurations, and a
# SelfSigned Issuer's Certificate, created through the webhook, becomes Ready with its Secret.
node_cert_manager() {
  local dir=${E2E_NODE_CERT_MANAGER:-} ref tar start=$SECONDS out
  [[ -n $dir ]] || return 0
  while read -r ref tar; do
    [[ $ref == quay.io/jetstack/cert-manager-* ]] || continue
    ctr -a "$node_containerd_sock" -n k8s.io images import "$tar" >/dev/null || die "importing $ref failed"
  done <"$dir/images.txt"
  kc apply --server-side --field-manager capmox-e2e \
    -f "$dir/repository/cert-manager/$CERT_MANAGER_VERSION/cert-manager.yaml" >/dev/null ||
    die "applying cert-manager's manifest failed"
  kc -n cert-manager wait --for condition=Available --timeout 180s \
    deployment/cert-manager deployment/cert-manager-webhook deployment/cert-manager-cainjector >/dev/null ||
    die "cert-manager not Available: $(kc -n cert-manager get pods -o wide 2>&1)"
  log "cert-manager's Deployments Available after $((SECONDS - start)) s"
  wait_until 120 "$node_kubelet_pid" "cainjector's CA in cert-manager-webhook" \
    node_webhook_ca_injected
  out=$(kc apply -f - 2>&1 <<EOF
apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: selfsigned, namespace: default}
spec: {selfSigned: {}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: node-check, namespace: default}
spec:
  secretName: node-check
  dnsNames: [node-check.default.svc]
  issuerRef: {name: selfsigned, kind: Issuer}
EOF
  ) || die "creating an Issuer and a Certificate through cert-manager's webhook failed: $out"
  kc wait --for condition=Ready --timeout 120s certificate/node-check >/dev/null ||
    die "Certificate node-check not Ready: $(kc get certificate node-check -o jsonpath='{.status}' 2>&1)"
  out=$(kc get secret node-check -o jsonpath='{.type}')
  log "cert-manager: Certificate node-check Ready after $((SECONDS - start)) s (Secret node-check, $out)"
}

# With E2E_NODE_CERT_MANAGER: the HA install removed, then deploy/overlays/ha as shipped, its
# certificates (the serving one, etcd's CA, members' and client's) from cert-manager and the
# APIServices' caBundle from its cainjector; on new volumes, as a fresh cluster would have.
node_deploy_ha_cert_manager() {
  local start=$SECONDS out
  [[ -n ${E2E_NODE_CERT_MANAGER:-} ]] || return 0
  kc delete namespace e2e-ha --wait=false >/dev/null 2>&1 || true
  node_uninstall "$run/deploy-ha.yaml" deploy/overlays/ha-manual-certs capmox-e2e-etcd-{0,1,2}
  log "deploy/overlays/ha-manual-certs removed in $((SECONDS - start)) s"
  start=$SECONDS
  node_etcd_volumes etcd-cm
  node_apply_overlay deploy-ha-cm ha
  node_wait_ready capmox-etcd 3 240
  node_wait_ready "$CAPMOX_SERVICE" 3 240
  node_apiservices_available
  out=$(kc get apiservice "v1alpha2.$INFRA_GROUP" -o jsonpath='{.spec.caBundle}' | base64 -d |
    openssl x509 -noout -subject 2>&1) || die "the APIService's caBundle is not a certificate: $out"
  api_check 6443 | kc -n default apply -f - >/dev/null || die "creating a ProxmoxCluster through the aggregator failed"
  kc -n default get "proxmoxclusters.$INFRA_GROUP" api-check >/dev/null || die "reading the ProxmoxCluster back failed"
  log "deploy/overlays/ha with cert-manager: etcd and replicas Ready, APIServices Available $((SECONDS - start)) s after kubectl apply (caBundle $out); a ProxmoxCluster created and read back"
}

# With E2E_NODE_CERT_MANAGER: deploy/overlays/ha removed as node_remove_capmox removes an install
# (every object of its rendered manifests, the namespace gone, its volumes), then
# `kubectl apply -k deploy/overlays/default` exactly as docs/deploy.md has it (no kustomization of
# ours: the base's image is the one imported), a new volume for its claim: the pod Ready, both
# APIServices Available with cainjector's caBundle, a ProxmoxCluster created and read back.
node_deploy_default_cert_manager() {
  local start=$SECONDS out ca
  [[ -n ${E2E_NODE_CERT_MANAGER:-} ]] || return 0
  kc -n default delete "proxmoxclusters.$INFRA_GROUP" api-check >/dev/null ||
    die "deleting ProxmoxCluster default/api-check failed"
  node_uninstall "$run/deploy-ha-cm.yaml" deploy/overlays/ha capmox-e2e-etcd-cm-{0,1,2}
  out=$(kc get apiservices -o name | grep "\.$INFRA_GROUP\$") && die "APIServices left by the removal: $out"
  log "deploy/overlays/ha removed in $((SECONDS - start)) s"
  start=$SECONDS
  node_volume capmox-e2e-default "$run/volumes/default-data" 1Gi "data-$CAPMOX_SERVICE-0"
  kc apply -k "$repo/deploy/overlays/default" >"$run/deploy-default.log" 2>&1 ||
    die "kubectl apply -k deploy/overlays/default failed: $(tail -n 5 "$run/deploy-default.log")"
  log "kubectl apply -k deploy/overlays/default: $(grep -c . "$run/deploy-default.log") objects"
  node_wait_ready "$CAPMOX_SERVICE" 1 180
  out=$(kc -n "$CAPMOX_NAMESPACE" get pod "$CAPMOX_SERVICE-0" -o jsonpath='{.spec.containers[0].image}')
  [[ $out == "capmox-apiserver:$capmox_version" ]] || die "$CAPMOX_SERVICE-0 runs $out"
  node_apiservices_available
  ca=$(kc get apiservice "v1alpha2.$INFRA_GROUP" -o jsonpath='{.spec.caBundle}' | base64 -d |
    openssl x509 -noout -subject 2>&1) || die "the APIService's caBundle is not a certificate: $ca"
  api_check 6443 | kc -n default apply -f - >/dev/null || die "creating a ProxmoxCluster through the aggregator failed"
  out=$(kc -n default get "proxmoxclusters.$INFRA_GROUP" api-check \
    -o jsonpath='{.spec.controlPlaneEndpoint.host}:{.spec.controlPlaneEndpoint.port} {.metadata.uid}' 2>&1) ||
    die "reading the ProxmoxCluster back failed: $out"
  [[ $out == "10.0.0.10:6443 "?* ]] || die "the ProxmoxCluster read back: $out"
  log "deploy/overlays/default with cert-manager: $CAPMOX_SERVICE-0 Ready, APIServices Available $((SECONDS - start)) s after kubectl apply -k (caBundle $ca); ProxmoxCluster default/api-check read back ($out)"
}

node_webhook_ca_injected() {
  [[ -n $(kc get validatingwebhookconfiguration cert-manager-webhook -o jsonpath='{.webhooks[0].clientConfig.caBundle}') ]]
}

# E2E_NODE_CLUSTERCTL=DIR (a `run images` directory), instead of deploy/overlays/manual-certs and
# E2E_NODE_CERT_MANAGER: `clusterctl init --infrastructure proxmox --ipam in-cluster` as an admin runs
# it, with DIR's images imported, DIR's clusterctl.yaml and our provider from deploy/clusterctl,
# its URL naming node_components_file (hostPath PersistentVolumes for the StatefulSets' claims, as
# node_deploy_capmox and node_deploy_ha make). Then our StatefulSet's pods (and etcd's members) are
# Ready and its APIServices, their CA injected by cert-manager, Available.
node_clusterctl_init() {
  local dir=$E2E_NODE_CLUSTERCTL data=$run/volumes/capmox-data start=$SECONDS ref tar out timing=''
  while read -r ref tar; do
    ctr -a "$node_containerd_sock" -n k8s.io images import "$tar" >/dev/null || die "importing $ref failed"
  done <"$dir/images.txt"
  if ((node_replicas > 1)); then
    node_etcd_volumes etcd
  else
    node_volume capmox-e2e-data "$data" 1Gi "data-$CAPMOX_SERVICE-0"
  fi
  sed "/^providers:/a - name: proxmox\\n  type: InfrastructureProvider\\n  url: file://${node_clusterctl_repo:-$repo/deploy/clusterctl}/infrastructure-proxmox/$capmox_version/$node_components_file" \
    "$dir/clusterctl.yaml" >"$run/clusterctl-init.yaml"
  CLUSTERCTL_DISABLE_VERSIONCHECK=true CAPMOX_IMAGE=capmox-apiserver:$capmox_version "$bin/clusterctl" init --config "$run/clusterctl-init.yaml" \
    --kubeconfig "$kubeconfig" --infrastructure proxmox --ipam in-cluster \
    --wait-providers --wait-provider-timeout 300 -v 5 >"$run/clusterctl-init.log" 2>&1 ||
    die "clusterctl init failed: $(tail -n 5 "$run/clusterctl-init.log")"
  # Which file clusterctl read (its URL's last path element), from its -v 5 log.
  grep -q "^Fetching file=\"$node_components_file\" provider=\"proxmox\"" "$run/clusterctl-init.log" ||
    die "clusterctl did not read $node_components_file: $(grep Fetching "$run/clusterctl-init.log" | head -n 5)"
  log "clusterctl init done after $((SECONDS - start)) s ($(grep -c '^Installing' "$run/clusterctl-init.log") installs; ours from $node_components_file)"
  if ((node_replicas > 1)); then
    node_wait_ready capmox-etcd 3 240
    timing="etcd members Ready after $((SECONDS - start)) s, "
  fi
  node_wait_ready "$CAPMOX_SERVICE" "$node_replicas" 240
  timing+="$node_replicas replica(s) Ready after $((SECONDS - start)) s"
  node_apiservices_available
  out=$(kc get "proxmoxclusters.$INFRA_GROUP" -A 2>&1) || die "listing ProxmoxClusters failed: $out"
  log "clusterctl init: $timing, APIServices Available after $((SECONDS - start)) s (our kinds in discovery ${node_discovery_lag} s after); ProxmoxClusters listed; restarts: $(node_restarts)"
}

# Each pod of ours and of etcd as NAME=RESTARTS.
node_restarts() {
  kc -n "$CAPMOX_NAMESPACE" get pods -l "app.kubernetes.io/name in ($CAPMOX_SERVICE,capmox-etcd)" \
    -o jsonpath='{range .items[*]}{.metadata.name}={.status.containerStatuses[0].restartCount} {end}'
}

# With E2E_NODE_CLUSTERCTL_HA, after node_clusterctl_init: etcd speaks mutual TLS only, with the
# certificates cert-manager issued from the components file's Certificates (etcd's CA and the
# server's client certificate read from the Secret capmox-etcd-client-tls).
node_clusterctl_etcd_checks() {
  local certs=$run/certs-clusterctl ip key file
  ((node_replicas > 1)) || return 0
  mkdir -p "$certs"
  for key in ca.crt:etcd-ca.crt tls.crt:etcd-client.crt tls.key:etcd-client.key; do
    file=${key#*:} key=${key%%:*}
    kc -n "$CAPMOX_NAMESPACE" get secret capmox-etcd-client-tls -o jsonpath="{.data.${key//./\\.}}" |
      base64 -d >"$certs/$file" || die "reading $key of Secret capmox-etcd-client-tls failed"
  done
  ip=$(kc -n "$CAPMOX_NAMESPACE" get pod capmox-etcd-0 -o jsonpath='{.status.podIP}')
  node_etcd_mtls "$ip" "$certs"
}

# NAMESPACE: our objects there as "kind/name=uid" lines, sorted (ProxmoxClusters and
# ProxmoxMachines, read through the aggregator).
node_object_uids() {
  kc -n "$1" get "proxmoxclusters.$INFRA_GROUP,proxmoxmachines.$INFRA_GROUP" \
    -o jsonpath='{range .items[*]}{.kind}/{.metadata.name}={.metadata.uid}{"\n"}{end}' | sort
}

# After node_clusterctl_init: what `clusterctl delete --infrastructure proxmox` keeps with its
# default options (no --include-namespace, no --include-crd), and `clusterctl init --infrastructure
# proxmox` again on top of it. A ProxmoxCluster and a ProxmoxMachine are created first; then
# `--include-crd` must be refused while they exist (clusterctl lists every shadow CRD's kind
# through our API); the plain delete removes the StatefulSet, Service, APIServices, Certificates,
# Issuers, credentials Secret and the inventory, and keeps the namespace, the claim (no clusterctl
# labels), cert-manager's Secrets, the ClusterRoles and Bindings (clusterctl deletes only
# cluster-scoped objects whose names start with "<namespace>-") and the shadow CRDs. After the new
# init the same claim is bound to the new pod and the objects are there with the same uids.
node_clusterctl_reinstall() {
  local ns=e2e-reinstall start=$SECONDS before after out pvc kind
  kc create namespace "$ns" >/dev/null || die "creating namespace $ns failed"
  api_check 6443 | kc -n "$ns" apply -f - >/dev/null || die "creating ProxmoxCluster $ns/api-check failed"
  kc -n "$ns" apply -f - >/dev/null <<EOF || die "creating ProxmoxMachine $ns/kept failed"
apiVersion: $INFRA_GROUP/v1alpha2
kind: ProxmoxMachine
metadata: {name: kept}
spec:
  sourceNode: pve1
  templateID: 100
  format: qcow2
  full: true
  numSockets: 1
  numCores: 2
  memoryMiB: 2048
  disks: {bootVolume: {disk: scsi0, sizeGb: 20}}
  network: {networkDevices: [{name: net0, bridge: vmbr0, model: virtio}]}
EOF
  before=$(node_object_uids "$ns")
  [[ $(wc -l <<<"$before") == 2 ]] || die "objects before clusterctl delete: $before"
  pvc=$(kc -n "$CAPMOX_NAMESPACE" get pvc "data-$CAPMOX_SERVICE-0" -o jsonpath='{.metadata.uid}')

  if out=$(CLUSTERCTL_DISABLE_VERSIONCHECK=true "$bin/clusterctl" delete --config "$run/clusterctl-init.yaml" \
    --kubeconfig "$kubeconfig" --infrastructure proxmox --include-crd 2>&1); then
    die "clusterctl delete --include-crd deleted our provider while its objects exist: $out"
  fi
  [[ $out == *"objects"* ]] || die "clusterctl delete --include-crd failed, but not for the objects: $out"
  kc get "customresourcedefinition/proxmoxclusters.$INFRA_GROUP" "apiservice/v1alpha2.$INFRA_GROUP" >/dev/null ||
    die "clusterctl delete --include-crd deleted something before refusing"
  log "clusterctl delete --include-crd refused while our objects exist: $(tail -n 1 <<<"$out" | cut -c1-200)"

  start=$SECONDS
  CLUSTERCTL_DISABLE_VERSIONCHECK=true "$bin/clusterctl" delete --config "$run/clusterctl-init.yaml" \
    --kubeconfig "$kubeconfig" --infrastructure proxmox -v 5 >"$run/clusterctl-delete.log" 2>&1 ||
    die "clusterctl delete --infrastructure proxmox failed: $(tail -n 5 "$run/clusterctl-delete.log")"
  until [[ -z $(kc -n "$CAPMOX_NAMESPACE" get pods -o name 2>&1) ]]; do
    ((SECONDS - start < 120)) || die "pods left 120 s after clusterctl delete: $(kc -n "$CAPMOX_NAMESPACE" get pods 2>&1)"
    sleep 1
  done
  log "clusterctl delete --infrastructure proxmox: done, no pod left after $((SECONDS - start)) s; it deleted: $(sed 1d "$run/clusterctl-delete.log" | sed -n 's/^Deleting \([A-Za-z]*\)=.*/\1/p' | sort | uniq -c | tr -s ' \n' ' ')"
  # Gone: every object clusterctl labelled and deletes, and the inventory.
  for kind in statefulset service serviceaccount "certificates.cert-manager.io" "issuers.cert-manager.io"; do
    out=$(kc -n "$CAPMOX_NAMESPACE" get "$kind" -l cluster.x-k8s.io/provider=infrastructure-proxmox -o name 2>&1)
    [[ -z $out ]] || die "left after clusterctl delete: $out"
  done
  out=$(kc get apiservices -o name | grep "\.$INFRA_GROUP\$") && die "APIServices left after clusterctl delete: $out"
  out=$(kc get providers.clusterctl.cluster.x-k8s.io -A -o name)
  [[ $out != *infrastructure-proxmox* ]] || die "clusterctl's inventory still has our provider: $out"
  # Kept: the namespace, the claim and its volume, the serving certificate's Secret, RBAC, shadow CRDs.
  kc get namespace "$CAPMOX_NAMESPACE" >/dev/null || die "clusterctl delete removed namespace $CAPMOX_NAMESPACE"
  out=$(kc -n "$CAPMOX_NAMESPACE" get pvc "data-$CAPMOX_SERVICE-0" -o jsonpath='{.metadata.uid} {.status.phase}') ||
    die "clusterctl delete removed the claim data-$CAPMOX_SERVICE-0"
  [[ $out == "$pvc Bound" ]] || die "the claim after clusterctl delete: $out (was $pvc)"
  kc -n "$CAPMOX_NAMESPACE" get secret capmox-apiserver-tls capmox-apiserver-ca >/dev/null ||
    die "clusterctl delete removed cert-manager's Secrets (serving certificate, CA)"
  kc get clusterrole capmox-manager capmox-view capmox-edit >/dev/null || die "clusterctl delete removed our ClusterRoles"
  kc get "customresourcedefinition/proxmoxclusters.$INFRA_GROUP" >/dev/null || die "clusterctl delete removed the shadow CRDs"
  log "kept after clusterctl delete: namespace $CAPMOX_NAMESPACE, claim data-$CAPMOX_SERVICE-0 (Bound, same uid), Secrets $(kc -n "$CAPMOX_NAMESPACE" get secrets -o jsonpath='{.items[*].metadata.name}'), ClusterRoles, shadow CRDs"

  start=$SECONDS
  CLUSTERCTL_DISABLE_VERSIONCHECK=true CAPMOX_IMAGE=capmox-apiserver:$capmox_version "$bin/clusterctl" init \
    --config "$run/clusterctl-init.yaml" --kubeconfig "$kubeconfig" --infrastructure proxmox \
    --wait-providers --wait-provider-timeout 300 >"$run/clusterctl-reinit.log" 2>&1 ||
    die "clusterctl init (again) failed: $(tail -n 5 "$run/clusterctl-reinit.log")"
  kc -n "$CAPMOX_NAMESPACE" rollout status "statefulset/$CAPMOX_SERVICE" --timeout 180s >/dev/null ||
    die "StatefulSet $CAPMOX_SERVICE not ready after the second init"
  node_apiservices_available
  after=$(node_object_uids "$ns")
  [[ $after == "$before" ]] || die "objects after clusterctl delete and init: $(tr '\n' ' ' <<<"$after"), before: $(tr '\n' ' ' <<<"$before")"
  out=$(kc -n "$CAPMOX_NAMESPACE" get pod "$CAPMOX_SERVICE-0" -o jsonpath='{.spec.volumes[?(@.name=="data")].persistentVolumeClaim.claimName}')
  [[ $out == "data-$CAPMOX_SERVICE-0" && $(kc -n "$CAPMOX_NAMESPACE" get pvc "$out" -o jsonpath='{.metadata.uid}') == "$pvc" ]] ||
    die "the new pod's claim: $out"
  log "clusterctl init again: $CAPMOX_SERVICE-0 Ready, APIServices Available after $((SECONDS - start)) s; the same claim, and the objects with the same uids: $(tr '\n' ' ' <<<"$after")"
}

# REPLICAS: our StatefulSet scaled to REPLICAS, waited for (no pod left, or the pod Ready and the
# APIServices Available).
node_scale_capmox() {
  local deadline=$((SECONDS + 180))
  kc -n "$CAPMOX_NAMESPACE" scale "statefulset/$CAPMOX_SERVICE" --replicas "$1" >/dev/null ||
    die "scaling $CAPMOX_SERVICE to $1 failed"
  if (($1 == 0)); then
    until [[ -z $(kc -n "$CAPMOX_NAMESPACE" get pods -l "app.kubernetes.io/name=$CAPMOX_SERVICE" -o name 2>&1) ]]; do
      ((SECONDS < deadline)) || die "$CAPMOX_SERVICE's pod not gone 180 s after scaling to 0"
      sleep 1
    done
  else
    node_wait_ready "$CAPMOX_SERVICE" "$1" 180
    node_apiservices_available
  fi
}

# After node_clusterctl_reinstall: docs/guide.md's backup of the embedded store's file as written
# (scale the StatefulSet to 0, copy capmox.redb from the data directory, here the hostPath
# volume's directory, scale up), a ProxmoxCluster created after the backup, then the restore (the
# file put back while scaled to 0): the objects of the backup are there with their uids, the
# later one is not.
node_backup_restore() {
  local ns=e2e-reinstall data=$run/volumes/capmox-data start=$SECONDS before after
  before=$(node_object_uids "$ns")
  node_scale_capmox 0
  [[ -f $data/capmox.redb ]] || die "no capmox.redb in the data directory: $(ls -la "$data" 2>&1)"
  cp "$data/capmox.redb" "$run/capmox.redb.backup"
  node_scale_capmox 1
  log "backup: capmox.redb ($(stat -c %s "$run/capmox.redb.backup") bytes) copied while scaled to 0; Available again after $((SECONDS - start)) s"
  api_check 6443 | sed 's/name: api-check/name: after-backup/' | kc -n "$ns" apply -f - >/dev/null ||
    die "creating ProxmoxCluster $ns/after-backup failed"
  [[ $(node_object_uids "$ns" | wc -l) == 3 ]] || die "objects after the backup: $(node_object_uids "$ns")"
  start=$SECONDS
  node_scale_capmox 0
  cp "$run/capmox.redb.backup" "$data/capmox.redb"
  node_scale_capmox 1
  after=$(node_object_uids "$ns")
  [[ $after == "$before" ]] || die "objects after the restore: $(tr '\n' ' ' <<<"$after"), in the backup: $(tr '\n' ' ' <<<"$before")"
  log "restore: the file put back while scaled to 0, Available again after $((SECONDS - start)) s; the backup's objects with their uids, not the later one: $(tr '\n' ' ' <<<"$after")"
}

# Last in the clusterctl mode: what docs/deploy.md tells users not to do while the objects are
# meant to stay. `clusterctl delete --include-namespace` deletes capmox-system, and with it the
# StatefulSet's claim; its volume is then Released (Retain here: a provisioner's Delete policy
# would remove it, and the objects with it).
node_clusterctl_delete_namespace() {
  local start=$SECONDS deadline=$((SECONDS + 180)) out
  CLUSTERCTL_DISABLE_VERSIONCHECK=true "$bin/clusterctl" delete --config "$run/clusterctl-init.yaml" \
    --kubeconfig "$kubeconfig" --infrastructure proxmox --include-namespace >"$run/clusterctl-delete-ns.log" 2>&1 ||
    die "clusterctl delete --include-namespace failed: $(tail -n 5 "$run/clusterctl-delete-ns.log")"
  until [[ -z $(kc get namespace "$CAPMOX_NAMESPACE" --ignore-not-found -o name 2>&1) ]]; do
    ((SECONDS < deadline)) ||
      die "namespace $CAPMOX_NAMESPACE not gone 180 s after clusterctl delete --include-namespace: $(kc get namespace "$CAPMOX_NAMESPACE" -o jsonpath='{.status}' 2>&1)"
    sleep 1
  done
  out=$(kc get persistentvolume capmox-e2e-data -o jsonpath='{.status.phase} {.spec.claimRef.name}')
  [[ $out == "Released data-$CAPMOX_SERVICE-0" ]] || die "PersistentVolume capmox-e2e-data after the namespace's deletion: $out"
  log "clusterctl delete --include-namespace: namespace $CAPMOX_NAMESPACE and claim data-$CAPMOX_SERVICE-0 gone after $((SECONDS - start)) s; its volume $out (kept only by its Retain policy)"
}

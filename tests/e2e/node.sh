# shellcheck shell=bash
# A real node (sourced by run after scenario.sh). See docs/e2e.md, "A real node".

# kubelet and kube-proxy from the k8s.io/kubernetes module kube-apiserver comes from; only the
# node action builds them (the other actions never run a node).
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
}

// Compiled into a copy of Talos' NoCloud platform package (tests/e2e/run build-talos-reader):
// Talos' own reader parses the seed our controller wrote for a VM, and the result is printed
// for the scenario's Talos step to check (tests/e2e/talos_seed.py --reader).
//
// Environment: CAPMOX_SEED_DIR (network-config and meta-data as the guest reads them),
// CAPMOX_SEED_MAC (the MAC of the VM's net0, as Proxmox VE assigned it), CAPMOX_SEED_OUT
// (where the parsed platform network configuration goes, as YAML).

package nocloud_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"gopkg.in/yaml.v3"

	"github.com/siderolabs/talos/internal/app/machined/pkg/runtime/v1alpha1/platform/nocloud"
	"github.com/siderolabs/talos/pkg/machinery/nethelpers"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
)

func TestCapmoxSeed(t *testing.T) {
	dir := os.Getenv("CAPMOX_SEED_DIR")
	if dir == "" {
		t.Skip("CAPMOX_SEED_DIR is not set")
	}

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	// The guest's one NIC, named as the kernel would name it, with the MAC Proxmox VE gave it.
	mac, err := net.ParseMAC(os.Getenv("CAPMOX_SEED_MAC"))
	if err != nil {
		t.Fatalf("CAPMOX_SEED_MAC: %v", err)
	}

	st := state.WrapCore(namespaced.NewState(inmem.Build))
	devices := runtime.NewDevicesStatus(runtime.NamespaceName, runtime.DevicesID)
	devices.TypedSpec().Ready = true

	if err = st.Create(ctx, devices); err != nil {
		t.Fatal(err)
	}

	link := network.NewLinkStatus(network.NamespaceName, "enp6s18")
	link.TypedSpec().PermanentAddr = nethelpers.HardwareAddr(mac)
	link.TypedSpec().Type = nethelpers.LinkEther

	if err = st.Create(ctx, link); err != nil {
		t.Fatal(err)
	}

	raw, err := os.ReadFile(filepath.Join(dir, "network-config"))
	if err != nil {
		t.Fatal(err)
	}

	decoded, err := nocloud.DecodeNetworkConfig(raw)
	if err != nil {
		t.Fatalf("Talos cannot decode network-config: %v", err)
	}

	rawMeta, err := os.ReadFile(filepath.Join(dir, "meta-data"))
	if err != nil {
		t.Fatal(err)
	}

	var metadata nocloud.MetadataConfig
	if err = yaml.Unmarshal(rawMeta, &metadata); err != nil {
		t.Fatalf("Talos cannot decode meta-data: %v", err)
	}

	parsed, needsReconcile, err := (&nocloud.Nocloud{}).ParseMetadata(ctx, decoded, st, &metadata)
	if err != nil {
		t.Fatalf("Talos rejects the network configuration: %v", err)
	}

	out, err := yaml.Marshal(map[string]any{"needsReconcile": needsReconcile, "config": parsed})
	if err != nil {
		t.Fatal(err)
	}

	if err = os.WriteFile(os.Getenv("CAPMOX_SEED_OUT"), out, 0o644); err != nil {
		t.Fatal(err)
	}
}

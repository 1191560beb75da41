// The cert-manager CA injector for the e2e harness: cert-manager's injectors
// (pkg/controller/cainjector: the CA of the Certificate or Secret an object's
// cert-manager.io/inject-ca-from or inject-ca-from-secret annotation names, into
// ValidatingWebhookConfigurations, MutatingWebhookConfigurations, CustomResourceDefinitions'
// conversion webhooks and APIServices) in a controller-runtime manager of ours. It reads the
// flags the released manifest passes and --config; metrics are served in plain HTTP.
package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	cliflag "k8s.io/component-base/cli/flag"
	apireg "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cert-manager/cert-manager/capmox-e2e/common"
	config "github.com/cert-manager/cert-manager/internal/apis/config/cainjector"
	"github.com/cert-manager/cert-manager/internal/apis/config/cainjector/scheme"
	"github.com/cert-manager/cert-manager/internal/apis/config/cainjector/validation"
	"github.com/cert-manager/cert-manager/internal/kube"
	v1alpha1 "github.com/cert-manager/cert-manager/pkg/apis/config/cainjector/v1alpha1"
	"github.com/cert-manager/cert-manager/pkg/cainjector/configfile"
	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"
	utilconfigfile "github.com/cert-manager/cert-manager/pkg/util/configfile"
)

// flags binds the command line the chart's cainjector Deployment can pass (and --kubeconfig,
// to run it outside a cluster) to c.
func flags(fs *pflag.FlagSet, c *config.CAInjectorConfiguration) {
	fs.StringVar(&c.KubeConfig, "kubeconfig", c.KubeConfig, "kubeconfig file (default: in-cluster)")
	fs.StringVar(&c.Namespace, "namespace", c.Namespace, "inject only into objects of this namespace (default: all)")
	le := &c.LeaderElectionConfig
	fs.BoolVar(&le.Enabled, "leader-elect", le.Enabled, "elect a leader before running")
	fs.StringVar(&le.Namespace, "leader-election-namespace", le.Namespace, "namespace of the leader election Lease")
	fs.DurationVar(&le.LeaseDuration, "leader-election-lease-duration", le.LeaseDuration, "leader election lease duration")
	fs.DurationVar(&le.RenewDeadline, "leader-election-renew-deadline", le.RenewDeadline, "leader election renew deadline")
	fs.DurationVar(&le.RetryPeriod, "leader-election-retry-period", le.RetryPeriod, "leader election retry period")
	fs.Var(cliflag.NewMapStringBool(&c.FeatureGates), "feature-gates", "feature gates, NAME=BOOL,...")
	fs.StringVar(&c.MetricsListenAddress, "metrics-listen-address", c.MetricsListenAddress, "metrics address (HTTP), 0 for none")
	logf.AddFlags(&c.Logging, fs)
}

func main() {
	cfg := &config.CAInjectorConfiguration{}
	s, _, err := scheme.NewSchemeAndCodecs()
	if err == nil {
		versioned := &v1alpha1.CAInjectorConfiguration{}
		s.Default(versioned)
		err = s.Convert(versioned, cfg, nil)
	}
	if err != nil {
		panic(err)
	}
	cfg = common.Configure("cainjector", cfg, flags, func() (utilconfigfile.ConfigFile, func() *config.CAInjectorConfiguration) {
		f := configfile.New()
		return f, func() *config.CAInjectorConfiguration { return f.Config }
	})
	common.Run("cainjector", cfg.FeatureGates, &cfg.Logging, validation.ValidateCAInjectorConfiguration(cfg, nil).ToAggregate(),
		func(ctx context.Context) error { return run(ctx, cfg) })
}

func run(ctx context.Context, c *config.CAInjectorConfiguration) error {
	rest, err := kube.BuildClientConfig("", c.KubeConfig)
	if err != nil {
		return err
	}
	objects := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{kscheme.AddToScheme, cmscheme.AddToScheme, apiext.AddToScheme, apireg.AddToScheme} {
		utilruntime.Must(add(objects))
	}
	var namespaces map[string]cache.Config
	if c.Namespace != "" {
		namespaces = map[string]cache.Config{c.Namespace: {}}
	}
	le := c.LeaderElectionConfig
	mgr, err := ctrl.NewManager(util.RestConfigWithUserAgent(rest, "cainjector"), ctrl.Options{
		Scheme: objects,
		Cache:  cache.Options{ReaderFailOnMissingInformer: true, DefaultNamespaces: namespaces},
		// Secrets are read when needed rather than all cached (the injectors watch only their metadata).
		Client:         client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		LeaderElection: le.Enabled, LeaderElectionNamespace: le.Namespace, LeaderElectionReleaseOnCancel: true,
		// The Lease the chart's RBAC names.
		LeaderElectionID:           "cert-manager-cainjector-leader-election",
		LeaderElectionResourceLock: resourcelock.LeasesResourceLock,
		LeaseDuration:              &le.LeaseDuration, RenewDeadline: &le.RenewDeadline, RetryPeriod: &le.RetryPeriod,
		Metrics: metricsserver.Options{BindAddress: c.MetricsListenAddress},
	})
	if err != nil {
		return err
	}
	// Injecting from Certificates needs their CRD: the manifest installs it with this Deployment.
	if c.EnableDataSourceConfig.Certificates {
		direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: objects, Mapper: mgr.GetRESTMapper()})
		if err != nil {
			return err
		}
		crd := types.NamespacedName{Name: "certificates.cert-manager.io"}
		if err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
			err := direct.Get(ctx, crd, &apiext.CustomResourceDefinition{})
			return err == nil, client.IgnoreNotFound(err)
		}); err != nil {
			return fmt.Errorf("waiting for the Certificate CRD: %w", err)
		}
	}
	if err := cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		Namespace:                    c.Namespace,
		EnableCertificatesDataSource: c.EnableDataSourceConfig.Certificates,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   c.EnableInjectableConfig.MutatingWebhookConfigurations,
			cainjector.ValidatingWebhookConfigurationName: c.EnableInjectableConfig.ValidatingWebhookConfigurations,
			cainjector.APIServiceName:                     c.EnableInjectableConfig.APIServices,
			cainjector.CustomResourceDefinitionName:       c.EnableInjectableConfig.CustomResourceDefinitions,
		},
	}); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

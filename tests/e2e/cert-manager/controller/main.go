// The cert-manager controller for the e2e harness: cert-manager's own control loops (the
// ones registered with pkg/controller, all of which its configuration defaults import), run
// by a short loop of ours. It reads the flags the released manifest passes and --config; its
// metrics are served in plain HTTP, and ACME's DNS01 checks use the default resolvers unless
// configured.
package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/cert-manager/cert-manager/capmox-e2e/common"
	config "github.com/cert-manager/cert-manager/internal/apis/config/controller"
	"github.com/cert-manager/cert-manager/internal/apis/config/controller/scheme"
	defaults "github.com/cert-manager/cert-manager/internal/apis/config/controller/v1alpha1"
	"github.com/cert-manager/cert-manager/internal/apis/config/controller/validation"
	"github.com/cert-manager/cert-manager/internal/pem"
	v1alpha1 "github.com/cert-manager/cert-manager/pkg/apis/config/controller/v1alpha1"
	"github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/configfile"
	"github.com/cert-manager/cert-manager/pkg/healthz"
	dnsutil "github.com/cert-manager/cert-manager/pkg/issuer/acme/dns/util"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	utilconfigfile "github.com/cert-manager/cert-manager/pkg/util/configfile"

	// The kinds of issuer the issuers and clusterissuers controllers set up (each registers
	// itself); the controllers register themselves from the configuration's defaults.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/acme"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/vault"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/venafi"
)

// flags binds the command line the chart's controller Deployment can pass (and a few more to
// run it outside a cluster) to c.
func flags(fs *pflag.FlagSet, c *config.ControllerConfiguration) {
	fs.StringVar(&c.KubeConfig, "kubeconfig", c.KubeConfig, "kubeconfig file (default: in-cluster)")
	fs.StringVar(&c.Namespace, "namespace", c.Namespace, "watch only this namespace (default: all)")
	fs.StringVar(&c.ClusterResourceNamespace, "cluster-resource-namespace", c.ClusterResourceNamespace, "namespace of ClusterIssuers' secrets")
	le := &c.LeaderElectionConfig
	fs.BoolVar(&le.Enabled, "leader-elect", le.Enabled, "elect a leader before running")
	fs.StringVar(&le.Namespace, "leader-election-namespace", le.Namespace, "namespace of the leader election Lease")
	fs.DurationVar(&le.LeaseDuration, "leader-election-lease-duration", le.LeaseDuration, "leader election lease duration")
	fs.DurationVar(&le.RenewDeadline, "leader-election-renew-deadline", le.RenewDeadline, "leader election renew deadline")
	fs.DurationVar(&le.RetryPeriod, "leader-election-retry-period", le.RetryPeriod, "leader election retry period")
	fs.StringSliceVar(&c.Controllers, "controllers", c.Controllers, "controllers to run: * for the defaults, -NAME to leave one out")
	fs.StringVar(&c.ACMEHTTP01Config.SolverImage, "acme-http01-solver-image", c.ACMEHTTP01Config.SolverImage, "image of ACME HTTP01 solver pods")
	fs.StringVar(&c.IngressShimConfig.DefaultIssuerName, "default-issuer-name", c.IngressShimConfig.DefaultIssuerName, "ingress-shim's default issuer name")
	fs.StringVar(&c.IngressShimConfig.DefaultIssuerKind, "default-issuer-kind", c.IngressShimConfig.DefaultIssuerKind, "ingress-shim's default issuer kind")
	fs.StringVar(&c.IngressShimConfig.DefaultIssuerGroup, "default-issuer-group", c.IngressShimConfig.DefaultIssuerGroup, "ingress-shim's default issuer group")
	fs.Var(cliflag.NewMapStringBool(&c.FeatureGates), "feature-gates", "feature gates, NAME=BOOL,...")
	fs.IntVar(&c.MaxConcurrentChallenges, "max-concurrent-challenges", c.MaxConcurrentChallenges, "ACME challenges processed at once")
	fs.BoolVar(&c.EnableCertificateOwnerRef, "enable-certificate-owner-ref", c.EnableCertificateOwnerRef, "make Certificates own their Secrets")
	fs.BoolVar(&c.ACMEDNS01Config.RecursiveNameserversOnly, "dns01-recursive-nameservers-only", c.ACMEDNS01Config.RecursiveNameserversOnly, "DNS01 checks ask only the recursive nameservers")
	fs.StringSliceVar(&c.ACMEDNS01Config.RecursiveNameservers, "dns01-recursive-nameservers", c.ACMEDNS01Config.RecursiveNameservers, "DNS01 check nameservers, HOST:PORT or https://...")
	fs.StringVar(&c.MetricsListenAddress, "metrics-listen-address", c.MetricsListenAddress, "metrics address (HTTP)")
	fs.StringVar(&c.HealthzListenAddress, "internal-healthz-listen-address", c.HealthzListenAddress, "/livez address")
	logf.AddFlags(&c.Logging, fs)
}

func main() {
	cfg := &config.ControllerConfiguration{}
	s, _, err := scheme.NewSchemeAndCodecs()
	if err == nil {
		versioned := &v1alpha1.ControllerConfiguration{}
		s.Default(versioned)
		err = s.Convert(versioned, cfg, nil)
	}
	if err != nil {
		panic(err)
	}
	cfg = common.Configure("controller", cfg, flags, func() (utilconfigfile.ConfigFile, func() *config.ControllerConfiguration) {
		f := configfile.New()
		return f, func() *config.ControllerConfiguration { return f.Config }
	})
	common.Run("controller", cfg.FeatureGates, &cfg.Logging, validation.ValidateControllerConfiguration(cfg, nil).ToAggregate(),
		func(ctx context.Context) error { return run(ctx, cfg) })
}

// enabled is the set of controllers --controllers names: "*" for the defaults, "-NAME" to drop
// one (the defaults are implied when only drops are given).
func enabled(c *config.ControllerConfiguration) sets.Set[string] {
	on, off := sets.New[string](), sets.New[string]()
	for _, name := range c.Controllers {
		switch {
		case name == "*":
			on.Insert(defaults.DefaultEnabledControllers...)
		case strings.HasPrefix(name, "-"):
			off.Insert(name[1:])
		default:
			on.Insert(name)
		}
	}
	if on.Len() == 0 {
		on.Insert(defaults.DefaultEnabledControllers...)
	}
	if c.Namespace != "" {
		off.Insert(defaults.ClusterScopedControllers...)
	}
	return on.Difference(off)
}

func run(ctx context.Context, c *config.ControllerConfiguration) error {
	log := logf.FromContext(ctx)
	var quantities [4]resource.Quantity
	for i, q := range []string{c.ACMEHTTP01Config.SolverResourceRequestCPU, c.ACMEHTTP01Config.SolverResourceRequestMemory,
		c.ACMEHTTP01Config.SolverResourceLimitsCPU, c.ACMEHTTP01Config.SolverResourceLimitsMemory} {
		var err error
		if quantities[i], err = resource.ParseQuantity(q); err != nil {
			return fmt.Errorf("ACME HTTP01 solver resources: %w", err)
		}
	}
	nameservers := c.ACMEDNS01Config.RecursiveNameservers
	if len(nameservers) == 0 {
		nameservers = dnsutil.RecursiveNameservers
	}
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig: c.KubeConfig, APIServerHost: c.APIServerHost, Namespace: c.Namespace,
		KubernetesAPIQPS: c.KubernetesAPIQPS, KubernetesAPIBurst: c.KubernetesAPIBurst,
		IssuerOptions: controller.IssuerOptions{
			ClusterResourceNamespace:        c.ClusterResourceNamespace,
			IssuerAmbientCredentials:        c.IssuerAmbientCredentials,
			ClusterIssuerAmbientCredentials: c.ClusterIssuerAmbientCredentials,
		},
		ACMEOptions: controller.ACMEOptions{
			HTTP01SolverImage:              c.ACMEHTTP01Config.SolverImage,
			HTTP01SolverResourceRequestCPU: quantities[0], HTTP01SolverResourceRequestMemory: quantities[1],
			HTTP01SolverResourceLimitsCPU: quantities[2], HTTP01SolverResourceLimitsMemory: quantities[3],
			ACMEHTTP01SolverRunAsNonRoot: c.ACMEHTTP01Config.SolverRunAsNonRoot,
			HTTP01SolverNameservers:      c.ACMEHTTP01Config.SolverNameservers,
			DNS01Nameservers:             nameservers,
			DNS01CheckRetryPeriod:        c.ACMEDNS01Config.CheckRetryPeriod,
			DNS01CheckAuthoritative:      !c.ACMEDNS01Config.RecursiveNameserversOnly,
		},
		IngressShimOptions: controller.IngressShimOptions{
			DefaultIssuerName: c.IngressShimConfig.DefaultIssuerName, DefaultIssuerKind: c.IngressShimConfig.DefaultIssuerKind,
			DefaultIssuerGroup:                c.IngressShimConfig.DefaultIssuerGroup,
			DefaultAutoCertificateAnnotations: c.IngressShimConfig.DefaultAutoCertificateAnnotations,
			ExtraCertificateAnnotations:       c.IngressShimConfig.ExtraCertificateAnnotations,
		},
		CertificateOptions: controller.CertificateOptions{
			EnableOwnerRef:                           c.EnableCertificateOwnerRef,
			CopiedAnnotationPrefixes:                 c.CopiedAnnotationPrefixes,
			CertificateRequestMinimumBackoffDuration: c.CertificateRequestMinimumBackoffDuration,
		},
		SchedulerOptions: controller.SchedulerOptions{MaxConcurrentChallenges: c.MaxConcurrentChallenges},
	})
	if err != nil {
		return err
	}
	base, err := factory.Build()
	if err != nil {
		return err
	}
	limits := c.PEMSizeLimitsConfig
	pem.SetGlobalSizeLimits(pem.NewSizeLimitsFromConfig(limits.MaxCertificateSize, limits.MaxPrivateKeySize, limits.MaxChainLength, limits.MaxBundleSize))

	g, ctx := errgroup.WithContext(ctx)
	var lc net.ListenConfig
	// /livez, which the Deployment's liveness probe asks; it fails once leadership is lost.
	health := healthz.NewServer(c.LeaderElectionConfig.HealthzTimeout)
	healthLn, err := lc.Listen(ctx, "tcp", c.HealthzListenAddress)
	if err != nil {
		return err
	}
	g.Go(func() error { return health.Start(ctx, healthLn) })
	if c.MetricsListenAddress != "0" {
		metricsLn, err := lc.Listen(ctx, "tcp", c.MetricsListenAddress)
		if err != nil {
			return err
		}
		base.Metrics.SetupACMECollector(base.SharedInformerFactory.Acme().V1().Challenges().Lister())
		base.Metrics.SetupCertificateCollector(base.SharedInformerFactory.Certmanager().V1().Certificates().Lister())
		base.Metrics.SetupIssuerCollector(base.SharedInformerFactory.Certmanager().V1().Issuers().Lister())
		base.Metrics.SetupClusterIssuerCollector(base.SharedInformerFactory.Certmanager().V1().ClusterIssuers().Lister())
		metrics := base.Metrics.NewServer(metricsLn)
		g.Go(func() error { <-ctx.Done(); return metrics.Close() })
		g.Go(func() error {
			if err := metrics.Serve(metricsLn); err != http.ErrServerClosed {
				return err
			}
			return nil
		})
	}

	// The controllers start once this instance leads (the Lease the chart's RBAC names).
	start := func(ctx context.Context) {
		names := enabled(c)
		log.Info("starting controllers", "controllers", sets.List(names))
		for name, constructor := range controller.Known() {
			if !names.Has(name) {
				continue
			}
			loop, err := constructor(factory)
			if err != nil {
				g.Go(func() error { return fmt.Errorf("controller %s: %w", name, err) })
				return
			}
			g.Go(func() error { return loop.Run(c.NumberOfConcurrentWorkers, ctx) })
		}
		base.SharedInformerFactory.Start(ctx.Done())
		base.KubeSharedInformerFactory.Start(ctx.Done())
		base.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	}
	if !c.LeaderElectionConfig.Enabled {
		start(ctx)
		return g.Wait()
	}
	elector, err := factory.Build("leader-election")
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, c.LeaderElectionConfig.Namespace, "cert-manager-controller",
		elector.Client.CoreV1(), elector.Client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: host + "-external-cert-manager-controller", EventRecorder: elector.Recorder})
	if err != nil {
		return err
	}
	g.Go(func() error {
		lost := true
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: c.LeaderElectionConfig.LeaseDuration, RenewDeadline: c.LeaderElectionConfig.RenewDeadline,
			RetryPeriod: c.LeaderElectionConfig.RetryPeriod, ReleaseOnCancel: true, WatchDog: health.LeaderHealthzAdaptor,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: start,
				OnStoppedLeading: func() { lost = ctx.Err() == nil },
			},
		})
		if lost {
			return fmt.Errorf("leader election lost")
		}
		return nil
	})
	return g.Wait()
}

// The cert-manager webhook for the e2e harness. cert-manager's main module has all of it: the
// flags (pkg/webhook/options) and the server with validation, defaulting and conversion of its
// resources, serving with a certificate from a CA it keeps in a Secret
// (internal/webhook.NewCertManagerWebhookServer). This only reads the configuration and runs it.
package main

import (
	"context"

	"github.com/cert-manager/cert-manager/capmox-e2e/common"
	config "github.com/cert-manager/cert-manager/internal/apis/config/webhook"
	"github.com/cert-manager/cert-manager/internal/apis/config/webhook/validation"
	cmwebhook "github.com/cert-manager/cert-manager/internal/webhook"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	utilconfigfile "github.com/cert-manager/cert-manager/pkg/util/configfile"
	"github.com/cert-manager/cert-manager/pkg/webhook/configfile"
	"github.com/cert-manager/cert-manager/pkg/webhook/options"
)

func main() {
	cfg, err := options.NewWebhookConfiguration()
	if err != nil {
		panic(err)
	}
	cfg = common.Configure("webhook", cfg, options.AddConfigFlags,
		func() (utilconfigfile.ConfigFile, func() *config.WebhookConfiguration) {
			f := configfile.New()
			return f, func() *config.WebhookConfiguration { return f.Config }
		})
	common.Run("webhook", cfg.FeatureGates, &cfg.Logging, validation.ValidateWebhookConfiguration(cfg, nil).ToAggregate(),
		func(ctx context.Context) error {
			server, err := cmwebhook.NewCertManagerWebhookServer(logf.FromContext(ctx), *cfg)
			if err != nil {
				return err
			}
			return server.Run(ctx)
		})
}

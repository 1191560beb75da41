// Package common is what the three entry points share: reading a component's configuration
// and running it until a signal.
package common

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	logsapi "k8s.io/component-base/logs/api/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util/configfile"
	utilfeature "github.com/cert-manager/cert-manager/pkg/util/feature"
)

// Configure reads a component's configuration the way the released manifests expect: cfg holds
// the defaults; --config FILE, when given, replaces them with the file's (decoded into the
// object file returns); the command line, parsed with the flags bind adds, overrides both.
// --help prints the flags and exits.
func Configure[T any](name string, cfg *T, bind func(*pflag.FlagSet, *T), file func() (configfile.ConfigFile, func() *T)) *T {
	parse := func(cfg *T) string {
		fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
		path := fs.String("config", "", "a file holding a "+name+" configuration object; flags override it")
		bind(fs, cfg)
		if err := fs.Parse(os.Args[1:]); errors.Is(err, pflag.ErrHelp) {
			os.Exit(0)
		} else if err != nil {
			exit(name, err)
		}
		return *path
	}
	if path := parse(cfg); path != "" {
		into, loaded := file()
		loader, err := configfile.NewConfigurationFSLoader(nil, path)
		if err == nil {
			err = loader.Load(into)
		}
		if err != nil {
			exit(name, fmt.Errorf("reading %s: %w", path, err))
		}
		// Parse again onto the file's configuration (a fresh flag set, so that list flags
		// start over rather than append).
		cfg = loaded()
		parse(cfg)
	}
	return cfg
}

// Run applies the configuration's feature gates and logging options, then runs the component
// until SIGINT or SIGTERM cancels its context; an error ends the process with status 1.
// invalid holds what the component's validation found wrong with the configuration.
func Run(name string, gates map[string]bool, logging *logsapi.LoggingConfiguration, invalid error, run func(context.Context) error) {
	logf.InitLogs()
	defer logf.FlushLogs()
	ctrl.SetLogger(logf.Log) // controller-runtime's own logs (the cainjector's manager, the webhook's)
	err := invalid
	if err == nil {
		err = utilfeature.DefaultMutableFeatureGate.SetFromMap(gates)
	}
	if err == nil {
		err = logf.ValidateAndApply(logging)
	}
	if err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		err = run(logf.NewContext(ctx, logf.Log, name))
	}
	if err != nil {
		logf.FlushLogs()
		exit(name, err)
	}
}

func exit(name string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	os.Exit(1)
}

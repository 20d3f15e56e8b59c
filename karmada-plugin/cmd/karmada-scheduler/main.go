// Command karmada-scheduler is the upstream Karmada scheduler (v1.18.2) with the
// carbonshift CarbonAware plugin compiled in. It takes every upstream flag plus
// --carbonshift-url, --carbonshift-ca-file, --carbonshift-cert-file,
// --carbonshift-key-file, --carbonshift-timeout and --carbonshift-cache-ttl (or the
// CARBONSHIFT_* environment variables).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register" // JSON log format
	"k8s.io/klog/v2"
	controllerruntime "sigs.k8s.io/controller-runtime"

	"github.com/karmada-io/karmada/cmd/scheduler/app"
	"github.com/karmada-io/karmada/pkg/scheduler/framework"

	"carbonshift.invalid/karmada-plugin/carbon"
)

func main() {
	ctx := controllerruntime.SetupSignalHandler()
	opts, err := carbon.OptionsFromEnv(os.Getenv)
	if err != nil {
		klog.ErrorS(err, "bad carbonshift environment")
		os.Exit(2)
	}
	var cmd *cobra.Command
	factory := func() (framework.Plugin, error) { return newPlugin(ctx, cmd, opts) }
	cmd = app.NewSchedulerCommand(ctx, app.WithPlugin(carbon.Name, factory))
	addCarbonFlags(cmd, &opts)
	code := cli.Run(cmd)
	logs.FlushLogs()
	os.Exit(code)
}

// addCarbonFlags registers the plugin's flags and lists them after the upstream help.
func addCarbonFlags(cmd *cobra.Command, opts *carbon.Options) {
	flags := pflag.NewFlagSet("carbonshift", pflag.ContinueOnError)
	opts.AddFlags(flags)
	cmd.Flags().AddFlagSet(flags)
	help := cmd.HelpFunc()
	cmd.SetHelpFunc(func(c *cobra.Command, args []string) {
		help(c, args)
		fmt.Fprintf(c.OutOrStdout(), "\nCarbonshift flags (plugin %s):\n\n%s", carbon.Name, flags.FlagUsages())
	})
}

// newPlugin runs after flag parsing: it reuses the scheduler's --kubeconfig/--master to
// list Clusters and read workload annotations. Without them it still works, one
// cluster per request and without annotations.
func newPlugin(ctx context.Context, cmd *cobra.Command, opts carbon.Options) (framework.Plugin, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	flag := func(name string) string {
		if f := cmd.Flags().Lookup(name); f != nil {
			return f.Value.String()
		}
		return ""
	}
	var facts carbon.Facts
	cfg, err := clientcmd.BuildConfigFromFlags(flag("master"), flag("kubeconfig"))
	if err == nil {
		facts, err = carbon.NewKubeFacts(ctx, cfg)
	}
	if err != nil {
		klog.ErrorS(err, "carbonshift plugin runs without a Kubernetes client: one cluster per request, no workload annotations")
		facts = nil
	}
	if kube, ok := facts.(*carbon.KubeFacts); ok && opts.Settle > 0 {
		settling := carbon.NewSettlingEstimator(opts.Settle, nil, kube.PodsInUse)
		if err := kube.ObserveBindings(settling.Observe); err != nil {
			klog.ErrorS(err, "carbonshift settling estimator not registered")
		} else {
			settling.Register()
		}
	}
	return carbon.New(opts, facts)
}

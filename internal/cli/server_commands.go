package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/klog/v2"

	"github.com/falconhq/falcon/internal/apiserver"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/leader"
	"github.com/falconhq/falcon/internal/output"
	"github.com/falconhq/falcon/internal/provider/gke"
	"github.com/falconhq/falcon/internal/resourcemanager"
	"github.com/falconhq/falcon/internal/resourcemanager/queue"
	"github.com/falconhq/falcon/internal/sim"
	"github.com/falconhq/falcon/internal/stack"
)

// addServerCommands adds the commands that run Falcon's own processes
// (dev, server, controller, migrate). They live apart from the client
// commands because they pull in the server, store and controllers.
func addServerCommands(root *cobra.Command, f *factory.Factory) {
	root.AddCommand(newDevCmd(), newServerCmd(f), newControllerCmd(), newMigrateCmd(f))
}

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// logFlags are the logging flags of dev, server and controller.
type logFlags struct{ level, format string }

func (l *logFlags) add(f *pflag.FlagSet) {
	f.StringVar(&l.level, "log-level", envOr("FALCON_LOG_LEVEL", "info"), "debug, info, warn or error (env FALCON_LOG_LEVEL)")
	f.StringVar(&l.format, "log-format", envOr("FALCON_LOG_FORMAT", "text"), "text, or json for log collectors such as Cloud Logging (env FALCON_LOG_FORMAT)")
}

// logger writes to stderr, where Kubernetes and falcon dev's user read it.
func (l *logFlags) logger() (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(l.level)); err != nil {
		return nil, errdefs.Invalid("--log-level", "%q is not a level; allowed: debug, info, warn, error", l.level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	var log *slog.Logger
	switch l.format {
	case "text":
		log = slog.New(slog.NewTextHandler(os.Stderr, opts))
	case "json":
		log = slog.New(slog.NewJSONHandler(os.Stderr, opts))
	default:
		return nil, errdefs.Invalid("--log-format", "%q is not a format; allowed: text, json", l.format)
	}
	// client-go logs through klog (informers, leader election, retries);
	// routed here, its lines are in the same format as Falcon's own.
	klog.SetSlogLogger(log)
	return log, nil
}

func defaultDataDir() string {
	if d := os.Getenv("FALCON_DATA_DIR"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ".falcon"
	}
	return filepath.Join(home, ".falcon", "dev")
}

func newDevCmd() *cobra.Command {
	var cfg stack.DevConfig
	var logs logFlags
	var pools poolFlags
	var retries retryFlags
	cmd := &cobra.Command{
		Use: "dev",
		Example: `  falcon dev
  falcon dev --data-dir /tmp/falcon-dev --http-addr 127.0.0.1:7171`,
		Short: "Run all of Falcon on this machine: API server, controllers and the local cluster",
		Long: `Run the API server, the controllers and a cluster named "local" in one process,
on an embedded SQLite database in --data-dir. Jobs run as local process groups;
their logs and artifacts stay in the data dir. No login is needed: the server
listens on loopback only and attributes work to the local user.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := logs.logger()
			if err != nil {
				return err
			}
			cfg.Log = log
			if cfg.GKE, err = pools.config(); err != nil {
				return err
			}
			if cfg.Retry, err = retries.config(); err != nil {
				return err
			}
			cfg.Ready = func(httpAddr, grpcAddr string) {
				if logs.format == "json" {
					// Every line on stderr stays one JSON object for a
					// collector; the banner below is for people.
					log.Info("falcon dev is running", "http", httpAddr, "grpc", grpcAddr, "data", cfg.DataDir)
					return
				}
				// Clients find the default address by themselves; any other
				// needs telling, so the hint says how.
				try := "falcon exp create -f examples/hello.yaml && falcon exp list"
				if url := "http://" + httpAddr; url != DefaultServer {
					try = "export " + ServerEnv + "=" + url + "; " + try
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "Falcon dev is running.\n  HTTP: http://%s  (dashboard at /ui/, OpenAPI at /openapi.json)\n  gRPC: %s\n  data: %s\nTry:  %s\n",
					httpAddr, grpcAddr, cfg.DataDir, try)
			}
			ctx, cancel := signalContext()
			defer cancel()
			return stack.Dev(ctx, cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.DataDir, "data-dir", defaultDataDir(), "where the database, logs and artifacts live (env FALCON_DATA_DIR)")
	f.StringVar(&cfg.HTTPAddr, "http-addr", stack.DefaultDevHTTPAddr, "HTTP/JSON gateway address (loopback)")
	f.StringVar(&cfg.GRPCAddr, "grpc-addr", stack.DefaultDevGRPCAddr, "gRPC address (loopback)")
	f.DurationVar(&cfg.Interval, "poll-interval", 2*time.Second, "controllers' safety-net poll; changes wake them at once")
	f.BoolVar(&cfg.Insecure, "insecure", false, "allow non-loopback addresses although dev has no authentication")
	f.BoolVar(&cfg.Pprof, "pprof", false, "serve Go's profiler at /debug/pprof/ on the HTTP address")
	maxTTLFlag(f, &cfg.MaxTTL)
	resultsFlag(f, &cfg.ResultsEvery)
	logs.add(f)
	pools.flags(f)
	retries.flags(f)
	return cmd
}

func dbFlags(cmd *cobra.Command, driver, dsn *string) {
	cmd.Flags().StringVar(driver, "db-driver", envOr("FALCON_DB_DRIVER", "mysql"), "mysql or sqlite (env FALCON_DB_DRIVER)")
	cmd.Flags().StringVar(dsn, "db-dsn", os.Getenv("FALCON_DB_DSN"), "data source name, e.g. user:pass@tcp(host:3306)/falcon?parseTime=true or file:/var/lib/falcon.db (env FALCON_DB_DSN)")
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func checkDB(driver, dsn string) error {
	if driver != "mysql" && driver != "sqlite" {
		return errdefs.Invalid("--db-driver", "%q is not supported; allowed: mysql, sqlite", driver)
	}
	if dsn == "" {
		return errdefs.Invalid("--db-dsn", "is required (or set FALCON_DB_DSN)")
	}
	return nil
}

// controllerSecretEnv holds the controller secret itself, for deployments
// that inject secrets as environment variables rather than files.
const controllerSecretEnv = "FALCON_CONTROLLER_TOKEN"

// controllerSecret reads --controller-token-file, or else the environment.
func controllerSecret(file string) (string, error) {
	if file == "" {
		return os.Getenv(controllerSecretEnv), nil
	}
	s, err := auth.ReadControllerSecret(file)
	if err != nil {
		return "", errdefs.Invalid("--controller-token-file", "%v", err)
	}
	return s, nil
}

func controllerSecretFlag(cmd *cobra.Command, file *string) {
	cmd.Flags().StringVar(file, "controller-token-file", os.Getenv("FALCON_CONTROLLER_TOKEN_FILE"),
		"file holding the secret shared by the API server and its controllers (env FALCON_CONTROLLER_TOKEN_FILE, or the secret itself in "+controllerSecretEnv+")")
}

func newServerCmd(fac *factory.Factory) *cobra.Command {
	var cfg stack.ServerConfig
	var logs logFlags
	var secretFile string
	var check bool
	cmd := &cobra.Command{
		Use: "server",
		Example: `  falcon server --db-driver mysql --db-dsn "$DSN" --auth cloudflare --cf-team-domain team.cloudflareaccess.com --cf-audience "$AUD"
  falcon server --check-config --db-driver sqlite --db-dsn /var/lib/falcon/falcon.db`,
		Short: "Run the API server (gRPC and HTTP gateway)",
		Long: `Run the API server. Every call must be authenticated:

  --auth cloudflare (the default) verifies the Cloudflare Access token of
  every call against the team's published keys. Put the HTTP address behind
  the Access application whose AUD tag is --cf-audience.

  --auth none attributes every call to the user running the server, like
  falcon dev; it listens on loopback only unless --insecure.

Controllers present the secret in --controller-token-file; they are the only
callers of the internal methods. Admins (--admin-email) may abort and delete
anyone's experiments, change the cluster registry and read the audit log;
everyone else may abort and delete only their own experiments.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkDB(cfg.DBDriver, cfg.DBDSN); err != nil {
				return err
			}
			log, err := logs.logger()
			if err != nil {
				return err
			}
			cfg.Log = log
			if cfg.ControllerSecret, err = controllerSecret(secretFile); err != nil {
				return err
			}
			if v := os.Getenv("FALCON_ADMIN_EMAILS"); v != "" && !cmd.Flags().Changed("admin-email") {
				cfg.Admins = strings.Split(v, ",")
			}
			ctx, cancel := signalContext()
			defer cancel()
			if check {
				return checkServerConfig(ctx, fac, cfg)
			}
			return stack.Server(ctx, cfg)
		},
	}
	dbFlags(cmd, &cfg.DBDriver, &cfg.DBDSN)
	f := cmd.Flags()
	f.BoolVar(&cfg.Migrate, "migrate", false, "apply database migrations before serving")
	f.StringVar(&cfg.HTTPAddr, "http-addr", ":8080", "HTTP/JSON gateway address")
	f.StringVar(&cfg.GRPCAddr, "grpc-addr", ":9090", "gRPC address")
	f.StringVar(&cfg.ArtifactRoot, "artifact-root", "", "where artifacts live: gs://bucket[/prefix] (required; file:///dir for a single machine)")
	f.BoolVar(&cfg.CloudLogging, "cloud-logging", false, "read logs of GKE jobs whose pods and bucket objects are gone from Cloud Logging (Application Default Credentials with roles/logging.viewer)")
	f.StringVar(&cfg.LogDir, "log-dir", "", "directory holding job logs as <job_id>/<pod>.log")
	logs.add(f)
	f.StringVar(&cfg.Auth, "auth", envOr("FALCON_AUTH", stack.AuthCloudflare), "how callers are identified: cloudflare or none (env FALCON_AUTH)")
	f.StringVar(&cfg.CFTeamDomain, "cf-team-domain", os.Getenv("FALCON_CF_TEAM_DOMAIN"), "Cloudflare Access team, e.g. myteam or myteam.cloudflareaccess.com (env FALCON_CF_TEAM_DOMAIN)")
	f.StringVar(&cfg.CFAudience, "cf-audience", os.Getenv("FALCON_CF_AUDIENCE"), "AUD tag of the Cloudflare Access application (env FALCON_CF_AUDIENCE)")
	f.StringArrayVar(&cfg.Admins, "admin-email", nil, "email of an admin, who may abort and delete anyone's experiments, change clusters and read the audit log, or group:<name> for an identity-provider group the Access token carries; repeatable (env FALCON_ADMIN_EMAILS, comma-separated)")
	f.BoolVar(&cfg.Insecure, "insecure", false, "allow --auth none, and gRPC without TLS, on a non-loopback address")
	f.StringVar(&cfg.TLSCertFile, "tls-cert-file", os.Getenv("FALCON_TLS_CERT_FILE"), "PEM certificate for the gRPC port and the HTTP gateway, re-read when it changes (env FALCON_TLS_CERT_FILE); required unless --grpc-addr is loopback")
	f.StringVar(&cfg.TLSKeyFile, "tls-key-file", os.Getenv("FALCON_TLS_KEY_FILE"), "PEM private key of --tls-cert-file (env FALCON_TLS_KEY_FILE)")
	f.StringVar(&cfg.MetricsAddr, "metrics-addr", os.Getenv("FALCON_METRICS_ADDR"), "serve Prometheus /metrics, /healthz and /readyz here in clear text, e.g. :9091 (env FALCON_METRICS_ADDR); empty: off")
	maxTTLFlag(f, &cfg.MaxTTL)
	resultsFlag(f, &cfg.ResultsEvery)
	f.BoolVar(&check, "check-config", false, "check the configuration (database and schema, team keys, artifact root, TLS files, controller secret), print what was found and exit 0 if all is well, 1 if not")
	controllerSecretFlag(cmd, &secretFile)
	return cmd
}

// checkServerConfig runs `falcon server --check-config`: one line per
// check (or, with -o json, {"checks": [{name, ok, detail}]}), exit 1 if
// any failed.
func checkServerConfig(ctx context.Context, f *factory.Factory, cfg stack.ServerConfig) error {
	checks := stack.CheckServerConfig(ctx, cfg)
	var failed []string
	items := make([]any, 0, len(checks))
	for _, c := range checks {
		detail := c.Detail
		if c.Err != nil {
			failed = append(failed, c.Name)
			detail = c.Err.Error()
		}
		items = append(items, map[string]any{"name": c.Name, "ok": c.Err == nil, "detail": detail})
	}
	res, err := structpb.NewStruct(map[string]any{"checks": items})
	if err != nil {
		return err
	}
	if err := f.Printer().Print(res, func(v output.View) error {
		for _, it := range items {
			m := it.(map[string]any)
			mark := "ok  "
			if !m["ok"].(bool) {
				mark = "FAIL"
			}
			if _, err := fmt.Fprintf(v.Out, "%s  %-18s %s\n", mark, m["name"], m["detail"]); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	if len(failed) > 0 {
		return &factory.ExitError{Code: 1, Kind: "CheckFailed",
			Err: fmt.Errorf("configuration check failed: %s", strings.Join(failed, ", "))}
	}
	return nil
}

func newControllerCmd() *cobra.Command {
	var cfg stack.ControllerConfig
	var logs logFlags
	var secretFile string
	var pools poolFlags
	var retries retryFlags
	var election stack.LeaderConfig
	cmd := &cobra.Command{
		Use: "controller",
		Example: `  falcon controller --api-grpc falcon-api:7443 --controller-token-file /var/run/falcon/token
  falcon controller --local-cluster --insecure --api-grpc 127.0.0.1:7443`,
		Short: "Run the controllers (expController and resource manager) against an API server",
		Long: `Run the expController and the resource manager against an API server.

Run two or more replicas for availability: one leads and reconciles, the
others stand by (/readyz answers "ok: standby", falcon_leader is 0) and one
takes over when the leader dies. --leader-elect picks how they agree: a
Kubernetes Lease (lease, the default inside a pod), a MySQL GET_LOCK (mysql,
the default when --leader-elect-dsn is set) or no election (off: run one
replica only).

On SIGTERM the leader starts no new cycle, lets the one in flight finish for
up to --drain-timeout, then hands leadership over at once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := logs.logger()
			if err != nil {
				return err
			}
			cfg.Log = log
			if cfg.ControllerSecret, err = controllerSecret(secretFile); err != nil {
				return err
			}
			if cfg.GKE, err = pools.config(); err != nil {
				return err
			}
			if cfg.Retry, err = retries.config(); err != nil {
				return err
			}
			elector, done, err := election.Elector(log)
			if err != nil {
				return err
			}
			defer done()
			cfg.Elector = elector
			ctx, cancel := signalContext()
			defer cancel()
			return stack.Controller(ctx, cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Server, "api-grpc", envOr("FALCON_API_GRPC", "127.0.0.1:9090"), "the API server's gRPC address (env FALCON_API_GRPC); over TLS unless it is loopback")
	f.StringVar(&cfg.APICAFile, "api-ca-file", os.Getenv("FALCON_API_CA_FILE"), "PEM CA bundle that signed the API server's certificate (env FALCON_API_CA_FILE); empty: the system's roots")
	f.StringVar(&cfg.APIServerName, "api-server-name", os.Getenv("FALCON_API_SERVER_NAME"), "name the API server's certificate must carry (env FALCON_API_SERVER_NAME); empty: the host of --api-grpc")
	f.BoolVar(&cfg.Insecure, "insecure", false, "send the controller secret in clear text to an --api-grpc that is not loopback")
	f.StringVar(&cfg.DataDir, "data-dir", defaultDataDir(), "working directory of the local backend")
	f.DurationVar(&cfg.Interval, "poll-interval", 5*time.Second, "safety-net poll; changes wake the controllers at once")
	f.StringVar(&cfg.LocalCluster, "local-cluster", "", "register a cluster of this name that runs jobs as processes on this machine")
	logs.add(f)
	f.StringVar(&cfg.MetricsAddr, "metrics-addr", os.Getenv("FALCON_METRICS_ADDR"), "serve Prometheus /metrics, /healthz and /readyz here, e.g. :9091 (env FALCON_METRICS_ADDR); empty: off")
	f.DurationVar(&cfg.DrainTimeout, "drain-timeout", stack.DefaultDrainTimeout, "on SIGTERM, how long the cycles in flight may finish before they are cut and leadership is handed over")
	electionFlags(f, &election)
	pools.flags(f)
	retries.flags(f)
	controllerSecretFlag(cmd, &secretFile)
	return cmd
}

// maxTTLFlag caps the ttl users may give experiments.
func maxTTLFlag(f *pflag.FlagSet, d *time.Duration) {
	f.DurationVar(d, "max-ttl", 0, "the longest ttl an experiment may have or be extended to, e.g. 24h; 0: no cap")
}

// resultsFlag is how often the API server reads running experiments'
// results (an ended experiment's are read once, when it ends).
func resultsFlag(f *pflag.FlagSet, d *time.Duration) {
	f.DurationVar(d, "results-interval", apiserver.DefaultResultsEvery, "how often the artifact index and metrics of running experiments are read (each read lists the artifact's files); an experiment's are read once more when it ends")
}

// electionFlags are the controller's leader election flags.
func electionFlags(f *pflag.FlagSet, c *stack.LeaderConfig) {
	f.StringVar(&c.Mode, "leader-elect", envOr("FALCON_LEADER_ELECT", stack.LeaderElectAuto), "how replicas elect the one that reconciles: auto (lease in a Kubernetes pod, else mysql if --leader-elect-dsn is set, else off), lease, mysql or off (env FALCON_LEADER_ELECT)")
	f.StringVar(&c.Name, "leader-elect-name", stack.DefaultLeaderElectName, "name of the Lease, or of the MySQL lock (the DSN's database name is appended)")
	f.StringVar(&c.Namespace, "leader-elect-namespace", "", "namespace of the Lease; default $POD_NAMESPACE, the pod's own namespace, or default")
	f.StringVar(&c.Kubeconfig, "leader-elect-kubeconfig", os.Getenv("FALCON_LEADER_ELECT_KUBECONFIG"), "kubeconfig of the cluster holding the Lease; empty: the in-cluster config (env FALCON_LEADER_ELECT_KUBECONFIG)")
	f.StringVar(&c.Identity, "leader-elect-identity", "", "this replica's name in the Lease; default $POD_NAME, else hostname_pid")
	f.StringVar(&c.DSN, "leader-elect-dsn", os.Getenv("FALCON_LEADER_ELECT_DSN"), "MySQL/MariaDB holding the lock, e.g. user:pass@tcp(db:3306)/falcon (env FALCON_LEADER_ELECT_DSN); only GET_LOCK is used")
	f.DurationVar(&c.Timing.LeaseDuration, "leader-elect-lease-duration", leader.DefaultTiming.LeaseDuration, "how long standbys wait after last hearing from the leader before taking over (whole seconds)")
	f.DurationVar(&c.Timing.RenewDeadline, "leader-elect-renew-deadline", leader.DefaultTiming.RenewDeadline, "how long a leader keeps leading without a successful renewal; below the lease duration")
	f.DurationVar(&c.Timing.RetryPeriod, "leader-elect-retry-period", leader.DefaultTiming.RetryPeriod, "how often candidates try to acquire and the leader renews")
}

// retryFlags pace the resource manager's retries of what clusters fail
// (000 Phase 2), for the controller and dev.
type retryFlags struct{ dispatch, stop resourcemanager.RetryPolicy }

func (r *retryFlags) flags(f *pflag.FlagSet) {
	d, st := resourcemanager.DefaultRetry.Dispatch, resourcemanager.DefaultRetry.Stop
	f.DurationVar(&r.dispatch.Initial, "dispatch-retry-initial", d.Initial, "wait before the first retry of a job's submission that failed in a way that may pass (cluster unreachable, overloaded); it doubles after each failure")
	f.DurationVar(&r.dispatch.Max, "dispatch-retry-max", d.Max, "longest wait between two retries of a job's submission")
	f.DurationVar(&r.dispatch.Window, "dispatch-retry-window", d.Window, "how long a job's submission is retried before the job fails with JobSubmitFailed")
	f.DurationVar(&r.stop.Initial, "stop-retry-initial", st.Initial, "wait before the first retry of a stop (abort or failure) that the job's cluster refused or did not answer; it doubles after each failure")
	f.DurationVar(&r.stop.Max, "stop-retry-max", st.Max, "longest wait between two retries of a stop")
	f.DurationVar(&r.stop.Window, "stop-retry-window", st.Window, "how long a stop is retried before the job's end is recorded anyway, saying its cluster never confirmed the stop")
}

func (r *retryFlags) config() (resourcemanager.Retry, error) {
	var errs errdefs.FieldErrors
	for _, p := range []struct {
		name   string
		policy resourcemanager.RetryPolicy
	}{{"dispatch", r.dispatch}, {"stop", r.stop}} {
		flag := func(part string) string { return "--" + p.name + "-retry-" + part }
		for _, d := range []struct {
			part string
			d    time.Duration
		}{{"initial", p.policy.Initial}, {"max", p.policy.Max}, {"window", p.policy.Window}} {
			if d.d <= 0 {
				errs.Add(flag(d.part), "must be a positive duration such as 30s, got %s", d.d)
			}
		}
		if p.policy.Initial > 0 && p.policy.Max > 0 && p.policy.Max < p.policy.Initial {
			errs.Add(flag("max"), "must be at least %s (%s), got %s", flag("initial"), p.policy.Initial, p.policy.Max)
		}
	}
	if err := errs.Err(); err != nil {
		return resourcemanager.Retry{}, err
	}
	return resourcemanager.Retry{Dispatch: r.dispatch, Stop: r.stop}, nil
}

// poolFlags configure GKE node pools, for the controller and dev.
type poolFlags struct {
	reservationScaleDown, flexScaleDown, provisionTimeout, grace time.Duration
	policy                                                       string
}

func (p *poolFlags) flags(f *pflag.FlagSet) {
	f.DurationVar(&p.reservationScaleDown, "reservation-scale-down", 10*time.Minute, "how long an idle node pool from a reservation keeps its nodes (scaleDownUnneededTime)")
	f.DurationVar(&p.flexScaleDown, "flex-start-scale-down", 6*time.Hour, "how long an idle flex-start node pool keeps its nodes (scaleDownUnneededTime)")
	f.DurationVar(&p.provisionTimeout, "node-pool-timeout", 30*time.Minute, "a node pool not RUNNING this long after creation fails its job with NodePoolTimeout")
	f.DurationVar(&p.grace, "orphan-grace", 10*time.Minute, "a falcon-* node pool no job owns is left alone while younger than this and still provisioning")
	f.StringVar(&p.policy, "pool-policy", "spec", "what becomes of a node pool whose job ended, by falcon sim's names: spec (kept for a waiting job of its shape, else deleted), per-job (always deleted), linger=DUR (kept up to DUR idle, e.g. linger=15m), cap=N (at most N pools of a shape per cluster; a job beyond waits for one to fall free), joined with + (cap=8+linger=5m)")
}

func (p *poolFlags) config() (stack.GKEConfig, error) {
	var errs errdefs.FieldErrors
	for _, f := range []struct {
		name string
		d    time.Duration
	}{
		{"--reservation-scale-down", p.reservationScaleDown},
		{"--flex-start-scale-down", p.flexScaleDown},
		{"--node-pool-timeout", p.provisionTimeout},
	} {
		if f.d <= 0 {
			errs.Add(f.name, "must be a positive duration such as 10m, got %s", f.d)
		}
	}
	if p.grace < 0 {
		errs.Add("--orphan-grace", "must not be negative, got %s", p.grace)
	}
	policy, err := sim.ParsePolicyFlag("--pool-policy", p.policy)
	switch {
	case err != nil:
		errs.Add("--pool-policy", "%s", strings.TrimLeft(strings.TrimPrefix(err.Error(), "--pool-policy"), " :"))
	case policy.Selection != queue.PolicySpread:
		errs.Add("--pool-policy", "%q chooses clusters, which the registry sets: put selection: priority in the clusters file and run falcon cluster apply", p.policy)
	}
	if err := errs.Err(); err != nil {
		return stack.GKEConfig{}, err
	}
	t := resourcemanager.DefaultPoolTiming
	t.Grace = p.grace
	return stack.GKEConfig{
		PoolOptions: []gke.Option{gke.WithScaleDownUnneeded(p.reservationScaleDown, p.flexScaleDown), gke.WithProvisionTimeout(p.provisionTimeout)},
		PoolTiming:  &t,
		PoolPolicy:  policy,
	}, nil
}

func newMigrateCmd(f *factory.Factory) *cobra.Command {
	var driver, dsn string
	cmd := &cobra.Command{
		Use: "migrate",
		Example: `  falcon migrate --db-driver mysql --db-dsn "$DSN"
  falcon migrate --db-driver sqlite --db-dsn ./falcon.db -o json`,
		Short: "Apply database migrations",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkDB(driver, dsn); err != nil {
				return err
			}
			ctx, cancel := signalContext()
			defer cancel()
			v, err := stack.Migrate(ctx, driver, dsn)
			if err != nil {
				return err
			}
			res, err := structpb.NewStruct(map[string]any{"driver": driver, "schema_version": v})
			if err != nil {
				return err
			}
			return f.Printer().Print(res, output.Text("schema at version %d (%s)\n", v, driver))
		},
	}
	dbFlags(cmd, &driver, &dsn)
	return cmd
}

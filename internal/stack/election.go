package stack

import (
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"strings"

	"github.com/go-sql-driver/mysql"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/leader"
)

// How `falcon controller` elects its active replica (--leader-elect).
const (
	// LeaderElectAuto is LeaderElectLease in a Kubernetes pod, else
	// LeaderElectMySQL when a DSN is given, else LeaderElectOff.
	LeaderElectAuto  = "auto"
	LeaderElectLease = "lease"
	LeaderElectMySQL = "mysql"
	LeaderElectOff   = "off"
	// DefaultLeaderElectName names the Lease and the MySQL lock.
	DefaultLeaderElectName = "falcon-controller"
)

// LeaderConfig says how a controller finds out whether it leads.
type LeaderConfig struct {
	Mode string // LeaderElect*
	// Name is the Lease's name, or the MySQL lock's; MySQL locks are global
	// to the server, so the DSN's database name is appended.
	Name string
	// Namespace holds the Lease; empty: $POD_NAMESPACE, the pod's own
	// namespace, or "default".
	Namespace string
	// Kubeconfig reaches the Lease's cluster; empty: the in-cluster config.
	Kubeconfig string
	// Identity names this replica; empty: leader.DefaultIdentity().
	Identity string
	// DSN is the MySQL server holding the lock (lock only: no tables).
	DSN    string
	Timing leader.Timing
	// Getenv reads the environment; nil is os.Getenv. Tests inject it.
	Getenv func(string) string
}

// inKubernetesEnv is set in every pod (the kubernetes Service's address).
const inKubernetesEnv = "KUBERNETES_SERVICE_HOST"

// mode resolves auto, and says why when it picks off.
func (c LeaderConfig) mode() (mode, why string, err error) {
	getenv := c.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	switch c.Mode {
	case LeaderElectLease, LeaderElectMySQL, LeaderElectOff:
		return c.Mode, "", nil
	case LeaderElectAuto, "":
		switch {
		case getenv(inKubernetesEnv) != "":
			return LeaderElectLease, "running in Kubernetes (" + inKubernetesEnv + " is set)", nil
		case c.DSN != "":
			return LeaderElectMySQL, "--leader-elect-dsn is set", nil
		}
		return LeaderElectOff, "not in Kubernetes and no --leader-elect-dsn: run only one controller", nil
	}
	return "", "", errdefs.Invalid("--leader-elect", "%q is not supported; allowed: %s, %s, %s, %s", c.Mode, LeaderElectAuto, LeaderElectLease, LeaderElectMySQL, LeaderElectOff)
}

// timingFlags maps leader.TimingError fields to the flags that set them.
var timingFlags = map[string]string{
	"LeaseDuration": "--leader-elect-lease-duration",
	"RenewDeadline": "--leader-elect-renew-deadline",
	"RetryPeriod":   "--leader-elect-retry-period",
}

// Elector builds the elector c describes; done releases what it holds.
func (c LeaderConfig) Elector(log *slog.Logger) (e leader.Elector, done func(), err error) {
	log = orDiscard(log)
	mode, why, err := c.mode()
	if err != nil {
		return nil, nil, err
	}
	if why != "" {
		log.Info("leader election", "mode", mode, "why", why)
	}
	if mode == LeaderElectOff {
		return leader.Always{}, func() {}, nil
	}
	if err := c.Timing.Validate(); err != nil {
		var te *leader.TimingError
		if errors.As(err, &te) {
			return nil, nil, errdefs.Invalid(timingFlags[te.Field], "%s", te.Msg)
		}
		return nil, nil, err
	}
	name := c.Name
	if name == "" {
		name = DefaultLeaderElectName
	}
	opts := []leader.Option{leader.WithTiming(c.Timing), leader.WithLogger(log)}
	if mode == LeaderElectMySQL {
		return c.mysql(name, opts)
	}
	return c.lease(name, opts)
}

func (c LeaderConfig) mysql(name string, opts []leader.Option) (leader.Elector, func(), error) {
	if c.DSN == "" {
		return nil, nil, errdefs.Invalid("--leader-elect-dsn", "is required with --leader-elect mysql (or set FALCON_LEADER_ELECT_DSN)")
	}
	cfg, err := mysql.ParseDSN(c.DSN)
	if err != nil {
		return nil, nil, errdefs.Invalid("--leader-elect-dsn", "%v", err)
	}
	if cfg.DBName != "" {
		name += ":" + cfg.DBName
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, nil, errdefs.Invalid("--leader-elect-dsn", "%v", err)
	}
	e, err := leader.NewMySQL(db, name, opts...)
	if err != nil {
		db.Close()
		return nil, nil, errdefs.Invalid("--leader-elect-name", "%v", err)
	}
	return e, func() { db.Close() }, nil
}

// serviceAccountNamespace is where a pod finds its own namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

func (c LeaderConfig) lease(name string, opts []leader.Option) (leader.Elector, func(), error) {
	var rc *rest.Config
	var err error
	if c.Kubeconfig == "" {
		if rc, err = rest.InClusterConfig(); err != nil {
			return nil, nil, errdefs.Invalid("--leader-elect-kubeconfig", "is required outside a Kubernetes pod: %v", err)
		}
	} else if rc, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		return nil, nil, errdefs.Invalid("--leader-elect-kubeconfig", "%v", err)
	}
	// A renewal hung longer than the deadline is a lost one anyway.
	rc.Timeout = c.Timing.RenewDeadline
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, errdefs.Invalid("--leader-elect-kubeconfig", "%v", err)
	}
	ns := c.Namespace
	if ns == "" {
		ns = podNamespace(c.Getenv)
	}
	id := c.Identity
	if id == "" {
		id = leader.DefaultIdentity()
	}
	e, err := leader.NewLease(client, ns, name, id, opts...)
	if err != nil {
		return nil, nil, errdefs.Invalid("--leader-elect-namespace", "%v", err)
	}
	return e, func() {}, nil
}

func podNamespace(getenv func(string) string) string {
	if getenv == nil {
		getenv = os.Getenv
	}
	if ns := getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile(serviceAccountNamespace); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	return "default"
}

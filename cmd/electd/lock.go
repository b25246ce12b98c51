package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	stdlog "log"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/hashicorp/go-hclog"
	goredis "github.com/redis/go-redis/v9"
	"golang.org/x/sys/unix"

	"github.com/electd/electd/actions/proc"
	"github.com/electd/electd/agent"
	"github.com/electd/electd/config"
	"github.com/electd/electd/internal/redact"
	"github.com/electd/electd/internal/timing"
	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/registry"
)

// The exit statuses of `electd lock` besides the command's own, from
// sysexits.h and the shell's conventions, so that a cron job or a script
// can tell electd's outcomes from the usual 0 and 1 of a command.
const (
	exitLockUsage    = 2   // bad usage, a bad -provider URL
	exitLockStore    = 69  // EX_UNAVAILABLE: the store failed or did not answer for -store-timeout, or the lease was lost and the command stopped
	exitLockTimeout  = 75  // EX_TEMPFAIL: held by another: it kept the lease for all of -timeout
	exitLockNoExec   = 126 // the command exists but cannot run
	exitLockNotFound = 127 // the command was not found
	exitLockSignal   = 128 // + N: electd lock itself got signal N and stopped the command
)

// envLockProvider is the default of -provider: a URL with a password is
// then not shown to every user by ps.
const envLockProvider = "ELECTD_LOCK_PROVIDER"

// lockName is the provider name of the one provider `electd lock` builds;
// it shows as "TYPE.lock" in its log.
const lockName = "lock"

// defaultLockStoreTimeout is the default -store-timeout: a cron job whose
// store is down gives up within a minute, before the next run piles up.
const defaultLockStoreTimeout = time.Minute

// maxLockStopTimeout is the default -stop-timeout for long ttls: the
// default stop_timeout of a run block.
const maxLockStopTimeout = config.DefaultStopTimeout

// cmdLock is `electd lock`: run one command while holding a lease, with no
// configuration file, like `consul lock`, `etcdctl lock` and flock(1). It is
// the agent itself, in this process, with one job built in memory (agent
// RunOnce): the timing rule, the stop protocol and the release are those of
// `electd run`.
func cmdLock(args []string, stdout, stderr io.Writer) int {
	c := newCommand("lock")
	provider := c.stringFlag("provider")
	ttl := c.durationFlag("ttl")
	timeout, stopTimeout := c.optDurationFlag("timeout"), c.optDurationFlag("stop-timeout")
	logLevel := c.stringFlag("log-level")
	storeTimeout := c.durationFlag("store-timeout")
	quiet := c.boolFlag("quiet")

	// The command is what follows "--", untouched: its flags are its own.
	var command []string
	dashes := false
	for i, a := range args {
		if a == "--" {
			args, command, dashes = args[:i], args[i+1:], true
			break
		}
	}
	pos, exit, ok := c.parse(args, stdout, stderr)
	if !ok {
		return exit
	}
	switch {
	case len(pos) == 0:
		return c.usageError(stderr, "missing NAME")
	case len(pos) > 1 && !dashes:
		return c.usageError(stderr, "write -- before the command, so that its flags are not read as electd's: electd lock [flags] NAME -- COMMAND [ARG...]")
	case len(pos) > 1:
		return c.usageError(stderr, fmt.Sprintf("unexpected argument %q before --", pos[1]))
	case len(command) == 0:
		return c.usageError(stderr, "missing COMMAND after --")
	}
	name := pos[0]

	url := *provider
	if url == "" {
		url = os.Getenv(envLockProvider)
	}
	// The command gets the environment of electd lock: not the store's
	// password.
	os.Unsetenv(envLockProvider)
	if url == "" {
		return c.usageError(stderr, "missing -provider URL (or $"+envLockProvider+")")
	}
	// Whatever is printed from here on is masked: the URL's password as
	// written, and then the secrets the store's settings declare.
	secrets := redact.New(providers.URLSecrets(url)...)
	typ, settings, err := registry.FromURL(url)
	if err != nil {
		return c.usageError(stderr, secrets.String("-provider: "+err.Error()))
	}
	secrets.Add(settings.Secrets()...)

	job, problems := lockJob(name, command, typ, settings, *ttl, *stopTimeout)
	if *quiet && *logLevel == "warn" {
		*logLevel = "error"
	}
	if !validLevel(*logLevel) {
		problems = append(problems, fmt.Sprintf("-log-level %q is not one of trace, debug, info, warn and error", *logLevel))
	}
	if len(problems) > 0 {
		return c.usageError(stderr, secrets.String(strings.Join(problems, "\n")))
	}
	if !timeout.set {
		timeout.d = -1 // wait until the lease is free
	}
	// Several electd lock on one host compete as different nodes, not as
	// one node's processes (which the agent reports as a node_id clash);
	// the pid tells the holder apart in messages and `electd leases`.
	nodeID := fmt.Sprintf("%s-%d", config.DefaultNodeID(), os.Getpid())
	if lim := settings.Limits(); len(nodeID)+config.HolderReserve > lim.MaxHolder {
		return c.usageError(stderr, fmt.Sprintf("the host name is %d bytes; this store keeps lease holders of at most %d bytes, of which electd uses %d", len(nodeID), lim.MaxHolder, config.HolderReserve))
	}
	cfg := &config.Config{
		Agent: config.Agent{
			NodeID:    nodeID,
			LogLevel:  *logLevel,
			LogFormat: "text",
			// Stopping takes the command's stop timeout and the release.
			ShutdownTimeout: job.Run.StopTimeout + timing.KillMargin + min(job.TTL, 5*time.Second) + time.Second,
		},
		Providers: []config.Provider{{Type: typ, Name: lockName, Settings: settings}},
		Jobs:      []config.Job{job},
	}

	// Logs pass through the masking, as the agent's do; so do the lines that
	// go-redis, the MySQL driver and Go's log package write on their own.
	masked := secrets.Writer(stderr)
	log := hclog.New(&hclog.LoggerOptions{Name: "electd", Level: hclog.LevelFromString(*logLevel), Output: masked})
	// The store clients' own warnings (a connection that failed, retried)
	// are what electd lock's one message on giving up sums up: at the
	// default level they are not shown.
	provLevel := hclog.LevelFromString(*logLevel)
	if provLevel == hclog.Warn {
		provLevel = hclog.Error
	}
	provLog := hclog.New(&hclog.LoggerOptions{Name: "electd.provider", Level: provLevel, Output: masked})
	goredis.SetLogger(redisLog{provLog.Named("redis")})
	stdlog.SetOutput(masked)
	mysql.SetLogger(stdlog.New(masked, "[mysql] ", stdlog.LstdFlags))
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintln(masked, "electd lock: "+fmt.Sprintf(format, a...))
		return code
	}

	shim, _ := locateShim() // as for electd run: the command dies with electd lock
	a, err := agent.New(cfg, agent.Options{
		Logger: log.Named("agent"),
		Shim:   shim,
		Open: func(ctx context.Context, p config.Provider) (providers.Provider, error) {
			return openBounded(ctx, openBound(*timeout, *storeTimeout), func(ctx context.Context) (providers.Provider, error) {
				return p.Settings.Open(ctx, provLog.With("provider", p.Ref()))
			})
		},
	})
	if err != nil {
		return fail(exitLockStore, "%v", err)
	}

	// SIGINT and SIGTERM stop the command and release the lease; a second
	// one kills the command at once. SIGHUP (a closed terminal) too, unless
	// it is ignored (nohup).
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE) // as electd run: EPIPE, not death
	stopSigs := []os.Signal{syscall.SIGINT, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		stopSigs = append(stopSigs, syscall.SIGHUP)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, stopSigs...)
	defer signal.Stop(sigs)
	var got atomic.Int32 // the first stop signal
	go func() {
		for sig := range sigs {
			n := int32(sig.(syscall.Signal))
			if got.CompareAndSwap(0, n) {
				log.Info("stopping: stopping the command and releasing the lease", "signal", sig.String())
				stop()
				continue
			}
			log.Warn("second signal: killing the command and exiting now", "signal", sig.String())
			a.Kill()
			os.Exit(exitLockSignal + int(n))
		}
	}()

	reason := a.RunOnce(ctx, agent.Once{Wait: timeout.d, StoreWait: *storeTimeout, Stdout: stdout, Stderr: stderr})

	var exited *agent.ExitError
	var held *providers.HeldError
	switch {
	case errors.As(reason, &exited):
		return exited.Code
	case got.Load() != 0:
		sig := syscall.Signal(got.Load())
		return fail(exitLockSignal+int(sig), "stopped by %s: %s", unix.SignalName(sig), reasonText(reason))
	case errors.Is(reason, agent.ErrWaitTimeout) && errors.As(reason, &held):
		if *quiet {
			return exitLockTimeout // held by another: the status says it (flock -n)
		}
		waited := "gave up after " + timeout.d.String()
		if timeout.d == 0 {
			waited = "not waiting (-timeout 0)"
		}
		return fail(exitLockTimeout, "%s is held by %s (token %d); %s", name, agent.NodeOf(held.Holder), held.Token, waited)
	case errors.Is(reason, agent.ErrStoreUnreachable):
		return fail(exitLockStore, "gave up on the lease %s: %v (-store-timeout %s)", name, reason, *storeTimeout)
	case errors.Is(reason, agent.ErrWaitTimeout):
		return fail(exitLockStore, "cannot take the lease %s: %v", name, reason)
	case errors.Is(reason, agent.ErrLeaseLost), errors.Is(reason, agent.ErrRenewDeadline):
		return fail(exitLockStore, "lost the lease %s: %v; the command was stopped", name, reason)
	case errors.Is(reason, agent.ErrCannotStart):
		code := exitLockNoExec
		if errors.Is(reason, exec.ErrNotFound) || errors.Is(reason, fs.ErrNotExist) {
			code = exitLockNotFound
		}
		return fail(code, "%s", startFailure(reason, command[0]))
	case reason == nil:
		return fail(exitLockStore, "the lease %s ended for no known reason", name)
	}
	return fail(exitLockStore, "%v", reason)
}

// openBound is how long opening the store may take: what -timeout allows
// (one second at least, as for an attempt), and no more than
// -store-timeout; 0: no bound.
func openBound(timeout optionalDuration, storeTimeout time.Duration) time.Duration {
	bound := storeTimeout
	if timeout.d >= 0 {
		d := max(timeout.d, time.Second)
		if bound == 0 || d < bound {
			bound = d
		}
	}
	return bound
}

// openBounded opens a store, giving up after bound (0: no bound): a client
// that connects in Open (NATS) can wait for its connect timeout on a store
// that is down. Open keeps ctx (a client may hold it for its life); one
// that gave up is left to finish, and what it opened is closed.
func openBounded(ctx context.Context, bound time.Duration, open func(context.Context) (providers.Provider, error)) (providers.Provider, error) {
	if bound <= 0 {
		return open(ctx)
	}
	type result struct {
		p   providers.Provider
		err error
	}
	done := make(chan result, 1)
	go func() {
		p, err := open(ctx)
		done <- result{p, err}
	}()
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case r := <-done:
		return r.p, r.err
	case <-t.C:
		go func() {
			if r := <-done; r.p != nil {
				r.p.Close()
			}
		}()
		return nil, fmt.Errorf("the store did not answer within %s", bound)
	}
}

// startFailure says why the command could not start in the user's terms:
// the program and the system's answer, without the layers of electd that
// passed the error on (agent, proc, the shim's report, os/exec), which
// name the program again and again.
func startFailure(reason error, program string) string {
	msg := reason.Error()
	for _, layer := range []string{
		agent.ErrCannotStart.Error() + ": ",
		proc.ErrCannotStart.Error() + " " + strconv.Quote(program) + ": ",
		"exec: " + strconv.Quote(program) + ": ",
		"fork/exec " + program + ": ",
	} {
		if i := strings.Index(msg, layer); i >= 0 {
			msg = msg[:i] + msg[i+len(layer):]
		}
	}
	return fmt.Sprintf("cannot start the command %q: %s", program, msg)
}

// lockJob is the one job of `electd lock`, or what is wrong with the
// arguments. Its timings are derived so that the timing rule holds
// (docs/leases.md): three renewals and the command's stop fit in 99% of
// the ttl.
func lockJob(name string, command []string, typ string, s providers.Settings, ttl time.Duration, stopTimeout optionalDuration) (config.Job, []string) {
	var problems []string
	lim := s.Limits()
	if !config.ValidJobName(name) {
		problems = append(problems, fmt.Sprintf("the NAME %q must start with a letter or digit and hold only letters, digits, \"_\", \".\" and \"-\": it is the lease key in every store", name))
	} else if len(name) > lim.MaxKey {
		problems = append(problems, fmt.Sprintf("the NAME is %d bytes; this store keeps leases under keys of at most %d bytes", len(name), lim.MaxKey))
	}
	if ttl < config.MinTTL {
		problems = append(problems, fmt.Sprintf("-ttl %s is shorter than %s: a store's answer could take longer than the lease", ttl, config.MinTTL))
		return config.Job{}, problems
	}
	if err := lim.CheckTTL(ttl); err != nil {
		problems = append(problems, fmt.Sprintf("-ttl: the store refuses it: %v", err))
	}
	stop := min(maxLockStopTimeout, (ttl / 3).Truncate(time.Millisecond))
	if stopTimeout.set {
		stop = stopTimeout.d
	}
	if stop < 0 {
		problems = append(problems, "-stop-timeout must not be negative")
	}
	renew, retry, err := lockTimings(ttl, stop)
	if err != nil {
		problems = append(problems, err.Error())
	}
	return config.Job{
		Name:       name,
		Provider:   typ + "." + lockName,
		Mode:       config.ModeLeader,
		TTL:        ttl,
		RenewEvery: renew,
		RetryEvery: retry,
		Run: &config.Run{
			Command:     config.Command{Argv: config.ListOf(command...)},
			StopSignal:  syscall.SIGTERM,
			StopTimeout: stop,
			Restart:     config.RestartNever,
			// The command runs once: no failure counting gives the job away.
			MaxFailures:   math.MaxInt32,
			FailureWindow: config.DefaultFailureWindow,
		},
	}, problems
}

// minLockRenew is the shortest renew_every lockTimings derives: a store's
// answer takes a few milliseconds, and more under load.
const minLockRenew = 100 * time.Millisecond

// lockTimings derives renew_every and retry_every from the ttl and the stop
// timeout: a third of what is left of ttl×0.99 once the stop and the kill
// margin are taken, so that the leader gets three renewal attempts where
// `electd check` demands two.
func lockTimings(ttl, stop time.Duration) (renew, retry time.Duration, err error) {
	renew = ((timing.Budget(ttl) - stop - timing.KillMargin) / 3).Truncate(time.Millisecond)
	if renew < minLockRenew {
		// The smallest whole-second ttl that leaves room.
		need := time.Duration(math.Ceil(float64(stop+timing.KillMargin+3*minLockRenew)/(1-timing.SafetyMargin)/float64(time.Second))) * time.Second
		return 0, 0, fmt.Errorf("-ttl %s leaves no time to renew the lease: three renewals and the command's stop (-stop-timeout %s plus a %s kill margin) must fit in 99%% of the ttl; raise -ttl to at least %s or lower -stop-timeout",
			ttl, stop, timing.KillMargin, need)
	}
	return renew, min(config.DefaultRetryEvery, renew), nil
}

// lockAbout is what `electd lock -h` says besides the flags.
func lockAbout() string {
	return `Run COMMAND while this process holds the lease NAME in the store at -provider, with no configuration file.

electd lock waits for the lease, runs COMMAND (an argv, no shell) with
ELECTD_TOKEN and the other ELECTD_* variables of a run command, and exits
with its status once it has released the lease. When the lease is lost the
command is stopped (SIGTERM, then SIGKILL after -stop-timeout) before the
lease can expire. SIGINT and SIGTERM stop the command and release the lease.

Exit status: COMMAND's own; 2 bad usage or -provider URL; 69 the store
failed or answered nothing for -store-timeout, or the lease was lost;
75 another holds the lease (it stayed held for -timeout); 126 COMMAND
cannot run; 127 COMMAND not found; 128+N stopped by signal N.

In cron, -timeout 0 -quiet runs COMMAND where the lease is free and exits
75 in silence where it is held, as flock -n does with 1.

Provider URLs: ` + strings.Join(registry.Schemes(), " ") + `
  sqlite:///var/lib/electd/leases.db (absolute) or sqlite:leases.db (relative)
  postgres://user:PASSWORD@host:5432/db?sslmode=require
  mysql://user:PASSWORD@host:3306/db
  redis://[user:PASSWORD@]host:6379[,host2:6379,host3:6379][/db]
  etcd://[user:PASSWORD@]host:2379[,host2:2379]
Keep a password off the command line (ps shows it): set $` + envLockProvider + `.`
}

// usageError prints msg and the usage on stderr and returns the usage
// status, as a bad flag does.
func (c *command) usageError(stderr io.Writer, msg string) int {
	fmt.Fprintf(stderr, "electd %s: %s\n\n", c.Name(), msg)
	c.usage(stderr)
	return exitLockUsage
}

// optionalDuration is a duration flag that knows whether it was given.
type optionalDuration struct {
	d   time.Duration
	set bool
}

func (o *optionalDuration) String() string {
	if o == nil || !o.set {
		return ""
	}
	return o.d.String()
}

func (o *optionalDuration) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("not a Go duration such as 30s")
	}
	if d < 0 {
		return errors.New("negative")
	}
	o.d, o.set = d, true
	return nil
}

func validLevel(l string) bool {
	switch l {
	case "trace", "debug", "info", "warn", "error":
		return true
	}
	return false
}

// reasonText is why the term ended, for the message of a stop by signal.
func reasonText(reason error) string {
	if errors.Is(reason, agent.ErrStopping) {
		return "the command, if it ran, was stopped and the lease released"
	}
	return reason.Error()
}

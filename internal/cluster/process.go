package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Spec says how to start one process: an agent, or any contender the
// benchmark compares electd with.
type Spec struct {
	Name    string   // the node id, for messages
	Argv    []string // program and arguments
	Dir     string   // working directory ("": this one)
	Env     []string // added to this process's environment
	LogPath string   // stdout and stderr
	// AppendLog appends to LogPath, after a line that says when the process
	// started, instead of truncating it (an agent restarted under its old
	// name keeps its history).
	AppendLog bool
	// Pipe sends the output through a pipe whose read end is Agent.Out, so
	// that a test can close it under the process; what is read is copied to
	// LogPath.
	Pipe bool
	// Group starts the process in a process group of its own: a signal to
	// the group (SignalGroup) reaches it and what it started, as Ctrl-C
	// would.
	Group bool
	API   string // host:port of its HTTP API, when it serves one
}

// Agent is one started process, usually `electd run`. Every process gets
// SIGKILL when the process that started it dies (Linux parent-death
// signal), so an interrupted test or benchmark leaves none behind.
type Agent struct {
	Node    string
	Cmd     *exec.Cmd
	API     string // host:port of its API, "" when it serves none
	LogPath string
	Out     *os.File // with Spec.Pipe: the read end of its output
	group   bool
	done    chan struct{}
	err     error
}

// StartProcess starts s.
func StartProcess(s Spec) (*Agent, error) {
	flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if s.AppendLog {
		flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	logf, err := os.OpenFile(s.LogPath, flags, 0o644)
	if err != nil {
		return nil, err
	}
	if s.AppendLog {
		fmt.Fprintf(logf, "=== started at %s\n", time.Now().Format(time.RFC3339Nano))
	}
	cmd := exec.Command(s.Argv[0], s.Argv[1:]...)
	cmd.Dir = s.Dir
	if len(s.Env) > 0 {
		cmd.Env = append(os.Environ(), s.Env...)
	}
	cmd.SysProcAttr = procAttr(s.Group)
	a := &Agent{Node: s.Name, Cmd: cmd, API: s.API, LogPath: s.LogPath, group: s.Group, done: make(chan struct{})}
	var w *os.File
	if s.Pipe {
		if a.Out, w, err = os.Pipe(); err != nil {
			logf.Close()
			return nil, err
		}
		cmd.Stdout, cmd.Stderr = w, w
	} else {
		cmd.Stdout, cmd.Stderr = logf, logf
	}
	err = cmd.Start()
	if w != nil {
		w.Close()
	}
	if err != nil {
		logf.Close()
		if a.Out != nil {
			a.Out.Close()
		}
		return nil, fmt.Errorf("start %s: %w", s.Name, err)
	}
	if s.Pipe {
		go func() {
			// Ends when the process (the pipe's only writer) is gone, or
			// when the test closes Out.
			io.Copy(logf, a.Out)
			a.Out.Close()
			logf.Close()
		}()
		go func() { a.err = cmd.Wait(); close(a.done) }()
	} else {
		go func() { a.err = cmd.Wait(); logf.Close(); close(a.done) }()
	}
	return a, nil
}

// StartAgent starts `bin run -config cfg` as node, its output in
// dir/node.log.
func StartAgent(bin, node, cfg, dir string, env []string, api string) (*Agent, error) {
	return StartProcess(Spec{Name: node, Argv: []string{bin, "run", "-config", cfg}, Dir: dir, Env: env,
		LogPath: LogPath(dir, node), API: api})
}

// LogPath is where the agent named node in dir writes its output.
func LogPath(dir, node string) string { return filepath.Join(dir, node+".log") }

// Pid is the process id.
func (a *Agent) Pid() int { return a.Cmd.Process.Pid }

// Done is closed once the process has exited.
func (a *Agent) Done() <-chan struct{} { return a.done }

// Err is the process's exit status (nil for exit 0); valid once Done is
// closed.
func (a *Agent) Err() error { return a.err }

// Exited reports whether the process has exited.
func (a *Agent) Exited() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to the process alone.
func (a *Agent) Signal(sig syscall.Signal) error { return a.Cmd.Process.Signal(sig) }

// SignalGroup sends sig to the process's group when it has one of its own,
// else to the process.
func (a *Agent) SignalGroup(sig syscall.Signal) error {
	if a.group {
		return syscall.Kill(-a.Pid(), sig)
	}
	return a.Signal(sig)
}

// Wait waits up to within for the process to exit and returns its exit
// status; ok is false when it is still running.
func (a *Agent) Wait(within time.Duration) (err error, ok bool) {
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case <-a.done:
		return a.err, true
	case <-t.C:
		return nil, false
	}
}

// Kill sends SIGKILL (to the group too, and SIGCONT first, should it be
// stopped) and waits for the process.
func (a *Agent) Kill() {
	a.SignalGroup(syscall.SIGCONT)
	a.Signal(syscall.SIGKILL)
	a.SignalGroup(syscall.SIGKILL)
	<-a.done
}

// ErrStopTimeout is Stop's error for a process that outlived its time.
var ErrStopTimeout = errors.New("did not exit in time after SIGTERM; killed")

// Stop is a graceful stop: SIGTERM, then after within SIGKILL. It returns
// the exit status, or ErrStopTimeout.
func (a *Agent) Stop(within time.Duration) error {
	a.Signal(syscall.SIGTERM)
	if err, ok := a.Wait(within); ok {
		return err
	}
	a.Kill()
	return fmt.Errorf("%s: %w", a.Node, ErrStopTimeout)
}

// Log is what the process wrote so far.
func (a *Agent) Log() string {
	b, _ := os.ReadFile(a.LogPath)
	return string(b)
}

// URL is the address of path on the agent's API.
func (a *Agent) URL(path string) string { return "http://" + a.API + path }

// WaitReady waits until the agent's /readyz answers 200 (it has loaded its
// configuration and every job's loop runs), or it exits.
func (a *Agent) WaitReady(ctx context.Context) error {
	if a.API == "" {
		return fmt.Errorf("%s serves no API", a.Node)
	}
	return WaitHTTP(ctx, a, a.URL("/readyz"))
}

// WaitHTTP polls url until it answers 200, a exits, or ctx ends.
func WaitHTTP(ctx context.Context, a *Agent, url string) error {
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if a.Exited() {
			return fmt.Errorf("%s exited before it was ready: %v", a.Node, a.err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w", a.Node, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Alive reports whether pid runs. A zombie does no work: it counts as gone.
func Alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}

// Until polls cond every step until it returns true or within passes; it
// reports whether cond held.
func Until(within, step time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(step)
	}
}

// Tail is the end of a file, for error messages.
func Tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

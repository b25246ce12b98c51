package proc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Spares keeps one shim started ahead of the next command, so that Start
// need not wait for a shim to start: on a handover that is about a third of
// the time from SIGTERM to the new command running (docs/benchmarks.md).
//
// A spare is a shim that waits, with no command, for Start to send it one
// (its argv, environment and directory) on a pipe. It is started as any
// shim is: in a process group of its own, with the parent-death signal, so
// it dies with the agent. It exits when Close discards it, and on any
// signal that reaches it before it has a command (the agent's next command
// then starts under a fresh shim). Start refills the spare refillAfter after
// taking it. A nil *Spares keeps none.
type Spares struct {
	path string

	mu      sync.Mutex
	idle    *spare // ready to be taken; nil while there is none
	filling bool   // a spare is being started
	closed  bool
	running sync.WaitGroup // fills and discards under way
}

// refillAfter is how long after a spare is taken the next one starts: not
// while the command it was taken for starts, since starting a shim takes
// the CPU that the command's own start needs (on a handover, the old
// agent's exit wants it too).
const refillAfter = 50 * time.Millisecond

// NewSpares keeps spares of the shim at path, once Fill is called.
func NewSpares(path string) *Spares { return &Spares{path: path} }

// spare is a started shim waiting for its command.
type spare struct {
	cmd    *exec.Cmd
	ctl    *os.File // write end of the shim's spec pipe: the command, then EOF
	report *os.File // read end of the shim's report pipe
	stdout *switchWriter
	stderr *switchWriter
}

// Fill starts a spare in the background, unless one is ready or on its way
// or s is closed.
func (s *Spares) Fill() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.idle != nil || s.filling {
		return
	}
	s.filling = true
	s.running.Add(1)
	go func() {
		defer s.running.Done()
		sp, err := startSpare(s.path)
		s.mu.Lock()
		s.filling = false
		keep := err == nil && !s.closed
		if keep {
			s.idle = sp
		}
		s.mu.Unlock()
		if err == nil && !keep {
			sp.discard()
		}
	}()
}

// Close discards the spare and starts no other. It returns once no spare
// is left running, also when another Close is discarding it.
func (s *Spares) Close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.closed = true
	sp := s.idle
	s.idle = nil
	if sp != nil {
		s.running.Add(1)
	}
	s.mu.Unlock()
	if sp != nil {
		sp.discard()
		s.running.Done()
	}
	s.running.Wait()
}

// Waiting is the pid of the spare started and waiting to be taken, 0
// while there is none (tests wait on it).
func (s *Spares) Waiting() int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idle == nil {
		return 0
	}
	return s.idle.cmd.Process.Pid
}

// take returns the ready spare, if any, for spec's shim; the next one
// starts refillAfter later.
func (s *Spares) take(spec Spec) *spare {
	if s == nil || spec.Shim != s.path {
		return nil
	}
	s.mu.Lock()
	sp := s.idle
	s.idle = nil
	s.mu.Unlock()
	time.AfterFunc(refillAfter, s.Fill)
	return sp
}

// startSpare starts a shim of path with no command. Its descriptor 3 is the
// report pipe, as for any shim, and 4 the pipe it reads its command from.
func startSpare(path string) (*spare, error) {
	report, reportW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	specR, ctl, err := os.Pipe()
	if err != nil {
		report.Close()
		reportW.Close()
		return nil, err
	}
	sp := &spare{ctl: ctl, report: report, stdout: &switchWriter{}, stderr: &switchWriter{}}
	sp.cmd = exec.Command(path, spareArg)
	sp.cmd.Args[0] = shimTitle("")
	sp.cmd.Env = append(os.Environ(), envShim+"=1", envShimParent+"="+strconv.Itoa(os.Getpid()), envShimSpare+"=1")
	sp.cmd.ExtraFiles = []*os.File{reportW, specR}
	sp.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	sp.cmd.Stdout, sp.cmd.Stderr = sp.stdout, sp.stderr
	sp.cmd.WaitDelay = time.Second
	err = sp.cmd.Start()
	reportW.Close()
	specR.Close()
	if err != nil {
		report.Close()
		ctl.Close()
		return nil, err
	}
	return sp, nil
}

// discard ends a spare that was never given a command: EOF on its spec
// pipe, and it exits.
func (sp *spare) discard() {
	sp.ctl.Close()
	sp.report.Close()
	sp.cmd.Wait()
}

// errSpareGone is a spare that exited before it got its command (a signal
// reached it): Start falls back to a fresh shim.
var errSpareGone = errors.New("the spare shim exited before it got its command")

// run gives the spare spec's command, with the environment env, and
// returns once the shim has started it, or why it could not.
func (sp *spare) run(spec Spec, env []string) (*Process, error) {
	sp.stdout.set(spec.Stdout)
	sp.stderr.set(spec.Stderr)
	_, werr := sp.ctl.Write(encodeSpec(spec.Name, spec.Dir, encodeAs(spec.User, spec.Umask), spec.Argv, env))
	sp.ctl.Close()
	defer sp.report.Close()
	p := &Process{cmd: sp.cmd, pgid: sp.cmd.Process.Pid, shim: true, done: make(chan struct{})}
	go p.wait()
	if werr != nil {
		p.Kill()
		return nil, errSpareGone
	}
	err := readReport(sp.report)
	if err != nil {
		p.Kill()
		if errors.Is(err, errNoReport) {
			return nil, errSpareGone
		}
		return nil, err
	}
	return p, nil
}

// encodeSpec is what a spare reads on its spec pipe: the name it shows in
// ps, the directory, who the command runs as (encodeAs), the number of
// arguments, the arguments and the environment, each ended by a NUL (none
// of them can hold one).
func encodeSpec(name, dir, as string, argv, env []string) []byte {
	var b bytes.Buffer
	for _, s := range append(append([]string{name, dir, as, strconv.Itoa(len(argv))}, argv...), env...) {
		b.WriteString(s)
		b.WriteByte(0)
	}
	return b.Bytes()
}

var errBadSpec = errors.New("bad command spec")

func decodeSpec(b []byte) (name, dir, as string, argv, env []string, err error) {
	fs := bytes.Split(bytes.TrimSuffix(b, []byte{0}), []byte{0})
	if len(fs) < 4 {
		return "", "", "", nil, nil, errBadSpec
	}
	name, as = string(fs[0]), string(fs[2])
	fs = append([][]byte{fs[1]}, fs[3:]...) // the directory, then the count
	n, err := strconv.Atoi(string(fs[1]))
	if err != nil || n < 1 || n > len(fs)-2 {
		return "", "", "", nil, nil, errBadSpec
	}
	str := func(bs [][]byte) []string {
		out := make([]string, len(bs))
		for i, b := range bs {
			out[i] = string(b)
		}
		return out
	}
	return name, string(fs[0]), as, str(fs[2 : 2+n]), str(fs[2+n:]), nil
}

// waitSpec is a spare shim waiting for its command on descriptor specFd.
// It reports false when the pipe closed without one (the spare was
// discarded) or a signal came first.
func waitSpec(sigs <-chan os.Signal) (name, dir, as string, argv, env []string, ok bool) {
	syscall.CloseOnExec(specFd)
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(os.NewFile(specFd, "electd-shim-spec"))
		got <- b
	}()
	select {
	case b := <-got:
		if len(b) == 0 {
			return "", "", "", nil, nil, false
		}
		name, dir, as, argv, env, err := decodeSpec(b)
		if err != nil {
			fmt.Fprintln(os.Stderr, "electd-shim:", err)
			return "", "", "", nil, nil, false
		}
		return name, dir, as, argv, env, true
	case <-sigs:
		return "", "", "", nil, nil, false
	}
}

// switchWriter is a spare's output: nowhere until its command is known,
// then that command's Stdout or Stderr.
type switchWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *switchWriter) set(w io.Writer) {
	s.mu.Lock()
	s.w = w
	s.mu.Unlock()
}

func (s *switchWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	w := s.w
	s.mu.Unlock()
	if w == nil {
		return len(p), nil
	}
	return w.Write(p)
}

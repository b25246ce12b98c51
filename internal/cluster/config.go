package cluster

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// Timing is a job's ttl, renew_every, retry_every and run.stop_timeout.
type Timing struct{ TTL, Renew, Retry, Stop time.Duration }

func (t Timing) String() string {
	return fmt.Sprintf("ttl %s, renew %s, retry %s", t.TTL, t.Renew, t.Retry)
}

// Str is the attribute line `name = "value"`.
func Str(name, value string) string { return fmt.Sprintf("%s = %q", name, value) }

// List is the attribute line `name = ["a", "b"]`.
func List(name string, values ...string) string { return name + " = " + quoteList(values) }

func quoteList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// Block is `provider "typ" "s" { ... }` with one attribute line per attr
// (see Str and List). Every provider block of this package is named "s":
// the agents' metrics call it typ.s.
func Block(typ string, attrs ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "provider %q \"s\" {\n", typ)
	for _, a := range attrs {
		b.WriteString("  " + a + "\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// AgentBlock is the agent block of node, its API on listen ("" for none),
// with more attribute lines (log_level, shutdown_timeout, ...). Without a
// shutdown_timeout among them it gets 10s.
func AgentBlock(node, listen string, attrs ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "agent {\n  %s\n  %s\n", Str("node_id", node), Str("listen", listen))
	shutdown := false
	for _, a := range attrs {
		shutdown = shutdown || strings.HasPrefix(strings.TrimSpace(a), "shutdown_timeout")
		b.WriteString("  " + a + "\n")
	}
	if !shutdown {
		b.WriteString("  " + Str("shutdown_timeout", "10s") + "\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// LeaseJob is a job that only holds its lease (no run, no task).
func LeaseJob(name string, tm Timing) string {
	return fmt.Sprintf("job %q {\n  ttl = %q\n  renew_every = %q\n  retry_every = %q\n}\n", name, tm.TTL, tm.Renew, tm.Retry)
}

// RunJob is a job that supervises command while it leads, with
// tm.Stop as its stop_timeout.
func RunJob(name string, tm Timing, command ...string) string {
	return fmt.Sprintf(`job %q {
  ttl         = %q
  renew_every = %q
  retry_every = %q
  run {
    command      = %s
    stop_timeout = %q
  }
}
`, name, tm.TTL, tm.Renew, tm.Retry, quoteList(command), tm.Stop)
}

// WriteConfig writes the blocks, one after the other, to path.
func WriteConfig(path string, blocks ...string) error {
	return os.WriteFile(path, []byte(strings.Join(blocks, "\n")), 0o600)
}

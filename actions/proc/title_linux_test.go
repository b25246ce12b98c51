package proc

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/internal/syncbuf"
)

// ps shows a shim as electd-shim and its job, whether it started with its
// command or as a spare that got it later, and top's name (comm) is
// electd-shim; the command itself still gets its own arguments.
func TestShimTitle(t *testing.T) {
	for _, spares := range []bool{false, true} {
		name := "fresh"
		var s *Spares
		if spares {
			name = "spare"
			s = NewSpares(self(t))
			t.Cleanup(s.Close)
			ready(t, s)
		}
		t.Run(name, func(t *testing.T) {
			var out syncbuf.Buffer
			job := "billing-" + name
			p, err := Start(Spec{Argv: []string{"sh", "-c", "echo $0 $1; exec sleep 30", "x y"}, Stdout: &out, Shim: self(t), Spares: s, Name: job})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { p.Kill(); <-p.Done() }()
			cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(p.Pid()) + "/cmdline")
			if err != nil {
				t.Fatal(err)
			}
			// What ps prints: the arguments, NULs as spaces, trailing ones cut.
			shown := strings.TrimRight(strings.ReplaceAll(string(cmdline), "\x00", " "), " ")
			want := "electd-shim " + job
			if spares {
				if shown != want {
					t.Errorf("ps shows the spare as %q, want %q", shown, want)
				}
			} else if shown != want+" sh -c echo $0 $1; exec sleep 30 x y" {
				t.Errorf("ps shows the shim as %q, want %q and the command", shown, want)
			}
			// comm is set before the command starts: read it once the
			// command has said it runs.
			for i := 0; i < 500 && out.String() == ""; i++ {
				time.Sleep(10 * time.Millisecond)
			}
			if comm, _ := os.ReadFile("/proc/" + strconv.Itoa(p.Pid()) + "/comm"); strings.TrimSpace(string(comm)) != "electd-shim" {
				t.Errorf("comm %q, want electd-shim", comm)
			}
		})
	}
}

package systest

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"html"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/internal/cluster"
	"github.com/electd/electd/internal/teststore"
)

// The status page (/ui) in a real browser: Debian's chromium, headless,
// from the command line. scripts/services.sh installs it.

// chromiumBinary is the browser, or the test is skipped with the reason.
func chromiumBinary(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed, so the status page is not tested in a browser: " +
			"`scripts/services.sh chromium` installs Debian's chromium (make test runs it)")
	}
	return bin
}

// chromium runs the headless browser with args after the flags every run
// needs (a profile of its own, nothing fetched but the page) and returns
// its stdout. What it started is killed when it returns.
func chromium(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	argv := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir()}, args...)
	cmd := exec.CommandContext(ctx, bin, argv...)
	cmd.SysProcAttr = groupDyingWithTest()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // its helpers, if any outlived it
	}
	if err != nil {
		t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// pageRow is one job's row of the page's table, cell by cell, as text.
type pageRow struct {
	state string   // the row's data-state
	cells []string // job (and provider), state, leader, token, since, lease left, health, competing, action
	html  string
}

var (
	rowRE  = regexp.MustCompile(`(?s)<tr class="job" data-job="([^"]*)" data-state="([^"]*)">(.*?)</tr>`)
	cellRE = regexp.MustCompile(`(?s)<td[^>]*>(.*?)</td>`)
	tagRE  = regexp.MustCompile(`<[^>]*>`)
)

// pageRows reads the job table of a page as the browser rendered it.
func pageRows(dom string) map[string]pageRow {
	rows := map[string]pageRow{}
	for _, m := range rowRE.FindAllStringSubmatch(dom, -1) {
		r := pageRow{state: m[2], html: m[3]}
		for _, c := range cellRE.FindAllStringSubmatch(m[3], -1) {
			text := html.UnescapeString(tagRE.ReplaceAllString(c[1], " "))
			r.cells = append(r.cells, strings.Join(strings.Fields(text), " "))
		}
		rows[html.UnescapeString(m[1])] = r
	}
	return rows
}

// TestStatusPageInChromium runs two agents on one SQLite file with jobs in
// every state an operator meets (led here, led by the other node, not
// eligible here, unhealthy here), loads node-a's /ui in headless Chromium,
// checks each row against the JSON API, checks that the script refreshes
// the page in place, keeps a screenshot, and checks that a page of another
// site cannot use the buttons, even knowing the token.
func TestStatusPageInChromium(t *testing.T) {
	browser := chromiumBinary(t)
	dir := t.TempDir()
	ok := func(node string) string { return filepath.Join(dir, node+".ok") }
	if err := os.WriteFile(ok("node-b"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	timing := fmt.Sprintf("  ttl = %q\n  renew_every = %q\n  retry_every = %q\n", ttl, renewEvery, retryEvery)
	db := filepath.Join(teststore.DBDir(t), "ui.db") // one store for both nodes
	jobs := func(node string) string {
		return fmt.Sprintf(`provider "sql" "s" {
  driver = "sqlite"
  dsn    = %[1]q
}

job "billing" {
  provider = sql.s
%[2]s  run {
    command      = ["sh", "-c", "while :; do sleep 0.1; done"]
    stop_timeout = %[3]q
  }
}

job "audit" {
  provider = sql.s
%[2]s}

job "etl" {
  provider   = sql.s
  constraint = { role = "batch" }
%[2]s}

job "reports" {
  provider = sql.s
%[2]s  health {
    command   = ["test", "-e", %[4]q]
    interval  = "500ms"
    timeout   = "500ms"
    failures  = 2
    successes = 1
  }
}
`, db, timing, stopTimeout, ok(node))
	}
	node := func(name, listen string, attrs ...string) string {
		path := filepath.Join(dir, name+".hcl")
		// No balance: jobs stay where the test puts them.
		attrs = append(attrs, "balance = false")
		if err := cluster.WriteConfig(path, cluster.AgentBlock(name, listen, attrs...), jobs(name)); err != nil {
			t.Fatal(err)
		}
		return path
	}
	addrA, addrB := freeLoopback(t), freeLoopback(t)
	a := startNode(t, "node-a", node("node-a", addrA, cluster.Str("api_token", apiToken), `tags = { role = "web", zone = "eu-1" }`), addrA)
	a.waitStatus("/readyz", http.StatusOK, 20*time.Second)
	for _, job := range []string{"billing", "audit"} {
		a.waitJob(job, "node-a leads "+job, 20*time.Second, func(j jobStatus) bool { return j.State == "leader" })
	}
	// node-b has no api_token: its buttons work from loopback only.
	b := startNode(t, "node-b", node("node-b", addrB, `tags = { role = "batch", zone = "eu-2" }`), addrB)
	b.waitStatus("/readyz", http.StatusOK, 20*time.Second)
	for _, job := range []string{"etl", "reports"} {
		b.waitJob(job, "node-b leads "+job, 20*time.Second, func(j jobStatus) bool { return j.State == "leader" })
	}
	// A step-down through the API, for the history: node-b takes billing.
	if code, body := a.call(http.MethodPost, "/v1/jobs/billing/step-down", apiToken); code != http.StatusAccepted {
		t.Fatalf("step-down: %d %s", code, body)
	}
	b.waitJob("billing", "node-b takes billing", ttl+5*time.Second, func(j jobStatus) bool { return j.State == "leader" })
	a.waitJob("billing", "node-a follows node-b", 10*time.Second, func(j jobStatus) bool { return j.Leader == "node-b" })
	a.waitJob("reports", "node-a sees its health check fail", 10*time.Second, func(j jobStatus) bool { return j.Leader == "node-b" })
	// node-a looks up the leader of a job it may not lead every ttl/2:
	// the page and the API read after it then agree.
	a.waitJob("etl", "node-a sees node-b lead etl", 10*time.Second, func(j jobStatus) bool { return j.Leader == "node-b" })

	t.Run("rows", func(t *testing.T) {
		dom := chromium(t, browser, "--dump-dom", a.URL("/ui"))
		rows := pageRows(dom)
		if len(rows) != 4 {
			t.Fatalf("want 4 job rows, found %d in:\n%s", len(rows), dom)
		}
		api := map[string]jobStatus{}
		for _, job := range []string{"billing", "audit", "etl", "reports"} {
			api[job] = a.job(job)
		}
		// leader "" is whatever the API says; competing is one of the
		// texts.
		cases := []struct {
			job, state, leader string
			lease, action      bool
			health             string
			competing          []string
		}{
			{"audit", "leader", "node-a", true, true, "no check", []string{"yes"}},
			// node-a holds off for a ttl after its step-down.
			{"billing", "follower", "node-b", false, false, "no check", []string{"yes", "holding off after its last term, until "}},
			{"etl", "not eligible", "", false, false, "no check", []string{"not eligible: constraint role=batch does not match this node's tags"}},
			{"reports", "", "node-b", false, false, "failing", []string{"health check failing"}},
		}
		for _, c := range cases {
			r, found := rows[c.job]
			if !found || len(r.cells) != 9 {
				t.Errorf("%s: no row of 9 cells: %q", c.job, r.cells)
				continue
			}
			j := api[c.job]
			if r.state != j.State || (c.state != "" && r.cells[1] != c.state) {
				t.Errorf("%s: state %q (%s), want %q as the API says %q", c.job, r.cells[1], r.state, c.state, j.State)
			}
			if !strings.HasPrefix(r.cells[0], c.job+" sql.s") {
				t.Errorf("%s: job cell %q, want the name and the provider", c.job, r.cells[0])
			}
			wantLeader := cmp.Or(j.Leader, "none")
			if r.cells[2] != wantLeader || (c.leader != "" && j.Leader != c.leader) {
				t.Errorf("%s: leader %q (API %q), want %q", c.job, r.cells[2], j.Leader, cmp.Or(c.leader, wantLeader))
			}
			if tok, err := strconv.ParseUint(r.cells[3], 10, 64); err != nil || tok != j.Token || (c.leader != "" && tok == 0) {
				t.Errorf("%s: token %q, want the API's %d", c.job, r.cells[3], j.Token)
			}
			if !strings.HasSuffix(r.cells[4], " ago") && r.cells[4] != "just now" {
				t.Errorf("%s: since %q", c.job, r.cells[4])
			}
			if c.lease {
				left, err := time.ParseDuration(r.cells[5])
				if err != nil || left <= 0 || left > ttl {
					t.Errorf("%s: lease left %q, want within the ttl (%s)", c.job, r.cells[5], ttl)
				}
			} else if r.cells[5] != "–" {
				t.Errorf("%s: lease left %q on a job node-a does not lead", c.job, r.cells[5])
			}
			if r.cells[6] != c.health {
				t.Errorf("%s: health %q, want %q", c.job, r.cells[6], c.health)
			}
			if !slices.ContainsFunc(c.competing, func(w string) bool { return strings.HasPrefix(r.cells[7], w) }) {
				t.Errorf("%s: competing %q, want one of %q", c.job, r.cells[7], c.competing)
			}
			if got := r.cells[8] == "Step down"; got != c.action {
				t.Errorf("%s: action cell %q, want a step-down button: %v", c.job, r.cells[8], c.action)
			}
		}
		// node-a has an api_token: a token field for the buttons.
		for _, want := range []string{`name="token" type="password"`, `value="on" class="btn warn"`, `<title>electd · node-a</title>`,
			`<span class="tag">role=web</span>`, `<noscript><meta http-equiv="refresh" content="5; url=ui"></noscript>`} {
			if !strings.Contains(dom, want) {
				t.Errorf("no %q in the page", want)
			}
		}
		// billing's history tells the step-down: elected, then released.
		hist := regexp.MustCompile(`(?s)<details data-job="billing">.*?</details>`).FindString(dom)
		for _, want := range []string{"<td>elected</td>", `<td>demoted</td><td><span class="reason">released</span></td>`, "<td>leader change</td>"} {
			if !strings.Contains(hist, want) {
				t.Errorf("billing's history has no %q:\n%s", want, hist)
			}
		}
		if t.Failed() {
			t.Logf("the page as Chromium rendered it:\n%s", dom)
		}

		// node-b, no api_token, seen from loopback: buttons without a token
		// field, on the three jobs it leads.
		dom = chromium(t, browser, "--dump-dom", b.URL("/ui/"))
		if strings.Contains(dom, `name="token"`) || !strings.Contains(dom, `name="form_key"`) || strings.Count(dom, ">Step down</button>") != 3 {
			t.Errorf("node-b's page: want 3 step-down buttons and no token field:\n%s", dom)
		}
	})

	t.Run("refresh in place", func(t *testing.T) {
		// Virtual time runs the script's timer without waiting for it.
		dom := chromium(t, browser, "--virtual-time-budget=12000", "--dump-dom", a.URL("/ui"))
		n := regexp.MustCompile(`data-refreshed="(\d+)"`).FindStringSubmatch(dom)
		if n == nil || len(pageRows(dom)) != 4 {
			t.Errorf("the page did not refresh itself in 12s (virtual), or lost its rows:\n%s", dom)
		} else {
			t.Logf("refreshed in place %s times in 12s (virtual time)", n[1])
		}
	})

	t.Run("screenshot", func(t *testing.T) {
		root, err := teststore.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(root, "bin", "artifacts", "ui.png")
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			t.Fatal(err)
		}
		os.Remove(out)
		chromium(t, browser, "--hide-scrollbars", "--window-size=1280,800", "--screenshot="+out, a.URL("/ui"))
		f, err := os.Open(out)
		if err != nil {
			t.Fatalf("no screenshot: %v", err)
		}
		defer f.Close()
		img, err := png.Decode(f)
		if err != nil {
			t.Fatalf("screenshot %s: %v", out, err)
		}
		if b := img.Bounds(); b.Dx() != 1280 || b.Dy() != 800 {
			t.Errorf("screenshot is %dx%d, want 1280x800", b.Dx(), b.Dy())
		}
		// A page that rendered has more than a few colours (a blank or
		// unstyled one has two or three).
		colours := map[[4]uint32]bool{}
		for y := 0; y < 800; y += 4 {
			for x := 0; x < 1280; x += 4 {
				r, g, bl, al := img.At(x, y).RGBA()
				colours[[4]uint32{r, g, bl, al}] = true
			}
		}
		if len(colours) < 20 {
			t.Errorf("screenshot %s has %d colours: blank or unstyled?", out, len(colours))
		}
		t.Logf("screenshot of node-a's status page: %s", out)
	})

	t.Run("another site cannot press the buttons", func(t *testing.T) {
		// A page of another origin that posts the drain form on load, with
		// the right token even: the browser says where the form came from.
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, `<!DOCTYPE html><form id="f" method="post" action="%s">
<input name="drain" value="on"><input name="token" value="%s"></form>
<script>document.getElementById("f").submit()</script>`, html.EscapeString(a.URL("/ui/drain")), apiToken)
		}))
		defer evil.Close()
		dom := chromium(t, browser, "--virtual-time-budget=5000", "--dump-dom", evil.URL)
		if !strings.Contains(dom, "Refused: the form was sent from another site.") {
			t.Errorf("the agent did not refuse the other site's form (or the browser did not send it):\n%s", dom)
		}
		if code, body := a.call(http.MethodGet, "/v1/agent", ""); code != http.StatusOK || !strings.Contains(body, `"draining": false`) {
			t.Errorf("after another site's form: %d %s, want not draining", code, body)
		}
	})
}

package systest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// make image builds the container image with buildah (vfs storage, chroot
// isolation: no daemon, no registry, FROM scratch), and inside it, as its
// non-root user, electd version, check and a one-job run on the embedded
// SQLite default work.
func TestContainerImage(t *testing.T) {
	buildah, err := exec.LookPath("buildah")
	if err != nil {
		t.Skip("buildah is not installed: `scripts/services.sh buildah` (run by make test) installs it")
	}
	if os.Geteuid() != 0 {
		t.Skip("buildah with vfs storage and chroot isolation needs root here")
	}
	image := fmt.Sprintf("localhost/electd-systest:%d", os.Getpid())
	if b, err := exec.Command("make", "-C", "..", "image", "IMAGE="+image, "BUILDER=buildah").CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, b)
	}
	ba := func(args ...string) (string, error) {
		b, err := exec.Command(buildah, append([]string{"--storage-driver", "vfs"}, args...)...).CombinedOutput()
		return strings.TrimSpace(string(b)), err
	}
	t.Cleanup(func() { ba("rmi", "-f", image) })

	cfg, err := ba("inspect", "--type", "image", "--format",
		"{{.OCIv1.Config.User}} {{.OCIv1.Config.ExposedPorts}} {{.OCIv1.Config.Volumes}} {{.OCIv1.Config.Entrypoint}}", image)
	if err != nil {
		t.Fatalf("buildah inspect: %v\n%s", err, cfg)
	}
	for _, want := range []string{"65532:65532", "8790/tcp", "/etc/electd", "[/usr/bin/electd]"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("the image's configuration %q lacks %s", cfg, want)
		}
	}
	ctr, err := ba("from", "--pull=never", image)
	if err != nil {
		t.Fatalf("buildah from: %v\n%s", err, ctr)
	}
	t.Cleanup(func() { ba("rm", ctr) })

	etc, state := t.TempDir(), t.TempDir()
	if err := os.Chown(state, 65532, 65532); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(etc, 0o755); err != nil { // readable by the image's user
		t.Fatal(err)
	}
	port := freePort(t)
	// The run command is electd itself: the base has nothing else.
	conf := fmt.Sprintf(`agent {
  listen = "127.0.0.1:%d"
}

job "hello" {
  ttl         = "10s"
  renew_every = "3s"
  retry_every = "1s"
  run {
    command      = ["/usr/bin/electd", "version"]
    stop_timeout = "2s"
  }
}
`, port)
	if err := os.WriteFile(filepath.Join(etc, "electd.hcl"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	runArgs := func(args ...string) []string {
		return append([]string{"--storage-driver", "vfs", "run", "--isolation", "chroot",
			"-v", etc + ":/run/electd-config:ro", "-v", state + ":/var/lib/electd", ctr, "--"}, args...)
	}
	if b, err := exec.Command(buildah, runArgs("/usr/bin/electd", "version")...).CombinedOutput(); err != nil || !strings.HasPrefix(string(b), "electd ") {
		t.Errorf("electd version in the image: %v\n%s", err, b)
	}
	// The configuration is bound at a path of its own: bound over the
	// image's VOLUME /etc/electd, buildah's chroot isolation showed it empty
	// to one run in two here (once to check, once to run). A second try is
	// kept for that, and is not electd's.
	for try := 1; ; try++ {
		b, err := exec.Command(buildah, runArgs("/usr/bin/electd", "check", "-config", "/run/electd-config")...).CombinedOutput()
		if err == nil && strings.Contains(string(b), "(1 job") {
			break
		}
		if try == 3 || !strings.Contains(string(b), "No configuration files") {
			t.Fatalf("electd check in the image: %v\n%s", err, b)
		}
		t.Logf("try %d: buildah run showed /etc/electd empty; again", try)
	}

	// The agent: elected on SQLite, its command runs (and says its version).
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, buildah, runArgs("/usr/bin/electd", "run", "-config", "/run/electd-config")...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 20 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	elected, ran := false, false
	sc := bufio.NewScanner(out)
	for sc.Scan() && !(elected && ran) {
		line := sc.Text()
		log.WriteString(line + "\n")
		elected = elected || strings.Contains(line, "elected")
		ran = ran || (strings.Contains(line, "electd.agent.run: electd 0.") && strings.Contains(line, "job=hello"))
	}
	cancel()
	go func() {
		for sc.Scan() {
		}
	}()
	cmd.Wait()
	if !elected || !ran {
		t.Fatalf("the agent in the image was not elected or its command did not run:\n%s", log.String())
	}
	st, err := os.Stat(filepath.Join(state, "electd.db"))
	if err != nil {
		t.Fatalf("no electd.db in the state volume: %v", err)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || sys.Uid != 65532 {
		t.Errorf("electd.db is owned by %v, want the image's user 65532", st.Sys())
	}
}

package systest

import (
	"os/exec"
	"regexp"
	"strconv"
	"testing"
)

// The packaged unit keeps a hardened default: systemd-analyze security
// rates its exposure at most 3.0 (0 is the most restricted, 10 none).
func TestUnitSecurityScore(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed: the unit's exposure is not rated")
	}
	cmd := exec.Command(sa, "security", "--offline=true", "--no-pager", "../dist/systemd/electd.service")
	cmd.Env = append(cmd.Environ(), "SYSTEMD_COLORS=0")
	out, _ := cmd.CombinedOutput() // exits non-zero above its own threshold
	m := regexp.MustCompile(`Overall exposure level for electd\.service: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security gave no exposure level:\n%s", out)
	}
	score, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("exposure %.1f", score)
	if score > 3.0 {
		t.Errorf("dist/systemd/electd.service: exposure %.1f, want at most 3.0:\n%s", score, out)
	}
}

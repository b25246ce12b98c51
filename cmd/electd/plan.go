package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/electd/electd/api"
	"github.com/electd/electd/config"
)

// Exit statuses of `electd plan`, those of `terraform plan -detailed-exitcode`.
const (
	planNoChanges = 0
	planError     = 1
	planChanges   = 2
)

// cmdPlan is `electd plan`: what a reload would do to a running agent,
// before doing it. The agent reads and evaluates the files itself, with its
// own environment, and compares them as a reload does (agent.Diff), so the
// plan is what the reload would do.
func cmdPlan(args []string, stdout, stderr io.Writer) int {
	fs := newCommand("plan")
	configs := fs.pathsFlag("config")
	addr := fs.stringFlag("addr")
	token := fs.stringFlag("token")
	asJSON := fs.boolFlag("json")
	vars := fs.inputVars()
	pos, exit, ok := fs.parse(args, stdout, stderr)
	if !ok {
		if exit == planChanges {
			return planError // 2 means "changes" here: a typo must not read as one
		}
		return exit
	}
	if *token == "" {
		*token = os.Getenv(envToken)
	}
	var abs []string
	for _, p := range append(*configs, pos...) {
		a, err := filepath.Abs(p)
		if err != nil {
			fmt.Fprintln(stderr, "electd plan:", err)
			return planError
		}
		abs = append(abs, a)
	}
	if err := absVarFiles(*vars); err != nil {
		fmt.Fprintln(stderr, "electd plan:", err)
		return planError
	}
	if len(abs) > 0 {
		// The problems with their source lines, as `electd check -no-env`
		// shows them: the environment that counts is the agent's, and the
		// agent judges the files' permissions.
		opts := loadOptions(abs)
		opts.NoEnv, opts.AllowUnsafeFiles, opts.Vars = true, true, *vars
		if _, diags := config.Load(abs, opts); diags.HasErrors() {
			diags.WriteText(stderr)
			fmt.Fprintln(stderr, "electd plan: the configuration is invalid; a reload would reject it")
			return planError
		}
	}
	var st api.PlanStatus
	if err := apiRequest(http.MethodPost, *addr, "/v1/plan", *token, api.PlanRequest{Paths: abs, Vars: *vars}, time.Minute, http.StatusUnprocessableEntity, &st); err != nil {
		fmt.Fprintln(stderr, "electd plan:", err)
		return planError
	}
	if *asJSON {
		writeJSON(stdout, st)
	}
	if !st.OK {
		fmt.Fprintf(stderr, "electd plan: the agent cannot load the configuration at %s, and a reload would reject it: %s\n",
			strings.Join(st.Paths, ", "), st.Error)
		return planError
	}
	if !*asJSON {
		writeChanges(stdout, st.Changes, "a reload of "+strings.Join(st.Paths, ", ")+" would")
	}
	if st.Any() {
		return planChanges
	}
	return planNoChanges
}

// cmdReload is `electd reload`: SIGHUP through the API, with the outcome.
func cmdReload(args []string, stdout, stderr io.Writer) int {
	fs := newCommand("reload")
	addr := fs.stringFlag("addr")
	token := fs.stringFlag("token")
	asJSON := fs.boolFlag("json")
	vars := fs.inputVars()
	if _, exit, ok := fs.parse(args, stdout, stderr); !ok {
		return exit
	}
	var body any // none: the agent keeps the variables it used before
	if len(*vars) > 0 {
		if err := absVarFiles(*vars); err != nil {
			fmt.Fprintln(stderr, "electd reload:", err)
			return 1
		}
		body = api.ReloadRequest{Vars: *vars}
	}
	if *token == "" {
		*token = os.Getenv(envToken)
	}
	var st api.ReloadStatus
	// A reload waits for the restarted jobs to stop: up to their
	// stop_timeout, and the agent allows it five minutes.
	if err := apiRequest(http.MethodPost, *addr, "/v1/reload", *token, body, 6*time.Minute, http.StatusUnprocessableEntity, &st); err != nil {
		fmt.Fprintln(stderr, "electd reload:", err)
		return 1
	}
	if *asJSON {
		writeJSON(stdout, st)
	}
	if !st.OK {
		fmt.Fprintln(stderr, "electd reload: the agent rejected the configuration and keeps running the previous one:", st.Error)
		return 1
	}
	if !*asJSON {
		writeChanges(stdout, st.Changes, "")
	}
	return 0
}

// absVarFiles makes the -var-file paths absolute: the agent reads them,
// and its working directory means nothing to the client.
func absVarFiles(vars []config.Var) error {
	for i, v := range vars {
		if v.File == "" {
			continue
		}
		a, err := filepath.Abs(v.File)
		if err != nil {
			return fmt.Errorf("-var-file: %v", err)
		}
		vars[i].File = a
	}
	return nil
}

// writeChanges prints a plan (would is the sentence's start: "a reload of
// /etc/electd would") or a reload's outcome (would is ""), in the manner of
// terraform plan: a line per job added (+), restarted (~, with what
// changed) or removed (-), then the counts.
func writeChanges(w io.Writer, c api.Changes, would string) {
	const untouched = "leadership, token and child untouched"
	plan := would != ""
	if c.Any() {
		if plan {
			fmt.Fprintln(w, "Job actions are shown with these symbols:")
			for _, l := range []struct {
				on   bool
				line string
			}{
				{len(c.Added) > 0, "  + start (a candidate for its lease)"},
				{len(c.Restarted) > 0, "  ~ restart (stop its work, release its lease, start with the new configuration)"},
				{len(c.Updated) > 0, "  * update in place (the job keeps running: its leader, token, command and history stay)"},
				{len(c.Removed) > 0, "  - stop (stop its work, release its lease)"},
			} {
				if l.on {
					fmt.Fprintln(w, l.line)
				}
			}
			fmt.Fprintf(w, "\n%s%s:\n\n", strings.ToUpper(would[:1]), would[1:])
		}
		for _, name := range c.Added {
			fmt.Fprintf(w, "  + %s\n", name)
		}
		for _, name := range c.Restarted {
			if attrs := c.Attributes[name]; len(attrs) > 0 {
				fmt.Fprintf(w, "  ~ %s: %s\n", name, strings.Join(attrs, ", "))
			} else {
				fmt.Fprintf(w, "  ~ %s (no attribute's value changed, only the text of its block or of its provider's: comments, layout)\n", name)
			}
		}
		for _, name := range c.Updated {
			if attrs := c.Attributes[name]; len(attrs) > 0 {
				fmt.Fprintf(w, "  * %s: %s\n", name, strings.Join(attrs, ", "))
			} else {
				fmt.Fprintf(w, "  * %s (no attribute's value changed, only the text of its block: comments, layout)\n", name)
			}
		}
		for _, name := range c.Removed {
			fmt.Fprintf(w, "  - %s\n", name)
		}
		fmt.Fprintln(w)
	}
	switch {
	case plan && c.Any():
		fmt.Fprintf(w, "Plan: %d to add, %d to restart, %s%d to remove, %d kept (%s).\n",
			len(c.Added), len(c.Restarted), updatedCount(c, "to update in place"), len(c.Removed), len(c.Kept), untouched)
	case plan:
		fmt.Fprintf(w, "No changes: %s keep %s (%s).\n", would, jobCount(len(c.Kept)), untouched)
	case c.Any():
		fmt.Fprintf(w, "Reloaded: %d added, %d restarted, %s%d removed, %d kept (%s).\n",
			len(c.Added), len(c.Restarted), updatedCount(c, "updated in place"), len(c.Removed), len(c.Kept), untouched)
	default:
		fmt.Fprintf(w, "Reloaded: no changes; %s kept (%s).\n", jobCount(len(c.Kept)), untouched)
	}
	if len(c.Agent) > 0 {
		fmt.Fprintf(w, "\nWarning: the agent block changed (%s). A reload does not apply the agent block: it takes effect when the agent restarts.\n",
			strings.Join(c.Agent, ", "))
	}
}

// updatedCount is the count of jobs updated in place for the summary
// line, when there are any.
func updatedCount(c api.Changes, what string) string {
	if len(c.Updated) == 0 {
		return ""
	}
	return fmt.Sprintf("%d %s, ", len(c.Updated), what)
}

func jobCount(n int) string {
	switch n {
	case 0:
		return "no job"
	case 1:
		return "its one job"
	}
	return fmt.Sprintf("all %d jobs", n)
}

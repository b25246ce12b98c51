package agent

import (
	"maps"
	"slices"
	"strings"

	"github.com/electd/electd/config"
)

// Plan is what a reload from one configuration to another does to each job.
// Diff makes it, and a reload carries out the plan Diff made, so the plan
// shown beforehand (`electd plan`) is what the reload does.
type Plan struct {
	// Added jobs start, as candidates.
	Added []string
	// Removed jobs stop: their work stops and their lease is released.
	Removed []string
	// Restarted jobs stop as removed ones do, and start again with the new
	// configuration.
	Restarted []Change
	// Updated jobs keep running: their leadership, token, command (the
	// same process) and history stay, and the changed attributes apply in
	// place. Only attributes that do not change the running command or its
	// environment are applied so (UpdatesInPlace); a change of comments or
	// layout alone is one too.
	Updated []Change
	// Kept jobs are untouched: their leadership, token and child stay.
	Kept []string
	// Agent names the attributes of the agent block that differ from those
	// the agent started with. The agent block is not reloaded: they take
	// effect at the next restart of the agent.
	Agent []string
}

// Change is a job that a reload restarts or updates, and why.
type Change struct {
	Job string
	// Attributes whose values differ, as paths: "ttl", "run.command",
	// "on_demoted.webhook[0].url"; a provider's as "sql.main.dsn"; a block
	// added or removed as "health". Empty when no value differs: the
	// fingerprint counts the text of the job's block and of its provider's,
	// so a change of comments or layout changes it too (the job is then
	// updated in place, with nothing to apply).
	Attributes []string
}

// Changes reports whether the plan starts, stops or updates any job.
func (p Plan) Changes() bool {
	return len(p.Added)+len(p.Removed)+len(p.Restarted)+len(p.Updated) > 0
}

// inPlace are the attributes (and blocks) a reload applies to a running job
// without stopping it: none of them changes the running command or its
// environment. A path is one of them, or inside one.
var inPlace = []string{
	"retry_every",
	"run.stop_signal", "run.stop_timeout", "run.restart", "run.restart_wait",
	"run.max_failures", "run.failure_window", "run.hold_off",
	"task.timeout", "task.stop_signal", "task.stop_timeout",
	"health",
	"constraint", "prefer", "prefer_settle",
	"on_elected", "on_demoted", "on_leader_change", "on_task_failed", "on_task_succeeded",
}

// UpdatesInPlace says whether attribute path (as Change names it) is
// applied to a running job without a restart.
func UpdatesInPlace(path string) bool {
	for _, a := range inPlace {
		if path == a || strings.HasPrefix(path, a+".") || strings.HasPrefix(path, a+"[") {
			return true
		}
	}
	return false
}

// updatable says whether the change from o to n, whose attributes attrs
// differ, can be applied to the running job: every attribute in place, and
// no command runner needed that the job was built without.
func updatable(o, n *config.Job, attrs []string) bool {
	if o.Provider != n.Provider || (needsRunner(n) && !needsRunner(o)) {
		return false
	}
	for _, a := range attrs {
		if !UpdatesInPlace(a) {
			return false
		}
	}
	return true
}

// Diff is the plan of a reload from old to new: a job is kept when its
// fingerprint and its provider's settings are the same; updated in place
// when its provider's settings are the same and every attribute that
// differs is one UpdatesInPlace names; else restarted. old is nil before
// the first start (every job is added).
func Diff(old, new *config.Config) Plan {
	var p Plan
	prev := map[string]*config.Job{}
	oldKeys := map[string]string{}
	if old != nil {
		p.Agent = agentChanges(old.Agent, new.Agent)
		for i := range old.Jobs {
			prev[old.Jobs[i].Name] = &old.Jobs[i]
		}
		oldKeys = providerKeys(old)
	}
	newKeys := providerKeys(new)
	names := make(map[string]bool, len(new.Jobs))
	for i := range new.Jobs {
		spec := &new.Jobs[i]
		names[spec.Name] = true
		o, ok := prev[spec.Name]
		switch {
		case !ok:
			p.Added = append(p.Added, spec.Name)
		case o.Fingerprint == spec.Fingerprint && oldKeys[o.Provider] == newKeys[spec.Provider]:
			p.Kept = append(p.Kept, spec.Name)
		default:
			c := Change{Job: spec.Name, Attributes: changedAttributes(old, o, new, spec)}
			if oldKeys[o.Provider] == newKeys[spec.Provider] && updatable(o, spec, c.Attributes) {
				p.Updated = append(p.Updated, c)
			} else {
				p.Restarted = append(p.Restarted, c)
			}
		}
	}
	if old != nil {
		for _, j := range old.Jobs {
			if !names[j.Name] {
				p.Removed = append(p.Removed, j.Name)
			}
		}
	}
	return p
}

// providerKeys are the keys of a configuration's providers, by reference.
func providerKeys(c *config.Config) map[string]string {
	keys := make(map[string]string, len(c.Providers))
	for _, pc := range c.Providers {
		keys[pc.Ref()] = providerKey(pc)
	}
	return keys
}

// changedAttributes are the job's attributes that differ, then its
// provider's ("sql.main.dsn"), or "provider" when it moved to another.
func changedAttributes(old *config.Config, o *config.Job, new *config.Config, n *config.Job) []string {
	out := config.ChangedAttributes(*o, *n)
	if o.Provider != n.Provider {
		if !slices.Contains(out, "provider") {
			out = append(out, "provider")
		}
		return out
	}
	op, ok1 := old.Provider(o.Provider)
	np, ok2 := new.Provider(n.Provider)
	if ok1 && ok2 {
		for _, a := range config.ChangedSettings(op, np) {
			out = append(out, n.Provider+"."+a)
		}
	}
	return out
}

// agentChanges names the agent attributes that differ.
func agentChanges(old, new config.Agent) []string {
	var out []string
	for _, c := range []struct {
		name string
		same bool
	}{
		{"node_id", old.NodeID == new.NodeID},
		{"listen", old.Listen == new.Listen},
		{"api_token", old.APIToken == new.APIToken},
		{"log_level", old.LogLevel == new.LogLevel},
		{"log_format", old.LogFormat == new.LogFormat},
		{"shutdown_timeout", old.ShutdownTimeout == new.ShutdownTimeout},
		{"tags", maps.Equal(old.Tags, new.Tags)},
		{"balance", old.Balance == new.Balance},
	} {
		if !c.same {
			out = append(out, c.name)
		}
	}
	return out
}

package config

import (
	"fmt"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/electd/electd/internal/timing"
)

// HolderReserve is what the agent adds to the node_id in a lease's holder:
// "#" and the 8 hex digits of its process's incarnation.
const HolderReserve = 9

// checkLimits applies the rules that need the whole configuration: each
// store's limits on the jobs that use it (name, node_id, ttl), the floor of
// every ttl, and a shutdown_timeout that leaves every child its stop_timeout.
func checkLimits(a *agentDecl, jobs []*jobDecl, provs []*providerDecl) hcl.Diagnostics {
	var diags hcl.Diagnostics
	holderChecked := map[*providerDecl]bool{}
	var longest *jobDecl
	// The instances of a block whose names are too long, reported once
	// per block.
	type tooLong struct {
		j     *jobDecl
		names []string
		max   int
	}
	var long []*tooLong
	longOf := map[*hcl.Block]*tooLong{}
	seen := map[string]bool{} // a problem the instances of a block share is reported once
	for _, j := range jobs {
		if longest == nil || j.StopTimeout() > longest.StopTimeout() {
			longest = j
		}
		p := j.provider
		if p == nil || p.Settings == nil {
			continue
		}
		lim := p.Settings.Limits()
		switch {
		case len(j.Name) <= lim.MaxKey || j.inst.unknown:
		case j.inst.key != "":
			t := longOf[j.block]
			if t == nil {
				t = &tooLong{j: j, max: lim.MaxKey}
				longOf[j.block] = t
				long = append(long, t)
			}
			t.names = append(t.names, fmt.Sprintf("%s (%d bytes)", j.Name, len(j.Name)))
		default:
			diags = append(diags, errorf(j.nameRange, "Job name too long",
				"The job name is %d bytes; provider %s keeps leases under keys of at most %d bytes.", len(j.Name), p.Ref(), lim.MaxKey))
		}
		if j.ttlOK {
			if err := lim.CheckTTL(j.TTL); err != nil {
				d := errorf(j.ttlRange, "Invalid ttl for "+p.Type,
					"The ttl of a job on provider %s is refused by the store: %s (the store accepts %s).", p.Ref(), err, describeTTL(lim.MinTTL, lim.MaxTTL, lim.TTLStep))
				if key := fmt.Sprint(d.Subject, d.Detail); !seen[key] {
					seen[key] = true
					diags = append(diags, d)
				}
			}
		}
		if lim.Failover > 0 && j.ttlOK {
			// A renewal due as the store loses its leader may wait what is
			// left of the window after renew_every.
			if left := timing.Budget(j.TTL) - j.StopTimeout() - KillMargin - j.RenewEvery; left < lim.Failover {
				d := &hcl.Diagnostic{Severity: hcl.DiagWarning, Subject: j.ttlRange.Ptr(),
					Summary: "Term shorter than the store's failover",
					Detail: fmt.Sprintf("Provider %s is a cluster: %s, and no renewal succeeds meanwhile. A renewal due then can wait %s (ttl × 0.99 − stop_timeout − %s − renew_every), so losing the store's leader can end this job's term and move the job. Leave at least %s: raise ttl, or lower stop_timeout or renew_every.",
						p.Ref(), lim.FailoverWhy, left.Round(time.Millisecond), KillMargin, lim.Failover)}
				if key := fmt.Sprint(d.Subject, d.Detail); !seen[key] {
					seen[key] = true
					diags = append(diags, d)
				}
			}
		}
		if !holderChecked[p] && len(a.NodeID)+HolderReserve > lim.MaxHolder {
			holderChecked[p] = true
			diags = append(diags, errorf(a.nodeIDRange, "node_id too long",
				"The node_id is %d bytes; provider %s keeps the holder of a lease in at most %d bytes, of which the agent uses %d to tell its processes apart: at most %d bytes.", len(a.NodeID), p.Ref(), lim.MaxHolder, HolderReserve, lim.MaxHolder-HolderReserve))
		}
	}
	for _, t := range long {
		diags = append(diags, errorf(t.j.nameRange, "Instance name too long",
			"The instances of job %q are named %s%sKEY, and provider %s keeps leases under keys of at most %d bytes. Too long: %s. Shorten the job's name or the for_each keys.",
			t.j.block.Labels[0], t.j.block.Labels[0], InstanceSeparator, t.j.Provider, t.max, listSome(t.names, 3)))
	}
	if longest != nil && a.shutdownOK && a.ShutdownTimeout <= longest.StopTimeout()+KillMargin {
		diags = append(diags, errorf(a.shutdownRange, "shutdown_timeout too short",
			"The shutdown_timeout (%s) must be longer than the longest stop_timeout (%s, job %q) plus the %s kill margin: otherwise a stopping agent kills that job's child before its stop signal has had its time, and skips on_demoted.",
			a.ShutdownTimeout, longest.StopTimeout(), longest.Name, KillMargin))
	}
	return diags
}

// describeTTL says which ttls a store accepts.
func describeTTL(lo, hi, step time.Duration) string {
	s := "at least " + max(lo, MinTTL).String()
	if hi > 0 {
		s = "from " + max(lo, MinTTL).String() + " to " + hi.String()
	}
	if step == time.Second {
		s = "whole seconds " + s
	} else if step > 0 {
		s += " in steps of " + step.String()
	}
	return s
}

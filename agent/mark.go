package agent

// The token mark: the highest fencing token this agent has seen for a job,
// from its own terms, the holders it was refused by and the leaders it
// observed. Every Acquire asks the store for a token above it
// (providers.AcquireRequest.Floor), so a store that lost writes (a failover
// to a replica that had not received the last terms) cannot hand out a
// token again while an agent that saw it lives. A store that reports a
// token below the mark has lost writes: that is logged as an error once per
// job, counted (electd_token_regressions_total) and shown in the job's
// status, since a fence downstream may now refuse the next leader.

// seeToken records a token the store reported for the job: won is true for
// a term this node just won (a token at the mark is then a repeat, not the
// same term seen again).
func (j *job) seeToken(token uint64, won bool) {
	switch {
	case token > j.mark:
		j.mark = token
		j.setTokenMark(token)
		return
	case token == j.mark && !won, token == 0 && j.mark == 0:
		return
	}
	// Lower than a token seen before (or a repeat of it): the store lost
	// writes. Each distinct token reported is counted once, not each read.
	if token == j.regressed {
		return
	}
	j.regressed = token
	n := j.countRegression()
	if n == 1 {
		j.log().Error("the store reported a token below one this node has seen: it lost writes (a failover to a replica that had not received them?); the next term's token is asked above the highest seen",
			"token", token, "highest_seen", j.mark)
	}
}

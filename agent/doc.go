// Package agent runs the election of every job of a configuration:
// candidate, leader, stepping down (term.go reads a term's life top to
// bottom; policy.go says how each kind of job competes between terms). While
// it leads, a job supervises its `run` command or runs its scheduled `task`;
// every change of leadership fires the job's hooks in order.
//
// Safety comes first. A leader that sent a successful Acquire or Renew at
// monotonic time t treats its term as valid until t + ttl*0.99, and begins
// stepping down (stop_signal, then SIGKILL after stop_timeout) early enough
// that its work is dead before then, even when the store cannot be reached
// or answers late: that moment is a timer of the loop's own, never the
// arrival of an answer. A "lost" answer steps down at once. Time reaches the loop through Clock so
// these rules are tested without sleeping.
//
// Scale comes from the loop (loop.go): the jobs of one store are small
// structs driven by one goroutine with one timer heap, and the store
// requests that fall due together go out as one batch where the store can
// batch them.
package agent

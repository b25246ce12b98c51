package agent

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/config"
	"github.com/electd/electd/providers"
)

func TestSlotRecord(t *testing.T) {
	ms := func(n int64) *time.Time { v := time.UnixMilli(n).UTC(); return &v }
	code := 3
	full := slotRecord{
		slot: time.Unix(1_764_230_400, 0).UTC(), trigger: 7, lastSuccess: time.UnixMilli(1_764_144_061_250).UTC(),
		run: &TaskRun{Slot: time.Unix(1_764_230_400, 0).UTC(), StartedAt: ms(1_764_230_400_123), EndedAt: ms(1_764_230_461_456),
			ExitCode: &code, Result: ResultFailed, Node: "node-1", Token: 42},
	}
	skip := full
	skip.run = &TaskRun{Slot: time.Unix(1_764_230_460, 0).UTC(), EndedAt: ms(1_764_230_460_002), Result: ResultSkipped,
		Why: "the previous run was still running", Node: "node-1", Token: 42}
	skip.active = &TaskRun{Slot: time.Unix(1_764_230_400, 0).UTC(), StartedAt: ms(1_764_230_400_123), Result: ResultRunning,
		Node: "node-1", Token: 42, Trigger: 6}
	for _, tc := range []struct {
		name  string
		value string
		want  slotRecord
	}{
		{"empty", "", slotRecord{}},
		// An agent before the record wrote the slot alone: an upgraded
		// agent reads it as the last slot run, with no run known.
		{"the format before the record", "1764230400", slotRecord{slot: time.Unix(1_764_230_400, 0).UTC()}},
		{"garbage", "not a record", slotRecord{}},
		{"broken json", `{"s":`, slotRecord{}},
		{"full", full.String(), full},
		{"a skip beside the run in progress", skip.String(), skip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := parseRecord(tc.value); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("parseRecord(%q) = %+v, want %+v", tc.value, got, tc.want)
			}
		})
	}
	t.Logf("a full record: %d bytes: %s", len(full.String()), full.String())
	t.Logf("a skip beside a run: %d bytes: %s", len(skip.String()), skip.String())

	// A long node name and a long why are cut to fit the store's bound;
	// the numbers at most once rests on survive.
	long := skip
	r := *skip.run
	r.Node, r.Why = strings.Repeat("n", 200), strings.Repeat("why ", 100)
	long.run = &r
	v := long.String()
	if len(v) > providers.MaxValueLen {
		t.Fatalf("record of %d bytes, more than %d", len(v), providers.MaxValueLen)
	}
	got := parseRecord(v)
	if !got.slot.Equal(full.slot) || got.trigger != 7 || got.run == nil || got.run.Result != ResultSkipped || got.run.Token != 42 ||
		got.active == nil || !got.active.Slot.Equal(skip.active.Slot) || got.active.Trigger != 6 {
		t.Errorf("a cut record lost its numbers: %+v", got)
	}
}

// electd_task_last_run_succeeded follows the record's last run that ended:
// none known gives no series, a run in progress keeps the one before it.
func TestLastRunSucceededSample(t *testing.T) {
	var s status
	s.st.Job, s.taskSpec = "report", &config.Task{ScheduleText: "@hourly"}
	run := func(result string) slotRecord { return slotRecord{run: &TaskRun{Result: result, Node: "node-1"}} }
	for _, step := range []struct {
		rec           slotRecord
		known, wantOK bool
	}{
		{slotRecord{}, false, false},       // no run known
		{run(ResultRunning), false, false}, // the first run, in progress
		{run(ResultFailed), true, false},   // it failed
		{run(ResultRunning), true, false},  // the next runs: still the failure
		{run(ResultSucceeded), true, true}, // and succeeds
		{run(ResultRunning), true, true},   // the next runs
		{run(ResultKilled), true, false},   // killed by a step-down: not a success
		{run(ResultTimedOut), true, false}, // timed out
		{run(ResultSucceeded), true, true},
	} {
		s.setTask(step.rec)
		js := s.sample()
		if js.LastRunKnown != step.known || js.LastRunSucceeded != step.wantOK {
			t.Errorf("after a record with %+v: known %v succeeded %v, want %v %v", step.rec.run, js.LastRunKnown, js.LastRunSucceeded, step.known, step.wantOK)
		}
	}
}

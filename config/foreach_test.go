package config

import (
	"fmt"
	"strings"
	"testing"
)

func jobNamesOf(cfg *Config) string {
	var n []string
	for _, j := range cfg.Jobs {
		n = append(n, j.Name)
	}
	return strings.Join(n, ",")
}

// A job block with for_each is a job per element, named LABEL.KEY, and
// each.key and each.value reach every attribute and nested block.
func TestForEachInstances(t *testing.T) {
	src := `
variable "regions" {
  type = map(object({ zone = string, url = string }))
  default = {
    eu = { zone = "eu-1", url = "http://eu.internal/hook" }
    us = { zone = "us-1", url = "http://us.internal/hook" }
  }
}
locals {
  shards = toset(range(12))
}
job "before" {
}
job "consumer" {
  for_each = local.shards
  run {
    command = ["/bin/consumer", "--shard", each.key, "--of", tostring(length(local.shards))]
    env     = { SHARD = each.value }
  }
}
job "region" {
  for_each   = var.regions
  constraint = { zone = each.value.zone }
  health {
    command = ["/bin/ready", each.key]
  }
  run {
    command = ["/bin/r", each.key]
  }
  on_elected {
    webhook {
      url = each.value.url
      body = "${each.key} ${event.node}"
    }
  }
}
`
	cfg, diags, _ := loadSrc(t, map[string]string{"main.hcl": src}, testOpts)
	if diags.HasErrors() {
		t.Fatal(diagText(diags))
	}
	want := "before"
	for i := range 12 {
		want += fmt.Sprintf(",consumer.%d", i) // numeric keys in numeric order
	}
	want += ",region.eu,region.us"
	if got := jobNamesOf(cfg); got != want {
		t.Errorf("jobs %s\nwant %s", got, want)
	}
	if got := strings.Join(argv(t, cfg, "consumer.10"), " "); got != "/bin/consumer --shard 10 --of 12" {
		t.Errorf("consumer.10 runs %q", got)
	}
	if env, _ := job(t, cfg, "consumer.7").Run.Env.Eval(Event{}); env["SHARD"] != "7" {
		t.Errorf("consumer.7 env %v", env)
	}
	us := job(t, cfg, "region.us")
	if us.Constraint["zone"] != "us-1" {
		t.Errorf("region.us constraint %v", us.Constraint)
	}
	if a, _ := us.Health.Command.Argv.Eval(Event{}); strings.Join(a, " ") != "/bin/ready us" {
		t.Errorf("region.us health %v", a)
	}
	hook := us.OnElected[0].Webhook
	if u, _ := hook.URL.Eval(Event{}); u != "http://us.internal/hook" {
		t.Errorf("region.us webhook url %q", u)
	}
	if b, _ := hook.Body.Eval(Event{Node: "n1"}); b != "us n1" {
		t.Errorf("region.us webhook body %q", b)
	}
}

// An instance whose key stays keeps its fingerprint when the set grows
// or shrinks, so a reload keeps its leader; a change of what it runs
// (a variable it uses, its each.value) changes it.
func TestForEachFingerprints(t *testing.T) {
	src := func(shards int, url, eu string) string {
		return fmt.Sprintf(`
variable "url" { default = %q }
job "consumer" {
  for_each = toset(range(%d))
  run {
    command = ["/bin/consumer", each.key, var.url, "${event.token}"]
  }
}
job "region" {
  for_each = { eu = %q, us = "b" }
  run {
    command = ["/bin/r", each.value]
  }
}
`, url, shards, eu)
	}
	fingerprints := func(s string) map[string]Job {
		cfg, diags, _ := loadSrc(t, map[string]string{"main.hcl": s}, testOpts)
		if diags.HasErrors() {
			t.Fatal(diagText(diags))
		}
		out := map[string]Job{}
		for _, j := range cfg.Jobs {
			out[j.Name] = j
		}
		return out
	}
	four := fingerprints(src(4, "amqp://q", "a"))
	eight := fingerprints(src(8, "amqp://q", "a"))
	two := fingerprints(src(2, "amqp://q", "a"))
	if len(four) != 6 || len(eight) != 10 || len(two) != 4 {
		t.Fatalf("jobs: %d, %d, %d", len(four), len(eight), len(two))
	}
	for name, j := range two {
		if four[name].Fingerprint != j.Fingerprint || eight[name].Fingerprint != j.Fingerprint {
			t.Errorf("%s: the fingerprint changed with the size of the set", name)
		}
		if c := ChangedAttributes(eight[name], j); len(c) != 0 {
			t.Errorf("%s: changed attributes %v", name, c)
		}
	}
	// The variable is used where the event is too: the expression is not
	// known at load time, and its value still counts.
	other := fingerprints(src(4, "amqp://other", "a"))
	if other["consumer.0"].Fingerprint == four["consumer.0"].Fingerprint {
		t.Error("consumer.0: the fingerprint did not change with var.url")
	}
	if other["region.eu"].Fingerprint != four["region.eu"].Fingerprint {
		t.Error("region.eu: the fingerprint changed with a variable it does not use")
	}
	eu := fingerprints(src(4, "amqp://q", "c"))
	if eu["region.eu"].Fingerprint == four["region.eu"].Fingerprint || eu["region.us"].Fingerprint != four["region.us"].Fingerprint {
		t.Error("a changed each.value must restart its instance, and only it")
	}
	if c := ChangedAttributes(four["region.eu"], eu["region.eu"]); strings.Join(c, ",") != "run.command" {
		t.Errorf("region.eu changed attributes %v, want run.command", c)
	}
}

// The JSON syntax declares variables, locals and for_each as HCL does.
func TestForEachJSON(t *testing.T) {
	src := `{
  "variable": {"shards": {"type": "number", "default": 3}},
  "locals": {"prefix": "q"},
  "job": {"consumer": {
    "for_each": "${toset(range(var.shards))}",
    "run": {"command": ["/bin/c", "${local.prefix}-${each.key}"]}
  }}
}`
	cfg, diags, _ := loadSrc(t, map[string]string{"main.hcl.json": src}, testOpts)
	if diags.HasErrors() {
		t.Fatal(diagText(diags))
	}
	if got := jobNamesOf(cfg); got != "consumer.0,consumer.1,consumer.2" {
		t.Errorf("jobs %s", got)
	}
	if got := argv(t, cfg, "consumer.2"); got[1] != "q-2" {
		t.Errorf("consumer.2 runs %q", got)
	}
}

// Locals are evaluated once, in any order of declaration, across files.
func TestLocals(t *testing.T) {
	cfg, diags, _ := loadSrc(t, map[string]string{
		"a.hcl": `
locals {
  url = "${local.scheme}://${var.host}/${local.queue}"
}
job "j" {
  run {
    command = ["/bin/c", local.url]
  }
}
`,
		"b.hcl": `
variable "host" { default = "q.internal" }
locals {
  scheme = "amqp"
  queue  = upper("orders")
}
`}, testOpts)
	if diags.HasErrors() {
		t.Fatal(diagText(diags))
	}
	if got := argv(t, cfg, "j")[1]; got != "amqp://q.internal/ORDERS" {
		t.Errorf("local.url = %q", got)
	}
}

// Odd values where variables, locals and for_each meet: each gives
// diagnostics or a configuration, never an internal error. ";" stands for
// a line break.
func TestForEachOddValues(t *testing.T) {
	for _, src := range []string{
		`job "a" {;for_each = { x = null };}`,
		`job "a" {;for_each = toset([]);}`,
		`job "a" {;for_each = {};}`,
		`job "a" {;for_each = 5;}`,
		`job "a" {;for_each = toset([true, false]);}`,
		`job "a" {;for_each = { x = { y = ["1s", 2] } };ttl = each.value.y[0];}`,
		`job "a" {;for_each = toset(["x"]);ttl = each;}`,
		`job "a" {;ttl = var;}`,
		`job "a" {;ttl = local;}`,
		`job "a" {;ttl = var["x"];}`,
		`variable "x" {;default = null;};job "a" {;for_each = var.x;}`,
		`variable "x" {;type = any;};job "a" {;for_each = var.x;}`,
		`variable "x" {;type = set(string);default = ["a", null];};job "a" {;for_each = var.x;}`,
		`variable "x" {;default = 1;validation {;condition = var.y > 0;error_message = "x";};}`,
		`variable "x" {;default = 1;validation {;condition = true;error_message = 5;};}`,
		`variable "x" {;default = 1;validation {;condition = false;error_message = null;};}`,
		`variable "x" {;type = list(string);default = null;}`,
		`variable "x" {;sensitive = "yes";description = 3;}`,
		`locals {;a = [for x in local.b : x];b = local.a[*];}`,
		`locals {;a = each.key;b = event.node;c = var.nope;}`,
		`locals {;a = 1;};locals {;a = 2;};locals {;b = local.a + local.c;}`,
		`job "a" {;for_each = local.x;};locals {;x = local.x;}`,
		`provider "sql" "s" {;driver = "sqlite";dsn = var.dsn;}`,
		`variable "dsn" {;default = "x.db";};provider "sql" "s" {;driver = "sqlite";dsn = "${each.key}${var.dsn}";}`,
		`agent {;node_id = each.value;}`,
	} {
		src = strings.ReplaceAll(src, ";", "\n")
		for _, noEnv := range []bool{false, true} {
			opts := testOpts
			opts.NoEnv = noEnv
			_, diags, _ := loadSrc(t, map[string]string{"main.hcl": src}, opts)
			for _, d := range diags.All() {
				if d.Summary == "Internal error" {
					t.Errorf("%s (no-env %v): %s", src, noEnv, d.Detail)
				}
				if strings.HasPrefix(d.Summary, "Missing newline") || strings.HasPrefix(d.Summary, "Invalid single-argument") || strings.HasPrefix(d.Summary, "Argument or block definition required") {
					t.Errorf("%s: the case does not parse: %s", src, d.Summary)
				}
			}
		}
	}
}

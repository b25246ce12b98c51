// Package config reads electd's HCL files into plain runtime specs (spec.go)
// with diagnostics that point at the line: decoding, validation (the checks
// of `electd check`), the functions available to expressions, and the
// evaluators for expressions that use `event`, which run when an action fires.
// Input variables (vars.go) and locals (locals.go) are evaluated first; a job
// block with for_each becomes a job per instance (foreach.go), so that the
// agent sees only jobs, each with its own name.
package config

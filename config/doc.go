// Package config reads electd's HCL files into plain runtime specs (spec.go)
// with diagnostics that point at the line: decoding, validation (the checks
// of `electd check`), the functions available to expressions, and the
// evaluators for expressions that use `event`, which run when an action fires.
package config

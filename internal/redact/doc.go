// Package redact removes secret values from text on its way out of the
// agent: log lines, API answers, command output and diagnostics.
//
// Secrets are known as values, not as the names of the fields that hold
// them: a store's driver, an HTTP client or a function of the configuration
// language can repeat a password anywhere in an error message, and no
// redaction by field name follows it there. The configuration says which
// values are secret (config.Config.Secrets, each provider's
// Settings.Secrets); this package masks them wherever they appear.
package redact

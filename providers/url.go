package providers

import (
	"net/url"
	"strings"
)

// URLForm is how a provider type is written as one URL: `sqlite:///path`,
// `postgres://...`, `redis://host:port`. The store's package owns its form,
// as it owns its block: which schemes are its, what each part means, and
// how they become its Settings (package providers/registry finds the type
// by scheme).
type URLForm struct {
	// Schemes are the URL schemes of the type, lowercase ("postgres",
	// "postgresql"). A scheme belongs to one type of a build.
	Schemes []string
	// Example is a URL of the form, shown in errors and help.
	Example string
	// Parse turns a URL of one of Schemes into settings. It runs no
	// Validate (the caller does) and never quotes the URL in its errors:
	// the URL may hold a password.
	Parse func(raw string) (Settings, error)
}

// URLSecrets are the secret parts of a URL as written: its password,
// percent-encoded as written and decoded, and the URL itself when it holds
// one. Parse may re-encode the password into a DSN; the store's Secrets
// cover that form.
func URLSecrets(raw string) []string {
	var out []string
	rest := raw
	if _, after, ok := strings.Cut(rest, "://"); ok {
		rest = after
	}
	// The userinfo ends at the last "@" before the path: a password may
	// hold "@" when it is not encoded, and the path and query may too.
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		if _, pw, ok := strings.Cut(rest[:i], ":"); ok {
			out = append(out, raw, pw)
			if dec, err := url.PathUnescape(pw); err == nil {
				out = append(out, dec)
			}
		}
	}
	return out
}

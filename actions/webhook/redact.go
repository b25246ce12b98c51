package webhook

import (
	"fmt"
	"net/url"
	"strings"
)

// A webhook URL often carries a credential: user:password, a token in the
// query, or a secret path (Slack's /services/T/B/X). Its value is known
// only when the hook fires (it may use event), so the agent's redaction of
// known secrets cannot be relied on for it: logs show only the scheme and
// host, and transport errors lose the URL.

// redactURL is the scheme and host of raw. url.Parse lower-cases the scheme,
// so "HTTPS://" and "https://" read the same; the host never includes the
// userinfo.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(unparsable url)"
	}
	return strings.ToLower(u.Scheme) + "://" + u.Host
}

// withoutURL is err without the request URL. net/http returns every error
// as a *url.Error that quotes the URL whole but for the password (the query
// and path stay), re-encoded and with the scheme lower-cased, so it cannot
// be found and replaced by the URL as configured: the wrapper is dropped
// instead, keeping its operation ("Post") and cause.
func withoutURL(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return fmt.Errorf("%s: %w", ue.Op, withoutURL(ue.Err))
	}
	return err
}

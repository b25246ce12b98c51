package webhook

import (
	"net/url"
	"strings"
)

// Webhook URLs often carry a secret in the path or query (Slack's
// /services/T/B/X); logs show only the scheme and host.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(unparsable url)"
	}
	return u.Scheme + "://" + u.Host + "/..."
}

// redactErr keeps a transport error's meaning but not the URL it names.
func redactErr(err error, raw string) string {
	msg := err.Error()
	if raw != "" {
		msg = strings.ReplaceAll(msg, raw, redactURL(raw))
	}
	return msg
}

package providers

import (
	"errors"
	"net/url"
	"slices"
	"strings"
	"time"
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

// HostsURL is a URL of a store reached at one or more servers, split as
// the URL forms of several stores write it:
//
//	scheme://[user[:password]@]host[:port][,host[:port]...][/path][?k=v&...]
//
// The userinfo ends at the last "@" before the path, so an unencoded
// password may hold one; user and password are percent-decoded. Each query
// parameter may be given once.
type HostsURL struct {
	User, Password string
	HasUser        bool // "user@" or "user:password@" was written
	HasPassword    bool
	Hosts          []string // as written, in order; none when empty
	Path           string   // after the first "/", "" when none
	Query          map[string]string
}

// ParseHostsURL splits raw. Its errors never quote raw.
func ParseHostsURL(raw string) (HostsURL, error) {
	var u HostsURL
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return u, errors.New("it has no scheme://")
	}
	rest, query, _ := strings.Cut(rest, "?")
	hosts, path, _ := strings.Cut(rest, "/")
	u.Path = path
	if i := strings.LastIndex(hosts, "@"); i >= 0 {
		user, pass, hasPass := strings.Cut(hosts[:i], ":")
		var err error
		if u.User, err = url.PathUnescape(user); err != nil {
			return u, errors.New("its user name cannot be decoded")
		}
		if u.Password, err = url.PathUnescape(pass); err != nil {
			return u, errors.New("its password cannot be decoded")
		}
		u.HasUser, u.HasPassword = true, hasPass
		hosts = hosts[i+1:]
	}
	if hosts != "" {
		u.Hosts = strings.Split(hosts, ",")
	}
	q, err := ParseQuery(query)
	u.Query = q
	return u, err
}

// ParseQuery reads a URL's query, each parameter given once. Its errors
// never quote the query.
func ParseQuery(raw string) (map[string]string, error) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, errors.New("its query cannot be parsed")
	}
	m := make(map[string]string, len(q))
	for k, v := range q {
		if len(v) != 1 {
			return nil, errors.New("give each parameter once")
		}
		m[k] = v[0]
	}
	return m, nil
}

// URLParam is a query parameter a store's URL takes, and what it sets.
type URLParam struct {
	Name string
	Set  func(v string) error
}

// Params hands each query parameter to the URLParam of its name; a name
// not among params is refused, naming those taken (what is "an etcd URL",
// the error says "an etcd URL takes the parameters a, b and c").
func (u HostsURL) Params(what string, params ...URLParam) error {
	return SetParams(u.Query, what, params...)
}

// SetParams is Params for a query read with ParseQuery.
func SetParams(query map[string]string, what string, params ...URLParam) error {
	for k, v := range query {
		i := slices.IndexFunc(params, func(p URLParam) bool { return p.Name == k })
		if i < 0 {
			names := make([]string, len(params))
			for n, p := range params {
				names[n] = p.Name
			}
			if len(names) == 1 {
				return errors.New(what + " takes the parameter " + names[0])
			}
			return errors.New(what + " takes the parameters " + strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1])
		}
		if err := params[i].Set(v); err != nil {
			return err
		}
	}
	return nil
}

// URLBool reads a true/false query parameter.
func URLBool(name, v string) (bool, error) {
	switch v {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, errors.New(name + " must be true or false")
}

// URLDuration reads a positive duration query parameter.
func URLDuration(name, v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, errors.New(name + " must be a positive Go duration such as 5s")
	}
	return d, nil
}

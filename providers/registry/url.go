package registry

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/electd/electd/providers"
)

// FromURL reads a provider from one URL (`electd lock -provider URL`): the
// type whose URLForm lists the URL's scheme parses it, and its settings'
// Validate runs. It returns the type's name and the settings. Its errors
// never quote the URL, which may hold a password.
func FromURL(raw string) (typ string, s providers.Settings, err error) {
	scheme, _, ok := strings.Cut(raw, ":")
	scheme = strings.ToLower(scheme)
	if !ok || scheme == "" || strings.Trim(scheme, "abcdefghijklmnopqrstuvwxyz0123456789+.-") != "" {
		return "", nil, fmt.Errorf("the provider is not a URL: write one of %s", strings.Join(Schemes(), ", "))
	}
	for name, t := range Types() {
		if t.URL == nil || !slices.Contains(t.URL.Schemes, scheme) {
			continue
		}
		s, err := t.URL.Parse(raw)
		if err == nil {
			err = s.Validate()
		}
		if err != nil {
			return name, nil, fmt.Errorf("invalid %s URL: %w (write %s)", scheme, err, t.URL.Example)
		}
		return name, s, nil
	}
	return "", nil, fmt.Errorf("no lease store of this build has URLs %s://...: write one of %s", scheme, strings.Join(Schemes(), ", "))
}

// Schemes are the URL schemes of every provider type that has a URL form,
// sorted, as "scheme://".
func Schemes() []string {
	var out []string
	for _, t := range Types() {
		if t.URL == nil {
			continue
		}
		for _, s := range t.URL.Schemes {
			out = append(out, s+"://")
		}
	}
	sort.Strings(out)
	return out
}

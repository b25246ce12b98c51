package datastore

import (
	"errors"
	"net/url"
	"strings"

	"github.com/electd/electd/providers"
)

// urlForm is how a datastore provider is written as one URL (`electd lock
// -provider URL`): the project, then the namespace as the path.
//
//	datastore://PROJECT[/NAMESPACE][?kind=ElectdLease&credentials_file=/etc/electd/sa.json]
//
// Without credentials_file the client uses the application default
// credentials; DATASTORE_EMULATOR_HOST points it at an emulator.
func urlForm() *providers.URLForm {
	return &providers.URLForm{
		Schemes: []string{"datastore"},
		Example: "datastore://PROJECT[/NAMESPACE][?kind=KIND&credentials_file=PATH]",
		Parse:   fromURL,
	}
}

func fromURL(raw string) (providers.Settings, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("it cannot be parsed as a URL")
	}
	if u.User != nil || u.Port() != "" {
		return nil, errors.New("a datastore URL names a project, not a server: write datastore://PROJECT/NAMESPACE")
	}
	s := &Settings{ProjectID: u.Host, Kind: DefaultKind}
	s.Namespace = strings.TrimPrefix(u.Path, "/")
	q, err := providers.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, err
	}
	err = providers.SetParams(q, "a datastore URL",
		providers.URLParam{Name: "kind", Set: func(v string) error { s.Kind = v; return nil }},
		providers.URLParam{Name: "credentials_file", Set: func(v string) error { s.CredentialsFile = v; return nil }})
	if err != nil {
		return nil, err
	}
	return s, nil
}

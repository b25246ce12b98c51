package etcd

import (
	"errors"

	"github.com/electd/electd/providers"
)

// urlForm is how an etcd provider is written as one URL (`electd lock
// -provider URL`):
//
//	etcd://[user:PASSWORD@]host:2379[,host:2379,...][?prefix=/electd/&tls=true&dial_timeout=5s]
//
// tls=true reaches the endpoints over https, as https:// endpoints of a
// block do.
func urlForm() *providers.URLForm {
	return &providers.URLForm{
		Schemes: []string{"etcd"},
		Example: "etcd://[user:PASSWORD@]host:2379[,host2:2379,...][?prefix=/electd/]",
		Parse:   fromURL,
	}
}

func fromURL(raw string) (providers.Settings, error) {
	u, err := providers.ParseHostsURL(raw)
	if err != nil {
		return nil, err
	}
	if u.Path != "" {
		return nil, errors.New("an etcd URL has no path: give the key prefix as ?prefix=/electd/")
	}
	s := &Settings{Prefix: DefaultPrefix, DialTimeout: DefaultDialTimeout, Username: u.User, Password: u.Password}
	scheme := ""
	err = u.Params("an etcd URL",
		providers.URLParam{Name: "prefix", Set: func(v string) error { s.Prefix = v; return nil }},
		providers.URLParam{Name: "dial_timeout", Set: func(v string) (err error) {
			s.DialTimeout, err = providers.URLDuration("dial_timeout", v)
			return err
		}},
		providers.URLParam{Name: "tls", Set: func(v string) error {
			tls, err := providers.URLBool("tls", v)
			if tls {
				scheme = "https://"
			}
			return err
		}})
	if err != nil {
		return nil, err
	}
	if len(u.Hosts) == 0 {
		return nil, errors.New("it names no endpoint")
	}
	for _, h := range u.Hosts {
		s.Endpoints = append(s.Endpoints, scheme+h)
	}
	return s, nil
}

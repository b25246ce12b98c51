package etcd

import (
	"errors"
	"net/url"
	"strings"
	"time"

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
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, errors.New("write etcd://host:port")
	}
	s := &Settings{Prefix: DefaultPrefix, DialTimeout: DefaultDialTimeout}
	rest, query, _ := strings.Cut(rest, "?")
	hosts, path, _ := strings.Cut(rest, "/")
	if path != "" {
		return nil, errors.New("an etcd URL has no path: give the key prefix as ?prefix=/electd/")
	}
	// The userinfo ends at the last "@": an unencoded password may hold one.
	if i := strings.LastIndex(hosts, "@"); i >= 0 {
		user, pass, _ := strings.Cut(hosts[:i], ":")
		var err error
		if s.Username, err = url.PathUnescape(user); err != nil {
			return nil, errors.New("its user name cannot be decoded")
		}
		if s.Password, err = url.PathUnescape(pass); err != nil {
			return nil, errors.New("its password cannot be decoded")
		}
		hosts = hosts[i+1:]
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, errors.New("its query cannot be parsed")
	}
	scheme := ""
	for k, v := range q {
		if len(v) != 1 {
			return nil, errors.New("give each parameter once")
		}
		switch k {
		case "prefix":
			s.Prefix = v[0]
		case "dial_timeout":
			if s.DialTimeout, err = time.ParseDuration(v[0]); err != nil || s.DialTimeout <= 0 {
				return nil, errors.New("dial_timeout must be a positive Go duration such as 5s")
			}
		case "tls":
			switch v[0] {
			case "true":
				scheme = "https://"
			case "false":
			default:
				return nil, errors.New("tls must be true or false")
			}
		default:
			return nil, errors.New("an etcd URL takes the parameters prefix, dial_timeout and tls")
		}
	}
	if hosts == "" {
		return nil, errors.New("it names no endpoint")
	}
	for _, h := range strings.Split(hosts, ",") {
		s.Endpoints = append(s.Endpoints, scheme+h)
	}
	return s, nil
}

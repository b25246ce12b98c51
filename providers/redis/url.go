package redis

import (
	"errors"
	"strconv"
	"strings"

	"github.com/electd/electd/providers"
)

// urlForm is how a redis provider is written as one URL (`electd lock
// -provider URL`), as go-redis and redis-cli write it, with a list of
// hosts for Redlock:
//
//	redis://[user:PASSWORD@]host:6379[,host:6379,...][/db][?prefix=electd:]
//
// rediss:// turns TLS on.
func urlForm() *providers.URLForm {
	return &providers.URLForm{
		Schemes: []string{"redis", "rediss"},
		Example: "redis://[user:PASSWORD@]host:6379[,host2:6379,host3:6379][/db]",
		Parse:   fromURL,
	}
}

func fromURL(raw string) (providers.Settings, error) {
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, errors.New("write redis://host:port")
	}
	u, err := providers.ParseHostsURL(raw)
	if err != nil {
		return nil, err
	}
	s := &Settings{Prefix: DefaultPrefix, TLS: strings.EqualFold(scheme, "rediss"), Username: u.User, Password: u.Password}
	if s.Username != "" && s.Password == "" {
		return nil, errors.New("a user name is sent with a password (redis://user:PASSWORD@host:6379)")
	}
	if len(u.Hosts) == 0 {
		return nil, errors.New("it names no host")
	}
	for _, h := range u.Hosts {
		if !strings.Contains(h, ":") || strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
			h += ":6379"
		}
		s.Addresses = append(s.Addresses, h)
	}
	if u.Path != "" {
		db, err := strconv.Atoi(u.Path)
		if err != nil || db < 0 {
			return nil, errors.New("its path must be a database number, such as /0")
		}
		s.DB = db
	}
	for k, v := range u.Query {
		if k != "prefix" {
			return nil, errors.New("a redis URL takes one parameter, prefix (the key prefix), once")
		}
		s.Prefix = v
	}
	return s, nil
}

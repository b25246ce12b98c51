package redis

import (
	"errors"
	"net/url"
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
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, errors.New("write redis://host:port")
	}
	s := &Settings{Prefix: DefaultPrefix, TLS: strings.EqualFold(scheme, "rediss")}
	rest, query, _ := strings.Cut(rest, "?")
	hosts, path, _ := strings.Cut(rest, "/")
	// The userinfo ends at the last "@": an unencoded password may hold one.
	if i := strings.LastIndex(hosts, "@"); i >= 0 {
		user, pass, hasPass := strings.Cut(hosts[:i], ":")
		var err error
		if s.Username, err = url.PathUnescape(user); err != nil {
			return nil, errors.New("its user name cannot be decoded")
		}
		if hasPass {
			if s.Password, err = url.PathUnescape(pass); err != nil {
				return nil, errors.New("its password cannot be decoded")
			}
		}
		hosts = hosts[i+1:]
	}
	if s.Username != "" && s.Password == "" {
		return nil, errors.New("a user name is sent with a password (redis://user:PASSWORD@host:6379)")
	}
	if hosts == "" {
		return nil, errors.New("it names no host")
	}
	for _, h := range strings.Split(hosts, ",") {
		if !strings.Contains(h, ":") || strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
			h += ":6379"
		}
		s.Addresses = append(s.Addresses, h)
	}
	if path != "" {
		db, err := strconv.Atoi(path)
		if err != nil || db < 0 {
			return nil, errors.New("its path must be a database number, such as /0")
		}
		s.DB = db
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, errors.New("its query cannot be parsed")
	}
	for k, v := range q {
		if k != "prefix" || len(v) != 1 {
			return nil, errors.New("a redis URL takes one parameter, prefix (the key prefix), once")
		}
		s.Prefix = v[0]
	}
	return s, nil
}

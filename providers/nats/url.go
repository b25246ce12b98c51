package nats

import (
	"errors"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/electd/electd/providers"
)

// urlForm is how a nats provider is written as one URL (`electd lock
// -provider URL`), as the NATS tools write a server URL, with a list of
// hosts for a cluster:
//
//	nats://[user:PASSWORD@|TOKEN@]host:4222[,host:4222,...][?bucket=electd&tls=true&credentials_file=/path&connect_timeout=5s]
//
// tls=true turns TLS on, as tls:// servers do in a block (the scheme tls://
// is too general to claim for one store).
func urlForm() *providers.URLForm {
	return &providers.URLForm{
		Schemes: []string{"nats"},
		Example: "nats://[user:PASSWORD@]host:4222[,host2:4222,...][?bucket=electd]",
		Parse:   fromURL,
	}
}

func fromURL(raw string) (providers.Settings, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, errors.New("write nats://host:4222")
	}
	if !strings.EqualFold(scheme, "nats") {
		return nil, errors.New("write nats://host:4222")
	}
	s := &Settings{Bucket: DefaultBucket, Replicas: 1, ConnectTimeout: DefaultConnectTimeout}
	rest, query, _ := strings.Cut(rest, "?")
	hosts, path, _ := strings.Cut(rest, "/")
	if path != "" {
		return nil, errors.New("a nats URL has no path: give the bucket as ?bucket=electd")
	}
	// The userinfo ends at the last "@": an unencoded password may hold one.
	if i := strings.LastIndex(hosts, "@"); i >= 0 {
		user, pass, hasPass := strings.Cut(hosts[:i], ":")
		u, err := url.PathUnescape(user)
		if err != nil {
			return nil, errors.New("its user name cannot be decoded")
		}
		if !hasPass {
			// nats://TOKEN@host, as the NATS tools read it.
			s.Token = u
		} else {
			s.User = u
			if s.Password, err = url.PathUnescape(pass); err != nil {
				return nil, errors.New("its password cannot be decoded")
			}
		}
		hosts = hosts[i+1:]
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, errors.New("its query cannot be parsed")
	}
	for k, v := range q {
		if len(v) != 1 {
			return nil, errors.New("give each parameter once")
		}
		switch k {
		case "bucket":
			s.Bucket = v[0]
		case "credentials_file":
			s.CredentialsFile = v[0]
		case "tls":
			switch v[0] {
			case "true":
				s.TLS = true
			case "false":
			default:
				return nil, errors.New("tls must be true or false")
			}
		case "connect_timeout":
			if s.ConnectTimeout, err = time.ParseDuration(v[0]); err != nil || s.ConnectTimeout <= 0 {
				return nil, errors.New("connect_timeout must be a positive Go duration such as 5s")
			}
		default:
			return nil, errors.New("a nats URL takes the parameters bucket, tls, credentials_file and connect_timeout")
		}
	}
	if hosts == "" {
		return nil, errors.New("it names no server: write nats://host:4222")
	}
	for _, h := range strings.Split(hosts, ",") {
		if _, _, err := net.SplitHostPort(h); err != nil && h != "" {
			h = net.JoinHostPort(strings.Trim(h, "[]"), "4222")
		}
		s.Servers = append(s.Servers, "nats://"+h)
	}
	return s, nil
}

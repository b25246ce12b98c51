package nats

import (
	"errors"
	"net"
	"strings"

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
	scheme, _, _ := strings.Cut(raw, "://")
	u, err := providers.ParseHostsURL(raw)
	if err != nil || !strings.EqualFold(scheme, "nats") {
		return nil, errors.New("write nats://host:4222")
	}
	if u.Path != "" {
		return nil, errors.New("a nats URL has no path: give the bucket as ?bucket=electd")
	}
	s := &Settings{Bucket: DefaultBucket, Replicas: 1, ConnectTimeout: DefaultConnectTimeout}
	switch {
	case u.HasUser && !u.HasPassword:
		s.Token = u.User // nats://TOKEN@host, as the NATS tools read it
	case u.HasUser:
		s.User, s.Password = u.User, u.Password
	}
	err = u.Params("a nats URL",
		providers.URLParam{Name: "bucket", Set: func(v string) error { s.Bucket = v; return nil }},
		providers.URLParam{Name: "tls", Set: func(v string) (err error) { s.TLS, err = providers.URLBool("tls", v); return err }},
		providers.URLParam{Name: "credentials_file", Set: func(v string) error { s.CredentialsFile = v; return nil }},
		providers.URLParam{Name: "connect_timeout", Set: func(v string) (err error) {
			s.ConnectTimeout, err = providers.URLDuration("connect_timeout", v)
			return err
		}})
	if err != nil {
		return nil, err
	}
	if len(u.Hosts) == 0 {
		return nil, errors.New("it names no server: write nats://host:4222")
	}
	for _, h := range u.Hosts {
		if _, _, err := net.SplitHostPort(h); err != nil && h != "" {
			h = net.JoinHostPort(strings.Trim(h, "[]"), "4222")
		}
		s.Servers = append(s.Servers, "nats://"+h)
	}
	return s, nil
}

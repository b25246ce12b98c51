package zookeeper

import (
	"errors"
	"net"

	"github.com/electd/electd/providers"
)

// urlForm is how a zookeeper provider is written as one URL (`electd lock
// -provider URL`), the ensemble as ZooKeeper's own connect string writes it:
//
//	zk://[user:PASSWORD@]host:2181[,host:2181,...][/root][?connect_timeout=10s]
//
// The path is the root znode (default /electd); user and password are
// digest credentials.
func urlForm() *providers.URLForm {
	return &providers.URLForm{
		Schemes: []string{"zk", "zookeeper"},
		Example: "zk://[user:PASSWORD@]host:2181[,host2:2181,...][/electd]",
		Parse:   fromURL,
	}
}

func fromURL(raw string) (providers.Settings, error) {
	u, err := providers.ParseHostsURL(raw)
	if err != nil {
		return nil, err
	}
	s := &Settings{Root: DefaultRoot, ConnectTimeout: DefaultConnectTimeout, Username: u.User, Password: u.Password}
	if u.Path != "" {
		s.Root = "/" + u.Path
	}
	err = u.Params("a zk URL", providers.URLParam{Name: "connect_timeout", Set: func(v string) (err error) {
		s.ConnectTimeout, err = providers.URLDuration("connect_timeout", v)
		return err
	}})
	if err != nil {
		return nil, err
	}
	if len(u.Hosts) == 0 {
		return nil, errors.New("it names no server: write zk://host:2181")
	}
	for _, h := range u.Hosts {
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(h, "2181")
		}
		s.Servers = append(s.Servers, h)
	}
	return s, nil
}

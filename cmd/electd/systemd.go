package main

import (
	"context"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/hashicorp/go-hclog"
)

// sdNotify tells systemd about the agent's state when it runs as a
// Type=notify unit (NOTIFY_SOCKET set); elsewhere it does nothing.
func sdNotify(log hclog.Logger, state string) {
	if ok, err := daemon.SdNotify(false, state); err != nil {
		log.Warn("cannot notify systemd", "state", state, "error", err)
	} else if ok {
		log.Debug("notified systemd", "state", state)
	}
}

// reloadingState is RELOADING=1 with the MONOTONIC_USEC that systemd 253+
// wants with it, so `systemctl reload` waits for the following READY=1.
func reloadingState() string {
	if m := daemon.SdNotifyMonotonicUsec(); m != "" {
		return daemon.SdNotifyReloading + "\n" + m
	}
	return daemon.SdNotifyReloading
}

// watchdog pings systemd at half of WatchdogSec while healthy() says every
// job loop is turning; a stuck loop stops the pings, so systemd restarts
// the agent. A store that does not answer does not stop them
// (agent.Wedged): a restart would not bring it back. It returns when ctx is done or no watchdog is asked for.
func watchdog(ctx context.Context, log hclog.Logger, healthy func() bool) {
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil || interval <= 0 {
		return
	}
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	warned := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !healthy() {
			if !warned {
				log.Error("a job loop is stuck: no longer pinging the systemd watchdog")
				warned = true
			}
			continue
		}
		warned = false
		sdNotify(log, daemon.SdNotifyWatchdog)
	}
}

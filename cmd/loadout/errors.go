package main

import "fmt"

func errNotBuilt(channel string) error {
	return fmt.Errorf("%s: this channel is not available in this build (set %s.enabled: false)", channel, channel)
}

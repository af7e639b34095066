package standalone

import "time"

// clock maps the wall clock to cluster time: from base, at wallBase,
// cluster time runs speed times faster than the wall clock. It starts
// where the store's clock stopped, so cluster time stands still while the
// server is down and never runs backwards.
type clock struct {
	epoch    time.Time // wall rendering of cluster time zero
	base     time.Duration
	wallBase time.Time
	speed    float64
	wall     func() time.Time
}

func (c *clock) now() time.Duration {
	return c.base + time.Duration(float64(c.wall().Sub(c.wallBase))*c.speed)
}

// wallUntil is how long the wall clock takes to reach cluster time t.
func (c *clock) wallUntil(t time.Duration) time.Duration {
	return time.Duration(float64(t-c.now()) / c.speed)
}

// at renders cluster time t as a timestamp.
func (c *clock) at(t time.Duration) time.Time { return c.epoch.Add(t).UTC() }

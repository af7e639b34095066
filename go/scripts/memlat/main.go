// Command memlat measures how long this machine takes to load memory it
// has not just read, for working sets of growing size. The week-1000
// benchmark reads every unfinished job at each of its 160,000 cycles: it
// ran in 37 s on one 2-core machine and in 82-104 s on another of the
// same kind, whose loads past a few megabytes took 150-190 ns
// (docs/mixed.md, "Simulation speed"). Run it before reading a speed
// figure of that benchmark:
//
//	go run ./scripts/memlat
//
// Each size is a slice of 8-byte slots linked into one random cycle, so
// each load depends on the one before and the hardware cannot guess the
// next address: the time per load is the memory's latency at that size.
package main

import (
	"flag"
	"fmt"
	"time"

	"partita.dev/partita/internal/random"
)

// cycle returns n slots linked into a single random cycle: following
// next from any slot visits every slot once before coming back. (Several
// short cycles would stay in the cache and measure it instead.)
func cycle(n int, rng *random.Rand) []int {
	order := rng.Perm(n)
	next := make([]int, n)
	for i := range order {
		next[order[i]] = order[(i+1)%n]
	}
	return next
}

// chase follows next for steps loads from slot 0 and returns where it
// ends, so that the loads cannot be left out.
func chase(next []int, steps int) int {
	p := 0
	for range steps {
		p = next[p]
	}
	return p
}

func main() {
	steps := flag.Int("steps", 20_000_000, "loads per size")
	flag.Parse()
	rng := random.New(1)
	for _, mb := range []int{1, 2, 4, 8, 16, 64, 256} {
		next := cycle(mb<<20/8, rng)
		start := time.Now()
		end := chase(next, *steps)
		ns := float64(time.Since(start).Nanoseconds()) / float64(*steps)
		fmt.Printf("%4d MB: %6.1f ns a load (ended at %d)\n", mb, ns, end)
	}
}

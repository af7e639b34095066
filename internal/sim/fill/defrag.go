package fill

import "partita.dev/partita/internal/cluster"

// makeRoom is the beyond-the-protocol mode: it may move already-placed
// shares to make room for a pod that fits nowhere. Not written yet.
func (w *world) makeRoom(p Pod) (cluster.Assignment, bool) { return cluster.Assignment{}, false }

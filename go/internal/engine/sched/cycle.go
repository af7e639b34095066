package sched

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine"
	"partita.dev/partita/internal/random"
	"partita.dev/partita/internal/workload"
)

// searchBackoffFor is how long a job waits for its next victim search
// after one found nothing.
const searchBackoffFor = 2 * time.Minute

// urgentBackoffFor is the same for production and guarantee claims.
const urgentBackoffFor = 15 * time.Second

// freeRounds preemption rounds a job may make without starting before its
// searches back off, up to maxRoundBackoff.
const (
	freeRounds      = 3
	maxRoundBackoff = time.Hour
)

// Scheduler runs cycles for one configuration.
type Scheduler struct {
	cfg    Config
	placer *engine.Placer
	// promised maps a job to the victims preempted for it; while any is
	// still terminating the job waits instead of preempting again.
	promised      map[string][]string
	promisedNodes map[string]map[string]bool // the nodes each promised job will use
	// moving maps a job to the old places of the replicas moved for it
	// (migrate.go); moveBackoff holds off its next search after one that
	// found nothing.
	moving      map[string][]moveRef
	moveBackoff map[string]time.Duration
	// movedAt is when a service last had a replica moved: it is not moved
	// again within moveCooldown (two claims, or one claim's plans at the
	// same instant, moved one replica back and forth without end).
	movedAt map[string]time.Duration
	// reservation is the gang holding nodes, if any.
	reservation *reservation
	// lastChange is when each GPU was last re-partitioned, and awaiting the
	// changes asked for each job (forgotten once none is under way when
	// the job is looked at, or the job is gone).
	lastChange map[gpuRef]time.Duration
	awaiting   map[string][]askedChange
	// attempts counts changes asked for a job in a row; after two that did
	// not let it start, backoff holds off more until the cooldown passes.
	attempts map[string]int
	backoff  map[string]time.Duration
	// quotaHold maps a team to the gang holding its quota (holdQuota).
	quotaHold map[string]string
	// recent holds when production work started on each MIG profile, for
	// the warm pool (warm.go), and lastWarm when it last ran.
	recent   map[warmKey][]time.Duration
	lastWarm time.Duration
	// byID indexes the jobs of the input by ID (cycle.job), kept across
	// cycles; entries of jobs gone are pruned now and then.
	byID   map[string]*Job
	cycles int
	// liveFrom is the cycle of the last recount: a job's entry seen
	// since is of a job of the input, unless the job was gone since
	// (Input.Gone). kept holds the sums an incremental input updates.
	liveFrom int
	kept     kept
	// searchBackoff holds off a job's next victim search after one that
	// found nothing: the running work rarely changes enough in a minute.
	searchBackoff map[string]time.Duration
	// owedSince is when each pending job within its team's guarantee was
	// first seen so (protectionLapsed).
	owedSince map[string]time.Duration
	// borrowerMovesAt: no move search for borrowed work before then
	// (MoveForWholeNodes; one that failed holds off the next).
	borrowerMovesAt time.Duration
	// noVictimsUntil is the same for every job of a preemptKey.
	noVictimsUntil map[int]time.Duration
	// keyIDs numbers the memo and search keys (shapeEntry.ids): a map
	// keyed by number is cheaper than one keyed by the key, which is
	// hashed at every look-up, for each queued job, every cycle.
	keyIDs  map[string]int
	nextKey int
	// reqCache holds each pending job's prepared requests (requests).
	reqCache map[string]reqEntry
	// rounds counts a job's preemptions since it last started: a job
	// whose evictions keep not leading to its start (someone else takes
	// the room, the quota moved) must not evict the same work again and
	// again. Past freeRounds, each round backs its next search off twice
	// as long.
	rounds map[string]int
	// roundsUntil is when a job past freeRounds may evict again, by a
	// victim search or by a move plan that evicts (countRound).
	roundsUntil map[string]time.Duration
	// capacity is the cluster's capacity for validating jobs, for the node
	// set capacityFor: a light cycle for one new job would otherwise read
	// every node.
	capacity    *workload.Capacity
	capacityFor *cluster.NodeSet
	// orderKeys and orderOut are order's arrays, reused from cycle to
	// cycle: a backlog's were an eighth of what a week-1000 run allocates.
	orderKeys []orderKey
	orderOut  []*Job
	// groupOrder's arrays, reused the same way.
	orderGroups                          []orderGroup
	orderGroupOf, orderUsed, orderStarts []int
	orderSorted                          []orderKey
}

// orderKey is a pending job with its keys in the cycle's order, each
// copied from the job: the sort compares every two jobs many times, and
// reading them from the jobs was a miss each (a tenth of a week-1000 run).
type orderKey struct {
	j         *Job
	within    bool
	holds     bool
	share     float64
	class     workload.Class
	team, id  string
	submitted time.Duration
}

// capacityOf returns engine.CapacityOf(st), cached while the nodes stay
// the same.
func (s *Scheduler) capacityOf(st *cluster.State) *workload.Capacity {
	if s.capacity == nil || s.capacityFor != st.NodeSet() {
		s.capacity, s.capacityFor = engine.CapacityOf(st), st.NodeSet()
	}
	return s.capacity
}

func firstTask(j *Job) *workload.Task {
	if len(j.Spec.Tasks) == 0 {
		return nil
	}
	return &j.Spec.Tasks[0]
}

type gpuRef struct {
	node  string
	index int
}

// New builds a scheduler. rng is its only source of randomness.
func New(cfg Config, rng *random.Rand) *Scheduler {
	p := engine.NewPlacer(cfg.Placement, rng)
	p.SetHeadroom(cfg.Headroom)
	p.SetMIGOnly(cfg.MIG)
	p.SetBriefFailures(true) // a cycle only asks whether a job fits
	return &Scheduler{
		cfg: cfg, placer: p,
		promised: map[string][]string{}, promisedNodes: map[string]map[string]bool{}, lastChange: map[gpuRef]time.Duration{},
		moving: map[string][]moveRef{}, moveBackoff: map[string]time.Duration{}, movedAt: map[string]time.Duration{},
		awaiting: map[string][]askedChange{},
		attempts: map[string]int{}, backoff: map[string]time.Duration{},
		quotaHold: map[string]string{}, recent: map[warmKey][]time.Duration{},
		byID: map[string]*Job{}, searchBackoff: map[string]time.Duration{}, owedSince: map[string]time.Duration{},
		rounds: map[string]int{}, roundsUntil: map[string]time.Duration{}, noVictimsUntil: map[int]time.Duration{}, keyIDs: map[string]int{},
		reqCache: map[string]reqEntry{},
	}
}

// Config returns the scheduler's configuration.
func (s *Scheduler) Config() Config { return s.cfg }

// cycle is the working state of one Cycle call.
type cycle struct {
	sch *Scheduler
	in  Input
	st  *cluster.State // the plan so far, on a clone
	// use is the GPU milli each team of the input holds, by its position
	// there (teamPos); useOther the same for teams not in the input. (A
	// map by name was a twentieth of a week-1000 run: the backlog asks
	// for its team's usage several times a job, every cycle.)
	use      []int64
	useOther map[string]int64
	// inFlight is the demand of each team's jobs promised nodes
	// (withinGuarantee), by position, computed when first needed; nil
	// after a promise is made or kept.
	inFlight []int64
	d        Decision
	capacity *workload.Capacity
	// failed remembers job shapes that fitted nowhere this cycle: within a
	// cycle resources only shrink, so they would fail again. noVictims
	// does the same for victim searches that found nothing, and searches
	// counts them (maxSearches).
	failed    map[int]string
	noVictims map[int]bool
	searches  int
	// moved: a search for replicas to move ran this cycle (one a cycle);
	// ownerOf maps each placed task to its job (migrate.go).
	moved   bool
	ownerOf map[moveRef]taskOf
	// gpuBase[i] is the number of GPUs on the plan's nodes before node i
	// (one past the last at the end), gpuCount a count per GPU in that
	// numbering: wholeRoomAfter's, made on first use (gpuCounts).
	gpuBase, gpuCount []int
	// pinned is the nodes with MIG work that cannot move
	// (pinnedSliceNodes), once pinnedOK.
	pinned   map[string]bool
	pinnedOK bool
	// idleMIG lists the nodes with an idle MIG GPU migOffFor could turn
	// whole (anyIdleMIG), until the plan changes.
	idleMIG   []int
	idleMIGOK bool
	// endsBy[i] is when the last running job on node i (by position in
	// the input's cluster) is expected to end, endUnknown[i] whether one
	// has no estimate: a reservation's ready time (readyAt).
	endsBy     []time.Duration
	endUnknown []bool
	// lowest is the lowest class each team runs (mayPreempt), computed
	// when first needed; mayMemo is mayPreempt's answers until the plan
	// changes, by mayIndex: 0 not known, 1 no, 2 yes.
	lowest  []teamLow
	mayMemo []int8
	// quotaReady caches quotaReadyAt by gang ID.
	quotaReady map[string]time.Duration
	// free and migGPUs are freeMilli of the plan, computed when first
	// needed (free -1, also after each change of the plan); leavesByFree
	// the same (leaves).
	free, migGPUs int64
	leavesByFree  []string
	leavesOK      bool
}

// planChanged forgets what was computed from the plan.
func (c *cycle) planChanged() {
	c.free = -1
	c.leavesOK = false
	clear(c.mayMemo)
	c.idleMIGOK = false
}

// preemptKey identifies jobs whose victim searches would find the same:
// the same shape, class, team standing.
func (s *Scheduler) preemptKey(c *cycle, j *Job) int {
	if s.protectionLapsed(c, j) {
		return s.shape(j).ids[2] // it may evict what the others may not
	}
	return s.shape(j).ids[boolIndex(withinGuarantee(c, j))]
}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Cycle decides what to start, preempt and re-partition now.
//
//  1. Snapshot: plan on a clone of the cluster; count what each team holds.
//  2. Order: pending jobs by class, then fairness, then age.
//  3. For each job: quota check, then place (all tasks at once for a
//     gang), honouring a gang's reservation.
//  4. A job that does not fit may get a MIG re-partition, preempt
//     victims, or (a gang that has waited long) reserve nodes.
func (s *Scheduler) Cycle(in Input) Decision {
	c := s.snapshot(in)
	s.settlePromises(c)
	s.refreshReservation(c)
	if in.Only != nil {
		seen := map[string]bool{}
		for _, id := range in.Only {
			if seen[id] {
				continue
			}
			seen[id] = true
			if j, ok := c.job(id); ok && j.Phase == Pending {
				if reason := s.consider(c, j); reason != "" {
					c.d.Waiting[id] = Wait{Reason: reason}
					s.noteRetry(c, j)
				}
			}
		}
		s.noteStarts(c)
		return c.d
	}
	pending := s.order(c)
	if len(c.d.Waiting) == 0 {
		if in.Waiting != nil {
			clear(in.Waiting)
			c.d.Waiting = in.Waiting
		} else {
			c.d.Waiting = make(map[string]Wait, len(pending)) // grown by thousands otherwise
		}
	}
	// Queue positions per team, counted by the team's position in the
	// input (not a map update per pending job); teams not in the input in
	// a map.
	positions, others := make([]int, len(in.Teams)), map[string]int{}
	count := func(j *Job, d int) int {
		if t := j.held.team; t >= 0 {
			positions[t] += d
			return positions[t]
		}
		others[j.Spec.Team] += d
		return others[j.Spec.Team]
	}
	for _, j := range pending {
		pos := count(j, 1)
		if reason := s.consider(c, j); reason != "" {
			c.d.Waiting[j.ID()] = Wait{Position: pos, Reason: reason}
			s.noteRetry(c, j)
		} else {
			count(j, -1)
		}
	}
	clear(pending) // order's array, kept for the next cycle
	s.warm(c)
	return c.d
}

func (s *Scheduler) snapshot(in Input) *cycle {
	c := &cycle{
		sch: s, in: in, free: -1, st: in.Cluster.Scratch(), useOther: map[string]int64{},
		d: Decision{Waiting: map[string]Wait{}}, failed: map[int]string{},
		noVictims: map[int]bool{},
	}
	s.cycles++
	// Jobs gone linger in byID; drop them now and then, and as soon as
	// they outnumber the live ones: a world that builds its Jobs anew each
	// cycle (Kubernetes does) indexes each job again every cycle.
	prune := s.cycles%256 == 0 || len(s.byID) > 2*len(in.Jobs)+1024
	if in.Incremental && s.kept.fits(in) {
		s.applyChanges(c)
	} else {
		s.recount(c)
	}
	if prune {
		for id, j := range s.byID {
			if !s.live(&j.held) || j.ID() != id {
				delete(s.byID, id)
			}
		}
		s.forgetGone(c)
	}
	return c
}

// recount reads every job of the input: what each holds, what each team
// holds, when each node's running work ends. With Input.Incremental it
// also keeps those sums for the next cycles (incremental.go).
func (s *Scheduler) recount(c *cycle) {
	in := c.in
	s.liveFrom = s.cycles
	c.use = make([]int64, len(in.Teams))
	c.endsBy, c.endUnknown = make([]time.Duration, in.Cluster.Len()), make([]bool, in.Cluster.Len())
	k := &s.kept
	if in.Incremental {
		k.reset(in)
	} else if k.ok {
		*k = kept{}
	}
	for _, j := range in.Jobs {
		s.refresh(c, j)
		e := &j.held
		if j.Phase != Pending {
			// Read here, with the rest of the job, rather than when a
			// reservation asks (readyAt): it asks in most cycles of a
			// backlog, and a second pass over the jobs cost more.
			for _, i := range e.nodes {
				addEnd(c.endsBy, c.endUnknown, i, j)
			}
		}
		if e.milli > 0 {
			if e.team >= 0 {
				c.use[e.team] += e.milli
			} else {
				c.useOther[j.Spec.Team] += e.milli
			}
		}
		if in.Incremental {
			k.add(j)
		}
	}
	if in.Incremental {
		k.take(c)
	}
}

// refresh brings j's entry up to date with the input: indexed by ID,
// what it holds recomputed when its placement changed, seen this cycle,
// its team's position.
func (s *Scheduler) refresh(c *cycle, j *Job) {
	in := c.in
	e := &j.held
	if e.owner != s {
		// A Job not seen before: index it by ID. (Rebuilding that
		// index every cycle was a tenth of a cycle on a backlog.)
		s.byID[j.ID()] = j
		e.owner = nil
	}
	if e.owner == nil || e.set != in.Cluster.NodeSet() || !e.holds(j.Placed) {
		*e = heldEntry{owner: s, tasks: len(j.Placed), set: in.Cluster.NodeSet()}
		if !noneOf(j.Placed) {
			e.placed = append(e.small[:0:len(e.small)], j.Placed...)
			e.slices = onSlices(j)
		}
		for _, a := range j.Placed {
			if a == nil {
				continue
			}
			if i, ok := in.Cluster.Lookup(a.Node); ok {
				e.milli += int64(a.GPUMilli(in.Cluster.Node(i)))
				if !slices.Contains(e.nodes, i) {
					e.nodes = append(e.nodes, i)
				}
			}
		}
	}
	e.seen = s.cycles
	// The team's position in the input, which the entry remembers:
	// sums and counts per team by position, not through a map
	// updated for each of thousands of jobs.
	if t := e.team; t < 0 || t >= len(in.Teams) || in.Teams[t].Name != j.Spec.Team {
		e.team = c.posOf(j.Spec.Team)
	}
}

// live says whether e is the entry of a job of this cycle's input.
func (s *Scheduler) live(e *heldEntry) bool {
	return e.owner == s && e.seen >= s.liveFrom
}

// job returns the job of the input with that ID.
func (c *cycle) job(id string) (*Job, bool) {
	j, ok := c.sch.byID[id]
	if !ok {
		return nil, false
	}
	if !c.sch.live(&j.held) {
		return nil, false // gone, or replaced by another Job of that ID
	}
	return j, true
}

// heldOf is the GPU milli j holds (j from the input).
func (c *cycle) heldOf(j *Job) int64 {
	if e := &j.held; e.owner == c.sch {
		return e.milli
	}
	return 0
}

// pinnedNodes is c.pinned, computed once a cycle when first asked
// (pinnedSliceNodes): the nodes where running work other than
// production holds MIG instances.
func (c *cycle) pinnedNodes() map[string]bool {
	if c.pinnedOK {
		return c.pinned
	}
	c.pinnedOK = true
	for _, j := range c.in.Jobs {
		if e := &j.held; j.Phase != Pending && j.Spec.Class != workload.Production && e.milli > 0 && e.slices {
			if c.pinned == nil {
				c.pinned = map[string]bool{}
			}
			for _, i := range e.nodes {
				c.pinned[c.in.Cluster.Node(i).Name] = true
			}
		}
	}
	return c.pinned
}

// teamPos is the position of j's team in the input, -1 when it is not
// there: the snapshot's entry remembers it for every job of the input.
func (c *cycle) teamPos(j *Job) int {
	if e := &j.held; c.sch.live(e) {
		return e.team
	}
	return c.posOf(j.Spec.Team)
}

// posOf is the position of a team in the input, -1 when it is not there.
func (c *cycle) posOf(team string) int { return teamIndex(c.in, team) }

// teamOf is j's team, nil when it is not in the input.
func (c *cycle) teamOf(j *Job) *Team {
	if p := c.teamPos(j); p >= 0 {
		return &c.in.Teams[p]
	}
	return nil
}

// usageOf is the GPU milli j's team holds in the plan.
func (c *cycle) usageOf(j *Job) int64 {
	if p := c.teamPos(j); p >= 0 {
		return c.use[p]
	}
	return c.useOther[j.Spec.Team]
}

// addUsage counts milli more held by j's team.
func (c *cycle) addUsage(j *Job, milli int64) {
	if p := c.teamPos(j); p >= 0 {
		c.use[p] += milli
	} else {
		c.useOther[j.Spec.Team] += milli
	}
}

// heldEntry is what a job holds, with the assignments it was computed
// from: an assignment does not change once placed, so the sum holds while
// the job's assignments are the same ones.
type heldEntry struct {
	owner  *Scheduler            // the scheduler that computed it
	tasks  int                   // len(Placed)
	placed []*cluster.Assignment // nil when no task holds anything
	// small holds placed for jobs of up to four tasks (most services):
	// compared every cycle, in the entry it costs one memory read the
	// fewer (samePlacement was a twentieth of a week-1000 run).
	small  [4]*cluster.Assignment
	set    *cluster.NodeSet // the node set nodes index
	seen   int              // the last cycle whose input had the job
	milli  int64
	nodes  []int // the nodes the job holds, by position in the cluster
	team   int   // the job's team's position in the input (-1: none), when last seen
	slices bool  // a task holds a MIG instance (onSlices)
	// heldOff: a search or re-partition backoff was set while the job
	// was beyond its team's guarantee (clearOnClaim).
	heldOff bool
	// Caches of the job with this placement, each with the first task of
	// the task list it was computed for (a world may rebuild a job under
	// the same ID with other tasks): its shape, and its validation.
	shape      shapeEntry     // in the entry, not behind a pointer: read for every queued job
	shapeFor   *workload.Task // nil: shape not computed
	checked    bool
	checkedFor *workload.Task
	why        string
}

// holds reports whether placed is the placement e was computed from.
// Of a job with nothing placed (most of a backlog) e keeps no copy, and
// only placed is read.
func (e *heldEntry) holds(placed []*cluster.Assignment) bool {
	if len(placed) != e.tasks {
		return false
	}
	if e.placed == nil {
		return noneOf(placed)
	}
	return samePlacement(e.placed, placed)
}

// noneOf reports whether no task holds anything.
func noneOf(placed []*cluster.Assignment) bool {
	for _, a := range placed {
		if a != nil {
			return false
		}
	}
	return true
}

// samePlacement reports whether a and b hold the same assignments, task
// by task.
func samePlacement(a, b []*cluster.Assignment) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// settlePromises forgets promises whose victims have all left. The nodes
// of a settled promise stay held for one cycle, the one in which the job
// can take them, or for as long as a MIG change asked for the job is
// applied; after that they are freed whether it started or not. (Freed
// while the change ran, the victims' GPUs went back to the victims, and
// the job evicted them again when the change was done.)
func (s *Scheduler) settlePromises(c *cycle) {
	for job := range s.promisedNodes {
		_, open := s.promised[job]
		_, moving := s.moving[job]
		if !open && !moving && !s.changePending(c, job) {
			delete(s.promisedNodes, job)
		}
	}
	for job, refs := range s.moving {
		if j, ok := c.job(job); !ok || j.Phase != Pending {
			delete(s.moving, job)
			delete(s.promisedNodes, job)
			continue
		}
		if s.movesDone(c, refs) {
			delete(s.moving, job) // its nodes stay held for this cycle, as below
		}
	}
	for job, victims := range s.promised {
		j, ok := c.job(job)
		if !ok || j.Phase != Pending {
			delete(s.promised, job)
			delete(s.promisedNodes, job)
			continue
		}
		alive := victims[:0]
		for _, v := range victims {
			if vj, ok := c.job(v); ok && vj.Phase == Terminating {
				alive = append(alive, v)
			}
		}
		if len(alive) == 0 {
			delete(s.promised, job)
			// The nodes stay held for this cycle: the job is considered
			// in its turn and takes them; commit or the next settle frees
			// them.
		} else {
			s.promised[job] = alive
		}
	}
}

// consider tries to start one pending job; it returns why it waits, or ""
// when it started.
func (s *Scheduler) consider(c *cycle, j *Job) string {
	if why := s.invalid(c, j); why != "" {
		return why
	}
	s.clearOnClaim(c, j)
	s.noteOwed(c, j)
	if !s.withinQuota(c, j) {
		s.holdQuota(c, j)
		return WaitQuota
	}
	if _, waiting := s.promised[j.ID()]; waiting {
		s.wholeDuringGrace(c, j)
		return WaitPreempting
	}
	if _, waiting := s.moving[j.ID()]; waiting {
		return WaitMoving
	}
	if r := s.cfg.ProductionReserve; r > 0 && reserveHolds(c, j) {
		if c.freeNow()-c.demandOf(j) < r {
			return WaitProdReserve
		}
	}
	// Besides the shape, the class and team decide (holds, reservations,
	// guarantees), and whether j may backfill before a reservation. (Not
	// the estimate itself: with it in the key, no two jobs shared one, and
	// a backlog of thousands cost a placement each, every cycle.)
	key := s.shape(j).ids[boolIndex(s.backfills(c, j))]
	why, failed := c.failed[key]
	if s.holdsNodes(j) {
		// Nodes kept for j (its promise, its reservation) were closed to
		// the jobs that failed before it: its own attempt is different.
		failed = false
	}
	if failed {
		if !s.cfg.Gangs {
			return why
		}
		if _, due := s.searchDue(c, j); !due {
			return why
		}
	}
	reqs, err := s.requests(j)
	if err != nil {
		return WaitInvalidSpec + ": " + err.Error()
	}
	if failed {
		// Within a cycle room only shrinks: placing or re-partitioning
		// would fail again. Only evicting someone can change the answer.
		if w := s.searchVictims(c, j, reqs); w != "" {
			return w
		}
		return why
	}
	if !s.cfg.Gangs {
		why := s.placeOneByOne(c, j, reqs)
		if why == WaitNoRoom {
			c.failed[key] = why
		}
		return why
	}
	idx := pendingTasks(j)
	if !j.Spec.IsGang() && len(reqs) > 1 {
		// Replicas that need not start together: start each that fits.
		var left []*engine.Request
		for k, r := range reqs {
			if !s.tryStart(c, j, idx[k:k+1], reqs[k:k+1]) {
				left = append(left, r)
			}
		}
		if len(left) == 0 {
			return ""
		}
		reqs = left
	} else if s.tryStart(c, j, idx, reqs) {
		return ""
	}
	why = s.afterMiss(c, j, reqs)
	if why == WaitNoRoom || why == WaitGang || why == WaitNoSlice || why == WaitReserved {
		c.failed[key] = why
	}
	return why
}

// invalid is why j can never run on the cluster, or "". A job is
// validated once (again if rebuilt with other tasks, or placed anew).
func (s *Scheduler) invalid(c *cycle, j *Job) string {
	e := s.entry(j)
	if e != nil && e.checked && e.checkedFor == firstTask(j) {
		return e.why
	}
	if c.capacity == nil { // only new jobs need it
		c.capacity = s.capacityOf(c.in.Cluster)
	}
	why := ""
	if err := j.Spec.Validate(c.capacity); err != nil {
		why = WaitInvalidSpec + ": " + err.Error()
	}
	if e != nil {
		e.checked, e.checkedFor, e.why = true, firstTask(j), why
	}
	return why
}

// requests prepares the pending tasks of a job.
func (s *Scheduler) requests(j *Job) ([]*engine.Request, error) {
	// Cached by the set of pending tasks (jobs of up to 64 tasks): a
	// backlog asks for the same requests every cycle.
	ts, cacheable := pendingSet(j)
	if e, ok := s.reqCache[j.ID()]; ok && cacheable && e.id == ts {
		return append([]*engine.Request(nil), e.reqs...), nil
	}
	var reqs []*engine.Request
	for i, t := range j.Spec.Tasks {
		if i < len(j.Placed) && j.Placed[i] != nil {
			continue
		}
		r, err := s.placer.Request(t)
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, r)
	}
	if cacheable {
		s.reqCache[j.ID()] = reqEntry{ts, reqs}
	}
	return append([]*engine.Request(nil), reqs...), nil
}

type reqEntry struct {
	id   taskSet
	reqs []*engine.Request
}

// pendingTasks lists the indexes of j's tasks not started yet, in the
// order requests returns their requests.
func pendingTasks(j *Job) []int {
	idx := make([]int, 0, len(j.Spec.Tasks))
	for i := range j.Spec.Tasks {
		if i >= len(j.Placed) || j.Placed[i] == nil {
			idx = append(idx, i)
		}
	}
	return idx
}

// tryStart places tasks idx of j (their requests reqs) on the plan, all of
// them or none.
func (s *Scheduler) tryStart(c *cycle, j *Job, idx []int, reqs []*engine.Request) bool {
	widest := s.widest(c, j)
	// Every candidate narrows the widest: when the first task fits nowhere
	// there, each placement would fail on it. (A backlog's gangs failed a
	// placement per leaf switch, every cycle.)
	if len(reqs) > 1 && !s.placer.FitsSomewhere(c.st, reqs[0], widest) {
		return false
	}
	cands := c.narrowed(reqs, widest)
	if pinned := s.pinnedSliceNodes(c, j, reqs); pinned != nil {
		cands = append([]func(*cluster.Node) bool{func(n *cluster.Node) bool {
			return pinned[n.Name] && (widest == nil || widest(n))
		}}, cands...)
	}
	for _, allowed := range cands {
		if len(reqs) > 1 && !enoughWholeGPUsIn(c.st, reqs, allowed) {
			continue // would fail for want of free GPUs, after a clone
		}
		as, trial, err := s.placer.PlaceAll(c.st, reqs, allowed)
		if err != nil {
			continue
		}
		if s.changeUnderWay(c, j.ID()) && slices.ContainsFunc(as, func(a cluster.Assignment) bool { return createsInstance(c.st, a) }) {
			// A change made for j is still being applied: its instances
			// are ready no later than one created now, and made for it.
			// (Started elsewhere on a new instance, a replica waited as
			// long and the change was wasted. Default scenario, seeds
			// 1-96: production p95 ≤ 30 s on 77 seeds instead of 67.)
			return false
		}
		s.commit(c, j, idx, as, trial)
		return true
	}
	return false
}

// reserveHolds says whether the production reserve holds j back: work
// beyond its team's guarantee, of a class below production or production
// on whole GPUs. A 70B service beyond its team's guarantee took 4 of the
// last free GPUs at once, and the claims and the services on MIG that
// came next had to evict. Held too, on the default scenario: violations
// 204k → 181k team-s on seeds 1-144 and 200k → 163k on 145-288,
// production p95 ≤ 30 s on 128 seeds (124) and 129 (123). (Holding all
// borrowed production cut violations further but left the p95 over 30 s
// on almost every seed: docs/mixed.md.)
func reserveHolds(c *cycle, j *Job) bool {
	if withinGuarantee(c, j) {
		return false
	}
	return j.Spec.Class < workload.Production || onWholeGPUs(j)
}

// pinnedSliceNodes is, for a MIG task that cannot be moved (a notebook,
// anything but a production replica), the nodes that hold such tasks
// already, tried before the others; nil for other jobs. A claim for a
// whole node moves services off it (migrate.go) but not these: spread
// one or two to a node, research's notebooks kept every node from being
// freed for ads' 8-GPU fine-tunes and research's own experiments.
// Grouped, with maxMoves 16 instead of 8, guarantee violations on the
// default scenario fell from 660k to 586k team-s on seeds 1-144 and
// from 712k to 588k on seeds 145-288 (docs/mixed.md).
func (s *Scheduler) pinnedSliceNodes(c *cycle, j *Job, reqs []*engine.Request) map[string]bool {
	if !s.cfg.GroupPinned || !s.cfg.Migrate || j.Spec.Class == workload.Production || len(reqs) != 1 {
		return nil
	}
	if k := reqs[0].Kind; k != workload.MIGProfile && (k != workload.MemoryProfile || !s.cfg.MIG) {
		return nil
	}
	return c.pinnedNodes()
}

// onSlices says whether a task of j holds a MIG instance.
func onSlices(j *Job) bool {
	for _, a := range j.Placed {
		if a != nil && len(a.Grants) > 0 && a.Grants[0].Slice != nil {
			return true
		}
	}
	return false
}

// commit adopts a placement: the trial state becomes the plan and the
// tasks become Starts.
func (s *Scheduler) commit(c *cycle, j *Job, idx []int, as []cluster.Assignment, trial *cluster.State) {
	before := c.st
	c.st = trial
	c.planChanged()
	for k, i := range idx {
		a := as[k]
		c.d.Starts = append(c.d.Starts, Start{Job: j.ID(), Task: i, Assignment: a, Creates: createsInstance(before, a)})
		if n := trial.NodeByName(a.Node); n != nil {
			c.addUsage(j, int64(a.GPUMilli(n)))
		}
	}
	if s.reservation != nil && s.reservation.job == j.ID() {
		s.reservation = nil
	}
	delete(s.attempts, j.ID())
	delete(s.backoff, j.ID())
	delete(s.promisedNodes, j.ID())
	c.inFlight = nil
	delete(s.moving, j.ID())
	delete(s.moveBackoff, j.ID())
	delete(s.searchBackoff, j.ID())
	delete(s.owedSince, j.ID())
	delete(s.rounds, j.ID())
	delete(s.roundsUntil, j.ID())
	if s.quotaHold[j.Spec.Team] == j.ID() {
		delete(s.quotaHold, j.Spec.Team)
	}
}

// createsInstance reports whether a uses a MIG instance missing from st.
func createsInstance(st *cluster.State, a cluster.Assignment) bool {
	n := st.NodeByName(a.Node)
	for _, g := range a.Grants {
		if g.Slice == nil || n == nil {
			continue
		}
		found := false
		for _, sl := range n.GPUs[g.GPU].Slices() {
			if sl.Placement == *g.Slice {
				found = true
			}
		}
		if !found {
			return true
		}
	}
	return false
}

// placeOneByOne is the naive path: each task takes what it finds and holds
// it while the others wait.
func (s *Scheduler) placeOneByOne(c *cycle, j *Job, reqs []*engine.Request) string {
	placedAny, k := false, 0
	for i := range j.Spec.Tasks {
		if i < len(j.Placed) && j.Placed[i] != nil {
			continue
		}
		r := reqs[k]
		k++
		a, err := s.placer.PlaceRequest(c.st, r)
		if err != nil {
			continue
		}
		if err := c.st.Allocate(a); err != nil {
			continue
		}
		placedAny = true
		c.planChanged()
		c.d.Starts = append(c.d.Starts, Start{Job: j.ID(), Task: i, Assignment: a})
		if n := c.st.NodeByName(a.Node); n != nil {
			c.addUsage(j, int64(a.GPUMilli(n)))
		}
	}
	started := 0
	for _, st := range c.d.Starts {
		if st.Job == j.ID() {
			started++
		}
	}
	if started == len(reqs) {
		return ""
	}
	if placedAny || len(reqs) < len(j.Spec.Tasks) {
		return WaitGang
	}
	return WaitNoRoom
}

// afterMiss handles a job that did not fit: MIG re-partitioning,
// preemption, reservation, in that order.
func (s *Scheduler) afterMiss(c *cycle, j *Job, reqs []*engine.Request) string {
	if s.cfg.MIG {
		if why := s.repartition(c, j, reqs); why != "" {
			return why
		}
	}
	if why := s.searchVictims(c, j, reqs); why != "" {
		return why
	}
	if why := s.consolidate(c, j, reqs, false); why != "" {
		return why
	}
	if s.cfg.Reserve && j.Spec.IsGang() && s.reservation == nil && c.in.Now-j.Submitted >= s.cfg.ReserveAfter {
		s.reserve(c, j, reqs)
	}
	if s.reservation != nil && s.reservation.job != j.ID() && s.outranksReserved(c, s.reservation.job, j) {
		return WaitReserved
	}
	if len(reqs) > 1 && j.Spec.IsGang() {
		return WaitGang
	}
	if reqs[0].Kind == workload.MIGProfile || reqs[0].Kind == workload.MemoryProfile && s.cfg.MIG {
		return WaitNoSlice
	}
	return WaitNoRoom
}

// holdsNodes says whether nodes are kept for j: its settled promise or its
// reservation.
func (s *Scheduler) holdsNodes(j *Job) bool {
	if _, ok := s.promisedNodes[j.ID()]; ok {
		return true
	}
	return s.reservation != nil && s.reservation.job == j.ID()
}

// demandOf is demand(j), from the scheduler's cache.
func (c *cycle) demandOf(j *Job) int64 { return c.sch.shape(j).demand }

// searchDue says whether j may and should search for victims now: the
// cheap checks, made before its requests are built.
func (s *Scheduler) searchDue(c *cycle, j *Job) (key int, due bool) {
	if c.searches >= maxSearches || c.in.Now < s.searchBackoff[j.ID()] || !s.mayPreempt(c, j) {
		return 0, false
	}
	key = s.preemptKey(c, j)
	return key, !c.noVictims[key] && c.in.Now >= s.noVictimsUntil[key]
}

// takesGuarantee says whether evicting victims for j takes another team
// below its guarantee.
func takesGuarantee(c *cycle, j *Job, victims []*Job) bool {
	return slices.ContainsFunc(victims, func(v *Job) bool {
		return v.Spec.Team != j.Spec.Team && straddles(c, v)
	})
}

// searchVictims preempts for j when it may and a search is due; it returns
// WaitPreempting when it did, or "".
func (s *Scheduler) searchVictims(c *cycle, j *Job, reqs []*engine.Request) string {
	key, due := s.searchDue(c, j)
	if !due {
		return ""
	}
	c.searches++
	if victims, nodes := s.victims(c, j, reqs); len(victims) > 0 && keepsGuarantees(c, j, victims) {
		// Victims that take another team below its guarantee leave that
		// team owed in turn (an 8-GPU fine-tune evicted for a 70B
		// service is owed a whole node): moving services to make the
		// room goes first. Default scenario: every target met by the
		// owed clock on 48 seeds of 1-144 (31) and 42 of 145-288 (34),
		// production p95 ≤ 30 s on 130 (136) and 131 (139). Only moves
		// that can be made now, though (consolidate's nowOnly): a MIG change for
		// them, then another, and the claim evicted all the same after
		// 90 s (seed 146 at 18,770 s). Seeds 1-576: every target on 352
		// (345), none by the owed clock on 420 (403), useful ≥ 0.85 on
		// 511 (525); seeds 577-1152: every target on 371 (343).
		if takesGuarantee(c, j, victims) {
			if why := s.consolidate(c, j, reqs, true); why != "" {
				return why
			}
		}
		s.preempt(c, j, victims, nodes)
		delete(s.searchBackoff, j.ID())
		s.countRound(c, j)
		return WaitPreempting
	}
	c.noVictims[key] = true
	// j searches again after searchBackoffFor, or soon when it claims its
	// guarantee or is production (promised a quick start). Jobs of the
	// same key would find the same: none searches before j does again
	// (on a backlog of thousands, searches were half of a cycle's cost).
	wait := searchBackoffFor
	if j.Spec.Class == workload.Production || withinGuarantee(c, j) {
		wait = urgentBackoffFor
	}
	s.searchBackoff[j.ID()] = c.in.Now + wait
	s.noteBackoff(c, j)
	s.noVictimsUntil[key] = c.in.Now + wait
	return ""
}

// noteRetry asks the world for a cycle of j when the production
// protection against it lapses, if j is a best-effort claim whose search
// waits for that. The protection lasts ProtectProductionFor so that the
// claim's second search may evict and it still starts within the
// guarantee's 60 s + grace, MIG change included; with no cycle then, the
// second search waited for the periodic look (seed 219 at 496,312 s: an
// experiment evicted borrowed production after 63 s and started after
// 123 s of its 90). Default scenario, every target by the owed clock on
// 324 of seeds 1-576 (318) and 319 of 577-1152 (308), no owed
// violation on 415 (397), production p95 ≤ 30 s on 513 (523). Retries
// for every claim, whatever its class or timer: 327 and p95 on 510.
// A claim whose search was held off by another job of its key (the same
// shape, class and team, which searched first in the cycle) asked no
// cycle until 2026-12-02 and waited for the periodic look (seed 52 at
// 162,127 s: four experiments evicted at once for a fine-tune; the two
// that searched second started after 90 s and 100 s of their 90).
// Seeds 1-576 / 577-1152 / 1153-1728 / 1729-2304: every target by the
// owed clock on 433 / 416 / 415 / 403 (425 / 416 / 417 / 406), no owed
// violation on 494 / 490 / 474 / 478 (483 / 488 / 474 / 480), owed
// clock 3.8k / 3.9k / 6.1k / 5.5k team-s (5.2k / 4.3k / 6.6k / 5.4k).
func (s *Scheduler) noteRetry(c *cycle, j *Job) {
	if s.cfg.ProtectProductionFor <= 0 || j.Spec.Class != workload.BestEffort || !withinGuarantee(c, j) {
		return
	}
	since, owed := s.owedSince[j.ID()]
	lapses := since + s.cfg.ProtectProductionFor
	if !owed || c.in.Now >= lapses {
		return // lapsed already (protectionLapsed)
	}
	// Held off by its own search, or by one of another job of its key
	// that found nothing (searchDue): it made none of its own then.
	at := max(s.searchBackoff[j.ID()], s.noVictimsUntil[s.preemptKey(c, j)])
	if at <= c.in.Now {
		return // no search held off
	}
	c.d.Retries = append(c.d.Retries, Retry{Job: j.ID(), At: max(at, lapses)})
}

// noteOwed records when j, waiting, was first seen within its team's
// guarantee, and forgets it once j is not.
func (s *Scheduler) noteOwed(c *cycle, j *Job) {
	if !withinGuarantee(c, j) {
		delete(s.owedSince, j.ID())
		return
	}
	if _, ok := s.owedSince[j.ID()]; !ok {
		s.owedSince[j.ID()] = c.in.Now
	}
}

// protectionLapsed says whether j, a best-effort claim, has been within
// its team's guarantee for ProtectProductionFor and may now evict another
// team's borrowed production on MIG instances (eligible).
func (s *Scheduler) protectionLapsed(c *cycle, j *Job) bool {
	if s.cfg.ProtectProductionFor <= 0 || j.Spec.Class != workload.BestEffort {
		return false
	}
	return s.owedFor(c, j, s.cfg.ProtectProductionFor)
}

// owedFor says whether j has been within its team's guarantee for d or
// more (noteOwed).
func (s *Scheduler) owedFor(c *cycle, j *Job, d time.Duration) bool {
	since, ok := s.owedSince[j.ID()]
	return ok && c.in.Now-since >= d && withinGuarantee(c, j)
}

// noteBackoff marks j, held off just now, if it is beyond its team's
// guarantee.
func (s *Scheduler) noteBackoff(c *cycle, j *Job) {
	if !withinGuarantee(c, j) {
		j.held.heldOff = true
	}
}

// countRound counts a preemption round of j, made by its victim search or
// by a move plan that evicts. Past freeRounds, j's next round waits twice
// as long as the one before, and so does its next victim search. Move
// plans were not counted: at a 2 s cadence (about Kubernetes mode's),
// seed 205's borrowed fine-tune relocated the same five experiments every
// 90 s for hours (567 evictions), each time retaken by the experiments,
// owed once evicted. Counted, over seeds 1-288 at that cadence: every
// target on 192 seeds (186), owed clock 2.7k team-s (4.2k), preemptions
// -19 %; at the simulator's default cadence, seeds 1-576 and 577-1152:
// 416 and 408 (433 and 416), preemptions -5 % (docs/mixed.md "Cycle
// cadence").
func (s *Scheduler) countRound(c *cycle, j *Job) {
	s.rounds[j.ID()]++
	if k := s.rounds[j.ID()] - freeRounds; k > 0 {
		until := c.in.Now + min(searchBackoffFor<<min(k-1, 5), maxRoundBackoff)
		s.searchBackoff[j.ID()], s.roundsUntil[j.ID()] = until, until
		s.noteBackoff(c, j)
	}
}

// clearOnClaim lifts the backoffs a job earned beyond its team's
// guarantee once it is within it: it searches, re-partitions and
// preempts as a claim at once. (A borrower that became owed when its
// team's other work ended waited out a 2-minute search backoff, or one of
// up to an hour after preemption rounds, or a 10-minute re-partition
// backoff, all counted as violation. Default scenario: violations 104k →
// 101k team-s on seeds 1-144, 100k → 99k on 145-288; production p95 ≤
// 30 s on 135 seeds (133) and 139 (138).)
func (s *Scheduler) clearOnClaim(c *cycle, j *Job) {
	if !j.held.heldOff || !withinGuarantee(c, j) {
		return
	}
	j.held.heldOff = false
	delete(s.searchBackoff, j.ID())
	delete(s.rounds, j.ID())
	delete(s.roundsUntil, j.ID())
	delete(s.backoff, j.ID())
	delete(s.attempts, j.ID())
}

// order returns the pending jobs in the order they are considered. With
// GuaranteeFirst, claims within their team's guarantee come before
// everything else, then by class: otherwise capacity freed while a team
// waits for what it is owed goes to a higher class that borrows, which
// the claim may then not take back (ProtectProduction). Among the claims,
// those holding nodes (they evicted for them) come first: a reclaim that
// takes the borrower below its guarantee makes its victims claims too,
// production outranks the claim, and the victims started again on the
// MIG instances they had just left (seed 75 at 384,050 s: a pretraining
// gang evicted twice and started after 125 s).
func (s *Scheduler) order(c *cycle) []*Job {
	ks := s.orderKeys[:0]
	share := s.shareFunc(c)
	jobs, sorted := s.jobsToOrder(c)
	for _, j := range jobs {
		if j.Phase == Pending {
			k := orderKey{j: j, class: j.Spec.Class, team: j.Spec.Team, id: j.ID(), submitted: j.Submitted}
			if s.cfg.Order != FIFO {
				k.share = share(j)
			}
			if s.cfg.GuaranteeFirst {
				k.within = withinGuarantee(c, j)
				_, promised := s.promisedNodes[j.ID()]
				k.holds = k.within && promised
			}
			ks = append(ks, k)
		}
	}
	pending := s.orderOut[:0]
	if !sorted || !s.groupOrder(c, ks) {
		// slices, not sort: sort.SliceStable's reflection swapper was
		// a twentieth of a week-1000 run. Not stable either: the keys
		// end with the job's ID, unique in an input, so no two jobs
		// compare equal.
		slices.SortFunc(ks, func(x, y orderKey) int {
			if d := s.orderLead(x, y); d != 0 {
				return d
			}
			if x.submitted != y.submitted {
				return cmp.Compare(x.submitted, y.submitted)
			}
			return strings.Compare(x.id, y.id)
		})
	}
	for i := range ks {
		pending = append(pending, ks[i].j)
	}
	// Kept for the next cycle, cleared so that they keep no job alive
	// (Cycle clears pending after its loop).
	clear(ks)
	s.orderKeys, s.orderOut = ks[:0], pending
	return pending
}

// orderLead compares the keys of the cycle's order that change from
// cycle to cycle; the share is the team's (shareFunc), compared between
// teams only. The order ends by submission and ID.
func (s *Scheduler) orderLead(x, y orderKey) int {
	if x.within != y.within {
		return before(x.within)
	}
	if x.holds != y.holds {
		return before(x.holds)
	}
	if s.cfg.ClassOrder && x.class != y.class {
		return cmp.Compare(y.class, x.class)
	}
	if s.cfg.Order != FIFO && x.team != y.team && x.share != y.share {
		return cmp.Compare(x.share, y.share)
	}
	return 0
}

// orderGroup is the pending jobs of one standing, class and team in a
// cycle's order (groupOrder).
type orderGroup struct {
	rep  orderKey // the first of them
	n    int
	rank int
}

// groupOrder sorts ks, listed by submission and ID, by orderLead,
// keeping that order among the jobs it does not tell apart: the full order,
// as that is how it ends. The jobs fall in few groups (standing, class,
// team), and only the groups are sorted: the sort of a week-1000 run's
// backlog of a thousand and more jobs, each cycle, was a tenth of the
// run. It reports false, doing nothing, for a class it does not know.
func (s *Scheduler) groupOrder(c *cycle, ks []orderKey) bool {
	lead := s.orderLead
	const classes = int(workload.Production) + 1
	teams := len(c.in.Teams) + 1 // and those not in the input
	groups := slices.Grow(s.orderGroups[:0], 4*classes*teams)[:4*classes*teams]
	clear(groups)
	of := slices.Grow(s.orderGroupOf[:0], len(ks))[:len(ks)]
	for i := range ks {
		k := &ks[i]
		if k.class < 0 || int(k.class) >= classes {
			return false
		}
		g := ((boolIndex(k.within)*2+boolIndex(k.holds))*classes+int(k.class))*teams + c.teamPos(k.j) + 1
		if groups[g].n == 0 {
			groups[g].rep = *k
		}
		groups[g].n++
		of[i] = g
	}
	used := s.orderUsed[:0]
	for g := range groups {
		if groups[g].n > 0 {
			used = append(used, g)
		}
	}
	slices.SortFunc(used, func(a, b int) int { return lead(groups[a].rep, groups[b].rep) })
	// Groups that lead does not tell apart (two teams of one share)
	// share a rank; each rank's jobs keep their order.
	starts := s.orderStarts[:0]
	for i, g := range used {
		if i == 0 || lead(groups[used[i-1]].rep, groups[g].rep) != 0 {
			starts = append(starts, 0)
		}
		groups[g].rank = len(starts) - 1
		starts[len(starts)-1] += groups[g].n
	}
	at := 0
	for r, n := range starts {
		starts[r], at = at, at+n
	}
	out := slices.Grow(s.orderSorted[:0], len(ks))[:len(ks)]
	for i := range ks {
		r := groups[of[i]].rank
		out[starts[r]] = ks[i]
		starts[r]++
	}
	copy(ks, out)
	clear(out)
	clear(groups)
	s.orderGroups, s.orderGroupOf, s.orderUsed, s.orderStarts, s.orderSorted = groups[:0], of[:0], used[:0], starts[:0], out[:0]
	return true
}

// before orders a key that is true first: -1 when x is true, 1 when not
// (the caller has checked that the two differ).
func before(x bool) int {
	if x {
		return -1
	}
	return 1
}

type shapeEntry struct {
	demand int64
	// ids number key|class|team|false, key|class|team|true and
	// key|class|team|lapsed: the keys of the failed-shape memo (the bool:
	// may backfill) and of victim searches (the bool: within the
	// guarantee; lapsed: and no longer held back by ProtectProduction),
	// found once, not on each of a backlog's memo hits.
	ids [3]int
}

// taskSet identifies a job's pending tasks: which ones, of which task
// list. (A world may rebuild a job under the same ID with other tasks.)
type taskSet struct {
	tasks *workload.Task // the job's first task
	n     int
	mask  uint64
}

// pendingSet returns j's taskSet; ok is false for jobs of more than 64
// tasks, which are not cached.
func pendingSet(j *Job) (taskSet, bool) {
	ts := taskSet{n: len(j.Spec.Tasks)}
	if ts.n == 0 || ts.n > 64 {
		return ts, false
	}
	ts.tasks = &j.Spec.Tasks[0]
	for i := range j.Spec.Tasks {
		if i >= len(j.Placed) || j.Placed[i] == nil {
			ts.mask |= 1 << i
		}
	}
	return ts, true
}

// shape returns j's demand and key numbers, cached on j's entry (which
// snapshot replaces when j's placement changes).
func (s *Scheduler) shape(j *Job) *shapeEntry {
	e := s.entry(j)
	if e != nil && e.shapeFor != nil && e.shapeFor == firstTask(j) {
		return &e.shape
	}
	sh := &shapeEntry{demand: s.grantedDemand(j)}
	prefix := shapeKey(j) + "|" + j.Spec.Class.String() + "|" + j.Spec.Team + "|"
	sh.ids = [3]int{s.keyID(prefix + "false"), s.keyID(prefix + "true"), s.keyID(prefix + "lapsed")}
	if e != nil && firstTask(j) != nil {
		e.shape, e.shapeFor = *sh, firstTask(j)
	}
	return sh
}

// grantedDemand is demand(j) as the placement will grant it: naive and
// gang-drf place a memory profile or a GPU fraction on a whole GPU
// (k8s-default's rewrite), and their quotas must count that whole GPU,
// not the profile's share (random scenarios: naive let a team of four
// GPUs start a second service of three small replicas while it held
// three GPUs, and hold six). For partita the requests are the tasks'
// own, and it is demand(j).
func (s *Scheduler) grantedDemand(j *Job) int64 {
	if !s.placer.Rewrites() {
		return demand(j)
	}
	reqs, err := s.requests(j)
	if err != nil {
		return demand(j) // an invalid job: consider says why
	}
	var total int64
	for _, r := range reqs {
		total += taskMilli(r.Task)
	}
	return total
}

// keyID returns the number of a memo or search key, numbering it if new.
// Numbers are never reused; the table starts over past maxKeys (a
// server that has seen that many shapes), after which jobs cached
// before and after share no memo.
func (s *Scheduler) keyID(key string) int {
	id, ok := s.keyIDs[key]
	if !ok {
		if len(s.keyIDs) >= maxKeys {
			s.keyIDs = map[string]int{}
		}
		s.nextKey++
		id = s.nextKey
		s.keyIDs[key] = id
	}
	return id
}

const maxKeys = 1 << 16

// entry returns the scheduler's entry for j, nil when it has none.
func (s *Scheduler) entry(j *Job) *heldEntry {
	if e := &j.held; e.owner == s {
		return e
	}
	return nil
}

// shapeKey identifies jobs that ask for the same thing, so that one that
// did not fit spares the others the search. Runs of equal tasks are
// written once with their count: the key of a gang of 32 is hashed at
// each memo look-up.
func shapeKey(j *Job) string {
	b := make([]byte, 0, 64)
	var last *workload.Task
	lastGPU, run := "", 0
	flush := func() {
		if run == 0 {
			return
		}
		b = strconv.AppendInt(b, int64(run), 10)
		b = append(b, '*')
		b = append(b, lastGPU...)
		b = append(b, '/')
		b = strconv.AppendInt(b, last.CPUMilli, 10)
		b = append(b, '/')
		b = strconv.AppendInt(b, last.MemoryMiB, 10)
		b = append(b, ';')
	}
	for i := range j.Spec.Tasks {
		if i < len(j.Placed) && j.Placed[i] != nil {
			continue
		}
		t := &j.Spec.Tasks[i]
		g := t.GPU.String()
		if last != nil && g == lastGPU && t.CPUMilli == last.CPUMilli && t.MemoryMiB == last.MemoryMiB {
			run++
			continue
		}
		flush()
		last, lastGPU, run = t, g, 1
	}
	flush()
	return string(b)
}

func productionClass() workload.Class { return workload.Production }

// forgetGone drops what the scheduler remembers of jobs that are no longer
// in the input (finished or cancelled), so a long-running server does not
// grow without end.
func (s *Scheduler) forgetGone(c *cycle) {
	for key, until := range s.noVictimsUntil {
		if c.in.Now >= until {
			delete(s.noVictimsUntil, key)
		}
	}
	dropGone(c, s.reqCache)
	dropGone(c, s.awaiting)
	for _, m := range []map[string]int{s.attempts, s.rounds} {
		dropGone(c, m)
	}
	for _, m := range []map[string]time.Duration{s.backoff, s.searchBackoff, s.moveBackoff, s.movedAt, s.owedSince, s.roundsUntil} {
		dropGone(c, m)
	}
}

// dropGone deletes from m, keyed by job ID, the jobs not in the input.
func dropGone[V any](c *cycle, m map[string]V) {
	for id := range m {
		if _, ok := c.job(id); !ok {
			delete(m, id)
		}
	}
}

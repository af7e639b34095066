//! The fixtures of the scheduler's tests (the Go build's
//! `helpers_test.go`): named builders for clusters, jobs and teams, and a
//! tiny world that carries a decision out the way the Go tests' world does
//! (starts, then reconfigs, then moves, then preemptions). Numbers in a
//! test are always named by the builder method that takes them.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::cluster::{Assignment, Grant, LABEL_LEAF, NodeSpec, State, build_node};
use crate::frag::{self, Shape};
use crate::gpu::{Layout, Placement};
use crate::policies;
use crate::random::Rand;
use crate::sched::snapshot::Cycle;
use crate::sched::{
    Config, Decision, HOUR, Input, Job, Nanos, Phase, Scheduler, Start, Team, Wait, preset,
};
use crate::workload::{self, Class, Demand, Task};

// ---- clusters ----

/// Builds a cluster in groups of identical nodes:
///
/// ```text
/// fleet().nodes(2).gpus(8, "H100-80GB").mig().leaf("a").nodes(1).gpus(4, "H100-80GB").build()
/// ```
///
/// Every modifier applies to the group the last `nodes` call started.
/// Nodes are named n1, n2, ... across groups unless a group is named.
#[derive(Default)]
pub struct Fleet {
    groups: Vec<NodeGroup>,
}

struct NodeGroup {
    prefix: String,
    count: usize,
    spec: NodeSpec,
}

pub fn fleet() -> Fleet {
    Fleet::default()
}

impl Fleet {
    /// Starts a group of `count` nodes with room for most tests (64 CPUs,
    /// 512 GiB) and no GPU.
    pub fn nodes(mut self, count: usize) -> Fleet {
        self.groups.push(NodeGroup {
            prefix: String::new(),
            count,
            spec: NodeSpec {
                cpu_milli: 64000,
                memory_mib: 512 * 1024,
                ..NodeSpec::default()
            },
        });
        self
    }

    fn last(&mut self) -> &mut NodeGroup {
        self.groups
            .last_mut()
            .expect("fleet: call nodes(count) before its modifiers")
    }

    /// Names the group's nodes prefix1, prefix2, ... (or prefix alone for a
    /// group of one).
    pub fn named(mut self, prefix: &str) -> Fleet {
        self.last().prefix = prefix.to_string();
        self
    }

    pub fn gpus(mut self, count: i32, model: &str) -> Fleet {
        let g = self.last();
        g.spec.gpus = count;
        g.spec.gpu_model = model.to_string();
        self
    }

    pub fn mig(mut self) -> Fleet {
        self.last().spec.mig = true;
        self
    }

    /// Gives every GPU of the group the MIG instances in text form
    /// ("4g.40gb@0,3g.40gb@4"); it implies `mig`.
    pub fn layout(mut self, text: &str) -> Fleet {
        let l = Layout::parse(text).unwrap_or_else(|e| panic!("layout {text:?}: {e}"));
        let g = self.last();
        g.spec.mig = true;
        g.spec.layout = l;
        self
    }

    /// Puts the group's nodes under one leaf switch.
    pub fn leaf(mut self, name: &str) -> Fleet {
        self.last().spec.labels = BTreeMap::from([(LABEL_LEAF.to_string(), name.to_string())]);
        self
    }

    pub fn build(self) -> State {
        let mut nodes = Vec::new();
        let mut seq = 0;
        for g in &self.groups {
            for i in 1..=g.count {
                let mut spec = g.spec.clone();
                spec.name = if !g.prefix.is_empty() && g.count == 1 {
                    g.prefix.clone()
                } else if !g.prefix.is_empty() {
                    format!("{}{i}", g.prefix)
                } else {
                    seq += 1;
                    format!("n{seq}")
                };
                nodes.push(
                    build_node(&spec).unwrap_or_else(|e| panic!("build_node({}): {e}", spec.name)),
                );
            }
        }
        State::new(nodes).expect("State::new")
    }
}

// ---- jobs ----

/// Builds a pending job: `job("j1").team("a").class(Class::Batch).gang(4).gpus(1)`.
/// Without `gang` or `replicas` a job has one task. Task i is named
/// "<id>/<i>".
#[derive(Clone)]
pub struct JobBuilder {
    spec: workload::Job,
    tasks: usize,
    demand: Demand,
    task_cpu: i64,
    task_mem: i64,
    submit_at: Nanos,
    declared: Nanos,
}

pub fn job(id: &str) -> JobBuilder {
    JobBuilder {
        spec: workload::Job {
            id: id.to_string(),
            class: Class::Batch,
            ..workload::Job::default()
        },
        tasks: 1,
        demand: Demand::whole_gpus(1),
        task_cpu: 1000,
        task_mem: 1024,
        submit_at: 0,
        declared: 0,
    }
}

impl JobBuilder {
    pub fn team(mut self, name: &str) -> JobBuilder {
        self.spec.team = name.to_string();
        self
    }
    pub fn class(mut self, c: Class) -> JobBuilder {
        self.spec.class = c;
        self
    }
    pub fn production(self) -> JobBuilder {
        self.class(Class::Production)
    }
    pub fn best_effort(self) -> JobBuilder {
        self.class(Class::BestEffort)
    }
    pub fn submitted(mut self, at: Nanos) -> JobBuilder {
        self.submit_at = at;
        self
    }
    pub fn estimate(mut self, d: Nanos) -> JobBuilder {
        self.declared = d;
        self
    }
    pub fn cpu(mut self, milli: i64) -> JobBuilder {
        self.task_cpu = milli;
        self
    }
    /// `size` tasks that start together.
    pub fn gang(mut self, size: usize) -> JobBuilder {
        self.tasks = size;
        self.spec.gang_size = size as i32;
        self
    }
    /// `count` tasks that start independently.
    pub fn replicas(mut self, count: usize) -> JobBuilder {
        self.tasks = count;
        self.spec.gang_size = 0;
        self
    }
    /// Per task, `count` whole GPUs.
    pub fn gpus(mut self, count: i32) -> JobBuilder {
        self.demand = Demand::whole_gpus(count);
        self
    }
    /// Per task, one MIG instance of the profile.
    pub fn mig_profile(mut self, name: &str) -> JobBuilder {
        self.demand = Demand::mig_profile(name);
        self
    }
    /// Per task, a memory profile: peak GPU memory and a compute share.
    pub fn gpu_memory(mut self, peak_mib: i64, compute: f64) -> JobBuilder {
        self.demand = Demand::memory_profile(peak_mib, compute);
        self
    }

    pub fn build(&self) -> Job {
        let mut spec = self.spec.clone();
        spec.tasks = (0..self.tasks)
            .map(|i| Task {
                name: format!("{}/{i}", spec.id),
                cpu_milli: self.task_cpu,
                memory_mib: self.task_mem,
                gpu: self.demand.clone(),
            })
            .collect();
        let mut j = Job::new(spec, self.submit_at);
        j.estimate = self.declared;
        j
    }
}

// ---- teams ----

/// Builds a team: `team("a").guarantee(4).burst(8).weight(2.0)`. Guarantee
/// and burst are in whole GPUs.
#[derive(Clone)]
pub struct TeamBuilder(pub Team);

pub fn team(name: &str) -> TeamBuilder {
    TeamBuilder(Team {
        name: name.to_string(),
        weight: 1.0,
        ..Team::default()
    })
}

impl TeamBuilder {
    pub fn guarantee(mut self, gpus: i64) -> TeamBuilder {
        self.0.guarantee = gpus * 1000;
        self
    }
    pub fn burst(mut self, gpus: i64) -> TeamBuilder {
        self.0.burst = gpus * 1000;
        self
    }
    pub fn weight(mut self, w: f64) -> TeamBuilder {
        self.0.weight = w;
        self
    }
}

// ---- schedulers ----

/// A preset built the way the mixed benchmark builds it: stock Kubernetes
/// placement for naive and gang-drf, Partita's for partita.
pub fn new_scheduler(name: &str, st: &State) -> Scheduler {
    new_scheduler_with(name, st, 1, |_| {})
}

/// `new_scheduler` with a seed and a change to the configuration first.
pub fn new_scheduler_with(
    name: &str,
    st: &State,
    seed: i64,
    tweak: impl FnOnce(&mut Config),
) -> Scheduler {
    let placement = if name == "partita" {
        "partita"
    } else {
        "k8s-default"
    };
    let shapes = vec![Shape {
        milli: 1000,
        num: 1,
        ..Shape::default()
    }];
    let typical = frag::typicals(
        &frag::without_memory(&shapes),
        frag::DEFAULT_THRESHOLD,
        None,
    );
    let mut pc = policies::config_for(st, typical);
    pc.shapes = shapes;
    let pol = policies::new(placement, pc).expect("policy");
    let mut cfg = preset(name).expect("preset");
    tweak(&mut cfg);
    Scheduler::new(cfg, pol, Rand::new(seed))
}

// ---- the tiny world ----

/// Owns a cluster and its jobs and carries decisions out as the Go tests'
/// world does: a start allocates at once and a job whose tasks all hold
/// resources is running; a reconfig changes the GPU and cordons it until
/// `uncordon_all`; a preemption makes the victim terminating until
/// `release` puts it back in its queue.
pub struct World {
    pub st: State,
    pub sch: Scheduler,
    pub teams: Vec<Team>,
    pub jobs: Vec<Job>,
    pub now: Nanos,
    /// The places of moved tasks, held until `moved` (the world releases
    /// each when its new place is ready).
    pub old_places: Vec<Assignment>,
    /// Jobs finished, kept for a test that lists them as gone.
    pub finished: Vec<Job>,
}

pub fn new_world(st: State, sch: Scheduler, teams: &[TeamBuilder]) -> World {
    World {
        st,
        sch,
        teams: teams.iter().map(|t| t.0.clone()).collect(),
        jobs: Vec::new(),
        now: 0,
        old_places: Vec::new(),
        finished: Vec::new(),
    }
}

impl World {
    /// Sets the world's clock.
    pub fn at(&mut self, now: Nanos) -> &mut World {
        self.now = now;
        self
    }

    /// Adds pending jobs.
    pub fn submit(&mut self, jobs: &[JobBuilder]) -> &mut World {
        for b in jobs {
            self.jobs.push(b.build());
        }
        self
    }

    fn index(&self, id: &str) -> usize {
        self.jobs
            .iter()
            .position(|j| j.id() == id)
            .unwrap_or_else(|| panic!("no job {id}"))
    }

    /// The named job.
    pub fn job(&self, id: &str) -> &Job {
        &self.jobs[self.index(id)]
    }

    /// The named job, to change.
    pub fn job_mut(&mut self, id: &str) -> &mut Job {
        let i = self.index(id);
        &mut self.jobs[i]
    }

    /// Adds a job already running: task i takes the whole GPUs listed in
    /// `where_[i]` ("n1:0,1"). It started at `started` and checkpointed at
    /// `checkpoint`.
    pub fn running(
        &mut self,
        b: JobBuilder,
        started: Nanos,
        checkpoint: Nanos,
        where_: &[&str],
    ) -> &mut World {
        let mut j = b.build();
        assert_eq!(
            where_.len(),
            j.spec.tasks.len(),
            "running {}: tasks and placements",
            j.id()
        );
        for (i, at) in where_.iter().enumerate() {
            let (node, list) = at.split_once(':').expect("node:gpu,gpu");
            let t = &j.spec.tasks[i];
            let mut a = Assignment {
                task: t.name.clone(),
                node: node.to_string(),
                cpu_milli: t.cpu_milli,
                memory_mib: t.memory_mib,
                grants: Vec::new(),
            };
            for s in list.split(',') {
                a.grants.push(Grant::whole(s.parse().expect("gpu index")));
            }
            self.allocate(&mut j, i, a);
        }
        self.mark_running(j, started, checkpoint)
    }

    /// Adds a one-task job running on a MIG instance ("n1:0:3g.40gb@4"),
    /// which must exist or fit.
    pub fn running_slice(&mut self, b: JobBuilder, at: &str) -> &mut World {
        let mut j = b.build();
        let parts: Vec<&str> = at.splitn(3, ':').collect();
        assert_eq!(
            parts.len(),
            3,
            "running_slice {}: {at:?}: want node:gpu:placement",
            j.id()
        );
        let k: i32 = parts[1].parse().expect("gpu index");
        let p = Placement::parse(parts[2]).expect("placement");
        let t = &j.spec.tasks[0];
        let a = Assignment {
            task: t.name.clone(),
            node: parts[0].to_string(),
            cpu_milli: t.cpu_milli,
            memory_mib: t.memory_mib,
            grants: vec![Grant::instance(k, p)],
        };
        self.allocate(&mut j, 0, a);
        let now = self.now;
        self.mark_running(j, now, now)
    }

    fn allocate(&mut self, j: &mut Job, task: usize, a: Assignment) {
        self.st
            .allocate(&a)
            .unwrap_or_else(|e| panic!("running {}: {e}", j.id()));
        j.placed[task] = Some(Arc::new(a));
    }

    fn mark_running(&mut self, mut j: Job, started: Nanos, checkpoint: Nanos) -> &mut World {
        j.phase = Phase::Running;
        j.started = started;
        j.checkpoint = checkpoint;
        self.jobs.push(j);
        self
    }

    /// Turns MIG off on the listed GPUs of a node.
    pub fn mig_off(&mut self, node: &str, gpus: &[usize]) -> &mut World {
        for &k in gpus {
            self.st
                .set_mig(node, k, false)
                .unwrap_or_else(|e| panic!("mig_off {node}/{k}: {e}"));
        }
        self
    }

    /// Runs a cycle on the world's input, limited to `only` when given,
    /// without carrying it out.
    pub fn decide_only(&mut self, only: Option<&[String]>) -> Decided {
        let refs: Vec<&Job> = self.jobs.iter().collect();
        let mut input = Input::new(self.now, &self.st, &self.teams, &refs);
        input.only = only;
        let decision = self.sch.cycle(&mut input);
        let waiting = decision
            .waits_by_id(&refs)
            .into_iter()
            .map(|(id, w)| (id.to_string(), w))
            .collect();
        Decided { decision, waiting }
    }

    /// Runs a full cycle without carrying it out.
    pub fn decide(&mut self) -> Decided {
        self.decide_only(None)
    }

    /// Runs a full cycle and carries it out.
    pub fn cycle(&mut self) -> Decided {
        let d = self.decide();
        self.apply(&d);
        d
    }

    /// Runs a cycle for the listed pending jobs and carries it out.
    pub fn light(&mut self, only: &[&str]) -> Decided {
        let only: Vec<String> = only.iter().map(|s| s.to_string()).collect();
        let d = self.decide_only(Some(&only));
        self.apply(&d);
        d
    }

    fn start(&mut self, s: &Start) {
        let now = self.now;
        let i = self.index(&s.job);
        assert_eq!(
            self.jobs[i].phase,
            Phase::Pending,
            "start {}: not pending",
            s.job
        );
        self.st
            .allocate(&s.assignment)
            .unwrap_or_else(|e| panic!("start {} task {}: {e}", s.job, s.task));
        let j = &mut self.jobs[i];
        j.placed[s.task] = Some(Arc::new(s.assignment.clone()));
        if j.complete() {
            j.phase = Phase::Running;
            j.started = now;
            j.checkpoint = now;
        }
    }

    fn reconfigure(&mut self, rc: &crate::sched::Reconfig, cordon_adds: bool) {
        let n = self
            .st
            .node_by_name(&rc.node)
            .unwrap_or_else(|| panic!("reconfig: unknown node {}", rc.node));
        let mig_now = n.gpus()[rc.gpu].mig();
        let res = if !rc.mig {
            self.st.set_mig(&rc.node, rc.gpu, false)
        } else if !mig_now {
            self.st
                .set_mig(&rc.node, rc.gpu, true)
                .and_then(|()| self.st.set_layout(&rc.node, rc.gpu, &rc.layout))
        } else {
            self.st.set_layout(&rc.node, rc.gpu, &rc.layout)
        };
        res.unwrap_or_else(|e| panic!("reconfig {}/{}: {e}", rc.node, rc.gpu));
        if !rc.add || cordon_adds {
            self.st
                .cordon(&rc.node, rc.gpu, true)
                .unwrap_or_else(|e| panic!("cordon {}/{}: {e}", rc.node, rc.gpu));
        }
    }

    fn migrate(&mut self, m: &crate::sched::Migration) {
        let i = self.index(&m.job);
        let j = &self.jobs[i];
        assert!(
            j.phase == Phase::Running && j.placed[m.task].is_some(),
            "move {} task {}: not running",
            m.job,
            m.task
        );
        self.st
            .allocate(&m.to)
            .unwrap_or_else(|e| panic!("move {} task {}: {e}", m.job, m.task));
        let old = self.jobs[i].placed[m.task].replace(Arc::new(m.to.clone()));
        self.old_places.push((*old.expect("placed")).clone());
    }

    fn preempt(&mut self, p: &crate::sched::Preemption) {
        let i = self.index(&p.job);
        assert_eq!(
            self.jobs[i].phase,
            Phase::Running,
            "preempt {}: not running",
            p.job
        );
        self.jobs[i].phase = Phase::Terminating;
    }

    /// Carries a decision out in the order `Decision` gives (starts, moves,
    /// MIG changes, preemptions), failing the test on any step the cluster
    /// refuses: the scheduler promises its decisions apply as they are.
    pub fn apply(&mut self, d: &Decision) {
        for s in &d.starts {
            self.start(s);
        }
        for m in &d.migrations {
            self.migrate(m);
        }
        for rc in &d.reconfigs {
            self.reconfigure(rc, true);
        }
        for p in &d.preemptions {
            self.preempt(p);
        }
        self.st
            .check()
            .expect("cluster invariant after the decision");
    }

    /// Carries a decision out as the mixed simulator does: starts, then
    /// moves, then MIG changes (an added instance cordons nothing), then
    /// preemptions.
    pub fn apply_as_mixed(&mut self, d: &Decision) {
        for s in &d.starts {
            self.start(s);
        }
        for m in &d.migrations {
            self.migrate(m);
        }
        for rc in &d.reconfigs {
            self.reconfigure(rc, false);
        }
        for p in &d.preemptions {
            self.preempt(p);
        }
        self.st
            .check()
            .expect("cluster invariant after the decision");
    }

    /// Releases the old places of every task moved: their new places are
    /// ready.
    pub fn moved(&mut self) -> &mut World {
        for a in std::mem::take(&mut self.old_places) {
            self.st
                .release(&a.node, &a.task)
                .unwrap_or_else(|e| panic!("release {}'s old place: {e}", a.task));
        }
        self
    }

    /// Ends every MIG change in flight.
    pub fn uncordon_all(&mut self) -> &mut World {
        let mut cordoned = Vec::new();
        for n in self.st.nodes() {
            for (k, g) in n.gpus().iter().enumerate() {
                if g.cordoned() {
                    cordoned.push((n.name().to_string(), k));
                }
            }
        }
        for (n, k) in cordoned {
            self.st.cordon(&n, k, false).expect("uncordon");
        }
        self
    }

    /// Ends the grace period of every terminating job: it frees what it
    /// holds and goes back to its queue.
    pub fn release(&mut self) -> &mut World {
        for i in 0..self.jobs.len() {
            if self.jobs[i].phase == Phase::Terminating {
                self.free(i);
                self.jobs[i].phase = Phase::Pending;
            }
        }
        self
    }

    /// Ends a job: it frees what it holds and leaves.
    pub fn finish(&mut self, id: &str) -> &mut World {
        let i = self.index(id);
        self.free(i);
        let j = self.jobs.remove(i);
        self.finished.push(j);
        self
    }

    fn free(&mut self, i: usize) {
        for k in 0..self.jobs[i].placed.len() {
            if let Some(a) = self.jobs[i].placed[k].take() {
                self.st
                    .release(&a.node, &a.task)
                    .unwrap_or_else(|e| panic!("release {}: {e}", a.task));
            }
        }
    }
}

/// Starts, for each team in name order, a job holding that many GPUs of
/// node n1, packed from GPU 0.
pub fn hold_gpus(w: &mut World, holding: &[(&str, usize)]) {
    let holding: BTreeMap<&str, usize> = holding.iter().copied().collect();
    let mut next = 0;
    for (name, &n) in &holding {
        let gpus: Vec<String> = (next..next + n).map(|k| k.to_string()).collect();
        next += n;
        let at = format!("n1:{}", gpus.join(","));
        w.running(
            job(&format!("{name}-running")).team(name).gpus(n as i32),
            0,
            0,
            &[at.as_str()],
        );
    }
}

// ---- reading decisions ----

/// The jobs with a start, each once, sorted.
pub fn started_jobs(d: &Decision) -> Vec<String> {
    let mut out: Vec<String> = d.starts.iter().map(|s| s.job.clone()).collect();
    out.sort();
    out.dedup();
    out
}

/// The starts of one job.
pub fn starts_of<'d>(d: &'d Decision, id: &str) -> Vec<&'d Start> {
    d.starts.iter().filter(|s| s.job == id).collect()
}

/// The preempted jobs, sorted.
pub fn victims_of(d: &Decision) -> Vec<String> {
    let mut out: Vec<String> = d.preemptions.iter().map(|p| p.job.clone()).collect();
    out.sort();
    out
}

/// A decision of the test world, with its waits by job ID (the
/// decision's own `waiting` names jobs by their place in the input):
/// `d.waiting` is this map, everything else the decision's.
#[derive(Debug, PartialEq)]
pub struct Decided {
    pub decision: Decision,
    pub waiting: BTreeMap<String, Wait>,
}

impl std::ops::Deref for Decided {
    type Target = Decision;
    fn deref(&self) -> &Decision {
        &self.decision
    }
}

/// The wait reason of a job, or "(not waiting)".
pub fn reason_of(d: &Decided, id: &str) -> String {
    d.waiting
        .get(id)
        .map_or_else(|| "(not waiting)".to_string(), |w| w.reason.to_string())
}

/// Runs the cycle's ordering step alone on the world's input.
pub fn order_of(w: &mut World) -> Vec<String> {
    let refs: Vec<&Job> = w.jobs.iter().collect();
    let input = Input::new(w.now, &w.st, &w.teams, &refs);
    let mut c: Cycle<'_> = w.sch.snapshot(&input);
    w.sch
        .order(&mut c, false)
        .into_iter()
        .map(|j| j.id().to_string())
        .collect()
}

/// The nodes the starts use, sorted.
pub fn nodes_of(starts: &[&Start]) -> Vec<String> {
    let mut out: Vec<String> = starts.iter().map(|s| s.assignment.node.clone()).collect();
    out.sort();
    out.dedup();
    out
}

/// Every node's description.
pub fn describe(st: &State) -> String {
    st.nodes().map(|n| n.describe()).collect()
}

/// Runs a cycle every 15 s from an hour to `hour + limit` and returns how
/// long after `hour` the first one that evicted came, with its decision.
pub fn first_victims(w: &mut World, limit: Nanos) -> Option<(Nanos, Decided)> {
    let mut waited = 0;
    while waited <= limit {
        w.at(HOUR + waited);
        let d = w.cycle();
        if !d.preemptions.is_empty() {
            return Some((waited, d));
        }
        waited += 15 * crate::sched::SECOND;
    }
    None
}

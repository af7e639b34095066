//! The property tests drive a small mixed cluster with random, often
//! invalid, operations and check after every step that the State keeps its
//! invariants and agrees with a shadow model kept beside it. The random
//! walks of the Go build (property_test.go) run here from the same seeds of
//! the project's generator; proptest runs the same walk from choices it
//! makes (and shrinks) itself.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::gpu::{self, Layout, ModelRef, Placement};
use crate::random::Rand;

/// The cluster the property tests run on.
fn mixed_world() -> State {
    new_state(&[
        node("v100-a")
            .cpu(16000)
            .memory(65536)
            .gpus(8, "V100-32GB")
            .nvlink(LINK_PAIRS),
        node("v100-b").cpu(16000).memory(65536).gpus(8, "V100-16GB"),
        node("h100-a")
            .cpu(16000)
            .memory(65536)
            .gpus(4, "H100-80GB")
            .mig()
            .layout("3g.40gb@0,2g.20gb@4,1g.10gb@6"),
        node("h100-b")
            .cpu(16000)
            .memory(65536)
            .gpus(4, "H100-80GB")
            .mig(),
        node("cpu").cpu(8000).memory(16384),
    ])
}

/// Where the walk's choices come from.
trait Choices {
    /// A number in [0, n); n > 0.
    fn below(&mut self, n: usize) -> usize;
}

impl Choices for Rand {
    fn below(&mut self, n: usize) -> usize {
        Rand::below(self, n)
    }
}

/// Choices proptest made: each is taken modulo what is asked, and 0 once
/// they run out, so that shrinking the list simplifies the walk.
struct Listed {
    xs: Vec<u32>,
    next: usize,
}

impl Choices for Listed {
    fn below(&mut self, n: usize) -> usize {
        let x = self.xs.get(self.next).copied().unwrap_or(0);
        self.next += 1;
        x as usize % n
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum OpKind {
    Allocate,
    Release,
    SetLayout,
    SetMig,
    Clone,
}

const OP_KINDS: [OpKind; 5] = [
    OpKind::Allocate,
    OpKind::Release,
    OpKind::SetLayout,
    OpKind::SetMig,
    OpKind::Clone,
];

/// One random operation on a State.
#[derive(Clone, Debug)]
struct Op {
    kind: OpKind,
    a: Assignment,
    node: String,
    task: String,
    gpu: i32,
    layout: Layout,
    on: bool,
}

impl Op {
    fn new(kind: OpKind) -> Op {
        Op {
            kind,
            a: Assignment::default(),
            node: String::new(),
            task: String::new(),
            gpu: 0,
            layout: Layout::new(),
            on: false,
        }
    }

    /// The GPU index as the State's methods take it; a negative one (which
    /// they cannot be given) as one past any node's last.
    fn gpu_index(&self) -> usize {
        usize::try_from(self.gpu).unwrap_or(usize::MAX)
    }

    /// Runs a mutating op; returns the node it targets.
    fn apply(&self, s: &mut State) -> (String, Result<(), ClusterError>) {
        match self.kind {
            OpKind::Allocate => (self.a.node.clone(), s.allocate(&self.a)),
            OpKind::Release => (
                self.node.clone(),
                s.release(&self.node, &self.task).map(drop),
            ),
            OpKind::SetLayout => (
                self.node.clone(),
                s.set_layout(&self.node, self.gpu_index(), &self.layout),
            ),
            OpKind::SetMig => (
                self.node.clone(),
                s.set_mig(&self.node, self.gpu_index(), self.on),
            ),
            OpKind::Clone => unreachable!("apply of a clone"),
        }
    }
}

/// Makes random operations against the State it is given.
struct Gen<C> {
    r: C,
    h100: ModelRef,
    /// Every maximal H100 layout.
    carving: Vec<Layout>,
    tasks: Vec<String>,
}

impl<C: Choices> Gen<C> {
    fn new(r: C) -> Gen<C> {
        let h100 = gpu::lookup("H100-80GB");
        let carving = h100.maximal_layouts();
        Gen {
            r,
            h100,
            carving,
            tasks: (0..12).map(|i| format!("t{i}")).collect(),
        }
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.r.below(100) < percent
    }

    fn node_name(&mut self, s: &State) -> String {
        if self.chance(4) {
            return "ghost".into();
        }
        s.node(self.r.below(s.len())).name().to_string()
    }

    fn task_name(&mut self) -> String {
        if self.chance(3) {
            return String::new();
        }
        self.tasks[self.r.below(self.tasks.len())].clone()
    }

    /// Mostly a real GPU of n, sometimes one past either end.
    fn gpu_index(&mut self, n: Option<&Node>) -> i32 {
        let count = n.map_or(0, |n| n.gpus().len());
        if count == 0 || self.chance(8) {
            return self.r.below(count + 2) as i32 - 1;
        }
        self.r.below(count) as i32
    }

    fn amount(&mut self, free: i64, most: i64) -> i64 {
        if self.chance(5) {
            return -1 - self.r.below(100) as i64;
        }
        if self.chance(5) {
            return free + 1 + self.r.below(100) as i64;
        }
        if self.chance(30) {
            return 0;
        }
        self.r.below(most as usize + 1) as i64
    }

    fn next(&mut self, s: &State) -> Op {
        let p = self.r.below(100);
        if p < 50 {
            return self.allocate(s);
        }
        if p < 75 {
            let mut o = Op::new(OpKind::Release);
            o.node = self.node_name(s);
            o.task = self.task_name();
            return o;
        }
        if p < 87 {
            return self.set_layout(s);
        }
        if p < 95 {
            let mut o = Op::new(OpKind::SetMig);
            o.node = self.node_name(s);
            o.gpu = self.gpu_index(s.node_by_name(&o.node));
            o.on = self.chance(60);
            return o;
        }
        Op::new(OpKind::Clone)
    }

    fn allocate(&mut self, s: &State) -> Op {
        let name = self.node_name(s);
        let n = s.node_by_name(&name);
        let mut a = Assignment {
            task: self.task_name(),
            node: name,
            ..Assignment::default()
        };
        if let Some(n) = n {
            a.cpu_milli = self.amount(n.cpu_free(), n.cpu_milli() / 4);
            a.memory_mib = self.amount(n.mem_free(), n.memory_mib() / 4);
        }
        for _ in 0..self.r.below(4) {
            let i = self.gpu_index(n);
            match n.and_then(|n| usize::try_from(i).ok().and_then(|k| n.gpus().get(k))) {
                Some(d) => {
                    let g = self.grant(d);
                    a.grants.push(g);
                }
                None => a
                    .grants
                    .push(Grant::share(i, 1 + self.r.below(1000) as i32)),
            }
        }
        let mut o = Op::new(OpKind::Allocate);
        o.a = a;
        o
    }

    /// Asks for something on d: usually the right kind, often too much.
    fn grant(&mut self, d: &Gpu) -> Grant {
        let index = d.index() as i32;
        let want_slice = d.mig() != self.chance(15);
        if !want_slice {
            let options = [
                1 + self.r.below(1000) as i32,
                1000,
                d.free(),
                d.free() + 1,
                0,
                -5,
                1001,
                250,
                500,
            ];
            return Grant::share(index, options[self.r.below(options.len())]);
        }
        let free: Vec<Placement> = d
            .slices()
            .iter()
            .filter(|s| s.is_free())
            .map(|s| s.placement().clone())
            .collect();
        let p = if !free.is_empty() && self.chance(40) {
            free[self.r.below(free.len())].clone()
        } else if self.chance(60) && d.model().mig {
            let prof = &d.model().profiles[self.r.below(d.model().profiles.len())];
            match d.model().free_placements(&d.layout(), &prof.name) {
                Ok(places) if !places.is_empty() => places[self.r.below(places.len())].clone(),
                _ => Placement::new(prof.name.clone(), self.r.below(8) as i32),
            }
        } else {
            let names = [
                "1g.10gb",
                "1g.10gb+me",
                "1g.20gb",
                "2g.20gb",
                "3g.40gb",
                "4g.40gb",
                "7g.80gb",
                "9g.99gb",
                "1g.18gb",
            ];
            Placement::new(
                names[self.r.below(names.len())],
                self.r.below(10) as i32 - 1,
            )
        };
        Grant::instance(index, p)
    }

    fn set_layout(&mut self, s: &State) -> Op {
        let mut o = Op::new(OpKind::SetLayout);
        o.node = self.node_name(s);
        let n = s.node_by_name(&o.node);
        o.gpu = self.gpu_index(n);
        let d = n.and_then(|n| usize::try_from(o.gpu).ok().and_then(|k| n.gpus().get(k)));
        let h100 = self.h100.clone();
        // Go's `case d != nil && chance(50)`: no draw when there is no GPU.
        if let Some(d) = d
            && self.chance(50)
        {
            // Keep the held instances and add what still fits: usually valid.
            o.layout = d
                .slices()
                .iter()
                .filter(|s| !s.is_free())
                .map(|s| s.placement().clone())
                .collect();
            for _ in 0..self.r.below(4) {
                let prof = &h100.profiles[self.r.below(h100.profiles.len())];
                if let Ok(places) = h100.free_placements(&o.layout, &prof.name)
                    && !places.is_empty()
                {
                    o.layout.push(places[self.r.below(places.len())].clone());
                }
            }
        } else if self.chance(50) {
            // A whole carving: valid, but it may drop held instances.
            o.layout = self.carving[self.r.below(self.carving.len())].clone();
        } else {
            // Anything at all.
            for _ in 0..self.r.below(4) {
                let prof = &h100.profiles[self.r.below(h100.profiles.len())];
                o.layout
                    .push(Placement::new(prof.name.clone(), self.r.below(8) as i32));
            }
        }
        o
    }
}

/// What the tests believe each node runs: node -> task -> assignment.
type Shadow = BTreeMap<String, BTreeMap<String, Assignment>>;

fn new_shadow(s: &State) -> Shadow {
    s.nodes()
        .map(|n| (n.name().to_string(), BTreeMap::new()))
        .collect()
}

/// Updates the shadow after a successful mutating op.
fn record(sh: &mut Shadow, o: &Op) {
    match o.kind {
        OpKind::Allocate => {
            sh.get_mut(&o.a.node)
                .unwrap()
                .insert(o.a.task.clone(), o.a.clone());
        }
        OpKind::Release => {
            sh.get_mut(&o.node).unwrap().remove(&o.task);
        }
        _ => {}
    }
}

/// Why s breaks an invariant or disagrees with the shadow, if it does.
fn invariant_problem(s: &State, sh: &Shadow) -> Option<String> {
    if let Err(e) = s.check() {
        return Some(format!("check: {e}"));
    }
    for (i, n) in s.nodes().enumerate() {
        if s.generation(i) != n.generation() {
            return Some(format!(
                "node {}: generation {} beside the node, {} in it",
                n.name(),
                s.generation(i),
                n.generation()
            ));
        }
        let want = &sh[n.name()];
        if n.tasks().len() != want.len() {
            return Some(format!(
                "node {} runs {} tasks, the shadow {}",
                n.name(),
                n.tasks().len(),
                want.len()
            ));
        }
        let (mut cpu, mut mem) = (0, 0);
        for a in want.values() {
            cpu += a.cpu_milli;
            mem += a.memory_mib;
            if n.task(&a.task) != Some(a) {
                return Some(format!("node {} lost or changed task {}", n.name(), a.task));
            }
        }
        if (cpu, mem) != (n.cpu_used(), n.mem_used()) {
            return Some(format!(
                "node {}: {}/{} in use, its tasks hold {cpu}/{mem}",
                n.name(),
                n.cpu_used(),
                n.mem_used()
            ));
        }
        if n.cpu_free() < 0 || n.mem_free() < 0 {
            return Some(format!("node {} over-committed", n.name()));
        }
        for d in n.gpus() {
            if let Some(p) = gpu_problem(d, want) {
                return Some(format!("node {} gpu {}: {p}", n.name(), d.index()));
            }
        }
    }
    None
}

/// No GPU over-allocated, every MIG layout valid, every counter right.
fn gpu_problem(d: &Gpu, tasks: &BTreeMap<String, Assignment>) -> Option<String> {
    let mut held = 0;
    let mut owners: BTreeMap<&Placement, &str> = BTreeMap::new();
    for a in tasks.values() {
        for g in a.grants.iter().filter(|g| g.gpu == d.index() as i32) {
            match &g.slice {
                Some(p) => {
                    owners.insert(p, &a.task);
                }
                None => held += g.milli,
            }
        }
    }
    let holders: i32 = d.holders().iter().map(Hold::milli).sum();
    if d.used() != held || holders != held || !(0..=1000).contains(&d.used()) {
        return Some(format!(
            "used {}, holders {holders}, tasks hold {held}",
            d.used()
        ));
    }
    if !d.mig() {
        if !d.slices().is_empty() || !owners.is_empty() || d.free() != 1000 - d.used() {
            return Some(format!(
                "MIG off: instances {}, free {}",
                d.layout(),
                d.free()
            ));
        }
        return None;
    }
    if !d.model().mig || d.used() != 0 || d.free() != 0 {
        return Some(format!(
            "MIG on: model {}, used {}, free {}",
            d.model().name,
            d.used(),
            d.free()
        ));
    }
    if let Err(e) = d.model().validate(&d.layout()) {
        return Some(format!("invalid layout {}: {e}", d.layout()));
    }
    let (mut mask, mut compute) = (0u8, 0);
    for sl in d.slices() {
        let p = d.model().find(sl.profile()).unwrap();
        mask |= p.mask(sl.start());
        compute += p.compute;
        if owners.remove(sl.placement()).unwrap_or("") != sl.task().unwrap_or("") {
            return Some(format!(
                "instance {} held by {:?}, tasks say otherwise",
                sl.placement(),
                sl.task()
            ));
        }
    }
    if !owners.is_empty() {
        return Some(format!("tasks hold missing instances {owners:?}"));
    }
    if d.free_memory_slices() != !mask || d.free_compute_slices() != gpu::COMPUTE_SLICES - compute {
        return Some(format!(
            "free {:08b}/{}, the layout leaves {:08b}/{}",
            d.free_memory_slices(),
            d.free_compute_slices(),
            !mask,
            7 - compute
        ));
    }
    None
}

/// What a walk did, to make sure it exercised both outcomes of every op.
#[derive(Default)]
struct Tally {
    ok: [usize; 5],
    refused: [usize; 5],
    created: usize,
    taken: usize,
    shared: usize,
}

/// The grants of an allocate that would create an instance, take an
/// existing one, or take milli.
fn grant_kinds(s: &State, o: &Op) -> (usize, usize, usize) {
    let Some(n) = s
        .node_by_name(&o.a.node)
        .filter(|_| o.kind == OpKind::Allocate)
    else {
        return (0, 0, 0);
    };
    let (mut created, mut taken, mut shared) = (0, 0, 0);
    for g in &o.a.grants {
        let Some(d) = usize::try_from(g.gpu).ok().and_then(|k| n.gpus().get(k)) else {
            continue;
        };
        match &g.slice {
            None => shared += 1,
            Some(p) if d.slice_at(p).is_some() => taken += 1,
            Some(_) => created += 1,
        }
    }
    (created, taken, shared)
}

/// A State the walk left behind at a clone, with its description then:
/// nothing done since may change it.
struct Frozen {
    s: State,
    text: String,
    step: usize,
}

/// Walks `steps` random operations from `choices`, checking every
/// invariant after each; returns the first broken one.
fn walk<C: Choices>(choices: C, steps: usize, tally: &mut Tally) -> Result<(), String> {
    let mut s = mixed_world();
    let mut sh = new_shadow(&s);
    let mut g = Gen::new(choices);
    let mut left: Vec<Frozen> = Vec::new();
    for step in 0..steps {
        let o = g.next(&s);
        if o.kind == OpKind::Clone {
            let mut c = s.clone();
            if describe(&c) != describe(&s) {
                return Err(format!("step {step}: a clone differs from its original"));
            }
            // Walk on with either side; the other must stay as it is.
            if g.chance(50) {
                std::mem::swap(&mut s, &mut c);
            }
            let text = describe(&c);
            left.push(Frozen { s: c, text, step });
            if left.len() > 4 {
                left.remove(0);
            }
            tally.ok[4] += 1;
            continue;
        }
        let kind = OP_KINDS.iter().position(|k| *k == o.kind).unwrap();
        let (before, before_gens) = (describe(&s), gens(&s));
        let (c, t, sh_) = grant_kinds(&s, &o);
        let (target, result) = o.apply(&mut s);
        match result {
            Err(e) => {
                tally.refused[kind] += 1;
                if describe(&s) != before {
                    return Err(format!(
                        "step {step}: refused {o:?} ({e}) changed the State"
                    ));
                }
            }
            Ok(()) => {
                tally.ok[kind] += 1;
                tally.created += c;
                tally.taken += t;
                tally.shared += sh_;
                record(&mut sh, &o);
                for (i, n) in s.nodes().enumerate() {
                    let changed = n.generation() != before_gens[i];
                    if changed != (n.name() == target)
                        || (changed && n.generation() < before_gens[i])
                    {
                        return Err(format!(
                            "step {step}: {o:?}: node {} gen {} -> {}",
                            n.name(),
                            before_gens[i],
                            n.generation()
                        ));
                    }
                }
            }
        }
        if let Some(p) = invariant_problem(&s, &sh) {
            return Err(format!("step {step}: after {o:?}: {p}\n{}", describe(&s)));
        }
        for f in &left {
            if describe(&f.s) != f.text {
                return Err(format!(
                    "step {step}: {o:?} changed the State left at the clone of step {}",
                    f.step
                ));
            }
        }
    }
    Ok(())
}

#[test]
fn random_operations_keep_every_invariant() {
    let (seeds, steps) = (40, 300);
    let mut tally = Tally::default();
    for seed in 1..=seeds {
        if let Err(e) = walk(Rand::new(seed), steps, &mut tally) {
            panic!("seed {seed}: {e}");
        }
    }
    // The walk must exercise both outcomes of every operation, or it
    // proves little.
    let least = 2 * seeds as usize;
    assert!(
        tally.created >= least && tally.taken >= least && tally.shared >= least,
        "successful grants: {} new instances, {} existing, {} shares; want at least {least} of each",
        tally.created,
        tally.taken,
        tally.shared
    );
    for (k, kind) in OP_KINDS.iter().enumerate() {
        assert!(
            tally.ok[k] >= least && (*kind == OpKind::Clone || tally.refused[k] >= least),
            "{kind:?}: {} succeeded, {} refused; want at least {least} of each",
            tally.ok[k],
            tally.refused[k]
        );
    }
}

#[test]
fn mutating_a_clone_never_changes_the_original() {
    for seed in 100..140 {
        let mut g = Gen::new(Rand::new(seed));
        let mut s = mixed_world();
        // Put some work on the original first.
        for _ in 0..100 {
            let o = g.next(&s);
            if o.kind != OpKind::Clone {
                let _ = o.apply(&mut s);
            }
        }
        let original = describe(&s);
        let mut c = s.clone();
        for _ in 0..200 {
            let o = g.next(&c);
            if o.kind != OpKind::Clone {
                let _ = o.apply(&mut c);
            }
            assert_eq!(
                describe(&s),
                original,
                "seed {seed}: changing the clone changed the original"
            );
        }
        must_check(&c);

        // And the other way round.
        let clone_text = describe(&c);
        for _ in 0..200 {
            let o = g.next(&s);
            if o.kind != OpKind::Clone {
                let _ = o.apply(&mut s);
            }
            assert_eq!(
                describe(&c),
                clone_text,
                "seed {seed}: changing the original changed the clone"
            );
        }
        must_check(&s);
    }
}

/// The State's description without the change numbers, which a release
/// cannot give back.
fn describe_contents(s: &State) -> String {
    let mut out = describe(s);
    for n in s.nodes() {
        out = out.replace(&format!(" gen={} ", n.generation()), " ");
    }
    out
}

/// The State with every instance an allocation of `a` would create already
/// there, free: what releasing `a` leaves, since MIG instances stay.
fn with_created_instances(s: &State, a: &Assignment) -> State {
    let mut s = s.clone();
    let Some(n) = s.node_by_name(&a.node) else {
        return s;
    };
    let mut layouts: Vec<(usize, Layout)> = Vec::new();
    for g in &a.grants {
        let (Some(p), Ok(k)) = (&g.slice, usize::try_from(g.gpu)) else {
            continue;
        };
        if n.gpus()[k].slice_at(p).is_none() {
            let mut l = n.gpus()[k].layout();
            l.push(p.clone());
            layouts.push((k, l));
        }
    }
    let node = a.node.clone();
    for (k, l) in layouts {
        s.set_layout(&node, k, &l)
            .expect("an instance allocate created fits");
    }
    s
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Any walk keeps every invariant: no GPU or node over-allocated,
    /// every MIG layout valid, refusals change nothing, clones stay apart.
    #[test]
    fn any_walk_keeps_every_invariant(choices in prop::collection::vec(any::<u32>(), 0..3000), steps in 1..150usize) {
        let mut tally = Tally::default();
        let r = walk(Listed { xs: choices, next: 0 }, steps, &mut tally);
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }

    /// Allocating and then releasing a task gives back the State it found,
    /// but for the change numbers and the MIG instances the allocation
    /// created, which stay, free.
    #[test]
    fn allocate_then_release_restores_the_state(
        warmup in prop::collection::vec(any::<u32>(), 0..1500),
        pick in prop::collection::vec(any::<u32>(), 0..64),
    ) {
        // Some work on the cluster first.
        let mut g = Gen::new(Listed { xs: warmup, next: 0 });
        let mut s = mixed_world();
        for _ in 0..60 {
            let o = g.next(&s);
            if o.kind != OpKind::Clone {
                let _ = o.apply(&mut s);
            }
        }
        // Then allocations until one is accepted, each released again.
        let mut g = Gen { r: Listed { xs: pick, next: 0 }, ..g };
        for _ in 0..20 {
            let o = g.allocate(&s);
            let mut t = s.clone();
            if t.allocate(&o.a).is_err() {
                continue;
            }
            let before = describe_contents(&with_created_instances(&s, &o.a));
            prop_assert!(t.check().is_ok());
            let back = t.release(&o.a.node, &o.a.task);
            prop_assert_eq!(back.as_ref().ok(), Some(&o.a));
            prop_assert_eq!(describe_contents(&t), before, "after allocate and release of {:?}", o.a);
        }
    }
}

//! The scheduler's table of the jobs it has met: one entry per job ID,
//! reached from a `Job` through the mark the scheduler leaves on it, so
//! that reading what the scheduler knows of a job costs no hashing.
//!
//! An entry has three parts:
//!   - `held`, what the scheduler computed from one `Job` value (what it
//!     holds, its shape, its validation): the Go build keeps it in the
//!     Job itself (`heldEntry`), and starts it over when a world gives a
//!     new Job under the same ID or the job's placement changes;
//!   - `part`, the job's share of the sums kept for incremental inputs;
//!   - `memory`, what the Go build keeps in maps keyed by job ID (backoffs,
//!     search rounds, when it became owed, its prepared requests): it
//!     outlives a new Job of the same ID and is dropped, as there, when the
//!     ID has left the input at a prune.

use rustc_hash::FxBuildHasher;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::incremental::Part;
use super::types::{Job, Nanos, WaitReason};
use crate::cluster::{Assignment, NodeSet};
use crate::placement::Request;

/// Numbers schedulers, so that a mark tells which one left it. It never
/// decides anything: a mark from another scheduler only means "not seen".
static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);

/// A new scheduler's token.
pub(super) fn new_token() -> u64 {
    NEXT_TOKEN.fetch_add(1, Ordering::Relaxed)
}

pub(super) type IdMap<V> = HashMap<Arc<str>, V, FxBuildHasher>;

/// What the scheduler computed from one `Job` value while its placement
/// stayed the same (the Go build's `heldEntry`). In C layout, the fields
/// every cycle reads of each pending job first, so that they share a
/// cache line or two (`Entry`).
#[derive(Debug, Default)]
#[repr(C)]
pub(super) struct Held {
    /// The job's team's position in the input (-1: none), when last seen.
    pub team: isize,
    /// The job's shape, for the task list it was computed for (identified
    /// by the address of its first task: a world may rebuild a job under
    /// the same ID with other tasks).
    pub shape: Option<(usize, Shape)>,
    /// The job's validation (why it can never run, if so), for the task
    /// list it was computed for (none: no tasks).
    pub checked: Option<(Option<usize>, Option<WaitReason>)>,
    /// A search or re-partition backoff was set while the job was beyond
    /// its team's guarantee (`clear_on_claim`).
    pub held_off: bool,
    /// A task holds a MIG instance (`on_slices`).
    pub slices: bool,
    pub milli: i64,
    /// The last cycle whose input had the job.
    pub seen: u64,
    /// `placed.len()` when computed.
    pub tasks: usize,
    /// The assignments it was computed from, by identity; empty when no
    /// task holds anything.
    pub placed: Vec<Option<Arc<Assignment>>>,
    /// The node set `nodes` index.
    pub set: Option<Arc<NodeSet>>,
    /// The nodes the job holds, by position in the cluster.
    pub nodes: Vec<usize>,
}

impl Held {
    /// Whether `placed` is the placement the entry was computed from.
    pub fn holds(&self, placed: &[Option<Arc<Assignment>>]) -> bool {
        if placed.len() != self.tasks {
            return false;
        }
        if self.placed.is_empty() {
            return none_of(placed);
        }
        self.placed.iter().zip(placed).all(|(a, b)| match (a, b) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        })
    }
}

/// Whether no task holds anything.
pub(super) fn none_of(placed: &[Option<Arc<Assignment>>]) -> bool {
    placed.iter().all(Option::is_none)
}

/// A job's demand and the numbers of its memo and search keys (Go's
/// `shapeEntry`): key|class|team|false, key|class|team|true and
/// key|class|team|lapsed, the keys of the failed-shape memo (the bool: may
/// backfill) and of victim searches (the bool: within the guarantee;
/// lapsed: and no longer held back by `protect_production`).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Shape {
    pub demand: i64,
    pub ids: [u32; 3],
}

/// A job's prepared requests, for one set of pending tasks.
#[derive(Debug)]
pub(super) struct ReqEntry {
    pub set: TaskSet,
    pub reqs: Vec<Request>,
}

/// Identifies a job's pending tasks: which ones, of which task list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TaskSet {
    pub tasks: usize,
    pub n: usize,
    pub mask: u64,
}

/// A change asked for a job: the GPU and when. The GPU's cordon is the
/// job's change only while no later change was asked there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct AskedChange {
    pub node: Arc<str>,
    pub gpu: usize,
    pub at: Nanos,
}

/// What the Go build keeps in maps keyed by job ID. Zero values stand for
/// absent keys wherever the Go build reads the map's zero value; `Option`
/// where it asks whether the key is there. In C layout, the fields read
/// for every pending job each cycle first (`Held`).
#[derive(Debug, Default)]
#[repr(C)]
pub(super) struct Memory {
    /// No victim search before then.
    pub search_backoff: Nanos,
    /// When the job, waiting, was first seen within its team's guarantee.
    pub owed_since: Option<Nanos>,
    /// Changes asked in a row; after two that did not let the job start,
    /// `backoff` holds off more until the cooldown passes.
    pub attempts: i32,
    pub backoff: Nanos,
    /// No move search before then.
    pub move_backoff: Nanos,
    /// When a replica of the job was last moved.
    pub moved_at: Option<Nanos>,
    /// Preemption rounds since it last started, and when a job past the
    /// free rounds may evict again.
    pub rounds: i32,
    pub rounds_until: Nanos,
    /// Changes asked for the job.
    pub awaiting: Vec<AskedChange>,
    /// Its prepared requests (`None` while taken out by a caller).
    pub reqs: Option<ReqEntry>,
}

/// One job ID's entry, in C layout: what a cycle reads of each pending
/// job first (`Held` and `Memory` lead with it). The entries' own fields
/// were spread over several cache lines, and reading them was a third of
/// a gang-drf cycle of a backlog.
#[derive(Debug)]
#[repr(C)]
pub(super) struct Entry {
    pub held: Held,
    pub memory: Memory,
    pub id: Arc<str>,
    /// The Go build's `byID` holds the job: from its first refresh until it
    /// is gone (incremental) or pruned.
    pub indexed: bool,
    pub part: Option<Part>,
}

/// The entries, their IDs and the free slots.
#[derive(Debug)]
pub(super) struct Table {
    pub token: u64,
    pub entries: Vec<Entry>,
    /// Each entry's epoch, which tells apart the `Job` values that held
    /// the slot: a mark of an older one is stale. Kept apart from the
    /// entries, which span many cache lines: every job's mark is checked
    /// several times a cycle.
    epochs: Vec<u64>,
    pub ids: IdMap<u32>,
    free: Vec<u32>,
    next_epoch: u64,
    /// How many entries are `indexed` (the size of the Go build's byID).
    pub indexed: usize,
}

impl Table {
    pub fn new() -> Table {
        Table {
            token: new_token(),
            entries: Vec::new(),
            epochs: Vec::new(),
            ids: IdMap::default(),
            free: Vec::new(),
            next_epoch: 1,
            indexed: 0,
        }
    }

    /// The slot of `j`'s entry, if `j` carries a current mark of this
    /// table (Go: `j.held.owner == s`).
    pub fn slot(&self, j: &Job) -> Option<usize> {
        let (owner, mark) = j.mark();
        if owner != self.token {
            return None;
        }
        let slot = (mark & 0xffff_ffff) as usize;
        let epoch = mark >> 32;
        match self.epochs.get(slot) {
            Some(&e) if e == epoch => Some(slot),
            _ => None,
        }
    }

    /// Reads `j`'s entry ahead of its use (as `Job::touch`).
    pub fn touch(&self, j: &Job) {
        if let Some(s) = self.slot(j) {
            let e = &self.entries[s];
            std::hint::black_box(e.held.team);
            std::hint::black_box(e.memory.search_backoff);
        }
    }

    /// The slot of the entry of `j`'s ID: its mark's when current (no
    /// hashing), else the ID's.
    pub fn id_slot(&self, j: &Job) -> Option<usize> {
        self.slot(j).or_else(|| self.slot_of_id(j.id()))
    }

    /// The slot of the entry of job ID `id`, if any.
    pub fn slot_of_id(&self, id: &str) -> Option<usize> {
        self.ids.get(id).map(|&s| s as usize)
    }

    /// Marks `j` as the value the entry of its ID is computed from, making
    /// the entry if the ID is new, and starts the entry's `held` over.
    pub fn claim(&mut self, j: &Job) -> usize {
        let slot = self.slot_for_id(j.id());
        let epoch = self.next_epoch;
        self.next_epoch += 1;
        self.epochs[slot] = epoch;
        self.entries[slot].held = Held::default();
        j.set_mark(self.token, (epoch << 32) | slot as u64);
        slot
    }

    /// The slot of the entry of job ID `id`, made (with no job value) if
    /// the ID is new.
    pub fn slot_for_id(&mut self, id: &str) -> usize {
        match self.ids.get(id) {
            Some(&s) => s as usize,
            None => {
                let id: Arc<str> = Arc::from(id);
                let entry = Entry {
                    id: Arc::clone(&id),
                    indexed: false,
                    held: Held::default(),
                    part: None,
                    memory: Memory::default(),
                };
                let s = match self.free.pop() {
                    Some(s) => {
                        self.entries[s as usize] = entry;
                        self.epochs[s as usize] = 0;
                        s
                    }
                    None => {
                        self.entries.push(entry);
                        self.epochs.push(0);
                        (self.entries.len() - 1) as u32
                    }
                };
                self.ids.insert(id, s);
                s as usize
            }
        }
    }

    /// Makes the marks of the entry's current value stale (Go: `owner =
    /// nil`): the next refresh starts it over.
    pub fn unmark(&mut self, slot: usize) {
        self.epochs[slot] = 0;
    }

    /// Drops the entry of an ID that left the input, with its memory.
    pub fn drop_slot(&mut self, slot: usize) {
        let e = &mut self.entries[slot];
        if e.indexed {
            e.indexed = false;
            self.indexed -= 1;
        }
        self.ids.remove(&e.id);
        self.epochs[slot] = 0;
        e.held = Held::default();
        e.part = None;
        e.memory = Memory::default();
        self.free.push(slot as u32);
    }

    /// Whether the slot holds an entry (not freed).
    pub fn in_use(&self, slot: usize) -> bool {
        self.ids
            .get(&*self.entries[slot].id)
            .is_some_and(|&s| s as usize == slot)
    }
}

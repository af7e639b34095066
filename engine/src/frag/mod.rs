//! GPU fragmentation the way the FGD paper measures it (Weng et al.,
//! "Beware of Fragmentation", USENIX ATC'23): free GPU capacity counts as
//! fragment when the tasks that typically arrive could not use it.
//!
//! The definitions follow hkust-adsl/kubernetes-scheduler-simulator
//! (pkg/utils/frag.go, GetTypicalPods and NodeGpuShareFragAmount), as
//! summarised in shared/reference/fgd-protocol.md §4.
//!
//! The fill experiment compares both builds' outputs bit for bit, so every
//! floating-point sum here is taken in the Go build's order.

use std::collections::BTreeMap;

#[cfg(test)]
mod golden;
#[cfg(test)]
mod oracle_tests;
#[cfg(test)]
mod tests;

/// A task's request as fragmentation sees it. The paper leaves host memory
/// out (`mem_mib` 0); Partita puts it in, since GPUs stranded on a node
/// whose memory is full are as lost as any other fragment.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Shape {
    pub cpu_milli: i64,
    pub mem_mib: i64,
    /// Per-GPU share: 1..=1000; 0 for CPU-only.
    pub milli: i64,
    /// GPUs; 0 for CPU-only.
    pub num: usize,
    /// Allowed models as written, `|`-separated ("" = any); part of the key.
    pub spec: String,
}

/// One frequent shape and its probability.
#[derive(Clone, Debug, PartialEq)]
pub struct Typical {
    pub shape: Shape,
    pub p: f64,
}

/// The most frequent shapes that cover 95% of tasks
/// (podPopularityThreshold=95 in the published runs).
pub const DEFAULT_THRESHOLD: f64 = 0.95;

/// The set of typical tasks, the "workload" FGD expects.
///
/// It is immutable once built, so one distribution can be shared by runs on
/// several threads. The Go build fills per-model caches on first use (a
/// `sync.Map`); here every model a spec names gets its table when the
/// distribution is built, and all other models share one table, since a
/// model no spec names is allowed exactly the tasks without a spec.
#[derive(Clone, Debug)]
pub struct Distribution {
    pods: Vec<Typical>,
    /// The tables of the models some spec names (canonical names), sorted
    /// by name.
    named: Vec<(String, ModelTable)>,
    /// The table of every other model.
    other: ModelTable,
}

/// What the measures need of the typical tasks on one GPU model.
#[derive(Clone, Debug)]
struct ModelTable {
    /// One term per typical task, in the distribution's order: the order
    /// in which the Go build adds them up.
    terms: Vec<Term>,
    /// CPU milli and memory MiB the typical mix asks per GPU milli (0 when
    /// the mix asks no GPU of this model).
    cpu_per_milli: f64,
    mem_per_milli: f64,
}

/// One typical task as seen from one GPU model.
#[derive(Clone, Copy, Debug)]
struct Term {
    p: f64,
    /// The task needs GPUs and may use this model. Otherwise every free
    /// GPU of the node is fragment for it.
    uses_gpu: bool,
    milli: i64,
    num: usize,
    cpu_milli: i64,
    mem_mib: i64,
}

/// How many of a node's GPUs the measures handle without allocating; a
/// node with more takes a heap buffer (as the Go build's arrays of 16 grow).
const STACK_GPUS: usize = 16;

/// The width of the fixed-size buffers `node_over` sums q in for a node with
/// this many distinct free amounts or fewer (that is, every node of up to 8
/// GPUs).
const NARROW: usize = 8;

/// One distinct free amount on a node's GPUs.
#[derive(Clone, Copy, Debug, Default)]
struct Room {
    /// Milli left.
    milli: i64,
    /// GPUs with exactly this much left.
    gpus: usize,
    /// The chance that one typical task could not use such a GPU
    /// (NodeOver's q).
    q: f64,
}

/// Counts shapes and keeps the most frequent ones that together cover at
/// least `threshold` of all tasks, with probabilities renormalised over the
/// kept ones. Ties in count go to the larger shape first (more CPU, then a
/// larger share, more GPUs, the later spec). `canonical` maps a model name
/// as written in a spec to the name nodes use (the GPU catalog's canonical
/// name); `None` keeps names as they are.
///
/// Memory is not part of the key (a key per memory size would split the
/// rare large tasks below the threshold); a kept shape carries the mean
/// memory of its tasks, rounded toward zero.
pub fn typicals(
    shapes: &[Shape],
    threshold: f64,
    canonical: Option<&dyn Fn(&str) -> String>,
) -> Distribution {
    struct Tally {
        count: f64,
        tasks: i64,
        memory: i64,
    }
    let mut tallies: BTreeMap<Shape, Tally> = BTreeMap::new();
    let mut total = 0.0;
    for s in shapes {
        let key = Shape {
            mem_mib: 0,
            ..s.clone()
        };
        let t = tallies.entry(key).or_insert(Tally {
            count: 0.0,
            tasks: 0,
            memory: 0,
        });
        t.count += 1.0;
        total += 1.0;
        t.tasks += 1;
        // Go's int64 wraps; so does this, should a sum ever get that big.
        t.memory = t.memory.wrapping_add(s.mem_mib);
    }
    let mut keys: Vec<(Shape, Tally)> = tallies.into_iter().collect();
    // A total order (the keys differ in cpu, milli, num or spec), so the
    // result is the Go build's whatever order the keys came in.
    keys.sort_by(|(a, ta), (b, tb)| {
        tb.count
            .total_cmp(&ta.count)
            .then_with(|| b.cpu_milli.cmp(&a.cpu_milli))
            .then_with(|| b.milli.cmp(&a.milli))
            .then_with(|| b.num.cmp(&a.num))
            .then_with(|| b.spec.cmp(&a.spec))
    });
    let mut pods = Vec::new();
    let mut cum = 0.0;
    for (key, tally) in keys {
        if cum >= threshold * total {
            break;
        }
        cum += tally.count;
        pods.push(Typical {
            shape: Shape {
                mem_mib: tally.memory / tally.tasks,
                ..key
            },
            p: tally.count,
        });
    }
    for t in &mut pods {
        t.p /= cum;
    }
    Distribution::new(pods, canonical)
}

/// The shapes with memory cleared, the paper's view.
pub fn without_memory(shapes: &[Shape]) -> Vec<Shape> {
    shapes
        .iter()
        .map(|s| Shape {
            mem_mib: 0,
            ..s.clone()
        })
        .collect()
}

impl Distribution {
    fn new(pods: Vec<Typical>, canonical: Option<&dyn Fn(&str) -> String>) -> Self {
        // Per typical task, the canonical models it may use; None = any.
        let allowed: Vec<Option<Vec<String>>> = pods
            .iter()
            .map(|t| {
                if t.shape.spec.is_empty() {
                    return None;
                }
                let models = t
                    .shape
                    .spec
                    .split('|')
                    .filter(|m| !m.is_empty())
                    .map(|m| match canonical {
                        Some(canonical) => canonical(m),
                        None => m.to_string(),
                    })
                    .collect();
                Some(models)
            })
            .collect();
        let mut names: Vec<&String> = allowed.iter().flatten().flatten().collect();
        names.sort();
        names.dedup();
        let named = names
            .into_iter()
            .map(|name| {
                let table = ModelTable::new(&pods, &allowed, |models| models.contains(name));
                (name.clone(), table)
            })
            .collect();
        let other = ModelTable::new(&pods, &allowed, |_| false);
        Distribution { pods, named, other }
    }

    /// The typical tasks, most frequent first.
    pub fn pods(&self) -> &[Typical] {
        &self.pods
    }

    fn table(&self, model: &str) -> &ModelTable {
        // A handful of models at most: a scan beats hashing the name.
        self.named
            .iter()
            .find(|(name, _)| name == model)
            .map_or(&self.other, |(_, table)| table)
    }

    /// The expected fragment of one node in GPU milli: for each typical
    /// task, the free GPU it could not use, weighted by its probability.
    /// `left` holds the milli left on each GPU; `model` is the GPUs' model;
    /// `mem_left` only matters for shapes with memory.
    ///
    /// A task that needs no GPU, may not use the model, or finds too few
    /// GPUs or too little CPU leaves all free GPU as fragment; a task that
    /// fits leaves the GPUs too small for it. The value depends on the
    /// GPUs' free amounts, not on their order.
    pub fn node(&self, model: &str, cpu_left: i64, mem_left: i64, left: &[i64]) -> f64 {
        let total: i64 = left.iter().sum();
        if total == 0 {
            return 0.0;
        }
        let mut stack = [Room::default(); STACK_GPUS];
        let mut heap = Vec::new();
        let rooms = distinct_rooms(left, &mut stack, &mut heap);
        let table = self.table(model);
        let mut f = 0.0;
        for t in &table.terms {
            let mut lost = total;
            if t.uses_gpu && cpu_left >= t.cpu_milli && mem_left >= t.mem_mib {
                // The GPUs with at least the share fit it; the others are
                // too small. Integer sums, so grouping GPUs by their free
                // amount changes nothing.
                let (mut fit, mut small) = (0, 0);
                for r in rooms.iter() {
                    if r.milli >= t.milli {
                        fit += r.gpus;
                    } else {
                        small += r.milli * r.gpus as i64;
                    }
                }
                if fit >= t.num {
                    lost = small;
                }
            }
            f += t.p * lost as f64;
        }
        f
    }

    /// [`node`](Self::node) with a horizon of `h` arrivals. `node` adds,
    /// for each free GPU j, left_j × q_j, where q_j is the chance that the
    /// next typical task could not use GPU j (it does not fit the node, or
    /// its share is bigger than left_j); `node_over` adds left_j × q_j^h,
    /// the chance that none of the next h could. A room that many frequent
    /// tasks fit (530 milli beside a 470 share, when 470s, 460s and 320s
    /// are common) is then not counted as lost, while a sliver only rare
    /// tasks fit (60, or 190 beside an 810) still is. `node_over(…, 1)`
    /// equals `node` up to rounding.
    pub fn node_over(
        &self,
        model: &str,
        cpu_left: i64,
        mem_left: i64,
        left: &[i64],
        h: usize,
    ) -> f64 {
        self.node_over_rooms(model, cpu_left, mem_left, left, h, &[])
    }

    /// [`node_over`](Self::node_over) with a horizon per room: a free GPU
    /// with l milli left is given `rooms[l]` arrivals (`h` where l is past
    /// the table).
    pub fn node_over_rooms(
        &self,
        model: &str,
        cpu_left: i64,
        mem_left: i64,
        left: &[i64],
        h: usize,
        rooms: &[usize],
    ) -> f64 {
        let total: i64 = left.iter().sum();
        if total == 0 {
            return 0.0;
        }
        // GPUs with the same milli left have the same q: it is summed once
        // per distinct value (a node's GPUs are mostly full, free or alike,
        // and the typical mix of a list with GPU models has dozens of
        // shapes).
        let mut stack = [Room::default(); STACK_GPUS];
        let mut heap = Vec::new();
        let distinct = distinct_rooms(left, &mut stack, &mut heap);
        let terms = &self.table(model).terms;
        let (cpu, mem) = (cpu_left, mem_left);
        if distinct.len() <= NARROW {
            fixed_width_chances::<NARROW>(distinct, terms, cpu, mem);
        } else if distinct.len() <= STACK_GPUS {
            fixed_width_chances::<STACK_GPUS>(distinct, terms, cpu, mem);
        } else {
            let milli: Vec<i64> = distinct.iter().map(|r| r.milli).collect();
            let gpus: Vec<usize> = distinct.iter().map(|r| r.gpus).collect();
            let mut q = vec![0.0; distinct.len()];
            add_chances(terms, cpu, mem, &milli, &gpus, &mut q);
            for (r, q) in distinct.iter_mut().zip(q) {
                r.q = q;
            }
        }
        // Summed by value in ascending order (distinct_rooms sorted them),
        // one GPU at a time, as the Go build does: the result then depends
        // on the GPUs' values and not on their order, so a share's trial
        // on each of a node's GPUs with the same room scores the same, and
        // only the first is computed (the FGD scorer relies on it). Rooms
        // of 0 or less add nothing and are skipped, as there.
        let mut f = 0.0;
        for r in distinct.iter().filter(|r| r.milli > 0) {
            let n = usize::try_from(r.milli)
                .ok()
                .and_then(|l| rooms.get(l))
                .copied()
                .unwrap_or(h);
            let mut pk = 1.0;
            for _ in 0..n {
                pk *= r.q;
            }
            for _ in 0..r.gpus {
                f += r.milli as f64 * pk;
            }
        }
        f
    }

    /// The free GPU (milli) a node would strand if the typical mix kept
    /// arriving: when its CPU or memory per free GPU is below what the mix
    /// asks, that resource runs out first and the GPU beyond it is lost.
    /// FGD's measure asks whether one task fits and cannot see this.
    pub fn unbalanced(&self, model: &str, cpu_left: i64, mem_left: i64, left: &[i64]) -> f64 {
        let total: i64 = left.iter().sum();
        if total == 0 {
            return 0.0;
        }
        let table = self.table(model);
        let mut usable = total as f64;
        // Go's min and max; with these operands (no NaN, no -0) Rust's
        // f64::min and f64::max return the same.
        if table.cpu_per_milli > 0.0 {
            usable = usable.min(cpu_left as f64 / table.cpu_per_milli);
        }
        if table.mem_per_milli > 0.0 {
            usable = usable.min(mem_left as f64 / table.mem_per_milli);
        }
        total as f64 - usable.max(0.0)
    }
}

impl ModelTable {
    /// The table of a model that the tasks whose allowed list `may_use`
    /// accepts may use (besides the tasks without a list).
    fn new(
        pods: &[Typical],
        allowed: &[Option<Vec<String>>],
        may_use: impl Fn(&[String]) -> bool,
    ) -> Self {
        let accessible: Vec<bool> = allowed
            .iter()
            .map(|models| models.as_deref().is_none_or(&may_use))
            .collect();
        let terms = pods
            .iter()
            .zip(&accessible)
            .map(|(t, &accessible)| Term {
                p: t.p,
                uses_gpu: t.shape.milli != 0 && accessible,
                milli: t.shape.milli,
                num: t.shape.num,
                cpu_milli: t.shape.cpu_milli,
                mem_mib: t.shape.mem_mib,
            })
            .collect();
        // The typical tasks that may run here, CPU-only ones too: they
        // take CPU from GPU nodes as well.
        let (mut c, mut m, mut g) = (0.0, 0.0, 0.0);
        for (t, &accessible) in pods.iter().zip(&accessible) {
            if t.shape.milli > 0 && !accessible {
                continue;
            }
            c += t.p * t.shape.cpu_milli as f64;
            m += t.p * t.shape.mem_mib as f64;
            g += t.p * (t.shape.milli * t.shape.num as i64) as f64;
        }
        let (cpu_per_milli, mem_per_milli) = if g > 0.0 { (c / g, m / g) } else { (0.0, 0.0) };
        ModelTable {
            terms,
            cpu_per_milli,
            mem_per_milli,
        }
    }
}

/// The distinct free amounts of `left`, ascending, with their GPU counts,
/// in `stack` when it has room and in `heap` otherwise.
fn distinct_rooms<'b>(
    left: &[i64],
    stack: &'b mut [Room],
    heap: &'b mut Vec<Room>,
) -> &'b mut [Room] {
    let buf: &mut [Room] = if left.len() <= stack.len() {
        stack
    } else {
        heap.resize(left.len(), Room::default());
        heap
    };
    let mut n = 0;
    for &l in left {
        // Insertion into the sorted prefix: a node has a few GPUs.
        let at = buf[..n].partition_point(|r| r.milli < l);
        if at < n && buf[at].milli == l {
            buf[at].gpus += 1;
            continue;
        }
        buf.copy_within(at..n, at + 1);
        buf[at] = Room {
            milli: l,
            gpus: 1,
            q: 0.0,
        };
        n += 1;
    }
    &mut buf[..n]
}

/// Sets each room's q: the chance that one typical task could not use a GPU
/// with that much left. The rooms are copied into buffers of width `N`,
/// padded: with the width known at compile time the compiler keeps the
/// running sums in registers, which made `node_over` a fifth faster than
/// summing in place.
fn fixed_width_chances<const N: usize>(
    rooms: &mut [Room],
    terms: &[Term],
    cpu_left: i64,
    mem_left: i64,
) {
    // A padding room fits every share (so it is never too small) and holds
    // no GPU (so it fits no task); its q is not read.
    let mut milli = [i64::MAX; N];
    let mut gpus = [0; N];
    let mut q = [0.0; N];
    for (k, r) in rooms.iter().enumerate() {
        milli[k] = r.milli;
        gpus[k] = r.gpus;
    }
    add_chances(terms, cpu_left, mem_left, &milli, &gpus, &mut q);
    for (r, q) in rooms.iter_mut().zip(q) {
        r.q = q;
    }
}

/// Adds to `q[k]` the probability of every typical task that could not use
/// a GPU with `milli[k]` left, in the tasks' order (the Go build's order of
/// the additions). `gpus[k]` GPUs have that much left.
#[inline(always)]
fn add_chances(
    terms: &[Term],
    cpu_left: i64,
    mem_left: i64,
    milli: &[i64],
    gpus: &[usize],
    q: &mut [f64],
) {
    for t in terms {
        // A task that fits the node cannot use only the GPUs too small for
        // it; one that does not, or needs no GPU of this model, none.
        let node_fits = t.uses_gpu && cpu_left >= t.cpu_milli && mem_left >= t.mem_mib && {
            let mut fit = 0;
            for (&m, &g) in milli.iter().zip(gpus) {
                fit += if m >= t.milli { g } else { 0 };
            }
            fit >= t.num
        };
        // Adding 0.0 to a q (never -0.0) leaves it as it is, which keeps
        // this loop free of branches.
        for (q, &m) in q.iter_mut().zip(milli) {
            *q += if !node_fits || m < t.milli { t.p } else { 0.0 };
        }
    }
}

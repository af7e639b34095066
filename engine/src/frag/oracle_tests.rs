//! The Go build's oracle_test.go, ported: `typicals` and `node` against a
//! naive version written straight from fgd-protocol.md §4, over random
//! workloads and nodes, and the properties the other measures promise.

use std::collections::BTreeMap;

use super::tests::{CANONICAL, EPS, canonical, near};
use super::*;
use crate::random::Rand;

/// One kept shape of the naive version.
struct NaiveTypical {
    key: Shape, // memory cleared
    mem: i64,   // mean memory
    p: f64,
    specs: Option<Vec<String>>, // canonical allowed models; None = any
}

/// Counts keys without memory, orders them by count and then by the larger
/// (cpu, milli, num, spec) with a selection sort, keeps the shortest
/// prefix with at least `threshold` of all tasks, and renormalises.
fn naive_typicals(shapes: &[Shape], threshold: f64) -> Vec<NaiveTypical> {
    let mut keys: Vec<Shape> = Vec::new();
    let mut count: BTreeMap<Shape, usize> = BTreeMap::new();
    let mut mem_sum: BTreeMap<Shape, i64> = BTreeMap::new();
    for s in shapes {
        let k = Shape {
            mem_mib: 0,
            ..s.clone()
        };
        if !count.contains_key(&k) {
            keys.push(k.clone());
        }
        *count.entry(k.clone()).or_default() += 1;
        *mem_sum.entry(k).or_default() += s.mem_mib;
    }
    let before = |a: &Shape, b: &Shape| {
        if count[a] != count[b] {
            return count[a] > count[b];
        }
        if a.cpu_milli != b.cpu_milli {
            return a.cpu_milli > b.cpu_milli;
        }
        if a.milli != b.milli {
            return a.milli > b.milli;
        }
        if a.num != b.num {
            return a.num > b.num;
        }
        a.spec > b.spec
    };
    for i in 0..keys.len() {
        for j in i + 1..keys.len() {
            if before(&keys[j], &keys[i]) {
                keys.swap(i, j);
            }
        }
    }
    let mut out = Vec::new();
    let mut kept = 0;
    for k in keys {
        if kept as f64 >= threshold * shapes.len() as f64 {
            break;
        }
        kept += count[&k];
        let specs = (!k.spec.is_empty()).then(|| k.spec.split('|').map(canonical).collect());
        out.push(NaiveTypical {
            mem: mem_sum[&k] / count[&k] as i64,
            p: count[&k] as f64,
            specs,
            key: k,
        });
    }
    for t in &mut out {
        t.p /= kept as f64;
    }
    out
}

/// §4's node fragmentation, with Partita's host memory check.
fn naive_node(
    typ: &[NaiveTypical],
    model: &str,
    cpu_left: i64,
    mem_left: i64,
    left: &[i64],
) -> f64 {
    let total: i64 = left.iter().sum();
    let mut f = 0.0;
    for k in typ {
        let allowed = k
            .specs
            .as_ref()
            .is_none_or(|specs| specs.iter().any(|m| m == model));
        if k.key.milli == 0 || !allowed {
            f += k.p * total as f64;
            continue;
        }
        let (mut gpus, mut small) = (0, 0);
        for &l in left {
            if l >= k.key.milli {
                gpus += 1;
            } else {
                small += l;
            }
        }
        if gpus >= k.key.num && cpu_left >= k.key.cpu_milli && mem_left >= k.mem {
            f += k.p * small as f64;
        } else {
            f += k.p * total as f64;
        }
    }
    f
}

fn pick<T: Clone>(rng: &mut Rand, items: &[T]) -> T {
    items[rng.below(items.len())].clone()
}

/// A workload drawn from a small alphabet, so that shapes repeat and
/// counts tie.
pub(super) fn random_shapes(rng: &mut Rand, n: usize) -> Vec<Shape> {
    let cpus = [0, 1000, 2000, 4000, 8000];
    let mems = [0, 1024, 4096];
    let shares = [100, 250, 500, 750, 900];
    let gpus = [1, 2, 4, 8];
    let specs = ["", "", "V100M16", "V100M16|V100M32", "G2", "G2|G3"];
    (0..n)
        .map(|_| {
            let mut s = Shape {
                cpu_milli: pick(rng, &cpus),
                mem_mib: pick(rng, &mems),
                ..Shape::default()
            };
            match rng.below(3) {
                0 => {} // CPU-only
                1 => {
                    s.milli = pick(rng, &shares);
                    s.num = 1;
                    s.spec = pick(rng, &specs).to_string();
                }
                _ => {
                    s.milli = 1000;
                    s.num = pick(rng, &gpus);
                    s.spec = pick(rng, &specs).to_string();
                }
            }
            s
        })
        .collect()
}

/// What a node has left.
#[derive(Debug)]
struct NodeLeft {
    model: &'static str,
    cpu: i64,
    mem: i64,
    gpu_left: Vec<i64>,
}

fn random_node(rng: &mut Rand) -> NodeLeft {
    let models = ["V100-16GB", "V100-32GB", "G2", "G3"];
    let steps = [0, 100, 250, 499, 500, 750, 1000, 1000];
    let model = pick(rng, &models);
    let cpu = rng.below(10) as i64 * 1000;
    let mem = rng.below(6) as i64 * 1024;
    let n = pick(rng, &[1, 2, 4, 8]);
    let gpu_left = (0..n)
        .map(|_| {
            if rng.below(4) == 0 {
                rng.below(1001) as i64
            } else {
                pick(rng, &steps)
            }
        })
        .collect();
    NodeLeft {
        model,
        cpu,
        mem,
        gpu_left,
    }
}

/// A random distribution of 5 to 104 tasks at the default threshold.
fn random_distribution(rng: &mut Rand) -> Distribution {
    let n = 5 + rng.below(100);
    typicals(&random_shapes(rng, n), DEFAULT_THRESHOLD, CANONICAL)
}

#[test]
fn typicals_and_node_agree_with_a_naive_version() {
    for seed in 1..=40 {
        let mut rng = Rand::new(seed);
        let n = 5 + rng.below(200);
        let shapes = random_shapes(&mut rng, n);
        let threshold = pick(&mut rng, &[0.5, 0.8, DEFAULT_THRESHOLD, 1.0]);
        let d = typicals(&shapes, threshold, CANONICAL);
        let naive = naive_typicals(&shapes, threshold);
        assert_eq!(d.pods().len(), naive.len(), "seed {seed}: kept shapes");
        for (i, (t, want)) in d.pods().iter().zip(&naive).enumerate() {
            let want_shape = Shape {
                mem_mib: want.mem,
                ..want.key.clone()
            };
            assert!(
                t.shape == want_shape && near(t.p, want.p),
                "seed {seed}: shape {i} = {:?} P {}, naive {want_shape:?} P {}",
                t.shape,
                t.p,
                want.p
            );
        }
        for _ in 0..50 {
            let n = random_node(&mut rng);
            let got = d.node(n.model, n.cpu, n.mem, &n.gpu_left);
            let want = naive_node(&naive, n.model, n.cpu, n.mem, &n.gpu_left);
            assert!(
                near(got, want),
                "seed {seed}: node({n:?}) = {got}, naive {want}"
            );
        }
    }
}

/// What any fragment measure must satisfy: none without free GPU, never
/// negative, never more than the free GPU.
#[test]
fn partita_measures_stay_in_range() {
    type Measure = fn(&Distribution, &NodeLeft) -> f64;
    let measures: [(&str, Measure); 2] = [
        ("unbalanced", |d, n| {
            d.unbalanced(n.model, n.cpu, n.mem, &n.gpu_left)
        }),
        ("node_over 5", |d, n| {
            d.node_over(n.model, n.cpu, n.mem, &n.gpu_left, 5)
        }),
    ];
    for (name, measure) in measures {
        for seed in 1..=20 {
            let mut rng = Rand::new(seed);
            let d = random_distribution(&mut rng);
            let full = NodeLeft {
                model: "V100-16GB",
                cpu: 8000,
                mem: 8192,
                gpu_left: vec![0; 4],
            };
            assert_eq!(
                measure(&d, &full),
                0.0,
                "seed {seed}: {name} with no free GPU"
            );
            for _ in 0..50 {
                let n = random_node(&mut rng);
                let total = n.gpu_left.iter().sum::<i64>() as f64;
                let got = measure(&d, &n);
                assert!(
                    got >= -EPS && got <= total + EPS * total,
                    "seed {seed}: {name}({n:?}) = {got}, want within 0..{total}"
                );
            }
        }
    }
}

/// A horizon of one task is FGD's fragment, and a longer one never counts
/// more.
#[test]
fn node_over_one_arrival_is_node() {
    for seed in 1..=20 {
        let mut rng = Rand::new(seed);
        let d = random_distribution(&mut rng);
        for _ in 0..50 {
            let n = random_node(&mut rng);
            let one = d.node_over(n.model, n.cpu, n.mem, &n.gpu_left, 1);
            let node = d.node(n.model, n.cpu, n.mem, &n.gpu_left);
            assert!(
                near(one, node),
                "seed {seed}: node_over({n:?}, 1) = {one}, node {node}"
            );
            let five = d.node_over(n.model, n.cpu, n.mem, &n.gpu_left, 5);
            assert!(
                five <= one + EPS * one.max(1.0),
                "seed {seed}: node_over({n:?}, 5) = {five}, more than over one task ({one})"
            );
        }
    }
}

/// `node_over_rooms` gives a free GPU with l milli left rooms[l] arrivals,
/// and h where l is past the table: without a table, or with one that
/// holds the same horizon c for every room, it is `node_over` with h, or
/// with c.
#[test]
fn node_over_rooms_per_room() {
    for seed in 1..=20 {
        let mut rng = Rand::new(seed);
        let d = random_distribution(&mut rng);
        for _ in 0..50 {
            let n = random_node(&mut rng);
            let h = 1 + rng.below(10);
            let c = 1 + rng.below(20);
            let rooms = vec![c; 1001];
            let over = |h| d.node_over(n.model, n.cpu, n.mem, &n.gpu_left, h);
            let with =
                |rooms: &[usize]| d.node_over_rooms(n.model, n.cpu, n.mem, &n.gpu_left, h, rooms);
            assert!(near(with(&[]), over(h)), "seed {seed}: no table, {n:?}");
            assert!(near(with(&rooms), over(c)), "seed {seed}: all {c}, {n:?}");
            assert!(
                near(with(&rooms[..1]), over(h)),
                "seed {seed}: room 0 only, {n:?}"
            );
        }
    }
}

/// `node` and `node_over` give exactly the same value, not merely a near
/// one, for any order of the same GPUs. The FGD scorer relies on it: a
/// share is tried on only the first of a node's GPUs with the same room,
/// and the others would score the same.
#[test]
fn node_measures_depend_on_the_rooms_not_their_order() {
    for seed in 1..=20 {
        let mut rng = Rand::new(seed);
        let d = random_distribution(&mut rng);
        for _ in 0..50 {
            let n = random_node(&mut rng);
            let h = 1 + rng.below(20);
            let node = d.node(n.model, n.cpu, n.mem, &n.gpu_left);
            let over = d.node_over(n.model, n.cpu, n.mem, &n.gpu_left, h);
            for _ in 0..5 {
                let mut p = n.gpu_left.clone();
                rng.shuffle(&mut p);
                assert_eq!(
                    d.node(n.model, n.cpu, n.mem, &p),
                    node,
                    "seed {seed}: {p:?}"
                );
                assert_eq!(
                    d.node_over(n.model, n.cpu, n.mem, &p, h),
                    over,
                    "seed {seed}: {p:?}"
                );
            }
        }
    }
}

/// `node_over_rooms` per GPU, straight from its definition: q_j adds the
/// probability of each typical task that could not use GPU j, in the
/// tasks' order; the result adds left_j × q_j^n one GPU at a time in
/// ascending order of left_j. That is the Go build's order of operations,
/// so the values must be equal, not merely near.
fn naive_node_over(
    d: &Distribution,
    model: &str,
    cpu: i64,
    mem: i64,
    left: &[i64],
    h: usize,
    rooms: &[usize],
) -> f64 {
    let table = d.table(model);
    let mut sorted = left.to_vec();
    sorted.sort();
    let mut f = 0.0;
    for &l in sorted.iter().filter(|&&l| l > 0) {
        let mut q = 0.0;
        for t in &table.terms {
            let fit = left.iter().filter(|&&x| x >= t.milli).count();
            let node_fits = t.uses_gpu && fit >= t.num && cpu >= t.cpu_milli && mem >= t.mem_mib;
            if !node_fits || l < t.milli {
                q += t.p;
            }
        }
        let n = rooms.get(l as usize).copied().unwrap_or(h);
        let mut qn = 1.0;
        for _ in 0..n {
            qn *= q;
        }
        f += l as f64 * qn;
    }
    f
}

#[test]
fn node_over_rooms_equals_its_definition_for_any_number_of_gpus() {
    for seed in 1..=20 {
        let mut rng = Rand::new(seed);
        let d = random_distribution(&mut rng);
        // Up to 40 GPUs: the 8- and 16-wide buffers and the heap.
        for gpus in 1..=40 {
            let mut n = random_node(&mut rng);
            n.gpu_left = (0..gpus)
                .map(|_| {
                    if rng.below(3) == 0 {
                        rng.below(1001) as i64
                    } else {
                        250 * rng.below(5) as i64
                    }
                })
                .collect();
            let h = 1 + rng.below(20);
            let rooms: Vec<usize> = (0..rng.below(1002)).map(|_| rng.below(30)).collect();
            let got = d.node_over_rooms(n.model, n.cpu, n.mem, &n.gpu_left, h, &rooms);
            let want = naive_node_over(&d, n.model, n.cpu, n.mem, &n.gpu_left, h, &rooms);
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "seed {seed}: {n:?} h {h}: {got} != {want}"
            );
        }
    }
}

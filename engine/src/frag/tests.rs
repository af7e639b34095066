//! The Go build's frag_test.go, ported.

use super::*;

/// Builds a Shape: `shape().cpu(2000).share(500).spec("G3")`.
#[derive(Clone, Default)]
pub(super) struct ShapeBuilder(pub Shape);

pub(super) fn shape() -> ShapeBuilder {
    ShapeBuilder::default()
}

impl ShapeBuilder {
    pub fn cpu(mut self, milli: i64) -> Self {
        self.0.cpu_milli = milli;
        self
    }
    pub fn mem(mut self, mib: i64) -> Self {
        self.0.mem_mib = mib;
        self
    }
    pub fn share(mut self, milli: i64) -> Self {
        self.0.milli = milli;
        self.0.num = 1;
        self
    }
    pub fn gpus(mut self, n: usize) -> Self {
        self.0.milli = 1000;
        self.0.num = n;
        self
    }
    pub fn spec(mut self, s: &str) -> Self {
        self.0.spec = s.to_string();
        self
    }
    pub fn s(&self) -> Shape {
        self.0.clone()
    }
}

/// `count` copies of each shape, in the order given.
fn tasks(groups: &[(usize, ShapeBuilder)]) -> Vec<Shape> {
    groups
        .iter()
        .flat_map(|(count, b)| std::iter::repeat_n(b.s(), *count))
        .collect()
}

/// The model-name mapping every caller passes: the GPU catalog's
/// canonical name.
pub(super) fn canonical(name: &str) -> String {
    crate::gpu::lookup(name).name.clone()
}

/// What `typicals` takes to canonicalise model names.
pub(super) type Canonical<'a> = Option<&'a dyn Fn(&str) -> String>;

pub(super) const CANONICAL: Canonical = Some(&canonical);

pub(super) const EPS: f64 = 1e-9;

pub(super) fn near(a: f64, b: f64) -> bool {
    (a - b).abs() <= EPS * b.abs().max(1.0)
}

#[test]
fn typicals_counts_and_orders_shapes() {
    struct Case {
        name: &'static str,
        tasks: Vec<Shape>,
        threshold: f64,
        want: Vec<Shape>,
        want_p: Vec<f64>,
    }
    let cases = [
        Case {
            name: "orders by count, most frequent first",
            tasks: tasks(&[(1, shape().share(100)), (3, shape().gpus(1)), (2, shape())]),
            threshold: 1.0,
            want: vec![shape().gpus(1).s(), shape().s(), shape().share(100).s()],
            want_p: vec![3.0 / 6.0, 2.0 / 6.0, 1.0 / 6.0],
        },
        Case {
            name: "breaks a tie in count by more CPU first",
            tasks: tasks(&[
                (2, shape().cpu(2000).share(900)),
                (2, shape().cpu(4000).share(100)),
            ]),
            threshold: 1.0,
            want: vec![
                shape().cpu(4000).share(100).s(),
                shape().cpu(2000).share(900).s(),
            ],
            want_p: vec![0.5, 0.5],
        },
        Case {
            name: "breaks a tie in CPU by the larger share first",
            tasks: tasks(&[(2, shape().share(300)), (2, shape().share(700))]),
            threshold: 1.0,
            want: vec![shape().share(700).s(), shape().share(300).s()],
            want_p: vec![0.5, 0.5],
        },
        Case {
            name: "breaks a tie in share by more GPUs first",
            tasks: tasks(&[
                (1, shape().gpus(2)),
                (1, shape().gpus(8)),
                (1, shape().gpus(4)),
            ]),
            threshold: 1.0,
            want: vec![
                shape().gpus(8).s(),
                shape().gpus(4).s(),
                shape().gpus(2).s(),
            ],
            want_p: vec![1.0 / 3.0; 3],
        },
        Case {
            name: "breaks a tie in GPUs by the later spec first",
            tasks: tasks(&[
                (1, shape().share(500).spec("G2")),
                (1, shape().share(500).spec("G3")),
                (1, shape().share(500)),
            ]),
            threshold: 1.0,
            want: vec![
                shape().share(500).spec("G3").s(),
                shape().share(500).spec("G2").s(),
                shape().share(500).s(),
            ],
            want_p: vec![1.0 / 3.0; 3],
        },
        Case {
            name: "keeps the smallest prefix that reaches the threshold",
            tasks: tasks(&[(5, shape().share(500)), (3, shape().gpus(1)), (2, shape())]),
            threshold: 0.8,
            want: vec![shape().share(500).s(), shape().gpus(1).s()],
            want_p: vec![5.0 / 8.0, 3.0 / 8.0],
        },
        Case {
            name: "keeps one more shape just past the threshold",
            tasks: tasks(&[(5, shape().share(500)), (3, shape().gpus(1)), (2, shape())]),
            threshold: 0.81,
            want: vec![shape().share(500).s(), shape().gpus(1).s(), shape().s()],
            want_p: vec![0.5, 0.3, 0.2],
        },
        Case {
            name: "keeps the first shape alone when it covers the threshold",
            tasks: tasks(&[(19, shape().share(500)), (1, shape().gpus(1))]),
            threshold: DEFAULT_THRESHOLD,
            want: vec![shape().share(500).s()],
            want_p: vec![1.0],
        },
        Case {
            name: "keys shapes by spec as written",
            tasks: tasks(&[
                (2, shape().share(500).spec("V100M16")),
                (1, shape().share(500).spec("V100-16GB")),
            ]),
            threshold: 1.0,
            want: vec![
                shape().share(500).spec("V100M16").s(),
                shape().share(500).spec("V100-16GB").s(),
            ],
            want_p: vec![2.0 / 3.0, 1.0 / 3.0],
        },
    ];
    for c in cases {
        let d = typicals(&c.tasks, c.threshold, CANONICAL);
        let got: Vec<&Shape> = d.pods().iter().map(|t| &t.shape).collect();
        let want: Vec<&Shape> = c.want.iter().collect();
        assert_eq!(got, want, "{}", c.name);
        for (t, want_p) in d.pods().iter().zip(&c.want_p) {
            assert!(near(t.p, *want_p), "{}: P {} want {}", c.name, t.p, want_p);
        }
        let sum: f64 = d.pods().iter().map(|t| t.p).sum();
        assert!(near(sum, 1.0), "{}: probabilities sum to {sum}", c.name);
    }
}

#[test]
fn typicals_averages_memory_instead_of_keying_on_it() {
    let ts = tasks(&[
        (1, shape().cpu(1000).mem(1000).share(500)),
        (1, shape().cpu(1000).mem(2000).share(500)),
        (1, shape().cpu(1000).mem(4000).share(500)),
        (1, shape().gpus(1).mem(300)),
    ]);
    let d = typicals(&ts, 1.0, CANONICAL);
    assert_eq!(
        d.pods().len(),
        2,
        "memory is not part of the key: {:?}",
        d.pods()
    );
    let first = &d.pods()[0];
    assert_eq!(first.shape, shape().cpu(1000).mem(7000 / 3).share(500).s());
    assert!(near(first.p, 0.75));
    assert_eq!(d.pods()[1].shape.mem_mib, 300);
}

#[test]
fn without_memory_clears_memory_only() {
    let input = tasks(&[(1, shape().cpu(1000).mem(2048).share(500).spec("G2"))]);
    let out = without_memory(&input);
    assert_eq!(out[0], shape().cpu(1000).share(500).spec("G2").s());
    assert_eq!(input[0].mem_mib, 2048, "without_memory changed its input");
}

/// a (.4) 500 milli and b (.3) 2 GPUs, both 2000 CPU or more; c (.2)
/// CPU-only; d (.1) 200 milli on G3 only.
pub(super) fn mix() -> Distribution {
    let ts = tasks(&[
        (4, shape().cpu(2000).share(500)),
        (3, shape().cpu(4000).gpus(2)),
        (2, shape().cpu(1000)),
        (1, shape().share(200).spec("G3")),
    ]);
    typicals(&ts, 1.0, CANONICAL)
}

#[test]
fn node_cases() {
    let cases: &[(&str, &str, i64, &[i64], f64)] = &[
        // L = 2400; GPUs under 500 hold 400, under 1000 hold 400 too.
        //   a fits: .4 × 400; b fits: .3 × 400; c: .2 × L; d excluded: .1 × L
        (
            "adds the small GPUs of fitting tasks and all of L otherwise",
            "V100-16GB",
            8000,
            &[1000, 1000, 300, 100],
            0.4 * 400.0 + 0.3 * 400.0 + 0.2 * 2400.0 + 0.1 * 2400.0,
        ),
        //   b is short of CPU: .3 × L
        (
            "adds all of L for a task short of CPU",
            "V100-16GB",
            3000,
            &[1000, 1000, 300, 100],
            0.4 * 400.0 + 0.3 * 2400.0 + 0.2 * 2400.0 + 0.1 * 2400.0,
        ),
        //   a and b short of CPU
        (
            "adds all of L for every task short of CPU",
            "V100-16GB",
            1999,
            &[1000, 1000, 300, 100],
            0.4 * 2400.0 + 0.3 * 2400.0 + 0.2 * 2400.0 + 0.1 * 2400.0,
        ),
        // L = 2000; b finds one free GPU of two: .3 × L
        (
            "adds all of L for a task without enough GPUs",
            "V100-16GB",
            8000,
            &[1000, 600, 300, 100],
            0.4 * 400.0 + 0.3 * 2000.0 + 0.2 * 2000.0 + 0.1 * 2000.0,
        ),
        // d may use G3 and fits: .1 × 100
        (
            "adds only the small GPUs of a spec that allows the model",
            "G3",
            8000,
            &[1000, 1000, 300, 100],
            0.4 * 400.0 + 0.3 * 400.0 + 0.2 * 2400.0 + 0.1 * 100.0,
        ),
        // L = 900: a (500) fits on one GPU, b fits nowhere.
        (
            "counts a GPU with exactly the share as fitting",
            "V100-16GB",
            8000,
            &[500, 400],
            0.4 * 400.0 + 0.3 * 900.0 + 0.2 * 900.0 + 0.1 * 900.0,
        ),
        ("is zero without free GPU", "V100-16GB", 8000, &[0, 0], 0.0),
        ("is zero on a node without GPUs", "", 8000, &[], 0.0),
    ];
    let d = mix();
    for &(name, model, cpu_left, left, want) in cases {
        let got = d.node(model, cpu_left, 0, left);
        assert!(
            near(got, want),
            "{name}: node({model}, cpu {cpu_left}, {left:?}) = {got}, want {want}"
        );
    }
}

#[test]
fn node_over_counts_each_gpu_by_the_chance_none_of_the_next_tasks_uses_it() {
    // On V100 with 8000 CPU, the free GPUs of 1000 fit a and b:
    // q = .2 + .1 = .3; 300 and 100 fit neither: q = 1.
    let d = mix();
    let left = [1000, 1000, 300, 100];
    for h in [1, 2, 5] {
        let want = 2000.0 * 0.3f64.powi(h as i32) + 400.0;
        let got = d.node_over("V100-16GB", 8000, 0, &left, h);
        assert!(
            near(got, want),
            "node_over({left:?}, h={h}) = {got}, want {want}"
        );
    }
    // Short of CPU, nothing fits anywhere: q = 1 everywhere, whatever h.
    let got = d.node_over("V100-16GB", 1999, 0, &left, 5);
    assert!(
        near(got, 2400.0),
        "node_over short of CPU = {got}, want all 2400"
    );
}

#[test]
fn node_counts_free_gpus_as_fragment_for_cpu_only_tasks_whatever_the_cpu() {
    let d = typicals(&tasks(&[(1, shape().cpu(64000))]), 1.0, CANONICAL);
    for cpu in [0, 64000] {
        assert_eq!(
            d.node("V100-16GB", cpu, 0, &[1000, 250]),
            1250.0,
            "cpu left {cpu}"
        );
    }
}

#[test]
fn node_canonicalises_the_spec() {
    let ts = tasks(&[(1, shape().share(500).spec("V100M16|V100M32"))]);
    let cases: &[(&str, Canonical, &str, f64)] = &[
        (
            "lets a trace spec use the canonical model",
            CANONICAL,
            "V100-16GB",
            100.0,
        ),
        (
            "lets either model of the spec",
            CANONICAL,
            "V100-32GB",
            100.0,
        ),
        (
            "excludes a model the spec does not name",
            CANONICAL,
            "G2",
            1100.0,
        ),
        (
            "compares names as written without a mapping",
            None,
            "V100-16GB",
            1100.0,
        ),
        (
            "matches names as written without a mapping",
            None,
            "V100M16",
            100.0,
        ),
    ];
    for &(name, canonical, model, want) in cases {
        let d = typicals(&ts, 1.0, canonical);
        assert_eq!(d.node(model, 0, 0, &[1000, 100]), want, "{name}");
    }
}

#[test]
fn node_counts_host_memory_only_for_shapes_that_have_it() {
    let with_memory = typicals(&tasks(&[(1, shape().mem(4096).share(500))]), 1.0, CANONICAL);
    assert_eq!(
        with_memory.node("V100-16GB", 0, 4095, &[1000, 100]),
        1100.0,
        "memory short"
    );
    assert_eq!(
        with_memory.node("V100-16GB", 0, 4096, &[1000, 100]),
        100.0,
        "memory enough"
    );
    let paper = typicals(
        &without_memory(&tasks(&[(1, shape().mem(4096).share(500))])),
        1.0,
        CANONICAL,
    );
    assert_eq!(
        paper.node("V100-16GB", 0, 0, &[1000, 100]),
        100.0,
        "paper view"
    );
}

#[test]
fn measures_handle_nodes_with_more_gpus_than_the_stack_buffer() {
    let d = mix();
    // 20 GPUs with 19 distinct amounts, more than the stack buffer holds:
    // checked against a hand count and against the GPUs in reverse order.
    let mut left: Vec<i64> = (0..18).map(|i| 50 * i + 10).collect();
    left.extend([1000, 1000]);
    let total: i64 = left.iter().sum();
    let small_500: i64 = left.iter().filter(|&&l| l < 500).sum();
    let small_1000: i64 = left.iter().filter(|&&l| l < 1000).sum();
    let want =
        0.4 * small_500 as f64 + 0.3 * small_1000 as f64 + 0.2 * total as f64 + 0.1 * total as f64;
    assert!(near(d.node("V100-16GB", 8000, 0, &left), want));
    let mut reversed = left.clone();
    reversed.reverse();
    assert_eq!(
        d.node_over("V100-16GB", 8000, 0, &left, 7),
        d.node_over("V100-16GB", 8000, 0, &reversed, 7)
    );
    assert!(near(d.node_over("V100-16GB", 8000, 0, &left, 1), want));
}

#[test]
fn unbalanced_counts_the_gpu_beyond_the_cpu_and_memory_of_the_mix() {
    // One shape: 2000 CPU and 1024 MiB per 500 milli, i.e. 4 CPU milli and
    // 2.048 MiB per GPU milli.
    let d = typicals(
        &tasks(&[(1, shape().cpu(2000).mem(1024).share(500))]),
        1.0,
        CANONICAL,
    );
    // 2000 milli free: needs 8000 CPU and 4096 MiB.
    let left = [1000, 1000];
    assert_eq!(d.unbalanced("T4", 8000, 4096, &left), 0.0);
    // CPU for 1000 milli only.
    assert_eq!(d.unbalanced("T4", 4000, 4096, &left), 1000.0);
    // Memory for 500 milli only.
    assert_eq!(d.unbalanced("T4", 8000, 1024, &left), 1500.0);
    // Nothing left at all, or less than nothing: all of it.
    assert_eq!(d.unbalanced("T4", -100, 4096, &left), 2000.0);
    assert_eq!(d.unbalanced("T4", 8000, 4096, &[0, 0]), 0.0);
    // A mix without GPU tasks for the model asks nothing per GPU milli.
    let cpu_only = typicals(&tasks(&[(1, shape().cpu(2000))]), 1.0, CANONICAL);
    assert_eq!(cpu_only.unbalanced("T4", 0, 0, &left), 0.0);
}

#[test]
fn distribution_can_be_shared_between_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<Distribution>();
    let d = mix();
    let left = [1000, 500, 250];
    let here = d.node_over("V100-16GB", 8000, 0, &left, 5);
    let there = std::thread::scope(|s| {
        s.spawn(|| d.node_over("V100-16GB", 8000, 0, &left, 5))
            .join()
            .expect("thread")
    });
    assert_eq!(here, there);
}

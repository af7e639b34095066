//! Partita's reservation (`Reserve`) on its own: which placements it puts
//! behind the others. The Go build has no test of its own for it; these
//! cases are worked out by hand from reserve.go's rules.

use crate::cluster::State;
use crate::frag::Shape;
use crate::placement::{Adjuster, Hint, Request};
use crate::policies::reserve::{RESERVE_PENALTY, Reserve};

use super::helpers::{TaskBuilder, allocate_on, canonical, node, running, shape, task, world};

const FACTOR: f64 = 1.5;

fn request(b: TaskBuilder) -> Request {
    Request::new(b.build(), 0.1).expect("a valid task")
}

/// `count` copies of a shape.
fn many(s: Shape, count: usize) -> Vec<Shape> {
    vec![s; count]
}

/// Node "a" (position 0) empty, node "b" (1) running one share: only "a"
/// can host an 8-GPU task.
fn one_host() -> State {
    let mut st = world(vec![
        node("a").gpus(8, "V100-32GB"),
        node("b").gpus(8, "V100-32GB"),
    ]);
    allocate_on(&mut st, "b", vec![running("x").share(0, 500)]);
    st
}

/// The adjusted score of every node for `r` (from 0).
fn adjusted(res: &mut Reserve, st: &State, r: &Request, hint: Option<&Hint>) -> Vec<i64> {
    res.prepare(st, r);
    (0..st.len())
        .map(|i| res.adjust(i, st.node(i), r, 0, hint))
        .collect()
}

#[test]
fn keeps_the_last_host_of_a_frequent_multi_gpu_size() {
    // 8-GPU tasks are 3·8000/(3·8000 + 500) of GPU demand: of the 15.5
    // free GPUs, 15.5·0.98/8·1.5 = 2.8 hosts are expected to be asked for,
    // and there is 1. A whole GPU on "a" would leave 7 free: put behind.
    let mut shapes = many(shape().gpus(8).s, 3);
    shapes.push(shape().share(500).s);
    let mut res = Reserve::new(&shapes, FACTOR, canonical);
    let st = one_host();
    let r = request(task("t").gpus(1));
    assert_eq!(adjusted(&mut res, &st, &r, None), vec![-RESERVE_PENALTY, 0]);
    // A share that the scorer hints onto a fully free GPU of "a" takes it
    // too; one without a hint is counted as taking none.
    let share = request(task("t").share(300));
    assert_eq!(
        adjusted(&mut res, &st, &share, Some(&Hint::on_gpu(3))),
        vec![-RESERVE_PENALTY, 0]
    );
    assert_eq!(adjusted(&mut res, &st, &share, None), vec![0, 0]);
}

#[test]
fn lets_hosts_go_while_they_are_plenty() {
    // 8-GPU tasks are 8000/(8000 + 100·500) of GPU demand: 15.5·0.14/8·1.5
    // = 0.4 hosts expected, fewer than the one there is.
    let mut shapes = many(shape().share(500).s, 100);
    shapes.push(shape().gpus(8).s);
    let mut res = Reserve::new(&shapes, FACTOR, canonical);
    let r = request(task("t").gpus(1));
    assert_eq!(adjusted(&mut res, &one_host(), &r, None), vec![0, 0]);
}

#[test]
fn counts_the_cpu_a_multi_gpu_task_needs() {
    // The 8-GPU tasks ask 64 cores: a CPU-only task that leaves "a" 28
    // cores takes its last host as surely as a GPU would; one that leaves
    // 64 does not.
    let shapes = many(shape().cpu(64000).gpus(8).s, 3);
    let mut res = Reserve::new(&shapes, FACTOR, canonical);
    let st = one_host();
    let heavy = request(task("t").cpu(100_000));
    assert_eq!(
        adjusted(&mut res, &st, &heavy, None),
        vec![-RESERVE_PENALTY, 0]
    );
    let light = request(task("t").cpu(64_000));
    assert_eq!(adjusted(&mut res, &st, &light, None), vec![0, 0]);
}

#[test]
fn keeps_a_scarce_model_for_the_tasks_that_need_it() {
    // Half the GPU demand may run only on V100-32GB, of which 8 of 16 free
    // GPUs are: 8 ≤ 16·0.5·1.5, scarce. A task allowed anywhere goes to
    // the V100-16GB node first; one that needs the V100-32GB does not.
    let mut shapes = many(shape().share(500).s, 2);
    for s in &mut shapes[..1] {
        s.spec = "V100M32".to_string();
    }
    let mut res = Reserve::new(&shapes, FACTOR, canonical);
    let st = world(vec![
        node("v32").gpus(8, "V100-32GB"),
        node("v16").gpus(8, "V100-16GB"),
    ]);
    let anywhere = request(task("t").share(500));
    assert_eq!(
        adjusted(&mut res, &st, &anywhere, None),
        vec![-RESERVE_PENALTY, 0]
    );
    let only_there = request(task("t").share(500).on(&["V100M32"]));
    assert_eq!(adjusted(&mut res, &st, &only_there, None), vec![0, 0]);
    // A CPU-only task is never kept off a model.
    let cpu = request(task("t").cpu(1000));
    assert_eq!(adjusted(&mut res, &st, &cpu, None), vec![0, 0]);
}

#[test]
fn reads_a_state_of_another_node_set_afresh() {
    // Two States built apart number their changes alike: the same
    // versions and generations, other contents ("b" runs a share in the
    // first, a CPU-only task in the second, so it can host an 8-GPU task
    // there). The reservation keys on the node set too, so it sees the
    // second one's two hosts, both of them needed (2 ≤ 2.9).
    let mut shapes = many(shape().gpus(8).s, 3);
    shapes.push(shape().share(500).s);
    let mut res = Reserve::new(&shapes, FACTOR, canonical);
    let first = one_host();
    let mut second = world(vec![
        node("a").gpus(8, "V100-32GB"),
        node("b").gpus(8, "V100-32GB"),
    ]);
    allocate_on(&mut second, "b", vec![running("x").cpu(1000)]);
    assert_eq!(first.version(), second.version());
    assert_eq!(first.generation(1), second.generation(1));
    let r = request(task("t").gpus(1));
    assert_eq!(
        adjusted(&mut res, &first, &r, None),
        vec![-RESERVE_PENALTY, 0]
    );
    assert_eq!(
        adjusted(&mut res, &second, &r, None),
        vec![-RESERVE_PENALTY, -RESERVE_PENALTY]
    );
    // And a change to a State it saw is seen: no host left, none to keep.
    let mut changed = first.clone();
    allocate_on(&mut changed, "a", vec![running("y").share(1, 500)]);
    assert_eq!(adjusted(&mut res, &changed, &r, None), vec![0, 0]);
}

//! The scheduler reads only the jobs the world lists as changed
//! (`sched::Input::incremental`): Go's incremental_test.go.

use super::super::{Options, SCHEDULERS};
use super::{checked, load, run_world_with};
use crate::scenario::duration::HOUR;
use crate::sched::Phase;

/// Every scheduler decides exactly as it does when it reads every job
/// each cycle. (The Go build runs a day of each; a debug build runs 12
/// hours of default.yaml and a day of tight-guarantees.yaml for partita,
/// which preempts there.)
#[test]
fn incremental_inputs_decide_as_full_ones() {
    for (file, hours, schedulers) in [
        ("default.yaml", 12, &SCHEDULERS[..]),
        ("tight-guarantees.yaml", 24, &["partita"][..]),
    ] {
        let mut sc = load(&format!("scenarios/{file}"));
        sc.duration = hours * HOUR;
        for &name in schedulers {
            let full = Options {
                full_inputs: true,
                ..Options {
                    scheduler: name.to_string(),
                    seed: 3,
                    ..Options::default()
                }
            };
            let (full, _) = run_world_with(&sc, &full);
            let (listed, _) = run_world_with(&sc, &checked(name, 3));
            if name == "partita" {
                assert!(
                    full.preemptions > 0,
                    "{file}, {name}: no preemption: the comparison misses the victim searches"
                );
            }
            assert_eq!(full, listed, "{file}, {name}: the runs differ");
        }
    }
}

/// A change of a job that the world does not list shows in the check of
/// the kept sums (`Options::check`): a world that forgets one fails its
/// run instead of scheduling from wrong sums.
#[test]
fn an_unlisted_change_fails_the_check() {
    let mut sc = load("scenarios/default.yaml");
    sc.duration = 2 * HOUR;
    let (_, mut w) = run_world_with(&sc, &checked("partita", 1));
    w.cycle_of(None).expect("a cycle with every change listed");
    let running = w
        .active
        .iter()
        .copied()
        .find(|&j| w.jobs[j].phase() == Phase::Running)
        .expect("no job runs after 2 h");
    w.jobs[running].job.phase = Phase::Terminating; // as preempt does, but not listed
    let err = w
        .cycle_of(None)
        .expect_err("a phase changed and not listed")
        .to_string();
    assert!(err.contains("not listed"), "{err}");
}

/// The world's lists of pending jobs, holdings and checkpoints agree with
/// its jobs after every cycle (`Options::check`), and a change made around
/// them shows.
#[test]
fn the_worlds_lists_follow_its_jobs() {
    let mut sc = load("scenarios/default.yaml");
    sc.duration = 36 * HOUR;
    let (_, mut w) = run_world_with(&sc, &checked("partita", 2));
    w.check_lists().expect("after 36 h");
    assert!(
        !w.lists.pending.is_empty() && !w.lists.ckpt.is_empty(),
        "after 36 h: {} pending, {} checkpointing: the check compares nothing",
        w.lists.pending.len(),
        w.lists.ckpt.len()
    );
    let j = w.lists.pending[0];
    w.jobs[j].held_share += 0.5; // as the metrics do, without held_changed
    let err = w
        .check_lists()
        .expect_err("a holding changed around the lists")
        .to_string();
    assert!(err.contains(w.jobs[j].id()), "{err}");
    w.jobs[j].held_share -= 0.5;
    w.lists.pending.remove(0);
    let err = w
        .check_lists()
        .expect_err("a pending job left out of the list")
        .to_string();
    assert!(err.contains("pending"), "{err}");
}

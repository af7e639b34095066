//! Incremental inputs (Go's `incremental_test.go`): the sums follow the
//! changes listed, a job gone is no longer found, and a change not listed
//! shows in `check_kept`.

use std::sync::Arc;

use super::helpers::{fleet, job, new_scheduler, new_world, team};
use crate::sched::{HOUR, Input, Job};

#[test]
fn incremental_inputs_keep_the_sums() {
    let st = fleet().nodes(2).gpus(8, "H100-80GB").build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(st, sch, &[team("a").guarantee(8), team("b").guarantee(8)]);
    w.running(
        job("a1").team("a").gpus(2).estimate(HOUR),
        0,
        0,
        &["n1:0,1"],
    );
    w.running(job("b1").team("b").gpus(1), 0, 0, &["n2:0"]);
    {
        // The first cycle recounts whatever is listed.
        let refs: Vec<&Job> = w.jobs.iter().collect();
        let mut input = Input::new(w.now, &w.st, &w.teams, &refs);
        input.incremental = true;
        input.changed = &refs;
        let c = w.sch.snapshot(&input);
        assert!(
            c.use_ == [2000, 1000] && c.ends_by[0] == HOUR && c.end_unknown[1],
            "after a recount: use {:?}, ends {:?} {:?}",
            c.use_,
            c.ends_by,
            c.end_unknown
        );
        drop(c);
        w.sch.check_kept(&input).expect("after a recount");
    }

    // b1 ends and a new job of b waits: b1 gone, the new one changed.
    w.finish("b1");
    w.submit(&[job("b2").team("b").gpus(4)]);
    {
        let refs: Vec<&Job> = w.jobs.iter().collect();
        let b1 = w.finished.iter().find(|j| j.id() == "b1").expect("b1");
        let b2 = refs.iter().copied().find(|j| j.id() == "b2").expect("b2");
        let changed = [b2];
        let gone = [b1];
        let mut input = Input::new(w.now, &w.st, &w.teams, &refs);
        input.incremental = true;
        input.changed = &changed;
        input.gone = &gone;
        let c = w.sch.snapshot(&input);
        assert!(
            c.use_ == [2000, 0] && !c.end_unknown[1],
            "after b1 left: use {:?}",
            c.use_
        );
        assert!(w.sch.job(&c, "b1").is_none(), "b1, gone, is still found");
        let (got, sorted) = w.sch.jobs_to_order(&c, true);
        assert!(
            sorted && got.len() == 1 && std::ptr::eq(got[0], b2),
            "pending jobs to order: {got:?}"
        );
        drop(c);
        w.sch.check_kept(&input).expect("after b1 left");
    }

    // a1 releases a GPU without the world listing it.
    let old = w.job("a1").placed[0].clone().expect("placed");
    w.st.release("n1", &old.task).expect("release");
    let mut half = (*old).clone();
    half.grants.truncate(1);
    w.st.allocate(&half).expect("allocate");
    w.job_mut("a1").placed[0] = Some(Arc::new(half));
    {
        let refs: Vec<&Job> = w.jobs.iter().collect();
        let mut input = Input::new(w.now, &w.st, &w.teams, &refs);
        input.incremental = true;
        drop(w.sch.snapshot(&input));
        let err = w
            .sch
            .check_kept(&input)
            .expect_err("a placement changed and not listed");
        assert!(err.to_string().contains("not listed"), "{err}");

        // A full input recounts, and the sums are right again.
        input.incremental = false;
        let c = w.sch.snapshot(&input);
        assert_eq!(c.use_[0], 1000, "after a full input");
    }
}

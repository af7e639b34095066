//! Small random worlds (the Go build's `randomScenario`, of
//! `determinism_test.go`): a small cluster, teams and jobs drawn from the
//! project's generator, and the changes made between cycles.

use super::helpers::{
    JobBuilder, TeamBuilder, World, fleet, job, new_scheduler_with, new_world, team,
};
use crate::cluster::State;
use crate::random::Rand;
use crate::sched::{MINUTE, Nanos, Phase};
use crate::workload::classes;

pub struct RandomScenario {
    pub st: State,
    pub teams: Vec<TeamBuilder>,
    /// Pending at the start.
    pub jobs: Vec<JobBuilder>,
    /// Arriving one by one between cycles.
    pub later: Vec<JobBuilder>,
}

impl RandomScenario {
    pub fn new(rng: &mut Rand) -> RandomScenario {
        let mut f = fleet();
        // As the Go loop `for i := 0; i < 1+rng.Intn(3); i++`: a draw for
        // each test of the condition.
        let mut i = 0;
        while i < 1 + rng.below(3) {
            i += 1;
            f = f.nodes(1).gpus(2 + rng.below(3) as i32, "H100-80GB");
            if rng.below(2) == 0 {
                f = f.mig();
            }
            if rng.below(2) == 0 {
                f = f.leaf(&format!("leaf-{}", rng.below(2)));
            }
        }
        let st = f.build();
        let mut teams = Vec::new();
        for name in ["a", "b"] {
            let g = rng.below(4) as i64;
            let burst = g + rng.below(9) as i64;
            let weight = (1 + rng.below(3)) as f64;
            teams.push(team(name).guarantee(g).burst(burst).weight(weight));
        }
        let (mut jobs, mut later) = (Vec::new(), Vec::new());
        let mut i = 0;
        while i < 6 + rng.below(8) {
            let t = ["a", "b", "c"][rng.below(3)];
            let class = classes()[rng.below(3)];
            let at = rng.below(20) as Nanos * MINUTE;
            let mut b = job(&format!("j{i}")).team(t).class(class).submitted(at);
            b = match rng.below(4) {
                0 => b.gpus(1 + rng.below(3) as i32),
                1 => {
                    let size = 2 + rng.below(2);
                    b.gang(size).gpus(1 + rng.below(2) as i32)
                }
                2 => b.mig_profile(["1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"][rng.below(4)]),
                _ => {
                    let peak = 4000 + rng.below(30000) as i64;
                    b.gpu_memory(peak, rng.below(5) as f64 / 10.0)
                }
            };
            if rng.below(2) == 0 {
                b = b.estimate((1 + rng.below(120)) as Nanos * MINUTE);
            }
            if rng.below(4) == 0 {
                b = b.replicas(2);
            }
            if i % 2 == 0 {
                jobs.push(b);
            } else {
                later.push(b);
            }
            i += 1;
        }
        RandomScenario {
            st,
            teams,
            jobs,
            later,
        }
    }

    /// The scenario's world with a scheduler of the preset.
    pub fn world(&self, preset: &str, seed: i64) -> World {
        let st = self.st.clone();
        let sch = new_scheduler_with(preset, &st, seed, |_| {});
        let mut w = new_world(st, sch, &self.teams);
        w.submit(&self.jobs);
        w
    }

    /// Changes the worlds alike between cycles: time passes, a job may
    /// arrive, MIG changes finish, grace periods end, a running job may
    /// finish.
    pub fn step(&mut self, rng: &mut Rand, ws: &mut [&mut World]) {
        let arrival = if !self.later.is_empty() && rng.below(2) == 0 {
            Some(self.later.remove(0))
        } else {
            None
        };
        let advance = (1 + rng.below(8)) as Nanos * MINUTE;
        let uncordon = rng.below(3) > 0;
        let release = rng.below(2) == 0;
        let finish = rng.below(3);
        for w in ws.iter_mut() {
            let now = w.now + advance;
            w.at(now);
            if let Some(b) = &arrival {
                w.jobs.push(b.clone().submitted(now).build());
            }
            if uncordon {
                w.uncordon_all();
            }
            if release {
                w.release();
            }
            let running: Vec<String> = w
                .jobs
                .iter()
                .filter(|j| j.phase == Phase::Running)
                .map(|j| j.id().to_string())
                .collect();
            if finish == 0 && !running.is_empty() {
                w.finish(&running[0]);
            }
        }
    }
}

/// The pending jobs of the world.
pub fn pending_ids(w: &World) -> Vec<String> {
    w.jobs
        .iter()
        .filter(|j| j.phase == Phase::Pending)
        .map(|j| j.id().to_string())
        .collect()
}

//! Random small scenarios (Go's random_test.go): every scheduler keeps the
//! invariants after every cycle, and partita places no task where it runs
//! out of memory. docs/mixed.md, "Random scenarios", says what they are.

use std::fmt::Write;

use super::super::{RunResult, SCHEDULERS, run};
use super::{checked, read_file};
use crate::random::Rand;
use crate::scenario;

/// A small scenario drawn from `rng`, as the Go build's
/// `randomScenarioYAML` draws it (the same generator, so the same
/// scenarios): one to three nodes of eight H100s, two or three teams whose
/// guarantees add up to at most the cluster, and streams of production
/// services on MIG slices, checkpointed training of whole GPUs (single or
/// gangs, now and then 8-GPU fine-tunes or pretraining gangs as large as
/// the cluster) and best-effort work, at an offered load around or above
/// capacity.
pub(super) fn random_scenario_yaml(rng: &mut Rand, name: &str) -> String {
    let mut b = String::new();
    let nodes = 1 + rng.below(3);
    let gpus = 8 * nodes;
    let _ = write!(
        b,
        "name: {name}\nduration: 8h\nseed: {}\nnodes:\n",
        1 + rng.below(1000)
    );
    let mig = rng.below(3) > 0;
    let _ = write!(
        b,
        "  - group: n\n    count: {nodes}\n    gpu: H100-80GB\n    gpus: 8\n    mig: {mig}\n    cpu: 192\n    memory: 2Ti\n"
    );
    let teams = &["t0", "t1", "t2"][..2 + rng.below(2)];
    let mut left = gpus;
    b.push_str("teams:\n");
    for (i, t) in teams.iter().enumerate() {
        let mut g = left / (teams.len() - i);
        if i < teams.len() - 1 {
            g = rng.below(g + 1);
        } else {
            g = rng.below(left + 1);
        }
        left -= g;
        let _ = write!(
            b,
            "  - name: {t}\n    guaranteed_gpus: {g}\n    burst_gpus: {gpus}\n"
        );
    }
    b.push_str("workloads:\n");
    let rate =
        |rng: &mut Rand, per_gpu_hour: f64| per_gpu_hour * gpus as f64 * (0.5 + rng.float64());
    for t in teams {
        if rng.below(2) == 0 {
            let profile = ["embed-335m", "llm-7b-bf16", "llm-8b-fp8"][rng.below(3)];
            let r = rate(rng, 0.05);
            let replicas = 1 + rng.below(3);
            let _ = write!(
                b,
                "  - name: {t}-svc\n    team: {t}\n    class: production\n    profile: {profile}\n    arrival: {{process: poisson, rate_per_hour: {r:.3}}}\n    duration: {{dist: exponential, mean: 2h}}\n    replicas: {replicas}\n"
            );
        }
        if rng.below(3) > 0 {
            let r = rate(rng, 0.1);
            let _ = write!(
                b,
                "  - name: {t}-train\n    team: {t}\n    class: batch\n    profile: lora-ft-7b\n    arrival: {{process: poisson, rate_per_hour: {r:.3}}}\n    duration: {{dist: exponential, mean: 2h}}\n    gang: {{sizes: [1, 2, 4]}}\n    checkpoint_every: 10m\n"
            );
        }
        match rng.below(6) {
            0 => {
                // 8-GPU fine-tunes, one or two nodes each.
                let sizes = if nodes > 1 { "[1, 2]" } else { "[1]" };
                let r = rate(rng, 0.01);
                let _ = write!(
                    b,
                    "  - name: {t}-big\n    team: {t}\n    class: batch\n    profile: full-ft-7b\n    arrival: {{process: poisson, rate_per_hour: {r:.3}}}\n    duration: {{dist: exponential, mean: 2h}}\n    gang: {{sizes: {sizes}}}\n    checkpoint_every: 20m\n"
                );
            }
            1 => {
                // Pretraining gangs of one-GPU tasks, up to every GPU.
                let r = rate(rng, 0.01);
                let _ = write!(
                    b,
                    "  - name: {t}-pre\n    team: {t}\n    class: batch\n    profile: pretrain-13b-worker\n    arrival: {{process: poisson, rate_per_hour: {r:.3}}}\n    duration: {{dist: exponential, mean: 3h}}\n    gang: {{sizes: [4, {gpus}]}}\n    checkpoint_every: 30m\n"
                );
            }
            _ => {}
        }
        match rng.below(3) {
            0 => {
                let r = rate(rng, 0.2);
                let _ = write!(
                    b,
                    "  - name: {t}-be\n    team: {t}\n    class: best-effort\n    profile: lora-ft-7b\n    arrival: {{process: poisson, rate_per_hour: {r:.3}}}\n    duration: {{dist: exponential, mean: 1h}}\n    checkpoint_every: 15m\n"
                );
            }
            1 => {
                let r = rate(rng, 0.5);
                let _ = write!(
                    b,
                    "  - name: {t}-nb\n    team: {t}\n    class: best-effort\n    profile: notebook-small\n    arrival: {{process: poisson, rate_per_hour: {r:.3}}}\n    duration: {{dist: exponential, mean: 1h}}\n"
                );
            }
            _ => {}
        }
    }
    b
}

/// On random small clusters and streams, every scheduler keeps the
/// invariants after every cycle (`Options::check`) and partita places no
/// task where it runs out of memory. The Go build runs 200 scenarios;
/// a debug build runs the first 24 (`RANDOM_SCENARIOS=N` runs N; the
/// first ones are the Go build's, drawn from the same generator).
#[test]
fn random_scenarios() {
    let n = match std::env::var("RANDOM_SCENARIOS") {
        Ok(v) => v
            .parse::<usize>()
            .ok()
            .filter(|&n| n >= 1)
            .unwrap_or_else(|| panic!("RANDOM_SCENARIOS={v:?}: want a count of scenarios")),
        Err(_) => 24,
    };
    let mut rng = Rand::new(1);
    for i in 0..n {
        let name = format!("random-{i}");
        let text = random_scenario_yaml(&mut rng, &name);
        let sc = scenario::parse(&text, &format!("{name}.yaml"))
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        for scheduler in SCHEDULERS {
            let r: RunResult = run(&sc, &checked(scheduler, sc.seed), &mut read_file, None)
                .unwrap_or_else(|e| panic!("{name}, {scheduler}: {e}\n{text}"));
            if scheduler == "partita" {
                assert_eq!(r.oom_events, 0, "{name}: OOM events\n{text}");
            }
        }
    }
}

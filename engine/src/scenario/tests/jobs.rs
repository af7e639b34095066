//! jobs_test.go: the job streams.

use super::*;
use crate::cluster::Node;
use crate::profiles;
use crate::scenario::duration::{HOUR, MINUTE, SECOND, hours};
use crate::scenario::{Arrival, CONSTANT, Dist};
use crate::workload::{Capacity, Class, Demand, Job, Kind, Task};

fn jobs(s: &Scenario, seed: i64) -> Vec<Arrival> {
    s.jobs(seed, &mut no_files)
        .unwrap_or_else(|e| panic!("jobs: {e}"))
}

/// The arrivals of one workload.
fn of(arrivals: &[Arrival], workload: &str) -> Vec<Arrival> {
    arrivals
        .iter()
        .filter(|a| a.job.project == workload)
        .cloned()
        .collect()
}

/// BASE with a 1,000-hour horizon and poisson training arrivals, for
/// statistics.
fn long_run() -> String {
    let text = edit(BASE, "duration: 24h", "duration: 1000h");
    edit(
        &text,
        "    arrival: {process: fixed, at: [0s, 10m]}",
        "    arrival: {process: poisson, rate_per_hour: 10}",
    )
}

fn shipped(name: &str) -> Scenario {
    let path = format!("scenarios/{name}.yaml");
    load(repo(&path).to_str().unwrap(), &path)
}

#[test]
fn jobs_are_deterministic() {
    let s = shipped("default");
    let (a, b) = (jobs(&s, 1), jobs(&s, 1));
    assert!(a == b, "the same seed gave two different streams");
    assert!(a != jobs(&s, 2), "seeds 1 and 2 gave the same stream");
    assert!(
        a.len() >= 1000,
        "{} jobs in a week of the default scenario, want thousands",
        a.len()
    );
}

#[test]
fn jobs_of_a_workload_do_not_depend_on_the_others() {
    let both = must_parse(BASE);
    let alone = must_parse(&BASE[..BASE.find("  - name: train").unwrap()]);
    assert!(of(&jobs(&alone, 7), "chat") == of(&jobs(&both, 7), "chat"));
}

#[test]
fn jobs_arrive_in_order_within_the_horizon() {
    let s = must_parse(BASE);
    let arrivals = jobs(&s, 1);
    assert!(
        arrivals.windows(2).all(|w| w[0].at <= w[1].at),
        "arrivals are not in time order"
    );
    for a in &arrivals {
        assert!(
            a.at >= 0 && a.at < s.duration && a.duration >= SECOND,
            "job {} at {} for {}",
            a.job.id,
            a.at,
            a.duration
        );
    }
    let train = of(&arrivals, "train");
    let at: Vec<i64> = train.iter().map(|a| a.at).collect();
    assert_eq!(at, [0, 10 * MINUTE]);
}

#[test]
fn poisson_arrivals_keep_their_rate() {
    let s = must_parse(&long_run());
    for (workload, per_hour) in [("chat", 30.0), ("train", 10.0)] {
        let n = of(&jobs(&s, 3), workload).len() as f64;
        let want: f64 = per_hour * 1000.0;
        assert!(
            (n - want).abs() <= 5.0 * want.sqrt(),
            "{workload}: {n} jobs in 1000h, want {want}"
        );
    }
}

#[test]
fn run_times_follow_their_distribution() {
    for (dist, mean, min, max) in [
        (
            "{dist: exponential, mean: 2h}",
            2 * HOUR,
            SECOND,
            1000 * HOUR,
        ),
        (
            "{dist: lognormal, mean: 2h, sigma: 0.5}",
            2 * HOUR,
            SECOND,
            1000 * HOUR,
        ),
        (
            "{dist: uniform, min: 1h, max: 3h}",
            2 * HOUR,
            HOUR,
            3 * HOUR,
        ),
        (
            "{dist: fixed, value: 90m}",
            90 * MINUTE,
            90 * MINUTE,
            90 * MINUTE,
        ),
    ] {
        let text = edit(
            &long_run(),
            "    duration: {dist: exponential, mean: 2h}",
            &format!("    duration: {dist}"),
        );
        let chat = of(&jobs(&must_parse(&text), 5), "chat");
        let mut sum = 0.0;
        for a in &chat {
            assert!(
                a.duration >= min && a.duration <= max,
                "{dist}: run time {} outside",
                a.duration
            );
            sum += hours(a.duration);
        }
        let got = sum / chat.len() as f64;
        assert!(
            (got - hours(mean)).abs() <= 0.03 * hours(mean),
            "{dist}: mean run time {got:.3}h"
        );
    }
}

#[test]
fn mix_and_gang_follow_their_weights() {
    let text = edit(
        &long_run(),
        "    profile: llm-7b-bf16",
        "    mix: {llm-7b-bf16: 3, embed-335m: 1}",
    );
    let text = edit(&text, "weights: [0.5, 0.5]", "weights: [3, 1]");
    let arrivals = jobs(&must_parse(&text), 11);
    let share = |xs: &[Arrival], f: &dyn Fn(&Arrival) -> bool| {
        xs.iter().filter(|a| f(a)).count() as f64 / xs.len() as f64
    };
    let llm = share(&of(&arrivals, "chat"), &|a| {
        a.job.tasks[0].gpu.peak_memory_mib == 31819
    });
    let small = share(&of(&arrivals, "train"), &|a| a.job.gang_size == 4);
    for (name, got) in [("llm-7b-bf16 in the mix", llm), ("gangs of 4", small)] {
        assert!(
            (got - 0.75).abs() <= 0.03,
            "{name}: {got:.3} of jobs, want 0.75 ± 0.03"
        );
    }
}

#[test]
fn jobs_are_built_from_their_profile() {
    let arrivals = jobs(&must_parse(BASE), 1);
    let (chat, train) = (&of(&arrivals, "chat")[0], &of(&arrivals, "train")[1]);
    let task = |name: &str| Task {
        name: name.into(),
        cpu_milli: 4000,
        memory_mib: 32 * 1024,
        gpu: Demand::memory_profile(31819, 0.40),
    };
    let want = Job {
        id: "chat-000000".into(),
        team: "search".into(),
        project: "chat".into(),
        class: Class::Production,
        tasks: vec![task("chat-000000-0"), task("chat-000000-1")],
        gang_size: 0,
    };
    assert_eq!(chat.job, want);
    assert_eq!(chat.checkpoint_every, 0);
    assert_eq!(train.job.id, "train-000001");
    assert_eq!(
        (train.job.team.as_str(), train.job.class),
        ("research", Class::Batch)
    );
    assert_eq!(train.job.tasks.len() as i32, train.job.gang_size);
    assert_eq!(
        (train.checkpoint_every, train.duration),
        (30 * MINUTE, HOUR)
    );
    for t in &train.job.tasks {
        assert_eq!(t.gpu, Demand::whole_gpus(1), "one whole GPU of any model");
    }
}

#[test]
fn jobs_keep_training_off_gpus_too_small_for_it() {
    let text = edit(
        BASE,
        "    leaves: [leaf-a, leaf-b]\n",
        "    leaves: [leaf-a, leaf-b]\n  - group: a100\n    gpu: A100-40GB\n    gpus: 8\n    cpu: 96\n    memory: 1Ti\n",
    );
    let arrivals = jobs(&must_parse(&text), 1);
    let train = &of(&arrivals, "train")[0].job.tasks[0].gpu;
    assert_eq!(
        train.models,
        ["H100-80GB"],
        "40 GB is too small for pre-training"
    );
    let chat = &of(&arrivals, "chat")[0].job.tasks[0].gpu;
    assert!(
        chat.models.is_empty(),
        "7B serving fits both: {:?}",
        chat.models
    );
}

/// The nodes as `Job::validate` wants them summarised.
fn capacity_of(nodes: &[Node]) -> Capacity {
    let mut c = Capacity::default();
    for n in nodes {
        c.max_cpu_milli = c.max_cpu_milli.max(n.cpu_milli());
        c.max_memory_mib = c.max_memory_mib.max(n.memory_mib());
        let Some(g) = n.gpus().first() else { continue };
        let m = g.model();
        let most = c.max_gpus.entry(m.name.clone()).or_default();
        *most = (*most).max(n.gpus().len() as i32);
        c.gpu_memory_mib.insert(m.name.clone(), m.memory_mib);
        for p in &m.profiles {
            let models = c.mig_profiles.entry(p.name.to_string()).or_default();
            if !models.contains(&m.name) {
                models.push(m.name.clone());
            }
        }
    }
    c
}

#[test]
fn shipped_scenarios_offer_jobs_their_cluster_can_run() {
    for name in ["default", "demo", "week-1000"] {
        let s = shipped(name);
        let capacity = capacity_of(&s.nodes().unwrap());
        for a in jobs(&s, s.seed) {
            a.job
                .validate(Some(&capacity))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
}

#[test]
fn default_scenario_offers_more_than_the_cluster_can_run() {
    let s = shipped("default");
    // The comment at the top of default.yaml works this out by hand.
    let load = s.offered_load();
    assert!(
        s.gpus() >= 64 && load >= s.gpus() as f64 && (load - 78.22).abs() <= 0.01,
        "offered load {load:.2}"
    );
    let mut by_class = [0.0; 3];
    for w in &s.workloads {
        by_class[w.class.index()] += s.workload_load(w);
    }
    let got = format!("{:.2} {:.2} {:.2}", by_class[2], by_class[1], by_class[0]);
    assert_eq!(
        got, "32.36 38.72 7.14",
        "production, batch, best-effort load"
    );
}

#[test]
fn shipped_scenario_loads() {
    for (name, min, max) in [
        ("default", 1.0, 1.5),
        ("week-1000", 1.0, 1.5),
        ("demo", 0.2, 0.6),
    ] {
        let s = shipped(name);
        let r = s.offered_load() / s.gpus() as f64;
        assert!(
            r >= min && r <= max,
            "{name}: offered load is {r:.2}× its {} GPUs",
            s.gpus()
        );
    }
}

#[test]
fn gpu_equivalents_of_a_slice() {
    let s = must_parse(BASE);
    for (profile, want) in [
        ("embed-335m", 1.0 / 7.0),           // 1g.10gb: compute decides
        ("speech-whisper-large", 2.0 / 8.0), // 1g.20gb: memory decides
        ("llm-7b-bf16", 4.0 / 8.0),          // 3g.40gb
        ("llm-13b-bf16", 1.0),               // 7g.80gb
        ("llm-70b-bf16", 4.0),               // whole GPUs
    ] {
        let p = profiles::lookup(profile).unwrap();
        let got = s.gpu_equivalents(&p);
        assert!(
            (got - want).abs() <= 1e-9,
            "{profile}: {got:.3} GPU-equivalents, want {want:.3}"
        );
    }
}

/// The trace scenario of the Go tests, named as they name it (relative to
/// go/internal/scenario).
fn trace_scenario() -> Scenario {
    load(
        repo("go/internal/scenario/testdata/trace.yaml")
            .to_str()
            .unwrap(),
        "testdata/trace.yaml",
    )
}

fn trace_jobs(s: &Scenario) -> Result<Vec<Arrival>, Error> {
    s.jobs(1, &mut files_from(repo("go/internal/scenario")))
}

#[test]
fn trace_arrivals() {
    let got: Vec<String> = trace_jobs(&trace_scenario())
        .unwrap()
        .iter()
        .map(|a| {
            use crate::scenario::duration::format_duration as d;
            format!("{} at {} for {}", a.job.id, d(a.at), d(a.duration))
        })
        .collect();
    assert_eq!(
        got,
        [
            "replay-000000 at 0s for 30m0s",       // p-first: 0..3600 s, halved
            "replay-000001 at 30m0s for 23h30m0s", // p-open: no deletion time, runs to the horizon
            "replay-000002 at 1h0m0s for 30m0s",   // p-late: 7200..10800 s, halved
        ] // p-cpu asks for no GPU; p-beyond arrives after the horizon
    );
}

#[test]
fn trace_arrivals_can_take_run_times_from_a_distribution() {
    let mut s = trace_scenario();
    s.workloads[0].duration = Dist {
        dist: CONSTANT.into(),
        value: 5 * MINUTE,
        ..Dist::default()
    };
    s.validate().unwrap();
    for a in trace_jobs(&s).unwrap() {
        assert_eq!(a.duration, 5 * MINUTE, "{}", a.job.id);
    }
}

#[test]
fn trace_errors() {
    for (file, want) in [
        (
            "absent.csv",
            "testdata/trace.yaml:19: workloads[0].arrival.file: open testdata/absent.csv: no such file or directory",
        ),
        // The rest is the trace reader's.
        (
            "pods_bad.csv",
            "testdata/trace.yaml:19: workloads[0].arrival.file: testdata/pods_bad.csv:2: ",
        ),
        (
            "pods_no_creation.csv",
            "testdata/trace.yaml:19: workloads[0].arrival.file: testdata/pods_no_creation.csv:3: pod p-none has no creation_time",
        ),
        (
            "pods_backwards.csv",
            "testdata/trace.yaml:19: workloads[0].arrival.file: testdata/pods_backwards.csv:3: pod p-back is deleted (100) before it is created (500)",
        ),
    ] {
        let mut s = trace_scenario();
        s.workloads[0].arrival.file = format!("testdata/{file}");
        let err = trace_jobs(&s).unwrap_err().to_string();
        if want.ends_with(": ") {
            assert!(err.starts_with(want), "{err}");
        } else {
            assert_eq!(err, want);
        }
    }
}

#[test]
fn a_scenario_without_trace_arrivals_reads_no_file() {
    let s = must_parse(BASE);
    let mut read = |path: &str| -> Result<Vec<u8>, String> { panic!("read {path}") };
    s.jobs(1, &mut read).unwrap();
    assert_eq!(s.workloads[1].kind(), Some(profiles::Kind::Training));
    assert_eq!(
        of(&jobs(&s, 1), "chat")[0].job.tasks[0].gpu.kind,
        Kind::MemoryProfile
    );
}

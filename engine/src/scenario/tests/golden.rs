//! Every job of every shipped scenario against the Go build's: the job
//! streams of testdata/jobs_golden.txt, written by the Go build
//! (testdata/golden_gen_test.go.txt says how).

use super::*;
use crate::numfmt::format_g;
use crate::quote::quote;
use crate::scenario::Arrival;

/// One arrival as the Go generator writes it.
fn line(a: &Arrival) -> String {
    let j = &a.job;
    let mut s = format!(
        "{} {} {} {} {} {} {} {}",
        a.at,
        a.duration,
        a.checkpoint_every,
        j.id,
        j.team,
        j.project,
        j.class.index(),
        j.gang_size
    );
    for t in &j.tasks {
        let d = &t.gpu;
        s += &format!(
            " [{} {} {} {} {} {} {} {} {} {}]",
            t.name,
            t.cpu_milli,
            t.memory_mib,
            d.kind as i64,
            d.count,
            d.milli,
            quote(&d.profile),
            d.peak_memory_mib,
            format_g(d.compute, None),
            d.models.join("|")
        );
    }
    s
}

fn fnv64(data: &[u8], mut h: u64) -> u64 {
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The golden file again, from the Rust build.
fn regenerate(golden: &str) -> String {
    let mut out = String::new();
    let mut files = files_from(repo(""));
    for l in golden.lines() {
        if l.starts_with('#') {
            out += l;
            out += "\n";
            continue;
        }
        let Some(path) = l
            .strip_prefix("scenario ")
            .and_then(|r| r.split(' ').next())
        else {
            continue;
        };
        let s = load(repo(path).to_str().unwrap(), path);
        out += &format!(
            "scenario {path} gpus {} load {}\n",
            s.gpus(),
            format_g(s.offered_load(), None)
        );
        let seeds: Vec<i64> = if path.ends_with("week-1000.yaml") {
            vec![s.seed]
        } else {
            (1..=24).collect()
        };
        for seed in seeds {
            let arrivals = s.jobs(seed, &mut files).unwrap_or_else(|e| panic!("{e}"));
            let mut h = 0xcbf2_9ce4_8422_2325;
            for a in &arrivals {
                h = fnv64(format!("{}\n", line(a)).as_bytes(), h);
            }
            out += &format!("seed {seed} jobs {} fnv {h:016x}\n", arrivals.len());
            if seed == 1 {
                for a in arrivals.iter().take(3) {
                    out += &format!("  {}\n", line(a));
                }
            }
        }
    }
    out
}

#[test]
fn job_streams_are_the_go_builds() {
    let golden =
        std::fs::read_to_string(repo("engine/src/scenario/testdata/jobs_golden.txt")).unwrap();
    let got = regenerate(&golden);
    for (g, w) in got.lines().zip(golden.lines()) {
        assert_eq!(g, w, "the Rust build's line differs from the Go build's");
    }
    assert_eq!(got.lines().count(), golden.lines().count());
    // Every shipped scenario is in it.
    for dir in ["scenarios", "go/internal/sim/mixed/testdata"] {
        for entry in std::fs::read_dir(repo(dir)).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            if name.ends_with(".yaml") {
                assert!(
                    golden.contains(&format!("scenario {dir}/{name} ")),
                    "{dir}/{name} is not in the golden file"
                );
            }
        }
    }
}

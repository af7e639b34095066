//! The Go build's profiles tests (go/internal/profiles/profiles_test.go).

use super::*;
use crate::gpu::{self, DEFAULT_HEADROOM};
use crate::workload::{Class, Job, Kind as DemandKind};

/// What each profile should get on an H100-80GB: the MIG profile its
/// memory and compute imply, or "N whole" for whole-GPU profiles. Every
/// catalog entry must be listed, so a new profile comes with its
/// expectation.
const EXPECTED_ON_H100: [(&str, &str); 13] = [
    ("embed-335m", "1g.10gb"), // 1,791 MiB × 1.1 fits 10 GB; 0.10 compute fits one slice
    ("recsys-dlrm", "1g.10gb"), // 6,259 MiB × 1.1 = 6,885
    ("notebook-small", "1g.10gb"), // 7,344 MiB × 1.1 = 8,078
    ("speech-whisper-large", "1g.20gb"), // 10,643 MiB × 1.1 = 11,707: two memory slices, one compute slice
    ("rerank-568m", "2g.20gb"),          // memory fits 1g.10gb; 0.25 compute needs two slices
    ("llm-8b-fp8", "2g.20gb"),           // 13,547 MiB × 1.1 = 14,902 and 0.25 compute
    ("diffusion-sdxl", "3g.40gb"), // 12,566 MiB fits 20 GB, but 0.40 compute needs three slices
    ("llm-7b-bf16", "3g.40gb"),    // 31,032 MiB × 1.1 = 34,135
    ("llm-13b-bf16", "7g.80gb"),   // 52,226 MiB × 1.1 = 57,449
    ("llm-70b-bf16", "4 whole"),   // tensor-parallel over 4 GPUs
    ("lora-ft-7b", "1 whole"),
    ("full-ft-7b", "8 whole"),
    ("pretrain-13b-worker", "1 whole"),
];

#[test]
fn profiles_get_the_expected_share_of_an_h100() {
    let h100 = gpu::lookup("H100-80GB");
    for p in all() {
        let want = EXPECTED_ON_H100
            .iter()
            .find(|(name, _)| *name == p.name)
            .map(|(_, want)| *want)
            .unwrap_or_else(|| panic!("no expectation for {}: add it to EXPECTED_ON_H100", p.name));
        if p.whole() {
            let d = p.demand(&[]);
            let got = format!("{} whole", d.count);
            assert!(
                d.kind == DemandKind::WholeGpus && got == want,
                "{}: demand {d}, want {want}",
                p.name
            );
            continue;
        }
        let mp = h100
            .profile_for(p.peak_memory_mib, p.compute, DEFAULT_HEADROOM)
            .unwrap_or_else(|e| panic!("{}: profile_for: {e}", p.name));
        assert_eq!(
            mp.name, want,
            "{}: profile_for({} MiB, {:.2})",
            p.name, p.peak_memory_mib, p.compute
        );
    }
    assert_eq!(EXPECTED_ON_H100.len(), all().len());
}

#[test]
fn whole_gpu_profiles_fit_an_h100_per_gpu() {
    let h100 = gpu::lookup("H100-80GB");
    for p in all().iter().filter(|p| p.whole()) {
        let need = p.peak_memory_mib as f64 * (1.0 + DEFAULT_HEADROOM);
        assert!(
            need <= h100.memory_mib as f64,
            "{}: {} MiB per GPU + headroom is {need:.0} MiB, more than an H100's {}",
            p.name,
            p.peak_memory_mib,
            h100.memory_mib
        );
    }
}

#[test]
fn derivations_add_up_to_the_peak() {
    for p in all() {
        assert_eq!(
            p.derivation.total_mib(),
            p.peak_memory_mib,
            "{}: the terms do not add up to peak_memory_mib\n{}",
            p.name,
            p.derivation
        );
    }
}

/// The terms worked out by hand here, for three profiles, so that a slip
/// in the port of a term's arithmetic shows even where the total still
/// rounds to the same MiB. The reserve is its rate times the terms before
/// it, added in order.
#[test]
fn each_term_is_the_go_builds_arithmetic() {
    const MIB: f64 = 1048576.0;
    let with_reserve = |rate: f64, tensors: &[f64], ctx: f64| {
        let mut sum = 0.0;
        for t in tensors {
            sum += t;
        }
        let mut terms = tensors.to_vec();
        terms.push(rate * sum);
        terms.push(ctx);
        terms
    };
    let want = [
        (
            "llm-7b-bf16",
            with_reserve(
                0.026,
                &[13_480_000_000.0, 17_179_869_184.0, 1024.0 * MIB],
                768.0 * MIB,
            ),
        ),
        (
            "llm-70b-bf16",
            with_reserve(
                0.026,
                &[34_490_000_000.0, 10_737_418_240.0, 1024.0 * MIB],
                1024.0 * MIB,
            ),
        ),
        (
            "full-ft-7b",
            with_reserve(
                0.102,
                &[
                    13_480_000_000.0,
                    17_179_869_184.0,
                    9_126_805_504.0,
                    16_777_216_000.0,
                    809_600_000.0,
                ],
                1536.0 * MIB,
            ),
        ),
    ];
    for (name, terms) in want {
        let p = lookup(name).unwrap();
        let got: Vec<f64> = p.derivation.terms.iter().map(|t| t.bytes).collect();
        assert_eq!(got, terms, "{name}");
    }
}

#[test]
fn catalog_is_well_formed() {
    let mut seen = Vec::new();
    for p in all() {
        assert!(
            !p.name.is_empty() && !seen.contains(&p.name),
            "name {:?} is empty or used twice",
            p.name
        );
        assert!(
            p.compute > 0.0 && p.compute <= 1.0,
            "{}: compute {}",
            p.name,
            p.compute
        );
        assert!(
            (0..=8).contains(&p.gpus),
            "{}: {} GPUs per task",
            p.name,
            p.gpus
        );
        assert!(
            !(p.kind == Kind::Training && p.gpus < 1),
            "{}: training needs whole GPUs",
            p.name
        );
        assert!(
            !(p.whole() && p.compute != 1.0),
            "{}: whole GPUs but compute {}",
            p.name,
            p.compute
        );
        assert!(
            p.cpu_milli > 0 && p.host_memory_mib > 0,
            "{}: host resources",
            p.name
        );
        assert!(
            !p.derivation.basis.is_empty() && p.derivation.terms.len() >= 2,
            "{}: derivation has no basis or too few terms",
            p.name
        );
        for term in &p.derivation.terms {
            assert!(
                !term.what.is_empty() && term.bytes > 0.0,
                "{}: term {:?}",
                p.name,
                term
            );
        }
        let job = Job {
            id: "j".into(),
            team: "t".into(),
            class: Class::Batch,
            tasks: vec![p.task("t0")],
            ..Job::default()
        };
        job.validate(None)
            .unwrap_or_else(|e| panic!("{}: task does not validate: {e}", p.name));
        seen.push(p.name);
    }
}

#[test]
fn catalog_covers_the_workload_mix() {
    // The scenarios and the benchmark rely on these; renaming one is a
    // breaking change for scenario files.
    for name in [
        "llm-7b-bf16",
        "llm-13b-bf16",
        "llm-70b-bf16",
        "llm-8b-fp8",
        "embed-335m",
        "rerank-568m",
        "diffusion-sdxl",
        "recsys-dlrm",
        "speech-whisper-large",
        "lora-ft-7b",
        "full-ft-7b",
        "pretrain-13b-worker",
    ] {
        lookup(name).unwrap();
    }
}

#[test]
fn lookup_finds_exact_names_only() {
    for (name, want_err) in [
        ("llm-7b-bf16", ""),
        ("full-ft-7b", ""),
        (
            "llm-9b",
            r#"unknown profile "llm-9b" (known: embed-335m, rerank-568m,"#,
        ),
        ("LLM-7B-BF16", r#"unknown profile "LLM-7B-BF16""#),
        ("", r#"unknown profile """#),
    ] {
        match lookup(name) {
            Ok(p) => assert!(
                want_err.is_empty() && p.name == name,
                "lookup({name:?}) = {}",
                p.name
            ),
            Err(e) => assert!(
                !want_err.is_empty() && e.to_string().contains(want_err),
                "lookup({name:?}) error {e}, want {want_err:?}"
            ),
        }
    }
    let e = lookup("x").unwrap_err().to_string();
    assert_eq!(
        e,
        format!(r#"unknown profile "x" (known: {})"#, names().join(", "))
    );
}

#[test]
fn demand_of_each_kind() {
    let models = |m: &[&str]| m.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let cases = [
        ("llm-7b-bf16", vec![], Demand::memory_profile(31819, 0.40)),
        (
            "embed-335m",
            models(&["H100-80GB"]),
            Demand::memory_profile(1818, 0.10).on(&["H100-80GB"]),
        ),
        ("llm-70b-bf16", vec![], Demand::whole_gpus(4)),
        (
            "full-ft-7b",
            models(&["H100-80GB", "H200-141GB"]),
            Demand::whole_gpus(8).on(&["H100-80GB", "H200-141GB"]),
        ),
        ("lora-ft-7b", vec![], Demand::whole_gpus(1)),
    ];
    for (name, models, want) in cases {
        let got = lookup(name).unwrap().demand(&models);
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn demand_does_not_share_the_callers_models() {
    let p = lookup("embed-335m").unwrap();
    let mut models = vec!["H100-80GB".to_string()];
    let d = p.demand(&models);
    models[0] = "changed".into();
    assert_eq!(d.models, ["H100-80GB"]);
}

#[test]
fn task_carries_host_resources() {
    let p = lookup("pretrain-13b-worker").unwrap();
    let task = p.task("w3");
    assert_eq!(task.name, "w3");
    assert_eq!(task.cpu_milli, p.cpu_milli);
    assert_eq!(task.memory_mib, p.host_memory_mib);
    assert_eq!(task.gpu, Demand::whole_gpus(1));
}

#[test]
fn all_and_lookup_return_copies() {
    let mut everything = all();
    everything[0].derivation.terms[0].bytes = -1.0;
    everything[0].name = "changed".into();
    let mut p = lookup("embed-335m").unwrap();
    assert!(p.derivation.terms[0].bytes > 0.0, "all shares the catalog");
    p.derivation.terms[0].bytes = -1.0;
    assert!(
        CATALOG[0].derivation.terms[0].bytes > 0.0,
        "lookup shares the catalog's terms"
    );
}

#[test]
fn derivation_text() {
    let s = lookup("llm-7b-bf16").unwrap().derivation.to_string();
    for want in [
        "Llama-2-7B",
        "16384.0 MiB  KV cache",
        "31819   MiB  total",
        "caching allocator reserve: 2.6 %",
    ] {
        assert!(s.contains(want), "derivation text lacks {want:?}:\n{s}");
    }
}

#[test]
fn total_mib_rounds_up() {
    let d = Derivation {
        basis: String::new(),
        terms: vec![
            Term {
                what: "a".into(),
                bytes: MIB,
            },
            Term {
                what: "b".into(),
                bytes: 1.0,
            },
        ],
    };
    assert_eq!(d.total_mib(), 2);
    assert_eq!(Derivation::default().total_mib(), 0);
}

/// Every measured process fits its derivation plus the headroom: the
/// headroom is what the derivations do not foresee, and each measurement
/// is a check of it.
#[test]
fn headroom_covers_every_measurement() {
    let mut n = 0;
    for p in all() {
        for m in &p.measured {
            n += 1;
            let limit = m.derived_mib as f64 * (1.0 + DEFAULT_HEADROOM);
            assert!(
                m.held_mib as f64 <= limit,
                "{} ({}): held {} MiB, more than {} derived + headroom",
                p.name,
                m.config,
                m.held_mib,
                m.derived_mib
            );
            assert!(
                !m.place.is_empty() && !m.config.is_empty() && m.held_mib > 0 && m.derived_mib > 0,
                "{}: a measurement without its facts: {m:?}",
                p.name
            );
        }
    }
    assert!(n > 0, "no measurement in the catalog");
}

/// A measurement of the profile's own configuration is compared with the
/// profile's own derivation.
#[test]
fn a_measurement_of_the_profiles_own_configuration_uses_its_derivation() {
    let p = lookup("lora-ft-7b").unwrap();
    assert!(
        !p.measured.is_empty() && p.measured[0].derived_mib == p.peak_memory_mib,
        "lora-ft-7b's measurement is of its own configuration: {:?}, the profile {}",
        p.measured,
        p.peak_memory_mib
    );
}

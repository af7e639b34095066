//! request_test.go.

use super::*;
use crate::gpu;

#[test]
fn new_request_canonicalises_model_names() {
    let cases: [(&str, &[&str], &[&str]); 8] = [
        ("keeps no models as any model", &[], &[]),
        (
            "turns a trace name into the catalog name",
            &["V100M16"],
            &["V100-16GB"],
        ),
        (
            "turns a GFD product label into the catalog name",
            &["NVIDIA-H100-80GB-HBM3"],
            &["H100-80GB"],
        ),
        ("ignores case", &["v100m32"], &["V100-32GB"]),
        (
            "keeps the order given",
            &["V100M32", "V100M16"],
            &["V100-32GB", "V100-16GB"],
        ),
        ("removes a name given twice", &["G2", "G2"], &["G2"]),
        (
            "removes two spellings of one model",
            &["V100M16", "V100-16GB", "v100m16", "V100M32"],
            &["V100-16GB", "V100-32GB"],
        ),
        ("keeps an unknown model as written", &["X9"], &["X9"]),
    ];
    for (name, asked, want) in cases {
        let r = request(&task("t").share(500).on(asked));
        assert_eq!(r.models(), want, "{name}");
    }
}

#[test]
fn new_request_copies_the_demand() {
    let r = request(
        &task("t")
            .cpu(1500)
            .memory(2048)
            .gpu_memory(4096, 0.5)
            .on(&["V100M16"]),
    );
    assert_eq!(
        (r.task().name.as_str(), r.cpu_milli(), r.mem_mib()),
        ("t", 1500, 2048)
    );
    assert_eq!(
        (r.kind(), r.peak_mib(), r.compute()),
        (Kind::MemoryProfile, 4096, 0.5)
    );
    let text = r.to_string();
    assert!(
        text.contains("t (cpu 1500m, mem 2048 MiB"),
        "Display = {text:?}"
    );
}

#[test]
fn new_request_refuses_invalid_tasks() {
    let cases = [
        ("refuses negative cpu", task("t").cpu(-1), "cpu"),
        ("refuses negative memory", task("t").memory(-1), "memory"),
        ("refuses a zero share", task("t").share(0), "fraction"),
        (
            "refuses a share of a whole GPU",
            task("t").share(1000),
            "fraction",
        ),
        ("refuses zero whole GPUs", task("t").gpus(0), "gpus"),
        (
            "refuses an empty MIG profile",
            task("t").mig_profile(""),
            "mig profile",
        ),
        (
            "refuses a memory profile without memory",
            task("t").gpu_memory(0, 0.5),
            "peak",
        ),
        (
            "refuses a compute share above one",
            task("t").gpu_memory(1024, 1.5),
            "compute",
        ),
        (
            "refuses models on a CPU-only task",
            task("t").on(&["V100M16"]),
            "no GPU",
        ),
    ];
    for (name, b, want) in cases {
        let got = Request::new(b.build(), 0.0);
        assert!(got.is_err(), "{name}: got a request");
        want_err(got, &[want]);
    }
}

#[test]
fn request_allows_model() {
    let any_model = request(&task("t").share(100));
    let v100 = request(&task("t").share(100).on(&["V100M16", "V100M32"]));
    let cases = [
        (
            "allows every model when none is named",
            &any_model,
            "G2",
            true,
        ),
        (
            "allows a named model under its catalog name",
            &v100,
            "V100-32GB",
            true,
        ),
        ("refuses a model not named", &v100, "G2", false),
    ];
    for (name, r, model, want) in cases {
        assert_eq!(r.allows_model(&gpu::lookup(model)), want, "{name}");
    }
}

#[test]
fn request_gpu_milli_counts_whole_gpus_as_a_thousand_each() {
    let cases = [
        ("counts nothing for a CPU-only task", task("t"), 0),
        ("counts a share as itself", task("t").share(250), 250),
        (
            "counts whole GPUs as a thousand each",
            task("t").gpus(4),
            4000,
        ),
        (
            "counts a MIG profile as nothing",
            task("t").mig_profile("1g.10gb"),
            0,
        ),
        (
            "counts a memory profile as nothing",
            task("t").gpu_memory(1024, 0.5),
            0,
        ),
    ];
    for (name, b, want) in cases {
        let r = request(&b);
        assert_eq!(r.gpu_milli(), want, "{name}");
        assert_eq!(r.is_fractional(), r.kind() == Kind::Fraction, "{name}");
    }
}

#[test]
fn resolve() {
    // (name, model, peak, compute, headroom, profile ("" = none), milli)
    let cases: [(&str, &str, i64, f64, f64, &str, i32); 12] = [
        // On a MIG model the smallest profile with peak x (1+headroom) of
        // memory and the compute share; 1g.10gb holds 10240 MiB.
        (
            "picks the smallest profile that holds the peak",
            "H100-80GB",
            9000,
            0.0,
            0.1,
            "1g.10gb",
            121,
        ),
        (
            "moves up a profile when the headroom no longer fits",
            "H100-80GB",
            9500,
            0.0,
            0.1,
            "1g.20gb",
            128,
        ),
        (
            "fits the same peak without headroom",
            "H100-80GB",
            9500,
            0.0,
            0.0,
            "1g.10gb",
            116,
        ),
        (
            "moves up to the compute share",
            "H100-80GB",
            5000,
            0.5,
            0.0,
            "4g.40gb",
            500,
        ),
        (
            "finds no profile for more than the GPU",
            "H100-80GB",
            90000,
            0.0,
            0.1,
            "",
            0,
        ),
        // Without MIG, a share is the larger of the memory share and the
        // compute share; V100-16GB has 16384 MiB.
        (
            "takes the memory share",
            "V100-16GB",
            4096,
            0.125,
            0.0,
            "",
            250,
        ),
        (
            "takes the compute share when larger",
            "V100-16GB",
            4096,
            0.5,
            0.0,
            "",
            500,
        ),
        (
            "rounds the memory share up",
            "V100-16GB",
            4096,
            0.0,
            0.25,
            "",
            313,
        ),
        ("takes at least one milli", "V100-16GB", 1, 0.0, 0.0, "", 1),
        (
            "takes the whole GPU when the peak is its memory",
            "V100-16GB",
            16384,
            0.0,
            0.0,
            "",
            1000,
        ),
        (
            "takes nothing when the headroom passes the whole GPU",
            "V100-16GB",
            16384,
            0.0,
            0.1,
            "",
            0,
        ),
        (
            "takes nothing when the GPU's memory is unknown",
            "G2",
            1024,
            0.5,
            0.0,
            "",
            0,
        ),
    ];
    for (name, model, peak, compute, headroom, want_profile, want_milli) in cases {
        let r = request_with(&task("t").gpu_memory(peak, compute), headroom);
        let m = gpu::lookup(model);
        let (p, milli) = r.resolve(&m);
        let got = p.map_or("", |p| &*p.name);
        assert_eq!((got, milli), (want_profile, want_milli), "{name}");
        let (p2, milli2) = r.resolve(&m);
        assert!(
            p2.map(std::ptr::from_ref) == p.map(std::ptr::from_ref) && milli2 == milli,
            "{name}: the second answer differs from the first"
        );
    }
}

#[test]
fn resolve_answers_per_model() {
    let r = request(&task("t").gpu_memory(8192, 0.0));
    assert_eq!(r.resolve(&gpu::lookup("V100-16GB")).1, 500, "on V100-16GB");
    assert_eq!(
        r.resolve(&gpu::lookup("V100-32GB")).1,
        250,
        "on V100-32GB after V100-16GB"
    );
}

#[test]
fn the_key_tells_apart_what_the_verdicts_depend_on() {
    let base = || task("t").cpu(1000).memory(2048).share(300);
    let key = |b: &TaskBuilder, headroom| request_with(b, headroom).key().clone();
    assert_eq!(key(&base(), 0.1), key(&base(), 0.1));
    // The task's name is no part of what it asks.
    assert_eq!(
        key(&base(), 0.1),
        key(&task("u").cpu(1000).memory(2048).share(300), 0.1)
    );
    for (name, other, headroom) in [
        ("cpu", base().cpu(1001), 0.1),
        ("memory", base().memory(2049), 0.1),
        ("share", base().share(301), 0.1),
        ("models", base().on(&["V100M16"]), 0.1),
        ("headroom", base(), 0.2),
    ] {
        assert_ne!(key(&base(), 0.1), key(&other, headroom), "{name}");
    }
    let mut r = request(&base());
    let before = r.key().clone();
    r.set_mig_only(true);
    assert!(r.mig_only());
    assert_ne!(*r.key(), before, "mig_only");
}

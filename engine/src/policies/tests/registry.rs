use std::sync::Arc;

use crate::frag::{self, Shape};
use crate::policies::{self, Config, PolicyError, config_for};

use super::helpers::{
    alibaba_norms, canonical, must_policy, node, norms, shape, typical, want_err, world,
};

/// Enough for every policy.
pub(super) fn full_config() -> Config {
    let shapes: Vec<Shape> = vec![
        shape().cpu(1000).share(500).s,
        shape().cpu(4000).gpus(2).s,
        shape().cpu(500).s,
    ];
    Config {
        typical: Some(Arc::new(frag::typicals(
            &shapes,
            frag::DEFAULT_THRESHOLD,
            Some(&canonical),
        ))),
        shapes,
        canonical: Some(canonical),
        ..alibaba_norms()
    }
}

#[test]
fn names_lists_every_policy_in_order() {
    let want = [
        "best-fit",
        "dot-product",
        "fgd",
        "gpu-clustering",
        "gpu-packing",
        "k8s-default",
        "partita",
        "random",
    ];
    assert_eq!(policies::names(), want);
}

#[test]
fn new_refuses_an_unknown_name_listing_the_known_ones() {
    let got = policies::new("tetris", full_config());
    assert_eq!(
        got.as_ref().err().map(ToString::to_string).as_deref(),
        Some(
            "unknown policy \"tetris\" (known: best-fit, dot-product, fgd, gpu-clustering, \
             gpu-packing, k8s-default, partita, random)"
        )
    );
    want_err(got, policies::names());
}

#[test]
fn new_quotes_an_unknown_name_as_go_does() {
    let got = policies::new("a\"b\\c\n\u{1}é", Config::default());
    want_err(got, &[r#"unknown policy "a\"b\\c\n\x01é""#]);
}

#[test]
fn new_builds_every_policy_named_after_itself() {
    for &name in policies::names() {
        let p = policies::new(name, full_config()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(p.name, name);
    }
}

#[test]
fn every_stage_of_every_policy_has_a_name() {
    // Names label the reasons a node is filtered out and the scores it got.
    for &name in policies::names() {
        let p = must_policy(name, full_config());
        if let Some(s) = &p.scorer {
            assert!(!s.name().is_empty(), "{name}: its scorer has no name");
        }
        for f in &p.filters {
            assert!(!f.name().is_empty(), "{name}: a filter has no name");
        }
    }
}

#[test]
fn new_refuses_a_policy_without_what_it_needs() {
    let typ = Arc::new(typical(vec![shape().share(500)]));
    let cases: Vec<(&str, &str, Config, &str)> = vec![
        (
            "refuses fgd without the typical workload",
            "fgd",
            alibaba_norms(),
            "Config.Typical",
        ),
        (
            "refuses partita without the typical workload",
            "partita",
            Config {
                shapes: full_config().shapes,
                ..Config::default()
            },
            "Config.Typical and Config.Shapes",
        ),
        (
            "refuses partita without the shapes",
            "partita",
            Config {
                typical: Some(typ.clone()),
                ..Config::default()
            },
            "Config.Typical and Config.Shapes",
        ),
        (
            "refuses dot-product without norms",
            "dot-product",
            Config {
                typical: Some(typ.clone()),
                ..Config::default()
            },
            "NormCPU and NormGPU",
        ),
        (
            "refuses dot-product without a GPU norm",
            "dot-product",
            norms(128000, 0),
            "NormCPU and NormGPU",
        ),
        (
            "refuses best-fit without norms",
            "best-fit",
            Config {
                typical: Some(typ.clone()),
                ..Config::default()
            },
            "NormCPU and NormGPU",
        ),
        (
            "refuses best-fit without a CPU norm",
            "best-fit",
            norms(0, 8000),
            "NormCPU and NormGPU",
        ),
    ];
    for (case, policy, config, want) in cases {
        let got = policies::new(policy, config);
        assert!(got.is_err(), "{case}: built");
        want_err(got, &[policy, want]);
    }
}

#[test]
fn new_names_the_missing_parts_in_go_s_words() {
    let err = |name: &str, c: Config| policies::new(name, c).err().map(|e| e.to_string());
    assert_eq!(
        err("fgd", Config::default()).as_deref(),
        Some("policy fgd: needs the typical workload (Config.Typical)")
    );
    assert_eq!(
        err("best-fit", Config::default()).as_deref(),
        Some("policy best-fit: needs NormCPU and NormGPU (policies.ConfigFor sets them)")
    );
    assert_eq!(
        err("partita", Config::default()),
        Some(PolicyError::PartitaNeedsWorkload.to_string())
    );
}

#[test]
fn new_builds_policies_that_need_nothing_from_an_empty_config() {
    for name in ["random", "gpu-clustering", "gpu-packing", "k8s-default"] {
        if let Err(e) = policies::new(name, Config::default()) {
            panic!("new({name}, empty config): {e}");
        }
    }
}

#[test]
fn config_for_takes_the_largest_node_of_each_kind() {
    let st = world(vec![
        node("wide").cpu(96000).gpus(2, "V100-16GB"),
        node("deep").cpu(64000).gpus(4, "V100-32GB"),
        node("cpu").cpu(32000),
    ]);
    let typ = Arc::new(typical(vec![shape().share(500)]));
    let c = config_for(&st, typ.clone());
    assert_eq!((c.norm_cpu, c.norm_gpu), (96000, 4000));
    assert!(c.typical.is_some_and(|t| Arc::ptr_eq(&t, &typ)));
}

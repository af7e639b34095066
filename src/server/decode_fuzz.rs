//! Request decoding fuzzed without a database: every body the API reads
//! (`decode_json` into each request type) and, for submissions, every
//! check after it (`check_texts`, `team_class`, `build_spec`, the
//! preview). Thousands of cases a run, against `tests/api_fuzz.rs`'s
//! hundreds through the whole router and PostgreSQL.
//!
//! Properties: nothing panics; every refusal is a 4xx whose message
//! starts with the field it names; a decoded request encodes and decodes
//! back to itself; an accepted submission has between 1 and
//! `MAX_TASKS` tasks.

use proptest::prelude::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::cluster::ClusterShape;
use super::decode::decode_json;
use super::error::ApiError;
use super::jobspec::{MAX_TASKS, build_spec, check_texts, team_class};
use super::preview::preview_options;
use crate::api;
use crate::store::accounts::TeamRow;

/// The request types' field names, so that generated objects get past
/// the first unknown field.
const KEYS: &[&str] = &[
    "team",
    "project",
    "name",
    "image",
    "command",
    "class",
    "tasks",
    "replicas",
    "gang",
    "cpu",
    "memory",
    "gpu",
    "count",
    "mig",
    "compute",
    "milli",
    "profile",
    "models",
    "duration",
    "fail_after",
    "checkpoint_every",
    "idempotency_key",
    "role",
    "guaranteed_gpus",
    "burst_gpus",
    "weight",
    "classes",
    "business_unit",
    "disabled",
    "expires_in",
    "direction",
    "prices",
];

/// Strings that mean something to some field: classes, quantities,
/// durations, MIG profiles, models, and a few that should not.
const WORDS: &[&str] = &[
    "",
    "batch",
    "production",
    "best-effort",
    "research",
    "default",
    "4",
    "500m",
    "0.5",
    "1.0001",
    "-1",
    "32Gi",
    "1.5Ti",
    "0.5Mi",
    "90m",
    "2h",
    "-1h",
    "9000h",
    "1g.10gb",
    "3g.40gb",
    "7g.80gb",
    "9g.99gb",
    "H100-80GB",
    "A100-80GB",
    "up",
    "down",
    "admin",
    "lead",
    "finance",
    "1e308",
    "NaN",
    "a b",
    "\u{e9}t\u{e9}",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-10i64..10_000).prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        (0.0f64..1.5).prop_map(Value::from),
        proptest::sample::select(WORDS).prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(
                prop_oneof![
                    proptest::sample::select(KEYS).prop_map(String::from),
                    "[a-z_]{1,8}"
                ],
                inner,
                0..6
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// An object of known keys, mostly with values of the right shape: the
/// submissions that get as far as the checks after decoding.
fn submission() -> impl Strategy<Value = Value> {
    let text = || {
        prop_oneof![
            3 => proptest::sample::select(WORDS).prop_map(Value::from),
            1 => ".{0,8}".prop_map(Value::from),
        ]
    };
    let number = || {
        prop_oneof![
            3 => (0i64..12).prop_map(Value::from),
            1 => any::<i64>().prop_map(Value::from),
        ]
    };
    let gpu = (
        proptest::option::of(number()),
        proptest::option::of(text()),
        proptest::option::of(text()),
        proptest::option::of((0.0f64..1.2).prop_map(Value::from)),
        proptest::option::of(prop_oneof![(0i64..1200).prop_map(Value::from), number()]),
        proptest::option::of(text()),
        proptest::option::of(proptest::collection::vec(text(), 0..3).prop_map(Value::Array)),
    )
        .prop_map(|(count, mig, memory, compute, milli, profile, models)| {
            let mut m = serde_json::Map::new();
            for (k, v) in [
                ("count", count),
                ("mig", mig),
                ("memory", memory),
                ("compute", compute),
                ("milli", milli),
                ("profile", profile),
                ("models", models),
            ] {
                if let Some(v) = v {
                    m.insert(k.to_string(), v);
                }
            }
            Value::Object(m)
        });
    // Each text field mostly gets a value it takes, so that a case gets
    // past the first check to the next.
    let good = |values: &'static [&'static str]| {
        prop_oneof![
            4 => proptest::option::of(proptest::sample::select(values).prop_map(Value::from)),
            1 => proptest::option::of(text()),
        ]
    };
    let texts = [
        ("project", good(&["", "default", "llm"])),
        ("name", good(&["", "train", "a name"])),
        ("image", good(&["", "registry/app:1"])),
        ("class", good(&["", "batch", "best-effort"])),
        ("cpu", good(&["", "4", "500m"])),
        ("memory", good(&["", "32Gi", "1Gi"])),
        ("duration", good(&["", "2h", "90m"])),
        ("fail_after", good(&["", "1h"])),
        ("checkpoint_every", good(&["", "10m"])),
    ];
    let names: Vec<&'static str> = texts.iter().map(|(k, _)| *k).collect();
    let values: Vec<_> = texts.into_iter().map(|(_, v)| v).collect();
    (
        values,
        proptest::option::of(number()),
        proptest::option::of(number()),
        proptest::option::of(number()),
        proptest::option::of(gpu),
    )
        .prop_map(move |(values, tasks, replicas, gang, gpu)| {
            let mut m = serde_json::Map::new();
            for (k, v) in names.iter().zip(values) {
                if let Some(v) = v {
                    m.insert(k.to_string(), v);
                }
            }
            for (k, v) in [
                ("tasks", tasks),
                ("replicas", replicas),
                ("gang", gang),
                ("gpu", gpu),
            ] {
                if let Some(v) = v {
                    m.insert(k.to_string(), v);
                }
            }
            Value::Object(m)
        })
}

/// A refusal must be a 4xx whose message begins with the field it names.
fn check_refusal(e: &ApiError) -> Result<(), TestCaseError> {
    prop_assert!(e.status.is_client_error(), "{e:?}");
    prop_assert!(!e.message.is_empty(), "{e:?}");
    if !e.field.is_empty() {
        // The message may name a part of the field: `gpu.models[0]`.
        let rest = e.message.strip_prefix(e.field.as_str());
        prop_assert!(
            rest.is_some_and(|r| r.starts_with([':', '[', '.'])),
            "the message does not name its field first: {e:?}"
        );
    }
    Ok(())
}

/// Decodes `bytes` as `T`: a refusal is well formed, and what decodes
/// encodes and decodes back to itself.
fn decodes<T>(bytes: &[u8]) -> Result<Option<T>, TestCaseError>
where
    T: DeserializeOwned + Serialize + PartialEq + std::fmt::Debug,
{
    match decode_json::<T>(bytes) {
        Err(e) => {
            check_refusal(&e)?;
            Ok(None)
        }
        Ok(v) => {
            let again = serde_json::to_vec(&v).expect("a request encodes");
            let back = decode_json::<T>(&again);
            prop_assert_eq!(back.as_ref(), Ok(&v), "{}", String::from_utf8_lossy(&again));
            Ok(Some(v))
        }
    }
}

/// Every request type the API decodes, from the same bytes.
fn every_request_type(bytes: &[u8]) -> Result<(), TestCaseError> {
    decodes::<api::SubmitRequest>(bytes)?;
    decodes::<api::TeamRequest>(bytes)?;
    decodes::<api::ProjectRequest>(bytes)?;
    decodes::<api::UserRequest>(bytes)?;
    decodes::<api::UserPatch>(bytes)?;
    decodes::<api::TokenRequest>(bytes)?;
    decodes::<api::JobPatch>(bytes)?;
    decodes::<api::JobMove>(bytes)?;
    decodes::<api::PricesUpdate>(bytes)?;
    Ok(())
}

/// Parsed once: the cases are many.
static DEMO: std::sync::LazyLock<ClusterShape> = std::sync::LazyLock::new(ClusterShape::demo);

fn team() -> TeamRow {
    TeamRow {
        id: 1,
        name: "research".into(),
        guarantee_milli: 8000,
        burst_milli: 16000,
        weight: 1.0,
        classes: vec!["batch".into(), "best-effort".into()],
        business_unit: None,
        projects: vec!["default".into(), "llm".into()],
    }
}

/// A submission through every check the API makes before storing it.
fn submit(bytes: &[u8], shape: &ClusterShape) -> Result<(), TestCaseError> {
    let Some(mut req) = decodes::<api::SubmitRequest>(bytes)? else {
        return Ok(());
    };
    let team = team();
    let checked = check_texts(&team, &mut req).and_then(|()| {
        req.class = team_class(&team, &req.class, "class")?;
        build_spec(&req, &team, &shape.capacity)
    });
    match checked {
        Err(e) => check_refusal(&e)?,
        Ok(spec) => {
            prop_assert!(
                (1..=MAX_TASKS as usize).contains(&spec.tasks.len()),
                "{} tasks",
                spec.tasks.len()
            );
            for t in &spec.tasks {
                preview_options(t, &shape.capacity);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        every_request_type(&bytes)?;
    }

    #[test]
    fn arbitrary_json(v in json_value()) {
        every_request_type(&serde_json::to_vec(&v).unwrap())?;
    }

    #[test]
    fn submissions(v in submission()) {
        submit(&serde_json::to_vec(&v).unwrap(), &DEMO)?;
    }
}

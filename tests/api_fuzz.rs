//! Arbitrary bytes and arbitrary JSON thrown at the request decoders
//! (submit, team, user) through the whole router: every answer is a
//! success or a 4xx with an error body, never a panic or a 5xx.

mod support;

use proptest::prelude::*;
use serde_json::Value;
use support::api::{World, call_raw, world};

/// Any JSON value, a few levels deep, with keys drawn from the request
/// types' own fields so that the decoders go past the first unknown one.
fn json_value() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("team".to_string()),
        Just("project".to_string()),
        Just("name".to_string()),
        Just("class".to_string()),
        Just("tasks".to_string()),
        Just("replicas".to_string()),
        Just("gang".to_string()),
        Just("cpu".to_string()),
        Just("memory".to_string()),
        Just("gpu".to_string()),
        Just("count".to_string()),
        Just("mig".to_string()),
        Just("milli".to_string()),
        Just("compute".to_string()),
        Just("profile".to_string()),
        Just("models".to_string()),
        Just("duration".to_string()),
        Just("role".to_string()),
        Just("guaranteed_gpus".to_string()),
        Just("burst_gpus".to_string()),
        Just("weight".to_string()),
        Just("classes".to_string()),
        Just("business_unit".to_string()),
        Just("idempotency_key".to_string()),
        "[a-z_]{1,8}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        prop_oneof![
            Just("search".to_string()),
            Just("1g.10gb".to_string()),
            Just("9".to_string()),
            Just("32Gi".to_string()),
            Just("batch".to_string()),
            Just("member".to_string()),
            Just("2h".to_string()),
            ".{0,12}"
        ]
        .prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

const TARGETS: [(&str, &str, &str); 4] = [
    ("POST", "/api/v1/jobs", "member"),
    ("POST", "/api/v1/teams", "admin"),
    ("PATCH", "/api/v1/teams/search", "admin"),
    ("POST", "/api/v1/users", "admin"),
];

fn check(w: &World, rt: &tokio::runtime::Runtime, body: Vec<u8>) -> Result<(), TestCaseError> {
    for (method, path, caller) in TARGETS {
        let a = rt.block_on(call_raw(
            &w.app,
            method,
            path,
            w.token(caller),
            Some(body.clone()),
            &[],
        ));
        prop_assert!(
            a.status.is_success() || a.status.is_client_error(),
            "{method} {path}: {} {}",
            a.status,
            a.body
        );
        if a.status.is_client_error() {
            prop_assert!(a.body["error"].is_string(), "{method} {path}: {}", a.body);
        }
    }
    Ok(())
}

#[test]
fn decoders_answer_4xx_or_success_never_5xx() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let w = rt.block_on(world());
    let config = ProptestConfig {
        cases: 300,
        ..ProptestConfig::default()
    };
    proptest!(config, |(v in json_value())| {
        check(&w, &rt, serde_json::to_vec(&v).unwrap())?;
    });
    proptest!(config, |(bytes in prop::collection::vec(any::<u8>(), 0..200))| {
        check(&w, &rt, bytes)?;
    });
}

/// What the fuzzer found once: an array filled a struct's fields in order
/// (serde allows it) and put U+0000 into a database query (500).
#[test]
fn arrays_and_nul_characters_are_refused_in_words() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let w = rt.block_on(world());
    for body in [
        &br#"["\u0000"]"#[..],
        br#"["search"]"#,
        br#"{"team": "\u0000"}"#,
        br#"{"name": "x\u0000y"}"#,
    ] {
        check(&w, &rt, body.to_vec()).unwrap();
    }
}

/// U+0000 in a path or a query (`%00`) is refused in words too, never
/// passed on to PostgreSQL.
#[test]
fn nul_characters_in_urls_are_refused_in_words() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let w = rt.block_on(world());
    for path in [
        "/api/v1/jobs?team=%00",
        "/api/v1/jobs?user=a%00b",
        "/api/v1/jobs/job-%00",
        "/api/v1/teams/%00",
        "/api/v1/queue?team=%00",
        "/api/v1/reports/chargeback?team=%00",
        "/api/v1/users/%00",
    ] {
        let a = rt.block_on(call_raw(&w.app, "GET", path, w.token("admin"), None, &[]));
        assert!(
            a.status.is_client_error(),
            "GET {path}: {} {}",
            a.status,
            a.body
        );
    }
}

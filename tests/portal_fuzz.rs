//! The portal's form parsers under random input: every form, posted with
//! a valid session and CSRF token but random fields and values (numbers
//! out of range, text with U+0000, repeated fields, unknown ones), is
//! answered with a page (2xx, 3xx or 4xx), never a 5xx, and nothing the
//! API refused is stored.

mod support;

use axum::http::StatusCode;
use proptest::prelude::*;
use support::api::{World, world};
use support::portal::{Visitor, encode_form};

const FIELDS: &[&str] = &[
    "kind",
    "team",
    "project",
    "class",
    "name",
    "image",
    "command",
    "tasks",
    "gang",
    "gpu_mode",
    "gpu_count",
    "gpu_mig",
    "gpu_memory",
    "gpu_compute",
    "gpu_profile",
    "models",
    "cpu",
    "memory",
    "duration",
    "checkpoint_every",
    "idempotency_key",
    "guaranteed_gpus",
    "burst_gpus",
    "weight",
    "classes",
    "business_unit",
    "role",
    "disabled",
    "user",
    "days",
    "description",
    "currency",
    "model",
    "direction",
    "back",
    "bogus",
];

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("0".to_string()),
        Just("-1".to_string()),
        Just("1e309".to_string()),
        Just("99999999999999999999".to_string()),
        Just("training".to_string()),
        Just("whole".to_string()),
        Just("3g.40gb".to_string()),
        Just("search".to_string()),
        Just("production".to_string()),
        Just("up".to_string()),
        Just("a\u{0}b".to_string()),
        Just("//evil.example/".to_string()),
        "[ -~]{0,12}",
        "\\PC{0,6}",
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|f| f.to_string()),
    ]
}

fn form() -> impl Strategy<Value = Vec<(&'static str, String)>> {
    prop::collection::vec((prop::sample::select(FIELDS), value()), 0..10)
}

async fn signed_in(w: &World, role: &str) -> Visitor {
    let mut v = Visitor::new(w.app.clone());
    v.sign_in(w.token(role).unwrap()).await;
    v.get("/").await;
    v
}

/// A user may type U+0000 into any field: every form, every field, with
/// it alone, answers a page in words (a user name with it once reached the
/// database through the tokens form, as a 500).
#[test]
fn a_nul_character_in_any_field_of_any_form_is_refused_in_words() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let w = rt.block_on(world());
    let (admin, lead, targets) = rt.block_on(setup(&w));
    for (as_admin, path) in &targets {
        let who = if *as_admin { &admin } else { &lead };
        for field in FIELDS {
            let mut v = Visitor::new(w.app.clone());
            v.cookies = who.cookies.clone();
            let body = encode_form(&[("csrf", &who.csrf), (field, "a\u{0}b")]);
            let page = rt.block_on(v.send("POST", path, Some(body), &[]));
            assert!(
                page.status.as_u16() < 500,
                "POST {path} {field}=a\\0b: {} {}",
                page.status,
                page.body
            );
        }
    }
}

/// A job to act on, an admin and a lead signed in, and every form's
/// target (whether it is the admin's).
async fn setup(w: &World) -> (Visitor, Visitor, Vec<(bool, String)>) {
    let a = support::api::call(
        &w.app,
        "POST",
        "/api/v1/jobs",
        w.token("member"),
        Some(serde_json::json!({"gpu": {"count": 1}})),
    )
    .await;
    let job = a.body["id"].as_str().unwrap().to_string();
    let admin = signed_in(w, "admin").await;
    let lead = signed_in(w, "lead").await;
    let targets: Vec<(bool, String)> = vec![
        (false, "/submit".into()),
        (false, "/submit/preview".into()),
        (false, format!("/jobs/{job}/class")),
        (false, format!("/jobs/{job}/move")),
        (false, format!("/jobs/{job}/cancel")),
        (true, "/admin/teams".into()),
        (true, "/admin/teams/search".into()),
        (true, "/admin/teams/search/projects".into()),
        (true, "/admin/users".into()),
        (true, "/admin/users/mia".into()),
        (true, "/admin/tokens".into()),
        (true, "/admin/prices".into()),
        (true, "/admin/sso/rules".into()),
    ];
    (admin, lead, targets)
}

#[test]
fn every_form_answers_a_page_never_a_server_error() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let w = rt.block_on(world());
    let (admin, lead, targets) = rt.block_on(setup(&w));
    let config = ProptestConfig {
        cases: 200,
        ..ProptestConfig::default()
    };
    proptest!(config, |(fields in form(), target in 0..targets.len())| {
        let (as_admin, path) = &targets[target];
        let who = if *as_admin { &admin } else { &lead };
        // A copy of the signed-in visitor: its cookies and CSRF token.
        let mut v = Visitor::new(w.app.clone());
        v.cookies = who.cookies.clone();
        let csrf = who.csrf.clone();
        let mut all: Vec<(&str, &str)> = vec![("csrf", &csrf)];
        for (k, val) in &fields {
            all.push((k, val));
        }
        let body = encode_form(&all);
        let page = rt.block_on(v.send("POST", path, Some(body), &[]));
        prop_assert!(
            page.status.as_u16() < 500,
            "POST {path} {fields:?}: {} {}",
            page.status,
            page.body
        );
        // A refusal is a page in words.
        if page.status.is_client_error() && page.status != StatusCode::NOT_FOUND {
            prop_assert!(page.body.contains("<html"), "POST {path}: {}", page.body);
        }
    });
}

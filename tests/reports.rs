//! Reports, the ledger and the price table through the API, on a real
//! PostgreSQL with ledger rows written straight into `usage_ledger` (each
//! charged with `accounting::charge`, as the worker charges it): totals
//! equal the ledger's sums exactly, rows add up to the total, the CSV says
//! the same with the period in every line, consecutive periods partition
//! the ledger; bad parameters name the field; no team sees another's rows.

mod support;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use partita::accounting::{self, Prices};
use proptest::prelude::*;
use serde_json::{Value, json};
use support::api::{World, call, world};
use tower::ServiceExt;

/// A GET answered with its headers and raw body.
struct Raw {
    status: StatusCode,
    content_type: String,
    disposition: String,
    body: String,
}

async fn get_raw(w: &World, path: &str, caller: &str) -> Raw {
    let req = Request::builder()
        .uri(path)
        .header(
            "Authorization",
            format!("Bearer {}", w.token(caller).unwrap()),
        )
        .body(Body::empty())
        .unwrap();
    let response = w.app.clone().oneshot(req).await.unwrap();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default()
    };
    let (content_type, disposition) = (header("content-type"), header("content-disposition"));
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 24)
        .await
        .unwrap();
    Raw {
        status,
        content_type,
        disposition,
        body: String::from_utf8(bytes.to_vec()).unwrap(),
    }
}

async fn get(w: &World, path: &str, caller: &str) -> Value {
    let a = call(&w.app, "GET", path, w.token(caller), None).await;
    assert_eq!(a.status, StatusCode::OK, "{path}: {}", a.body);
    a.body
}

/// A hold to write: team (0 search, 1 ads), share, start (seconds after
/// 2026-01-01), length in seconds, model, tier.
#[derive(Debug, Clone)]
struct NewHold {
    team: usize,
    share: i64,
    start_s: i64,
    len_s: i64,
    model: &'static str,
    tier: &'static str,
}

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()
}

/// Writes holds as ledger rows of a job of each team's member.
async fn write_holds(w: &World, holds: &[NewHold]) {
    sqlx::query("UPDATE teams SET business_unit_id = NULL")
        .execute(&w.pool)
        .await
        .unwrap();
    let jobs = [
        w.job(w.token("member").unwrap()).await,
        w.job(&w.ads_member).await,
    ];
    let prices = Prices::builtin();
    for (i, h) in holds.iter().enumerate() {
        let start = t0() + TimeDelta::seconds(h.start_s);
        let end = start + TimeDelta::seconds(h.len_s);
        let hold = accounting::Hold {
            business_unit: String::new(),
            team: String::new(),
            project: String::new(),
            user: String::new(),
            model: h.model.into(),
            tier: h.tier.into(),
            class: "batch".into(),
            share: h.share,
            start,
            end: Some(end),
        };
        let (share_ms, u) = accounting::charge(&hold, &prices).unwrap();
        sqlx::query(
            "INSERT INTO usage_ledger (hold_id, team_id, project_id, user_id, job_seq, task, node,
                gpu_index, gpu_model, gpu_share, capacity_tier, job_class, started_at, ended_at,
                share_ms, micro_gpu_hours, price_micros, cost_micros)
             SELECT $1, j.team_id, j.project_id, j.user_id, j.seq, 't0', 'node-1', 0, $3, $4, $5,
                'batch', $6, $7, $8, $9, $10, $11
             FROM jobs j WHERE j.id = $2",
        )
        .bind(format!("hold-{i}"))
        .bind(&jobs[h.team])
        .bind(h.model)
        .bind(h.share as i32)
        .bind(h.tier)
        .bind(start)
        .bind(end)
        .bind(share_ms)
        .bind(u.micro_gpu_hours)
        .bind(prices.per_hour(h.model, h.tier))
        .bind(u.cost_micros)
        .execute(&w.pool)
        .await
        .unwrap();
    }
}

/// (cost_micros, micro_gpu_hours) summed over the whole ledger in SQL.
async fn ledger_sums(w: &World) -> (i64, i64) {
    sqlx::query_as(
        "SELECT COALESCE(sum(cost_micros), 0)::bigint, COALESCE(sum(micro_gpu_hours), 0)::bigint
         FROM usage_ledger",
    )
    .fetch_one(&w.pool)
    .await
    .unwrap()
}

fn totals(r: &Value) -> (i64, i64) {
    (
        r["total"]["cost_micros"].as_i64().unwrap(),
        r["total"]["micro_gpu_hours"].as_i64().unwrap(),
    )
}

fn hold_strategy() -> impl Strategy<Value = NewHold> {
    (
        0..2usize,
        prop_oneof![
            (1..=7i64).prop_map(|k| k * 1000), // a MIG slice
            (1..=1000i64).prop_map(|m| m * 7), // a share in milli
            Just(accounting::SHARE_UNIT),      // a whole GPU
        ],
        0..(58 * 86_400i64),
        1..(2 * 86_400i64),
        prop::sample::select(vec!["H100-80GB", "A100-80GB", "L4", "B200"]),
        prop::sample::select(vec!["reserved", "on-demand", "spot"]),
    )
        .prop_map(|(team, share, start_s, len_s, model, tier)| NewHold {
            team,
            share,
            start_s,
            len_s,
            model,
            tier,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4, ..ProptestConfig::default() })]

    /// The chargeback of a period covering every row equals the ledger's
    /// sums; rows add up to the total; the CSV says the same, the period
    /// in every line; January and February add up to January–February.
    #[test]
    fn chargeback_totals_equal_the_ledger(holds in prop::collection::vec(hold_strategy(), 1..25)) {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let w = world().await;
            write_holds(&w, &holds).await;
            let want = ledger_sums(&w).await;
            // Starts before 28 February, at most two days long: every
            // row ends in [2026-01-01, 2026-03-03).
            let covering = "from=2026-01-01T00:00:00Z&to=2026-04-01T00:00:00Z";
            for caller in ["admin", "finance"] {
                let r = get(&w, &format!("/api/v1/reports/chargeback?{covering}"), caller).await;
                assert_eq!(totals(&r), want, "{caller}: {r}");
                let rows = r["rows"].as_array().unwrap();
                let sum = rows.iter().fold((0, 0), |(c, h), row| {
                    (c + row["cost_micros"].as_i64().unwrap(), h + row["micro_gpu_hours"].as_i64().unwrap())
                });
                assert_eq!(sum, want, "rows add up to the total");
                let holds_n: u64 = rows.iter().map(|row| row["holds"].as_u64().unwrap()).sum();
                assert_eq!(holds_n, holds.len() as u64);
                assert_eq!(r["total"]["cost"], accounting::micros(want.0));
            }
            let usage = get(&w, &format!("/api/v1/reports/usage?{covering}&group_by=model,tier"), "finance").await;
            assert_eq!(totals(&usage), want);

            // The CSV: a header, a line per row with the period, a TOTAL.
            let csv = get_raw(&w, &format!("/api/v1/reports/chargeback?{covering}&format=csv"), "finance").await;
            assert_eq!(csv.status, StatusCode::OK);
            assert_eq!(csv.content_type, "text/csv; charset=utf-8");
            assert!(csv.disposition.contains("chargeback_2026-01-01T000000Z_2026-04-01T000000Z.csv"), "{}", csv.disposition);
            let lines: Vec<&str> = csv.body.split("\r\n").filter(|l| !l.is_empty()).collect();
            let header: Vec<&str> = lines[0].split(',').collect();
            assert_eq!(&header[..5], ["business_unit", "team", "project", "period_from", "period_to"]);
            let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
            let mut sum = (0i64, 0i64);
            for (i, line) in lines[1..].iter().enumerate() {
                let f: Vec<&str> = line.split(',').collect();
                assert_eq!((f[col("period_from")], f[col("period_to")]),
                    ("2026-01-01T00:00:00Z", "2026-04-01T00:00:00Z"), "{line}");
                let v = (f[col("cost_micros")].parse::<i64>().unwrap(), f[col("micro_gpu_hours")].parse::<i64>().unwrap());
                if i + 2 == lines.len() {
                    assert_eq!(f[0], "TOTAL");
                    assert_eq!(v, want, "the CSV total");
                } else {
                    sum = (sum.0 + v.0, sum.1 + v.1);
                }
            }
            assert_eq!(sum, want, "the CSV's rows add up to the total");

            // Consecutive periods partition the ledger.
            let jan = get(&w, "/api/v1/reports/chargeback?month=2026-01", "admin").await;
            let feb = get(&w, "/api/v1/reports/chargeback?month=2026-02", "admin").await;
            let mar = get(&w, "/api/v1/reports/chargeback?month=2026-03", "admin").await;
            let both = get(&w, "/api/v1/reports/chargeback?from=2026-01-01T00:00:00Z&to=2026-03-01T00:00:00Z", "admin").await;
            let (j, f, m, b) = (totals(&jan), totals(&feb), totals(&mar), totals(&both));
            assert_eq!((j.0 + f.0, j.1 + f.1), b, "January + February");
            assert_eq!((b.0 + m.0, b.1 + m.1), want, "... + March is everything");
        });
    }
}

#[tokio::test]
async fn a_slice_of_seven_is_exactly_a_seventh_and_the_ledger_pages() {
    let w = world().await;
    // Seven 1g slices for an hour each bill exactly one GPU-hour.
    let holds: Vec<NewHold> = (0..7)
        .map(|i| NewHold {
            team: 0,
            share: accounting::slice_share(1),
            start_s: i * 10,
            len_s: 3600,
            model: "H100-80GB",
            tier: "reserved",
        })
        .collect();
    write_holds(&w, &holds).await;
    let r = get(
        &w,
        "/api/v1/reports/usage?month=2026-01&group_by=model",
        "viewer",
    )
    .await;
    // In the ledger's exact unit, seven slices are exactly one GPU-hour;
    // each row's micro GPU-hours are rounded half up once (142,857.14 to
    // 142,857), so the report says 0.999999, never more than half a micro
    // GPU-hour per row away.
    let exact: i64 = sqlx::query_scalar("SELECT sum(share_ms)::bigint FROM usage_ledger")
        .fetch_one(&w.pool)
        .await
        .unwrap();
    assert_eq!(exact, accounting::SHARE_UNIT * 3_600_000);
    assert_eq!(r["total"]["gpu_hours"], "0.999999", "{r}");
    let page = get(&w, "/api/v1/ledger?limit=4", "finance").await;
    assert_eq!(page["entries"].as_array().unwrap().len(), 4);
    assert_eq!(page["entries"][0]["share"], 1000);
    let next = page["next"].as_str().unwrap();
    let rest = get(&w, &format!("/api/v1/ledger?after={next}"), "finance").await;
    assert_eq!(rest["entries"].as_array().unwrap().len(), 3);
    assert!(rest.get("next").is_none(), "{rest}");
    let csv = get_raw(&w, "/api/v1/ledger?format=csv", "lead").await;
    assert_eq!(csv.content_type, "text/csv; charset=utf-8");
    assert_eq!(csv.body.split("\r\n").filter(|l| !l.is_empty()).count(), 8);
    let prices = get(&w, "/api/v1/prices", "member").await;
    assert_eq!(prices["currency"], "USD");
    assert!(!prices["assumptions"].as_array().unwrap().is_empty());
}

#[tokio::test]
async fn bad_parameters_name_the_field() {
    let w = world().await;
    let cases = [
        ("/api/v1/reports/chargeback?group_by=team,nope", "group_by"),
        ("/api/v1/reports/usage?group_by=team,team", "group_by"),
        ("/api/v1/reports/chargeback?month=2026-13", "month"),
        (
            "/api/v1/reports/chargeback?month=2026-01&from=2026-01-01T00:00:00Z",
            "month",
        ),
        ("/api/v1/reports/usage?from=yesterday", "from"),
        ("/api/v1/reports/usage?to=2026-01-01", "to"),
        (
            "/api/v1/reports/usage?from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z",
            "to",
        ),
        ("/api/v1/reports/usage?format=xml", "format"),
        ("/api/v1/ledger?limit=0", "limit"),
        ("/api/v1/ledger?after=-1", "after"),
    ];
    for (path, field) in cases {
        let a = call(&w.app, "GET", path, w.token("finance"), None).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{path}: {}", a.body);
        assert_eq!(a.body["field"], field, "{path}: {}", a.body);
    }
}

#[tokio::test]
async fn a_viewer_of_one_team_never_sees_another_teams_rows() {
    let w = world().await;
    let hold = |team| NewHold {
        team,
        share: 7000,
        start_s: 100,
        len_s: 600,
        model: "L4",
        tier: "spot",
    };
    write_holds(&w, &[hold(0), hold(1), hold(1)]).await;
    let a = call(
        &w.app,
        "PATCH",
        "/api/v1/teams/ads",
        w.token("admin"),
        Some(json!({"business_unit": "marketing"})),
    )
    .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    for caller in ["viewer", "member", "lead"] {
        for path in [
            "/api/v1/reports/chargeback?month=2026-01",
            "/api/v1/reports/usage?month=2026-01&group_by=team,user",
        ] {
            let r = get(&w, path, caller).await;
            let rows = r["rows"].as_array().unwrap();
            assert_eq!(rows.len(), 1, "{caller} {path}: {r}");
            assert_eq!(rows[0]["team"], "search");
            assert_eq!(r["total"]["holds"], 1);
        }
        let csv = get_raw(
            &w,
            "/api/v1/reports/chargeback?month=2026-01&format=csv",
            caller,
        )
        .await;
        assert!(
            !csv.body.contains("ads") && !csv.body.contains("marketing"),
            "{}",
            csv.body
        );
        let ledger = get(&w, "/api/v1/ledger", caller).await;
        let teams: Vec<&str> = ledger["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["team"].as_str().unwrap())
            .collect();
        assert_eq!(teams, ["search"], "{caller}");
        let other = call(
            &w.app,
            "GET",
            "/api/v1/reports/usage?team=ads",
            w.token(caller),
            None,
        )
        .await;
        assert_eq!(other.status, StatusCode::NOT_FOUND);
    }
    for caller in ["admin", "finance"] {
        let r = get(&w, "/api/v1/reports/chargeback?month=2026-01", caller).await;
        assert_eq!(r["total"]["holds"], 3, "{caller}");
        assert_eq!(r["rows"][0]["business_unit"], "", "{r}");
        assert_eq!(r["rows"][1]["business_unit"], "marketing", "{r}");
    }
}

//! The price table and the reports: figures worked by hand, errors that
//! name the field, and reconciliation to the micro unit for random
//! ledgers (the issue's "totals equal the ledger's sum exactly").

use chrono::{DateTime, Duration, TimeZone, Utc};
use partita::accounting::{
    Charged, GroupKey, Hold, Period, PriceItem, PriceTable, Prices, build_charged, charge, micros,
    parse_group_by, slice_share, usage, write_csv,
};
use proptest::prelude::*;

fn t(h: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap() + Duration::hours(h)
}

fn hold(
    model: &str,
    tier: &str,
    share: i64,
    start: DateTime<Utc>,
    end: Option<DateTime<Utc>>,
) -> Hold {
    Hold {
        business_unit: "research".into(),
        team: "a".into(),
        project: "p".into(),
        user: "u".into(),
        model: model.into(),
        tier: tier.into(),
        class: "batch".into(),
        share,
        start,
        end,
    }
}

#[test]
fn the_builtin_prices_are_valid_and_fall_back_to_any_model() {
    let p = Prices::builtin();
    assert_eq!(p.per_hour("H100-80GB", "on-demand"), 4_000_000);
    assert_eq!(p.per_hour("V100-32GB", "spot"), p.per_hour("*", "spot"));
    assert_eq!(p.per_hour("H100-80GB", "no-such-tier"), 0);
    assert_eq!(
        Prices::from_table(p.table()).unwrap(),
        p,
        "the table round-trips"
    );
    let json = serde_json::to_string(&p.table()).unwrap();
    assert_eq!(Prices::from_json(&json).unwrap(), p);
}

#[test]
fn a_bad_price_table_names_the_field() {
    let item = |model: &str, tier: &str, price: f64| PriceItem {
        model: model.into(),
        tier: tier.into(),
        price,
    };
    for (name, currency, items, want) in [
        (
            "unknown tier",
            "USD",
            vec![item("L4", "cheap", 1.0)],
            "prices[0].tier",
        ),
        (
            "negative price",
            "USD",
            vec![item("L4", "spot", -1.0)],
            "prices[0].price",
        ),
        (
            "not a number",
            "USD",
            vec![item("L4", "spot", f64::NAN)],
            "prices[0].price",
        ),
        (
            "empty model",
            "USD",
            vec![item("", "spot", 1.0)],
            "prices[0].model",
        ),
        (
            "twice",
            "USD",
            vec![item("L4", "spot", 1.0), item("L4", "spot", 2.0)],
            "prices[1]",
        ),
        ("currency", "dollars", vec![], "currency"),
    ] {
        let err = Prices::from_table(PriceTable {
            currency: currency.into(),
            source: String::new(),
            assumptions: vec![],
            prices: items,
        })
        .expect_err(name)
        .to_string();
        assert!(
            err.starts_with(want),
            "{name}: {err:?} does not name {want}"
        );
    }
    let err = Prices::from_json(r#"{"currency":"USD","prices":[],"colour":"red"}"#).unwrap_err();
    assert!(err.to_string().contains("colour"), "{err}");
}

#[test]
fn usage_weighs_slices_by_compute_and_clips_to_the_period() {
    let p = Prices::builtin();
    let ten_hours = Period {
        from: t(0),
        to: t(10),
    };
    for (name, h, period, now, want_gpu_h, want_cost) in [
        (
            "a whole reserved H100 for an hour",
            hold("H100-80GB", "reserved", 7000, t(0), Some(t(1))),
            ten_hours,
            t(0),
            1_000_000,
            2_500_000,
        ),
        (
            "a 3g slice for an hour is 3/7 GPU-hour",
            hold("H100-80GB", "reserved", slice_share(3), t(0), Some(t(1))),
            ten_hours,
            t(0),
            428_571,
            1_071_428,
        ),
        (
            "clipped to the period",
            hold("H100-80GB", "reserved", 7000, t(0), Some(t(4))),
            Period {
                from: t(1),
                to: t(2),
            },
            t(0),
            1_000_000,
            2_500_000,
        ),
        (
            "an open hold counts until now",
            hold("H100-80GB", "reserved", 7000, t(0), None),
            ten_hours,
            t(0) + Duration::minutes(30),
            500_000,
            1_250_000,
        ),
        (
            "outside the period",
            hold("H100-80GB", "reserved", 7000, t(0), Some(t(1))),
            Period {
                from: t(2),
                to: t(3),
            },
            t(0),
            0,
            0,
        ),
    ] {
        let u = usage(&h, &period, now, &p);
        assert_eq!(
            (u.micro_gpu_hours, u.cost_micros),
            (want_gpu_h, want_cost),
            "{name}"
        );
    }
}

#[test]
fn periods_default_to_the_calendar_month_and_bad_ones_name_the_field() {
    let now = Utc.with_ymd_and_hms(2026, 12, 5, 1, 2, 3).unwrap();
    let dec = Period::parse(None, None, None, now).unwrap();
    assert_eq!(
        (dec.from, dec.to),
        (
            Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).unwrap()
        )
    );
    let feb = Period::parse(Some("2028-02"), None, None, now).unwrap();
    assert_eq!(feb.to - feb.from, Duration::days(29), "a leap February");
    let p = Period::parse(
        None,
        Some("2026-11-30T12:00:00Z"),
        Some("2026-12-01T00:00:00+01:00"),
        now,
    )
    .unwrap();
    assert_eq!(p.to - p.from, Duration::hours(11));
    for (month, from, to, field) in [
        (Some("2026-13"), None, None, "month"),
        (Some("2026-12"), Some("2026-12-01T00:00:00Z"), None, "month"),
        (None, Some("yesterday"), None, "from"),
        (None, None, Some("2026-12-01"), "to"),
        (
            None,
            Some("2026-12-02T00:00:00Z"),
            Some("2026-12-01T00:00:00Z"),
            "to",
        ),
    ] {
        let err = Period::parse(month, from, to, now).unwrap_err();
        assert_eq!(err.field, field, "{err}");
    }
    assert_eq!(
        parse_group_by("", &[GroupKey::Team]).unwrap(),
        vec![GroupKey::Team]
    );
    assert_eq!(
        parse_group_by("business_unit, user", &[]).unwrap(),
        vec![GroupKey::BusinessUnit, GroupKey::User]
    );
    for bad in ["colour", "team,team"] {
        assert_eq!(
            parse_group_by(bad, &[]).unwrap_err().field,
            "group_by",
            "{bad}"
        );
    }
}

#[test]
fn micros_are_exact_decimals() {
    assert_eq!(micros(0), "0.000000");
    assert_eq!(micros(1_500_000), "1.500000");
    assert_eq!(micros(-42), "-0.000042");
    assert_eq!(micros(i64::MIN), "-9223372036854.775808");
}

fn arb_hold() -> impl Strategy<Value = Hold> {
    (
        0..3usize,
        0..3usize,
        0..3usize,
        0..4usize,
        prop::sample::select(vec![1000i64, 2000, 3000, 4000, 7000, 1750, 7]),
        0..2000i64,
        prop::option::of(1..3000i64),
    )
        .prop_map(
            |(team, model, tier, user, share, start_min, len_min)| Hold {
                business_unit: ["research", "product"][team % 2].into(),
                team: ["a", "b", "c,\"quoted\""][team].into(),
                project: format!("p{}", user % 2),
                user: format!("u{user}"),
                model: ["H100-80GB", "A100-80GB", "L4"][model].into(),
                tier: ["reserved", "on-demand", "spot"][tier].into(),
                class: "batch".into(),
                share,
                start: t(0) + Duration::minutes(start_min),
                end: len_min.map(|l| t(0) + Duration::minutes(start_min + l)),
            },
        )
}

fn arb_group_by() -> impl Strategy<Value = Vec<GroupKey>> {
    prop::sample::subsequence(GroupKey::ALL.to_vec(), 0..=GroupKey::ALL.len())
}

proptest! {
    /// Each finished hold is charged once over its own span (`charge`,
    /// what the worker stores); a report sums what was charged: its rows
    /// add up to its total and its total to the ledger's, to the micro
    /// unit, and two consecutive periods add up to the period covering
    /// both (a hold counts in the period in which it ends); the CSV says
    /// the same, with the period in every line.
    #[test]
    fn reports_reconcile_exactly(holds in prop::collection::vec(arb_hold(), 0..40), group_by in arb_group_by(), cut in 0..5000i64) {
        let p = Prices::builtin();
        let charged: Vec<Charged> = holds
            .iter()
            .filter_map(|h| charge(h, &p).map(|(_, usage)| Charged { hold: h.clone(), usage }))
            .collect();
        prop_assert_eq!(charged.len(), holds.iter().filter(|h| h.end.is_some()).count(), "an open hold is not charged");
        let everything = Period { from: t(-1), to: t(200) };
        let report = |period: Period| build_charged(&charged, period, &group_by, &p.currency, &p.source);
        let rep = report(everything);
        prop_assert_eq!(rep.total.micro_gpu_hours, charged.iter().map(|c| c.usage.micro_gpu_hours).sum::<i64>());
        prop_assert_eq!(rep.total.cost_micros, charged.iter().map(|c| c.usage.cost_micros).sum::<i64>());
        prop_assert_eq!(rep.rows.iter().map(|r| r.micro_gpu_hours).sum::<i64>(), rep.total.micro_gpu_hours);
        prop_assert_eq!(rep.rows.iter().map(|r| r.cost_micros).sum::<i64>(), rep.total.cost_micros);
        prop_assert_eq!(rep.rows.iter().map(|r| r.holds).sum::<u64>(), rep.total.holds);
        // A hold's figures do not depend on which covering period asks:
        // what `charge` stored is what any report covering it would give.
        let wider = Period { from: t(-1000), to: t(1000) };
        for c in &charged {
            prop_assert_eq!(usage(&c.hold, &wider, t(1000), &p), c.usage);
        }
        // Consecutive periods partition the ledger.
        let mid = t(0) + Duration::minutes(cut);
        let (a, b) = (report(Period { from: everything.from, to: mid }), report(Period { from: mid, to: everything.to }));
        prop_assert_eq!(a.total.cost_micros + b.total.cost_micros, rep.total.cost_micros);
        prop_assert_eq!(a.total.holds + b.total.holds, rep.total.holds);

        let mut buf = Vec::new();
        write_csv(&mut buf, &rep).unwrap();
        let text = String::from_utf8(buf).unwrap();
        prop_assert!(text.ends_with("\r\n"), "RFC 4180 line ends");
        let mut rd = csv::Reader::from_reader(text.as_bytes());
        let header = rd.headers().unwrap().clone();
        prop_assert_eq!(header.len(), group_by.len() + 7);
        let lines: Vec<csv::StringRecord> = rd.records().map(Result::unwrap).collect();
        prop_assert_eq!(lines.len(), rep.rows.len() + 1);
        let col = |name: &str| header.iter().position(|h| h == name).unwrap();
        let mut sum = 0i64;
        for (line, row) in lines.iter().zip(&rep.rows) {
            prop_assert_eq!(&line[col("period_from")], "2026-11-30T23:00:00Z");
            prop_assert_eq!(&line[col("period_to")], "2026-12-09T08:00:00Z");
            prop_assert_eq!(line[col("cost_micros")].parse::<i64>().unwrap(), row.cost_micros);
            if let Some(team) = &row.team {
                prop_assert_eq!(&line[col("team")], team.as_str(), "a quoted team survives");
            }
            sum += line[col("micro_gpu_hours")].parse::<i64>().unwrap();
        }
        let total = lines.last().unwrap();
        prop_assert_eq!(total[col("micro_gpu_hours")].parse::<i64>().unwrap(), sum);
        for k in &group_by {
            prop_assert_eq!(&total[col(k.name())], "TOTAL");
        }
    }
}
